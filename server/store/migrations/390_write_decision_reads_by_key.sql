-- The guard's leases and a speculation's claims are read by the queue's primary key alone, and the
-- other conditions checked on the row (migrations 340 and 350 otherwise unchanged).
--
-- Why: each check was one statement, `WHERE q.queue_id = … AND q.status = … AND …`, which the
-- partial indexes on status match as well as the primary key does. Planned while the queue had
-- few open rows and no statistics (a fresh database, before its first autoanalyze), the guard chose
-- queue_open_pool and the claim check queue_open_execution or queue_queued, and kept that plan on
-- the connection: every step then walked every leased row of every execution, or every due row,
-- each closed one among them until vacuum, to find the one it named. Seen in
-- `bench/decision-write`'s fill with auto_explain: up to 999 rows removed by the filter for the one
-- it kept. Only the primary key indexes queue_id, so a read by it alone can take no other path.
--
-- A NULL compares as not equal, as it did in the WHERE clause (IS NOT TRUE).
--
-- Both keep migration 380's SET clause, which CREATE OR REPLACE would otherwise drop.
CREATE OR REPLACE FUNCTION playflow_decision_current(p_execution_id bigint, p_last_seq integer, p_holders jsonb, p_vars jsonb)
RETURNS boolean LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
  h record;
  r record;
BEGIN
  -- PL/pgSQL, not SQL: a SQL function called from another is planned again on every call
  IF (SELECT COALESCE(max(e.seq), 0) FROM event e WHERE e.execution_id = p_execution_id) <> p_last_seq THEN
    RETURN false;
  END IF;
  IF jsonb_array_length(p_holders) > 0 THEN
    FOR h IN SELECT * FROM jsonb_to_recordset(p_holders) AS x(queue_id bigint, worker_id text, lease_token text) LOOP
      SELECT q.status, q.worker_id, q.lease_token INTO r FROM queue q WHERE q.queue_id = h.queue_id;
      IF NOT FOUND OR (r.status = 'leased' AND r.worker_id = h.worker_id AND r.lease_token = h.lease_token) IS NOT TRUE THEN
        RETURN false;
      END IF;
    END LOOP;
  END IF;
  RETURN (SELECT COALESCE(jsonb_object_agg(var_name, var_value), '{}'::jsonb) FROM vars
           WHERE vars.execution_id = p_execution_id AND (var_type <> 'step_result' OR written_by = 'api')) = p_vars;
END
$fn$;

CREATE OR REPLACE FUNCTION playflow_write_decision(
  p_execution_id bigint, p_events jsonb, p_commands jsonb, p_closes jsonb,
  p_status text, p_result jsonb, p_error jsonb, p_steps jsonb, p_terminal boolean,
  p_snapshot_seq integer, p_snapshot jsonb, p_steps_changed boolean,
  p_shared jsonb, p_result_idx integer, p_step_shares jsonb, p_snapshot_values jsonb, p_beside boolean,
  p_last_seq integer, p_holders jsonb, p_vars jsonb, p_reserve integer, p_claims jsonb)
RETURNS TABLE (current boolean, updated_at timestamptz, finished_at timestamptz, inserted jsonb, cancelled bigint, reserved text[])
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
  v_row record;
  v_updated timestamptz;
  v_finished timestamptz;
  v_inserted jsonb;
  v_cancelled bigint;
  v_closed bigint;
  v_claim record;
