/**
 * One execution: the workflow graph coloured by step state (live), the selected step's calls and
 * their rendered args / tool config (redacted) / response or error, the execution's payload,
 * result, error and vars, and the raw event log.
 *
 * The page never loads the whole log: it opens from the record and the per-step counts
 * (GET /api/execution/{id}/steps: state, loop progress n/m, calls), loads the selected step's
 * events with `?step=` on demand, and pages the raw log (virtualised, a page per screenful). A
 * running execution is followed with the events long poll (`limit=1&wait=`): each wake-up
 * re-reads the record and the counts, and the step panel and the log fetch what is new.
 */
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { api, ApiError, encodePath, q } from '../api.js';
import { WorkflowGraph } from '../components/Graph.js';
import { duration, ErrorBox, Json, Status, when } from '../components/Json.js';
import { PagedList, VirtualList } from '../components/Virtual.js';
import { redact } from '../model/redact.js';
import { emptySummary, foldEvents, shownState, stateLabel, summaryFromCounts, varsSet, type Call, type StepCounts, type StepSummary } from '../model/steps.js';
import { BASE, Link, navigate } from '../router.js';
import { TERMINAL, type CatalogEntry, type EventView, type EventsPage, type Execution, type Json as JsonValue, type Playbook } from '../types.js';

/** Events of one step per request (a 1,000-item loop step has about 4,000). */
const STEP_PAGE = 2000;
/** Rows of the raw log per request. */
const LOG_PAGE = 200;
/** Fewest ms between two refreshes of a running execution (each re-reads the counts). */
const FOLLOW_MS = 300;
const END = 2147483647;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The record, the per-step counts and the log's size; while running, kept current via the long poll. */
function useExecution(id: string) {
  const [ex, setEx] = useState<Execution>();
  const [counts, setCounts] = useState<StepCounts[]>();
  /** The execution's latest seq = its event count (seq is 1, 2, 3… per execution). */
  const [lastSeq, setLastSeq] = useState(0);
  const [error, setError] = useState<unknown>();
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const ac = new AbortController();
    const signal = ac.signal;
    // Following, the log's end is read first: anything written after it wakes the next long
    // poll, so the record and counts read after it are never older than what the poll waits on.
    // Opening, all three go at once (a finished execution is never followed).
    const refresh = async (following: boolean) => {
      const tailRead = api<EventsPage>(`/api/events/${id}${q({ after: END, limit: 1 })}`, { signal });
      if (following) await tailRead;
      const recordRead = api<Execution>(`/api/execution/${id}`, { signal });
      // Opening: the record alone lets the page fetch the playbook while the counts are computed.
      if (!following) void recordRead.then((r) => !signal.aborted && setEx((old) => old ?? r), () => {});
      const [tail, record, steps] = await Promise.all([
        tailRead,
        recordRead,
        api<{ steps: StepCounts[] }>(`/api/execution/${id}/steps`, { signal }),
      ]);
      if (signal.aborted) return { record, cursor: tail.last_seq ?? 0 };
      setEx(record);
      setCounts(steps.steps);
      setLastSeq(tail.last_seq ?? 0);
      return { record, cursor: tail.last_seq ?? 0 };
    };
    (async () => {
      try {
        let { record, cursor } = await refresh(false);
        if (TERMINAL.includes(record.status)) return;
        ({ record, cursor } = await refresh(true));
        while (!signal.aborted && !TERMINAL.includes(record.status)) {
          await api<EventsPage>(`/api/events/${id}${q({ after: cursor, limit: 1, wait: 20 })}`, { signal });
          ({ record, cursor } = await refresh(true));
          await sleep(FOLLOW_MS);
        }
        // What the terminal transition wrote after the last read of the log's end.
        if (!signal.aborted) await refresh(true);
      } catch (e) {
        if (!signal.aborted) setError(e);
      }
    })();
    return () => ac.abort();
  }, [id, tick]);
  return { ex, counts, lastSeq, error, reload: () => setTick((t) => t + 1) };
}

