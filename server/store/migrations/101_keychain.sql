-- Keychain entries (spec "Keychain entry"). Owned by server/store/keychain.ts.
-- cache_key: '<name>:<catalog_id>:global' | '<name>:<catalog_id>:<execution_id>' (local)
--          | '<name>:<catalog_id>:shared:<root execution_id>' (shared).
-- For shared entries execution_id is the ROOT execution id (cleanup when the root completes).

CREATE TABLE IF NOT EXISTS keychain (
  cache_key           text PRIMARY KEY,
  keychain_name       text NOT NULL,
  catalog_id          bigint NOT NULL,
  credential_type     text NOT NULL,
  cache_type          text NOT NULL CHECK (cache_type IN ('secret', 'token')),
  scope_type          text NOT NULL CHECK (scope_type IN ('local', 'global', 'shared')),
  execution_id        bigint,
  parent_execution_id bigint,
  data_enc            text NOT NULL,
  key_id              text NOT NULL,
  schema              jsonb,
  expires_at          timestamptz NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  accessed_at         timestamptz NOT NULL DEFAULT now(),
  access_count        integer NOT NULL DEFAULT 0,
  auto_renew          boolean NOT NULL DEFAULT false,
  renew_config        jsonb,
  CHECK (scope_type = 'global' OR execution_id IS NOT NULL)
);
CREATE INDEX IF NOT EXISTS keychain_catalog_idx ON keychain (catalog_id, keychain_name);
CREATE INDEX IF NOT EXISTS keychain_execution_idx ON keychain (execution_id) WHERE execution_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS keychain_expires_idx ON keychain (expires_at);
CREATE INDEX IF NOT EXISTS keychain_key_id_idx ON keychain (key_id);
