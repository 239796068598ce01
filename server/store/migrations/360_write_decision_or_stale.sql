-- playflow_write_decision (migrations 340, 350), raising instead of answering `current = false`
-- when the guard of a speculative decision does not hold. The end of an execution goes to
-- PostgreSQL as one pipeline (server/pipeline.ts): the write and the end's statements, bound, and
-- one Sync, so one implicit transaction. Statements after the write must not run when it wrote
-- nothing, and an error is what skips them: the rest of the pipeline is discarded and the
-- transaction rolled back. SQLSTATE PF409 (store/decision.ts STALE_SQLSTATE).
CREATE FUNCTION playflow_write_decision_or_stale(
  p_execution_id bigint, p_events jsonb, p_commands jsonb, p_closes jsonb,
  p_status text, p_result jsonb, p_error jsonb, p_steps jsonb, p_terminal boolean,
  p_snapshot_seq integer, p_snapshot jsonb, p_steps_changed boolean,
  p_shared jsonb, p_result_idx integer, p_step_shares jsonb, p_snapshot_values jsonb, p_beside boolean,
  p_last_seq integer, p_holders jsonb, p_vars jsonb, p_reserve integer, p_claims jsonb)
RETURNS TABLE (current boolean, updated_at timestamptz, finished_at timestamptz, inserted jsonb, cancelled bigint, reserved text[])
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  w record;
BEGIN
  SELECT * INTO w FROM playflow_write_decision(p_execution_id, p_events, p_commands, p_closes, p_status, p_result, p_error, p_steps,
    p_terminal, p_snapshot_seq, p_snapshot, p_steps_changed, p_shared, p_result_idx, p_step_shares, p_snapshot_values, p_beside,
    p_last_seq, p_holders, p_vars, p_reserve, p_claims);
  IF NOT w.current THEN
    RAISE EXCEPTION 'execution % changed since the decision''s state was read: nothing written', p_execution_id USING ERRCODE = 'PF409';
  END IF;
  RETURN QUERY SELECT w.current, w.updated_at, w.finished_at, w.inserted, w.cancelled, w.reserved;
END
$fn$;
