-- The event log, the queue and the step summaries lose their foreign keys to `execution`; a
-- statement-level trigger deletes them with their execution, as ON DELETE CASCADE did.
--
-- Why: PostgreSQL checks a foreign key with a query per inserted row (SELECT … FOR KEY SHARE on
-- the execution row). A step inserts about ten such rows (eight events, its next command, a new
-- step's summary), and a small execution about thirty: pg_stat_statements counted 33 checks per
-- execution of bench/executions, each a trigger, a snapshot and a query.
--
-- What the keys guaranteed still holds. Every row of these tables is written by the decision's
-- one statement (store/decision.ts), whose inserts depend on its update of the execution row: no
-- row is written for an execution that is not there, and the row lock that update takes holds off
-- a concurrent delete until the commit, as the key's FOR KEY SHARE did.
--
-- The trigger runs once per DELETE statement, with the deleted rows as a transition table, so it
-- costs nothing on the hot path, and it deletes for whoever deletes executions: retention, or a
-- server of the previous version, which relied on the cascade, during a rolling upgrade.
CREATE FUNCTION playflow_execution_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM event e USING gone g WHERE e.execution_id = g.execution_id;
  DELETE FROM queue q USING gone g WHERE q.execution_id = g.execution_id;
  DELETE FROM execution_step s USING gone g WHERE s.execution_id = g.execution_id;
  RETURN NULL;
END
$$;

CREATE TRIGGER execution_deleted AFTER DELETE ON execution
  REFERENCING OLD TABLE AS gone
  FOR EACH STATEMENT EXECUTE FUNCTION playflow_execution_deleted();

ALTER TABLE event DROP CONSTRAINT event_execution_id_fkey;
ALTER TABLE queue DROP CONSTRAINT queue_execution_id_fkey;
ALTER TABLE execution_step DROP CONSTRAINT execution_step_execution_id_fkey;
