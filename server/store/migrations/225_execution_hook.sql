-- The webhook trigger whose delivery started an execution (like schedule_id for a schedule tick).
ALTER TABLE execution ADD COLUMN hook_id bigint REFERENCES hook (hook_id) ON DELETE SET NULL;
