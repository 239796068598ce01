-- Idempotency-Key of a run request: a client retrying a request whose answer it never got
-- receives the execution the first one created instead of starting another.
ALTER TABLE execution ADD COLUMN IF NOT EXISTS idempotency_key text;
CREATE UNIQUE INDEX IF NOT EXISTS execution_idempotency_key ON execution (idempotency_key) WHERE idempotency_key IS NOT NULL;
