-- Snapshots of the folded state move to a table of their own (issue 20). This version keeps a
-- loop's results in chunks; a server of the previous version would read such a state as flat
-- lists and take every item for finished. It reads execution_state only, so during a rolling
-- upgrade it never sees a new snapshot: it folds its own older one plus the log, which is right.
-- This version writes here only and reads both tables, taking the newer (it reads the old layout).
CREATE TABLE execution_snapshot (
  execution_id bigint      PRIMARY KEY REFERENCES execution (execution_id) ON DELETE CASCADE,
  seq          integer     NOT NULL,
  state        jsonb       NOT NULL,
  updated_at   timestamptz NOT NULL DEFAULT now()
);

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'playflow_sql_reader') THEN
    GRANT SELECT ON execution_snapshot TO playflow_sql_reader;
  END IF;
EXCEPTION
  WHEN insufficient_privilege THEN
    RAISE NOTICE 'grant to playflow_sql_reader not given (insufficient privilege)';
END $$;