/**
 * The events of one step, fetched when the step is selected and then as the log grows (only
 * what is new). `complete`: everything up to the last known seq has arrived.
 */
function useStepEvents(id: string, step: string | undefined, lastSeq: number) {
  const [state, setState] = useState<{ key: string; events: EventView[]; complete: boolean }>({ key: '', events: [], complete: false });
  const st = useRef({ key: '', all: [] as EventView[], after: 0, running: false, again: false, ac: undefined as AbortController | undefined });
  const key = `${id}/${step ?? ''}`;
  useEffect(() => {
    const s = st.current;
    if (s.key !== key) {
      s.ac?.abort();
      Object.assign(s, { key, all: [], after: 0, running: false, again: false, ac: undefined });
      setState({ key, events: [], complete: false });
    }
    if (!step) return;
    if (s.running) {
      s.again = true;
      return;
    }
    s.running = true;
    const ac = new AbortController();
    s.ac = ac;
    (async () => {
      try {
        do {
          s.again = false;
          for (;;) {
            const page = await api<EventsPage>(`/api/events/${id}${q({ step, after: s.after, limit: STEP_PAGE })}`, { signal: ac.signal });
            if (ac.signal.aborted) return;
            if (page.events.length) {
              s.all = s.all.concat(page.events);
              s.after = page.events[page.events.length - 1].seq;
            }
            const complete = page.next_after === null;
            setState({ key, events: s.all, complete });
            if (complete) break;
          }
        } while (s.again && !ac.signal.aborted);
      } catch {
        // Aborted (another step selected) or a failed read: the next change of the log retries.
      } finally {
        if (s.ac === ac) s.running = false;
      }
    })();
  }, [key, lastSeq]);
  useEffect(() => () => st.current.ac?.abort(), []);
  return state.key === key ? state : { key, events: [], complete: false };
}

/** The raw log, a page at a time for the rows in view. */
function EventLog({ id, total }: { id: string; total: number }) {
  const [pages, setPages] = useState<Map<number, EventView[]>>(new Map());
  const pending = useRef(new Set<number>());
  const loaded = useRef(pages);
  loaded.current = pages;
  useEffect(() => () => pending.current.clear(), []);
  const onRange = useCallback((start: number, end: number) => {
    for (let p = Math.floor(start / LOG_PAGE); p <= Math.floor(end / LOG_PAGE); p++) {
      const want = Math.min(LOG_PAGE, total - p * LOG_PAGE);
      if ((loaded.current.get(p)?.length ?? 0) >= want || pending.current.has(p)) continue;
      pending.current.add(p);
      api<EventsPage>(`/api/events/${id}${q({ after: p * LOG_PAGE, limit: LOG_PAGE })}`)
        .then((page) => setPages((m) => new Map(m).set(p, page.events)))
        .catch(() => {})
        .finally(() => pending.current.delete(p));
    }
  }, [id, total]);
  const get = useCallback((i: number) => pages.get(Math.floor(i / LOG_PAGE))?.[i % LOG_PAGE], [pages]);
  return (
    <PagedList count={total} get={get} onRange={onRange} rowHeight={24} height={420} testId="events"
      placeholder={(i) => <div className="event-row muted"><span className="num">{i + 1}</span><span>…</span></div>}
      render={(e) => (
        <div className="event-row">
          <span className="num">{e.seq}</span>
          <span>{new Date(e.created_at).toLocaleTimeString()}</span>
          <span className="ev-name">{e.name}</span>
          <span>{e.step ?? ''}</span>
          <span className="ev-payload" title={JSON.stringify(e.payload)}>{JSON.stringify(redact(e.payload))}</span>
        </div>
      )} />
  );
}

