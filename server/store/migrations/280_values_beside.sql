-- Large values stored beside the documents that hold them, instead of inside.
--
-- PostgreSQL cannot put a value inside a jsonb document without taking the whole value apart and
-- building it again (jsonb_set and || do: about 100 ms per copy of a 30 MB result of strings, and
-- seconds for 30 MB of small objects), while a jsonb column takes a parsed value as it is. A
-- completing step's result sat inside five events, its summary and the snapshot. Now:
-- - event: the first event of a write carrying the value stores it in `value`, the later ones
--   name that event in `value_seq`, and both say where it belongs in their payload (`value_path`);
-- - execution_step: `result_value` holds the summary's result;
-- - execution_snapshot_value: the snapshot's large values, by their path in the state (a JSON
--   array of keys).
-- Readers put the values back (store/events.ts, store/executions.ts), so what they return is
-- unchanged. A server writes this layout only while every live server reads it (servers register
-- the feature `values-beside`; server/executions/values-gate.ts): servers of the previous
-- version, which read whole payloads, summaries and snapshots, keep getting them during a rolling
-- upgrade.
ALTER TABLE event
  ADD COLUMN value_path text[],
  ADD COLUMN value jsonb,
  ADD COLUMN value_seq integer;

ALTER TABLE execution_step ADD COLUMN result_value jsonb;

CREATE TABLE execution_snapshot_value (
  execution_id bigint NOT NULL REFERENCES execution (execution_id) ON DELETE CASCADE,
  path         text   NOT NULL,
  value        jsonb  NOT NULL,
  PRIMARY KEY (execution_id, path)
);

DO $$
BEGIN
  ALTER TABLE event ALTER COLUMN value SET COMPRESSION lz4;
  ALTER TABLE execution_step ALTER COLUMN result_value SET COMPRESSION lz4;
  ALTER TABLE execution_snapshot_value ALTER COLUMN value SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
  RAISE NOTICE 'lz4 is not available in this PostgreSQL build; values beside keep pglz';
END
$$;

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'playflow_sql_reader') THEN
    GRANT SELECT ON execution_snapshot_value TO playflow_sql_reader;
  END IF;
EXCEPTION
  WHEN insufficient_privilege THEN
    RAISE NOTICE 'grant to playflow_sql_reader not given (insufficient privilege)';
END $$;
