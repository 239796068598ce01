-- The role POST /api/postgres/execute runs as (PLAYFLOW_SQL_API=on): no superuser, no role or
-- database creation, SELECT only, and nothing on the secrets' tables. Roles are cluster-wide, so
-- it may exist already (another Playflow database on the same cluster). A DATABASE_URL user
-- without CREATEROLE cannot create it: the migration still applies, and the SQL API then needs
-- PLAYFLOW_SQL_API_URL (a read-only role the DBA provides).
DO $$
BEGIN
  BEGIN
    CREATE ROLE playflow_sql_reader NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS;
  EXCEPTION
    WHEN duplicate_object OR unique_violation THEN NULL;
    WHEN insufficient_privilege THEN
      RAISE NOTICE 'playflow_sql_reader not created (no CREATEROLE); the SQL API needs PLAYFLOW_SQL_API_URL';
      RETURN;
  END;
  GRANT USAGE ON SCHEMA public TO playflow_sql_reader;
  GRANT SELECT ON catalog, execution, event, execution_state, queue, runtime TO playflow_sql_reader;
EXCEPTION
  WHEN insufficient_privilege THEN
    RAISE NOTICE 'grants to playflow_sql_reader not given (insufficient privilege)';
END $$;
