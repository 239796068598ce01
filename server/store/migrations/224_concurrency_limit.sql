-- Per-playbook concurrency limits (a playbook's `concurrency: {limit: N}`): an execution of a
-- limited path is stored `waiting` (status 'started', no events yet) and started by the admitter
-- (server/executions/limits.ts) when fewer than N executions of its path run, oldest first.
ALTER TABLE execution ADD COLUMN waiting boolean NOT NULL DEFAULT false;
CREATE INDEX execution_waiting ON execution (path, execution_id) WHERE waiting;
CREATE INDEX execution_running_path ON execution (path) WHERE status IN ('started', 'running') AND NOT waiting;
