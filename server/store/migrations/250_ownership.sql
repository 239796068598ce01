-- Ownership of catalog paths and credential names (issue 14): the Kubernetes resource that
-- claimed them, {kind, namespace, name, uid}; NULL for entries written through the API without an
-- owner. The owner of a path is the owner of its latest live version. Owners are compared by
-- kind + namespace + name (server/ownership.ts); uid is kept to tell a re-created resource apart.
ALTER TABLE catalog ADD COLUMN owner jsonb;
ALTER TABLE credential ADD COLUMN owner jsonb;
