-- Worker pools (issue 14): each queue row belongs to the pool whose workers run it (the step's
-- `pool`, else the playbook's, else 'default'). Depth is read per pool by the WorkerPool
-- controller (GET /api/queue/stats?pool=), so the open rows are indexed by pool.
ALTER TABLE queue ADD COLUMN pool text NOT NULL DEFAULT 'default';
CREATE INDEX queue_open_pool ON queue (pool, status) WHERE status IN ('queued', 'leased');