/** Variables set by the run (its vars_set events), read when the tab is open. */
function useVars(id: string, active: boolean, lastSeq: number): Record<string, JsonValue> | undefined {
  const [vars, setVars] = useState<Record<string, JsonValue>>();
  useEffect(() => {
    if (!active) return;
    const ac = new AbortController();
    (async () => {
      const out: Record<string, JsonValue> = {};
      let after = 0;
      for (;;) {
        const page = await api<EventsPage>(`/api/events/${id}${q({ name: 'vars_set', after, limit: 1000 })}`, { signal: ac.signal });
        for (const e of page.events) Object.assign(out, varsSet(e));
        if (page.next_after === null || page.events.length === 0) break;
        after = page.next_after;
      }
      if (!ac.signal.aborted) setVars(out);
    })().catch(() => {});
    return () => ac.abort();
  }, [id, active, lastSeq]);
  return vars;
}

function usePlaybook(ex?: Execution): { playbook?: Playbook; error?: unknown } {
  const [state, setState] = useState<{ playbook?: Playbook; error?: unknown }>({});
  useEffect(() => {
    if (!ex) return;
    const ac = new AbortController();
    api<CatalogEntry>(`/api/catalog/playbook/${encodePath(ex.path)}${q({ version: ex.version })}`, { signal: ac.signal })
      .then((e) => setState({ playbook: e.playbook }))
      .catch((error) => {
        if (ac.signal.aborted) return;
        // A removed catalog path: the steps the execution knows, without edges.
        const workflow = Object.keys(ex.steps ?? {}).map((step) => ({ step }));
        setState({ playbook: { metadata: { name: ex.path }, workflow }, error });
      });
    return () => ac.abort();
  }, [ex?.path, ex?.version, Boolean(ex)]);
  return state;
}

function useChildren(id: string, changes: number): Execution[] {
  const [children, setChildren] = useState<Execution[]>([]);
  useEffect(() => {
    const ac = new AbortController();
    api<{ executions: Execution[] }>(`/api/executions${q({ parent: id, limit: 500, view: 'summary' })}`, { signal: ac.signal })
      .then((r) => setChildren(r.executions))
      .catch(() => {});
    return () => ac.abort();
  }, [id, changes]);
  return children;
}

function callState(c: Call): string {
  if (c.error !== undefined) return 'failed';
  if (c.done_at) return 'completed';
  if (c.started_at) return 'running';
  return 'queued';
}

function CallRow({ c, selected, onClick }: { c: Call; selected: boolean; onClick: () => void }) {
  return (
    <button className={`call-row${selected ? ' selected' : ''}`} onClick={onClick} data-call={c.command_id} data-state={callState(c)}>
      <span>#{c.command_id}</span>
      <span>{c.item !== null ? `item ${c.item}` : ''}</span>
      <span>attempt {c.attempt}{c.iteration != null && c.item === null ? ` · iter ${c.iteration}` : ''}</span>
      <span className={`badge status-${callState(c)}`}>{callState(c)}</span>
      <span className="num">{c.duration_ms !== undefined ? `${c.duration_ms} ms` : ''}</span>
      <span className="timebar"><span style={{ width: `${Math.min(100, Math.max(2, Math.log10((c.duration_ms ?? 0) + 1) * 25))}%` }} /></span>
    </button>
  );
}

