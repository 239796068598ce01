-- Credentials (spec "Credential") and the authentication cache filled by
-- GET /api/credentials/{identifier}?include_data=true. Owned by server/store/credentials.ts.
-- data_enc holds AES-256-GCM ciphertext (server/crypto.ts); key_id names the key that sealed it
-- so key rotation can find rows still under an old key.

CREATE TABLE IF NOT EXISTS credential (
  id          bigserial PRIMARY KEY,
  name        text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 255),
  type        text NOT NULL CHECK (type IN ('postgres', 'oauth2', 'bearer', 'basic', 'api_key', 'service_account', 'warehouse', 'custom')),
  data_enc    text NOT NULL,
  key_id      text NOT NULL,
  schema      jsonb,
  meta        jsonb NOT NULL DEFAULT '{}'::jsonb,
  tags        text[] NOT NULL DEFAULT '{}',
  description text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS credential_type_idx ON credential (type);
CREATE INDEX IF NOT EXISTS credential_tags_idx ON credential USING gin (tags);
CREATE INDEX IF NOT EXISTS credential_key_id_idx ON credential (key_id);

-- cache_key: '<credential name>:global' or '<credential name>:execution:<execution_id>'.
CREATE TABLE IF NOT EXISTS auth_cache (
  cache_key           text PRIMARY KEY,
  credential_id       bigint NOT NULL REFERENCES credential (id) ON DELETE CASCADE,
  credential_name     text NOT NULL,
  credential_type     text NOT NULL,
  cache_type          text NOT NULL CHECK (cache_type IN ('secret', 'token')),
  scope_type          text NOT NULL CHECK (scope_type IN ('execution', 'global')),
  execution_id        bigint,
  parent_execution_id bigint,
  data_enc            text NOT NULL,
  key_id              text NOT NULL,
  expires_at          timestamptz NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  accessed_at         timestamptz NOT NULL DEFAULT now(),
  access_count        integer NOT NULL DEFAULT 0,
  CHECK (scope_type = 'global' OR execution_id IS NOT NULL)
);
CREATE INDEX IF NOT EXISTS auth_cache_execution_idx ON auth_cache (execution_id) WHERE execution_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS auth_cache_expires_idx ON auth_cache (expires_at);
CREATE INDEX IF NOT EXISTS auth_cache_key_id_idx ON auth_cache (key_id);
