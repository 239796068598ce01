-- The event log loses its index on event_id; (execution_id, seq), unique since 001, is the key
-- every read uses and now the only one.
--
-- Why: nothing looks an event up by event_id. The log is read by execution and seq (a fold, a page
-- of GET /api/events, a value stored beside an earlier event) and deleted by execution. Yet every
-- event inserted an entry in the primary key's index too: a step writes about eight events, so
-- eight index inserts and WAL records a step that served no query.
--
-- event_id stays, numbered by its sequence as before: the API shows it (`Event.event_id`), and a
-- server of the previous version, during a rolling upgrade, inserts without naming it.
--
-- The unique constraint cannot become the primary key in place (PostgreSQL takes only an index no
-- constraint owns), and a new index would scan the whole log. Without a primary key the unique
-- index is named the replica identity, so logical replication still publishes the log's deletes
-- (retention). Both statements change the catalog only.
ALTER TABLE event DROP CONSTRAINT event_pkey;
ALTER TABLE event REPLICA IDENTITY USING INDEX event_execution_id_seq_key;