function StepPanel({ s, children, loading, totalCalls }: { s: StepSummary; children: Execution[]; loading: boolean; totalCalls?: number }) {
  const [picked, setPicked] = useState<number>();
  const failing = s.calls.findLast((c) => c.error !== undefined);
  const call = s.calls.find((c) => c.command_id === picked) ?? failing ?? s.calls[s.calls.length - 1];
  const kids = children.filter((c) => s.calls.some((x) => x.kind === 'playbook') && c.path === (s.calls[0]?.tool?.path as string | undefined));
  return (
    <div className="step-panel" data-testid="step-panel" data-step={s.name}>
      <h2>{s.name} <Status status={s.state} label={stateLabel(s.state)} /></h2>
      <div className="kv">
        <span>runs</span><span>{s.runs}</span>
        {s.loop && <><span>loop</span><span data-testid="loop-progress">{s.loop.done}/{s.loop.total} items</span></>}
        <span>calls</span><span data-testid="call-count">{loading && totalCalls !== undefined ? `${s.calls.length} of ${totalCalls} loaded…` : s.calls.length}</span>
      </div>
      {kids.length > 0 && (
        <div className="children">Child executions: {kids.map((k) => <Link key={k.execution_id} to={`/executions/${k.execution_id}`}>{k.execution_id} ({k.status}) </Link>)}</div>
      )}
      {s.error !== undefined && <><h3>Step error</h3><Json value={s.error} testId="step-error" /></>}
      <h3>Calls</h3>
      {s.calls.length === 0 ? <p className="muted">{loading ? 'Loading the step’s events…' : 'No calls yet.'}</p> : (
        <VirtualList items={s.calls} rowHeight={30} height={Math.min(240, s.calls.length * 30 + 2)} testId="calls"
          render={(c) => <CallRow c={c} selected={c === call} onClick={() => setPicked(c.command_id)} />} />
      )}
      {call && (
        <div className="call-detail" data-testid="call-detail">
          <h3>Call #{call.command_id}{call.worker_id ? ` on ${call.worker_id}` : ''}</h3>
          <div className="cols">
            <div><h4>Rendered args</h4><Json value={redact(call.args ?? {})} testId="call-args" /></div>
            <div><h4>Tool config</h4><Json value={redact(call.tool ?? {})} testId="call-tool" /></div>
          </div>
          {call.error !== undefined
            ? <><h4>Error</h4><Json value={call.error} testId="call-error" /></>
            : <><h4>Response</h4><Json value={call.response} testId="call-response" /></>}
        </div>
      )}
      {s.result !== undefined && <><h3>Step result</h3><Json value={s.result} /></>}
    </div>
  );
}

const TABS = ['payload', 'result', 'error', 'vars', 'events'] as const;

