/**
 * Wire shapes between the server and its clients (worker, CLI, operator). The shapes of the
 * worker protocol, executions, events, catalog, queue, runtime, schedules and probes are defined once, as schemas,
 * in common/contract/ (the server validates requests with them and the OpenAPI document at /docs
 * is generated from them); their static types are re-exported here under their published names.
 *
 * IDs (execution_id, queue_id, catalog_id) travel as decimal strings in responses so int64 values
 * round-trip through JavaScript exactly; requests accept a string or an integer.
 */
export type Id = string;

export type {
  ErrorBody, StatusOk,
  CommandNotification, ClaimRequest, ClaimedCommand, HeartbeatRequest, HeartbeatResponse, ReleaseLeaseRequest, ReleaseLeasesResponse,
  WorkerEvent, EventsAck, EventResult, ClaimNextRequest, EventsBatch,
  RunRequest, RunResponse, ExecutionStatusName, StepView, ExecutionView, RetryRequest, RerunRequest, ExecutionList, ExecutionListItem, ExecutionListView, ExecutionFullList, ExecutionSummary, ExecutionSummaryList, EventView, EventsPage,
  PlaybookIssueView, RegisterPlaybookRequest, RegisterPlaybookResponse, CatalogEntryView, CatalogSummaryView, PlaybookList, ResourceOwner,
  CatalogVersions, CatalogVersionsView, DeletePlaybookResponse,
  QueueStats, QueueThroughput, RuntimeRegisterRequest, RuntimeHeartbeatRequest, RuntimeEntry, RuntimeList,
  HealthCheck, HealthResponse, PostgresExecuteRequest, PostgresExecuteResponse,
  ConcurrencyPolicy, MissedRunPolicy, ScheduleSource, ScheduleSpec, ScheduleView, ScheduleList, ScheduleTickView, ScheduleTicks,
} from './contract/index.js';
