-- Step summaries leave the execution row (issue 20): the `steps` jsonb column held the summary of
-- every step, and each decision's `steps = steps || $changed` made PostgreSQL detoast, concatenate
-- and re-compress the whole value, so a step cost O(steps so far). One row per step: a decision
-- upserts the two or three summaries it changed. Readers aggregate them back into the same
-- `{step: summary}` object (store/executions.ts), so the API keeps its shape.
CREATE TABLE execution_step (
  execution_id bigint NOT NULL REFERENCES execution (execution_id) ON DELETE CASCADE,
  step         text   NOT NULL,
  summary      jsonb  NOT NULL,
  PRIMARY KEY (execution_id, step)
);

INSERT INTO execution_step (execution_id, step, summary)
SELECT e.execution_id, s.key, s.value FROM execution e, jsonb_each(e.steps) AS s;

UPDATE execution SET steps = '{}'::jsonb WHERE steps <> '{}'::jsonb;

-- The column stays, emptied above since this version never reads it: during a rolling upgrade,
-- servers of the previous version still read and write it (their own decisions' summaries; the
-- event log stays the truth for both). A later migration drops it, once no such server can run.
