-- Webhook triggers: POST /api/hooks/{name} starts the playbook at `path` with the request body as
-- payload. The request authenticates itself with an HMAC-SHA256 signature of its raw body under
-- the hook's secret (X-Hub-Signature-256), not with the API token; `insecure` hooks have none.
CREATE TABLE hook (
  hook_id     bigserial   PRIMARY KEY,
  name        text        NOT NULL UNIQUE,
  path        text        NOT NULL,
  version     integer     CHECK (version > 0),   -- pinned; NULL: the latest at each delivery
  filter      text,                              -- condition on the body (the engine's `when:` language)
  insecure    boolean     NOT NULL DEFAULT false,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- The secret, sealed like credentials (server/crypto.ts, purpose hook_secret) in a table of its
-- own so every row holds ciphertext: key rotation and the start-up key check treat it like the
-- credential tables. An insecure hook has no row.
CREATE TABLE hook_secret (
  hook_id   bigint PRIMARY KEY REFERENCES hook (hook_id) ON DELETE CASCADE,
  key_id    text   NOT NULL,
  data_enc  text   NOT NULL
);
CREATE INDEX hook_secret_key ON hook_secret (key_id);
