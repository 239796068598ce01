-- Retry from failure (POST /api/execution/{id}/retry): how many times an execution was retried,
-- and which failed children a parent's retry takes along (the parent's re-issued playbook command
-- resumes the child in place instead of starting a new one).
ALTER TABLE execution ADD COLUMN retries integer NOT NULL DEFAULT 0;
ALTER TABLE execution ADD COLUMN retry_with_parent boolean NOT NULL DEFAULT false;
