-- Execution variables (spec "Variable"). Owned by server/store/vars.ts.
-- No foreign key to execution: rows are removed by ExecutionHooks.onExecutionTerminal inside the
-- execution's terminal transaction, and the vars API may be written before the row is visible.

CREATE TABLE IF NOT EXISTS vars (
  execution_id bigint NOT NULL,
  var_name     varchar(255) NOT NULL,
  var_type     text NOT NULL DEFAULT 'user_defined' CHECK (var_type IN ('user_defined', 'step_result', 'computed', 'iterator_state')),
  var_value    jsonb NOT NULL,
  source_step  text,
  access_count integer NOT NULL DEFAULT 0,
  created_at   timestamptz NOT NULL DEFAULT now(),
  accessed_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (execution_id, var_name)
);
