-- Schedules: a cron expression (with seconds, in a time zone) that starts a playbook. Declared
-- through the API, in a playbook's `schedules:` section, or as a Schedule custom resource
-- (`source`). Every tick is claimed in this database, never in memory: a replica takes a due
-- schedule row FOR UPDATE SKIP LOCKED, writes one schedule_tick row per tick (primary key: a tick
-- is decided exactly once across replicas and restarts) and moves next_run on.
CREATE TABLE schedule (
  schedule_id               bigserial PRIMARY KEY,
  name                      text        NOT NULL UNIQUE,
  source                    text        NOT NULL DEFAULT 'api' CHECK (source IN ('api', 'playbook', 'kubernetes')),
  cron                      text        NOT NULL,
  timezone                  text        NOT NULL DEFAULT 'UTC',
  path                      text        NOT NULL,
  version                   integer     CHECK (version > 0),   -- pinned; NULL: the latest at each tick
  payload                   jsonb       NOT NULL DEFAULT '{}'::jsonb,
  concurrency_policy        text        NOT NULL DEFAULT 'Allow' CHECK (concurrency_policy IN ('Allow', 'Forbid', 'Replace')),
  missed_runs               text        NOT NULL DEFAULT 'RunOnce' CHECK (missed_runs IN ('RunOnce', 'Skip')),
  starting_deadline_seconds integer     CHECK (starting_deadline_seconds > 0),
  suspend                   boolean     NOT NULL DEFAULT false,
  next_run                  timestamptz,
  last_run                  timestamptz,
  last_execution_id         bigint,
  created_at                timestamptz NOT NULL DEFAULT now(),
  updated_at                timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX schedule_due ON schedule (next_run) WHERE NOT suspend;

-- One row per tick decided: started (execution_id set once started), skipped (concurrency
-- policy), missed (not run: the server was down, the policy ran one or none), failed (the start
-- failed, reason says why).
CREATE TABLE schedule_tick (
  schedule_id  bigint      NOT NULL REFERENCES schedule (schedule_id) ON DELETE CASCADE,
  tick         timestamptz NOT NULL,
  outcome      text        NOT NULL CHECK (outcome IN ('started', 'skipped', 'missed', 'failed')),
  reason       text,
  execution_id bigint,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (schedule_id, tick)
);
CREATE INDEX schedule_tick_unstarted ON schedule_tick (created_at) WHERE outcome = 'started' AND execution_id IS NULL;

ALTER TABLE execution ADD COLUMN schedule_id bigint REFERENCES schedule (schedule_id) ON DELETE SET NULL;
ALTER TABLE execution ADD COLUMN schedule_tick timestamptz;
-- A tick starts at most one execution, whichever replica (or recovery pass) starts it.
CREATE UNIQUE INDEX execution_schedule_tick ON execution (schedule_id, schedule_tick) WHERE schedule_id IS NOT NULL;
CREATE INDEX execution_schedule_open ON execution (schedule_id) WHERE status IN ('started', 'running');
