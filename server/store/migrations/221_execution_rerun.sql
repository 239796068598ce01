-- Run again (POST /api/execution/{id}/rerun): a new execution of the same playbook version,
-- linked to the one it repeats.
ALTER TABLE execution ADD COLUMN rerun_of bigint REFERENCES execution (execution_id) ON DELETE SET NULL;
CREATE INDEX execution_rerun_of ON execution (rerun_of) WHERE rerun_of IS NOT NULL;
