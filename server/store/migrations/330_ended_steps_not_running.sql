-- Steps of an execution that ended while they ran (cancelled, or failed elsewhere) read `running`
-- forever until 03794ad; since then the reducer marks them `cancelled` at the end, so a fold of
-- such a log says `cancelled` while the summaries and the snapshot written before say `running`.
-- Both are brought to what a fold gives: the summaries updated in place, the snapshots dropped
-- (a cache: the next load of the execution, a retry, folds its log).
UPDATE execution_step s
   SET summary = jsonb_set(s.summary, '{status}', '"cancelled"')
  FROM execution e
 WHERE e.execution_id = s.execution_id
   AND e.status IN ('cancelled', 'failed')
   AND s.summary->>'status' = 'running';

DELETE FROM execution_state st
 USING execution e
 WHERE e.execution_id = st.execution_id
   AND e.status IN ('cancelled', 'failed')
   AND EXISTS (SELECT 1 FROM jsonb_each(st.state->'steps') AS x WHERE x.value->>'status' = 'running');