BEGIN
  PERFORM pg_advisory_xact_lock(p_execution_id);
  IF p_last_seq IS NOT NULL AND NOT playflow_decision_current(p_execution_id, p_last_seq, p_holders, p_vars) THEN
    RETURN QUERY SELECT false, NULL::timestamptz, NULL::timestamptz, '[]'::jsonb, 0::bigint, ARRAY[]::text[];
    RETURN;
  END IF;

  -- a speculation's claims (p_claims: [{queue_id, worker_id, lease_token, lease_until}]) lease rows
  -- that are still queued, due and never delivered, all of them or none (each by its primary key,
  -- as the guard reads its holders); under the lock no other claim or close of this execution's
  -- rows runs, so what is checked first is what is updated
  IF jsonb_array_length(p_claims) > 0 THEN
    FOR v_claim IN SELECT * FROM jsonb_to_recordset(p_claims) AS x(queue_id bigint, worker_id text, lease_token text, lease_until timestamptz) LOOP
      SELECT q.execution_id, q.status, q.attempts, q.available_at INTO v_row FROM queue q WHERE q.queue_id = v_claim.queue_id;
      IF NOT FOUND OR (v_row.execution_id = p_execution_id AND v_row.status = 'queued' AND v_row.attempts = 0 AND v_row.available_at <= now()) IS NOT TRUE THEN
        RETURN QUERY SELECT false, NULL::timestamptz, NULL::timestamptz, '[]'::jsonb, 0::bigint, ARRAY[]::text[];
        RETURN;
      END IF;
    END LOOP;
    FOR v_claim IN SELECT * FROM jsonb_to_recordset(p_claims) AS x(queue_id bigint, worker_id text, lease_token text, lease_until timestamptz) LOOP
      UPDATE queue q SET status = 'leased', attempts = 1, worker_id = v_claim.worker_id, lease_token = v_claim.lease_token,
                         lease_until = v_claim.lease_until, heartbeat_at = now()
       WHERE q.queue_id = v_claim.queue_id;
    END LOOP;
  END IF;

  UPDATE execution x
     SET status = p_status, result = COALESCE(p_shared -> p_result_idx, p_result), error = p_error, updated_at = now(),
         finished_at = CASE WHEN p_terminal THEN COALESCE(x.finished_at, now()) ELSE NULL END
   WHERE x.execution_id = p_execution_id
  RETURNING x.updated_at, x.finished_at INTO v_updated, v_finished;
  IF NOT FOUND THEN
    RETURN QUERY SELECT true, NULL::timestamptz, NULL::timestamptz, '[]'::jsonb, 0::bigint, ARRAY[]::text[];
    RETURN;
  END IF;

  -- a shared value (store/shared-values.ts) goes beside the event's payload, or inside it
  INSERT INTO event (execution_id, seq, name, step, command_id, payload, value_path, value, value_seq)
  SELECT p_execution_id, e.seq, e.name, e.step, e.command_id,
         CASE WHEN e.share_path IS NULL OR p_beside THEN COALESCE(e.payload, '{}'::jsonb)
              ELSE jsonb_set(e.payload, e.share_path, p_shared -> e.share_idx) END,
         CASE WHEN p_beside THEN e.share_path END,
         CASE WHEN p_beside AND e.share_path IS NOT NULL AND e.value_seq IS NULL THEN p_shared -> e.share_idx END,
         CASE WHEN p_beside THEN e.value_seq END
    FROM jsonb_to_recordset(p_events) AS e(seq integer, name text, step text, command_id integer, payload jsonb,
                                           share_path text[], share_idx integer, value_seq integer)
   ORDER BY e.seq;

  v_inserted := '[]'::jsonb;
  v_cancelled := 0;
  IF jsonb_array_length(p_commands) > 0 THEN
    -- a command without its own `cmd` is the payload of the command_issued event that issued it
    WITH issued AS (
      SELECT DISTINCT ON (e.command_id) e.command_id, e.payload
        FROM jsonb_to_recordset(p_events) AS e(seq integer, name text, command_id integer, payload jsonb)
       WHERE e.name = 'command_issued'
       ORDER BY e.command_id, e.seq
    ), cmds AS (
      SELECT c.*, COALESCE(c.cmd, i.payload -> 'command') AS command
        FROM jsonb_to_recordset(p_commands) AS c(command_id integer, step text, cmd jsonb, max_deliveries integer, delay_ms double precision,
                                                 status text, queue_id bigint, worker_id text, lease_token text, lease_until timestamptz)
        LEFT JOIN issued i ON c.cmd IS NULL AND i.command_id = c.command_id
    ), ins AS (
      INSERT INTO queue (queue_id, execution_id, command_id, step, command, max_deliveries, available_at, status, finished_at,
                         attempts, worker_id, lease_token, lease_until, heartbeat_at, pool)
      SELECT COALESCE(c.queue_id, nextval(pg_get_serial_sequence('queue', 'queue_id'))), p_execution_id, c.command_id, c.step, c.command,
             GREATEST(COALESCE(c.max_deliveries, 3), 1), now() + make_interval(secs => c.delay_ms / 1000.0),
             COALESCE(c.status, CASE WHEN c.worker_id IS NULL THEN 'queued' ELSE 'leased' END),
             CASE WHEN c.status IS NULL THEN NULL ELSE now() END,
             CASE WHEN c.worker_id IS NULL THEN 0 ELSE 1 END, c.worker_id, c.lease_token,
             CASE WHEN c.status IS NULL THEN c.lease_until END, CASE WHEN c.worker_id IS NULL THEN NULL ELSE now() END,
             COALESCE(c.command->>'pool', 'default')
        FROM cmds c
      ON CONFLICT (execution_id, command_id) DO NOTHING
      RETURNING queue.queue_id, queue.step, queue.command_id, queue.pool, queue.status, queue.status = 'queued' AND queue.available_at <= now() AS due
    )
    SELECT COALESCE(jsonb_agg(jsonb_build_object('queue_id', ins.queue_id::text, 'step', ins.step, 'command_id', ins.command_id, 'pool', ins.pool, 'due', ins.due)), '[]'::jsonb),
           count(*) FILTER (WHERE ins.status = 'cancelled')
      INTO v_inserted, v_cancelled
      FROM ins;
  END IF;

  -- rows closed here were queued or leased before this write (store/decision.ts mergeCloses)
  v_closed := 0;
  IF jsonb_array_length(p_closes) > 0 THEN
    WITH cl AS (
      UPDATE queue q SET status = c.status, finished_at = now(), lease_until = NULL
        FROM jsonb_to_recordset(p_closes) AS c(command_id integer, status text)
       WHERE q.execution_id = p_execution_id AND q.command_id = c.command_id AND q.status IN ('queued', 'leased')
      RETURNING q.status
    )
    SELECT count(*) FILTER (WHERE cl.status = 'cancelled') INTO v_closed FROM cl;
  END IF;

  IF p_snapshot_seq IS NOT NULL THEN
    INSERT INTO execution_snapshot (execution_id, seq, state) VALUES (p_execution_id, p_snapshot_seq, p_snapshot)
    ON CONFLICT (execution_id) DO UPDATE SET seq = EXCLUDED.seq, state = EXCLUDED.state, updated_at = now();
    DELETE FROM execution_snapshot_value v WHERE v.execution_id = p_execution_id AND NOT (p_snapshot_values ? v.path);
    INSERT INTO execution_snapshot_value (execution_id, path, value)
    SELECT p_execution_id, v.key, p_shared -> (v.value #>> '{}')::integer FROM jsonb_each(p_snapshot_values) AS v
    ON CONFLICT (execution_id, path) DO UPDATE SET value = EXCLUDED.value;
  END IF;

  -- p_steps_changed: p_steps are the summaries that changed; else they replace all of them
  IF NOT p_steps_changed THEN
    DELETE FROM execution_step s WHERE s.execution_id = p_execution_id AND NOT (p_steps ? s.step);
  END IF;
  IF p_steps <> '{}'::jsonb THEN
    INSERT INTO execution_step (execution_id, step, summary, result_value)
    SELECT p_execution_id, s.key,
           CASE WHEN p_step_shares ? s.key AND NOT p_beside
                THEN jsonb_set(s.value, '{result}', p_shared -> (p_step_shares ->> s.key)::integer) ELSE s.value END,
           CASE WHEN p_step_shares ? s.key AND p_beside THEN p_shared -> (p_step_shares ->> s.key)::integer END
      FROM jsonb_each(p_steps) AS s
    ON CONFLICT (execution_id, step) DO UPDATE SET summary = EXCLUDED.summary, result_value = EXCLUDED.result_value
     WHERE execution_step.summary IS DISTINCT FROM EXCLUDED.summary OR execution_step.result_value IS DISTINCT FROM EXCLUDED.result_value;
  END IF;

  -- taken after every row above, so the next eager claims' queue ids follow them
  RETURN QUERY SELECT true, v_updated, v_finished, v_inserted, v_cancelled + v_closed,
    ARRAY(SELECT nextval(pg_get_serial_sequence('queue', 'queue_id'))::text FROM generate_series(1, COALESCE(p_reserve, 0)));
END
$fn$;
