-- Large values (a step's result, the events and the snapshot that carry it) are TOASTed, and
-- PostgreSQL's default pglz compresses at tens of MB/s: a 30 MB result is written several times
-- per completing step, and pglz was a large share of PostgreSQL's CPU for it (bench/results.ts
-- e2e). lz4 compresses and decompresses several times faster. Only new values use it; a server
-- built without lz4 keeps pglz (the DO block swallows "not supported").
DO $$
BEGIN
  ALTER TABLE event ALTER COLUMN payload SET COMPRESSION lz4;
  ALTER TABLE execution ALTER COLUMN result SET COMPRESSION lz4;
  ALTER TABLE execution ALTER COLUMN payload SET COMPRESSION lz4;
  ALTER TABLE execution_step ALTER COLUMN summary SET COMPRESSION lz4;
  ALTER TABLE execution_snapshot ALTER COLUMN state SET COMPRESSION lz4;
  ALTER TABLE queue ALTER COLUMN command SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
  RAISE NOTICE 'lz4 is not available in this PostgreSQL build; large values keep pglz';
END
$$;
