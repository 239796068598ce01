-- Children by parent. Every end reads its execution's running children (to cancel them), and with
-- no index on parent_execution_id alone PostgreSQL found them by scanning every running execution
-- (execution_status) and filtering on the parent: with 2,000 executions running, 2–6 ms per end,
-- growing with the number running, so a burst of ends cost O(N²). Listing an execution's children
-- (GET /api/executions?parent=) walked the primary key backwards until it had a page.
--
-- The partial unique index on (parent_execution_id, parent_command_id) cannot serve either: a
-- child started through the API with a parent but no parent command has no parent_command_id.
-- Children only, in id order: top-level executions, most of them, never touch this index.
CREATE INDEX execution_parent ON execution (parent_execution_id, execution_id)
  WHERE parent_execution_id IS NOT NULL;
