/**
 * The contract's numbers: page sizes and request limits. Plain constants with no schema library
 * behind them, so the HTTP client (and with it every CLI command and the worker) can read them
 * without building the TypeBox schemas, which take most of a CLI start. The schemas in this
 * folder use the same constants.
 */

/** A page size query parameter: its default and its cap are part of the contract. */
export interface PageLimit { default: number; max: number }

/** GET /api/catalog/playbooks page size. */
export const CATALOG_LIST_LIMIT: PageLimit = { default: 100, max: 1000 };
/** GET /api/executions page size. */
export const EXECUTION_LIST_LIMIT: PageLimit = { default: 50, max: 500 };
/** GET /api/events/{id} page size. */
export const EVENTS_PAGE_LIMIT: PageLimit = { default: 500, max: 5000 };
/** GET /api/schedules/{name}/ticks page size. */
export const SCHEDULE_TICKS_LIMIT: PageLimit = { default: 100, max: 1000 };
/** Longest `wait` a request may ask for: below the usual 60-120 s idle timeouts of proxies. */
export const MAX_WAIT_SECONDS = 60;
/** Most commands one claim_next may lease. */
export const CLAIM_NEXT_MAX = 16;
/**
 * A server or worker whose last runtime heartbeat is older than this is no longer live: four
 * missed beats at the 15 s default of both, so one late beat under load does not flap.
 */
export const RUNTIME_LIVE_SECONDS = 60;
/** Events in one request. */
export const MAX_EVENTS_PER_REQUEST = 1000;
