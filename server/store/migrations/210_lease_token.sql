-- A lease is held by (worker_id, lease_token): the token is issued with each claim (and with an
-- eager claim at insertion) and must come back with the lease's heartbeats and its call.done, so
-- neither another worker nor a previous incarnation of the same worker id can report for the row.
ALTER TABLE queue ADD COLUMN IF NOT EXISTS lease_token text;
-- Leases of one worker id (released at once when a worker restarts with that id).
CREATE INDEX IF NOT EXISTS queue_leased_worker ON queue (worker_id) WHERE status = 'leased';
