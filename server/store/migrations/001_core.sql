-- Core schema: catalog, executions, the event log, its snapshot cache, the command queue and
-- runtime registrations (DESIGN.md §4). Ids are bigint; the API sends them as strings.

CREATE TABLE catalog (
  catalog_id   bigserial PRIMARY KEY,
  path         text        NOT NULL,
  version      integer     NOT NULL CHECK (version > 0),
  content      text        NOT NULL,
  payload      jsonb       NOT NULL,           -- the normalised playbook
  content_hash text        NOT NULL,           -- sha256 of content, for "identical content"
  created_at   timestamptz NOT NULL DEFAULT now(),
  deleted_at   timestamptz,
  UNIQUE (path, version)
);
CREATE INDEX catalog_live_path ON catalog (path, version DESC) WHERE deleted_at IS NULL;

CREATE TABLE execution (
  execution_id        bigserial PRIMARY KEY,
  catalog_id          bigint      NOT NULL REFERENCES catalog (catalog_id),
  path                text        NOT NULL,
  version             integer     NOT NULL,
  parent_execution_id bigint      REFERENCES execution (execution_id),
  parent_command_id   integer,                 -- the parent's command this child answers
  parent_queue_id     bigint,
  root_execution_id   bigint      NOT NULL,
  status              text        NOT NULL DEFAULT 'started'
                      CHECK (status IN ('started', 'running', 'completed', 'failed', 'cancelled')),
  payload             jsonb       NOT NULL DEFAULT '{}'::jsonb,
  result              jsonb,
  error               jsonb,
  steps               jsonb       NOT NULL DEFAULT '{}'::jsonb,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  finished_at         timestamptz
);
CREATE INDEX execution_status ON execution (status, execution_id DESC);
CREATE INDEX execution_path ON execution (path, execution_id DESC);
CREATE INDEX execution_root ON execution (root_execution_id);
-- One child per parent command: a worker retrying "start child" gets the same execution back.
CREATE UNIQUE INDEX execution_parent_command ON execution (parent_execution_id, parent_command_id)
  WHERE parent_execution_id IS NOT NULL AND parent_command_id IS NOT NULL;

-- Append-only log; seq is the per-execution order (1, 2, 3…), assigned under the execution lock.
CREATE TABLE event (
  event_id     bigserial PRIMARY KEY,
  execution_id bigint      NOT NULL REFERENCES execution (execution_id) ON DELETE CASCADE,
  seq          integer     NOT NULL,
  name         text        NOT NULL,
  step         text,
  command_id   integer,
  payload      jsonb       NOT NULL DEFAULT '{}'::jsonb,
  created_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (execution_id, seq)
);

-- Cache of fold(events[1..seq]); may be deleted at any time, it is rebuilt from the log.
CREATE TABLE execution_state (
  execution_id bigint      PRIMARY KEY REFERENCES execution (execution_id) ON DELETE CASCADE,
  seq          integer     NOT NULL,
  state        jsonb       NOT NULL,
  updated_at   timestamptz NOT NULL DEFAULT now()
);

-- The command queue. The server is its only writer; workers claim rows through the API.
CREATE TABLE queue (
  queue_id       bigserial PRIMARY KEY,
  execution_id   bigint      NOT NULL REFERENCES execution (execution_id) ON DELETE CASCADE,
  command_id     integer     NOT NULL,
  step           text        NOT NULL,
  command        jsonb       NOT NULL,
  status         text        NOT NULL DEFAULT 'queued'
                 CHECK (status IN ('queued', 'leased', 'done', 'failed', 'cancelled')),
  attempts       integer     NOT NULL DEFAULT 0,  -- claims so far
  max_deliveries integer     NOT NULL DEFAULT 3,
  available_at   timestamptz NOT NULL DEFAULT now(),
  lease_until    timestamptz,
  worker_id      text,
  heartbeat_at   timestamptz,
  published_at   timestamptz,                   -- last successful broker notification
  created_at     timestamptz NOT NULL DEFAULT now(),
  finished_at    timestamptz,
  UNIQUE (execution_id, command_id)
);
-- Claimable / to publish (sweeper, stats).
CREATE INDEX queue_queued ON queue (available_at) WHERE status = 'queued';
-- Expired leases (sweeper).
CREATE INDEX queue_leased ON queue (lease_until) WHERE status = 'leased';
-- Open rows of one execution (cancel on terminal).
CREATE INDEX queue_open_execution ON queue (execution_id) WHERE status IN ('queued', 'leased');

CREATE TABLE runtime (
  kind           text        NOT NULL CHECK (kind IN ('server', 'worker')),
  name           text        NOT NULL,
  info           jsonb       NOT NULL DEFAULT '{}'::jsonb,
  registered_at  timestamptz NOT NULL DEFAULT now(),
  last_heartbeat timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (kind, name)
);