export function ExecutionView({ id }: { id: string }) {
  const { ex, counts, lastSeq, error, reload } = useExecution(id);
  const { playbook, error: pbError } = usePlaybook(ex);
  const summary = useMemo(() => (counts && ex ? summaryFromCounts(counts, ex) : foldEvents([], ex)), [counts, ex]);
  const children = useChildren(id, (ex?.status === 'running' ? lastSeq >> 6 : lastSeq) + summary.steps.size);
  const [selected, setSelected] = useState<string>();
  const [tab, setTab] = useState<(typeof TABS)[number]>('payload');
  const [actionError, setActionError] = useState<unknown>();
  const [busy, setBusy] = useState(false);

  const failedStep = useMemo(() => [...summary.steps.values()].find((s) => s.state === 'failed')?.name, [summary]);
  const current = selected ?? failedStep ?? playbook?.workflow[0]?.step;
  const stepEvents = useStepEvents(id, ex ? current : undefined, lastSeq);
  const vars = useVars(id, tab === 'vars', lastSeq);
  // State and loop progress from the counts (always current); calls, args and results from the
  // selected step's own events.
  const step = useMemo(() => {
    if (!current) return undefined;
    const base = summary.steps.get(current) ?? emptySummary(current);
    const state = shownState(base.state, ex?.status);
    const detail = foldEvents(stepEvents.events, ex).steps.get(current);
    return detail ? { ...detail, state, loop: base.loop, error: detail.error ?? base.error, result: detail.result ?? base.result } : { ...base, state };
  }, [current, summary, stepEvents.events, ex]);
  const stepCounts = counts?.find((c) => c.step === current);

  const childLinks = useMemo(() => {
    const out: Record<string, string> = {};
    for (const s of playbook?.workflow ?? []) {
      if (s.tool?.kind !== 'playbook') continue;
      const child = children.find((c) => c.path === s.tool?.path);
      if (child) out[s.step] = `${BASE}/executions/${child.execution_id}`;
    }
    return out;
  }, [playbook, children]);

  if (error) return <ErrorBox error={error instanceof ApiError && error.status === 404 ? `execution ${id} not found` : error} />;
  if (!ex) return <p className="muted">Loading execution {id}…</p>;

  const act = async (fn: () => Promise<void>) => {
    setBusy(true);
    setActionError(undefined);
    try {
      await fn();
    } catch (e) {
      setActionError(e);
    } finally {
      setBusy(false);
    }
  };
  const cancel = () => act(async () => {
    await api(`/api/execution/${id}/cancel`, { method: 'POST', body: {} });
  });
  // The server resumes the execution in place (completed steps keep their results); the page
  // follows it again from the start.
  const retry = () => act(async () => {
    await api(`/api/execution/${id}/retry`, { method: 'POST', body: {} });
    reload();
  });
  const rerun = () => act(async () => {
    const r = await api<{ execution_id: string }>('/api/run/playbook', { method: 'POST', body: { path: ex.path, version: ex.version, payload: ex.payload ?? {} } });
    navigate(`/executions/${r.execution_id}`);
  });

  return (
    <section className="execution" data-testid="execution" data-status={ex.status}>
      <header className="ex-head">
        <h1>Execution {ex.execution_id} <Status status={ex.status} /></h1>
        <div className="kv inline">
          <span>playbook</span><span><Link to={`/catalog/${encodePath(ex.path)}${q({ version: ex.version })}`}>{ex.path}</Link> v{ex.version}</span>
          <span>started</span><span>{when(ex.created_at)}</span>
          <span>duration</span><span>{duration(ex.created_at, ex.finished_at)}</span>
          {ex.parent_execution_id && <><span>parent</span><span><Link to={`/executions/${ex.parent_execution_id}`}>{ex.parent_execution_id}</Link></span></>}
          <span>events</span><span data-testid="event-count">{lastSeq}</span>
        </div>
        <div className="actions">
          {!TERMINAL.includes(ex.status) && <button className="danger" disabled={busy} onClick={cancel}>Cancel</button>}
          {(ex.status === 'failed' || ex.status === 'cancelled') && !ex.parent_execution_id && (
            <button disabled={busy} onClick={retry} data-testid="retry" title="Run the failed steps again (only the unfinished items of a loop); completed steps keep their results">Retry from the failed step</button>
          )}
          <button disabled={busy} onClick={rerun}>Run again with this payload</button>
        </div>
        <ErrorBox error={actionError} />
      </header>
      {pbError !== undefined && <p className="muted">Playbook {ex.path} v{ex.version} is no longer in the catalog: steps shown without edges.</p>}
      <div className="ex-main">
        {playbook && <WorkflowGraph playbook={playbook} steps={summary.steps} selected={current} onSelect={setSelected} childLinks={childLinks} executionStatus={ex.status} />}
        {step && <StepPanel key={step.name} s={step} children={children} loading={!stepEvents.complete} totalCalls={stepCounts?.calls} />}
      </div>
      <nav className="tabs">
        {TABS.map((t) => <button key={t} className={t === tab ? 'active' : ''} onClick={() => setTab(t)} data-tab={t}>{t}</button>)}
      </nav>
      <div className="tab-body" data-testid={`tab-${tab}`}>
        {tab === 'payload' && <Json value={ex.payload} />}
        {tab === 'result' && <Json value={ex.result} />}
        {tab === 'error' && <Json value={ex.error ?? undefined} testId="execution-error" />}
        {tab === 'vars' && (vars ? <Json value={vars} /> : <p className="muted">Loading…</p>)}
        {tab === 'events' && <EventLog id={id} total={lastSeq} />}
      </div>
    </section>
  );
}
