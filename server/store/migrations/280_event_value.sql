-- A large value a write holds in several events (a step's result: in call.done, action_completed,
-- step.exit, step_completed and execution_completed) is stored once, beside the payload instead
-- of inside it. PostgreSQL cannot put a value inside a jsonb document without taking the whole
-- value apart and building it again (jsonb_set and || do, at about 100 ms per copy of 30 MB),
-- while a jsonb column copies it as it is. So the first event carrying the value stores it in
-- `value`, the later ones name that event in `value_seq`, and both say where it belongs in their
-- payload (`value_path`). Readers (store/events.ts) put it back: the log reads as before.
ALTER TABLE event
  ADD COLUMN value_path text[],
  ADD COLUMN value jsonb,
  ADD COLUMN value_seq integer;

DO $$
BEGIN
  ALTER TABLE event ALTER COLUMN value SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
  RAISE NOTICE 'lz4 is not available in this PostgreSQL build; event values keep pglz';
END
$$;
