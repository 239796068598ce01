-- Credential scope (issue 20): which playbooks may use a credential, {paths: [glob], namespaces:
-- [name]} (server/secrets/scope.ts); NULL = every playbook. The server hands the data to a worker
-- only for a command it holds the lease of, and only when the command's playbook is in scope.
ALTER TABLE credential ADD COLUMN IF NOT EXISTS scope jsonb;
