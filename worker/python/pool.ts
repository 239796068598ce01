/**
 * A pool of warm python3 interpreters running worker/python/runner.py, outside the worker's
 * process. Each interpreter serves one call at a time over line-delimited JSON. Interpreters are
 * spawned when the pool starts, retired after exactly `maxCallsPerProcess` calls (its replacement
 * starts at once), and replaced at once when one crashes, exits (`os._exit`, `sys.exit`), times
 * out or its call is cancelled — killed with its process group, so what the user code started
 * goes too. Run as another user (`user`) when the worker is root, an interpreter cannot read the
 * worker's environment or memory (/proc/<worker>/environ, /mem).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Json, JsonObject } from '../../playbook/types.js';
import { parsedOnRead } from '../../common/raw-json.js';

/**
 * Calls an interpreter serves before it is retired, unless configured. Retiring bounds what user
 * code leaks, but a start costs about 35 ms of CPU against about 65 µs for a call (bench/python.ts):
 * retired every 200 calls, the starts cost about three times what the calls did; every 1,000, half.
 */
export const DEFAULT_MAX_CALLS = 1000;

export interface PythonPoolOptions {
  /** Warm interpreters kept ready. Default 2. */
  size?: number;
  /** Recycle an interpreter after this many calls. Default DEFAULT_MAX_CALLS. */
  maxCallsPerProcess?: number;
  /** Interpreter binary. Default env PLAYFLOW_PYTHON or `python3`. */
  python?: string;
  /** Extra environment for the interpreters (of the worker's own environment only PATH, HOME, locale, proxies, CA bundles, PYTHON* and the names listed in WORKER_PYTHON_ENV are passed on). */
  env?: Record<string, string>;
  /** How long an interpreter may take to start. Default 20 s. */
  startTimeoutMs?: number;
  /** Largest answer (result + log, JSON bytes) of one call; beyond it the call fails `too_large`. Default 64 MiB. */
  maxResultBytes?: number;
  /**
   * Run the interpreters as this user (the worker must be root): they cannot read the worker's
   * /proc/<pid>/environ or memory. null = as the worker's own user.
   */
  user?: { uid: number; gid: number } | null;
  onStderr?: (pid: number | undefined, text: string) => void;
}

export interface PythonRequest {
  code: string;
  args?: JsonObject;
  libs?: Record<string, string>;
}

export type PythonResult =
  /** `resultJson`: the result's JSON text, for a large answer (RAW_RESULT_MIN_CHARS); `result` is parsed from it on first use. */
  | { ok: true; result: Json; resultJson?: string; log: string; pid: number }
  | { ok: false; error: { type: string; message: string; code: string; traceback: string | null }; log: string; pid?: number };

/**
 * An answer at least this long keeps its result as JSON text (`resultJson`): the worker forwards
 * it to the server without parsing and serialising it again (common/raw-json.ts).
 */
export const RAW_RESULT_MIN_CHARS = 1024 * 1024;

/**
 * A success line as runner.py writes it, `{"id": <n>, "ok": true, "result": <text>, "log": "<…>"}`,
 * split without parsing the result; undefined for any other line. The log is a JSON string, in
 * which `"` is always escaped, so the last `, "log": ` is the runner's own.
 */
function splitResultLine(line: string): { id: number; ok: true; resultJson: string; log: string } | undefined {
  const head = /^\{"id": (\d+), "ok": true, "result": /.exec(line.slice(0, 64));
  if (!head || !line.endsWith('}')) return undefined;
  const at = line.lastIndexOf(', "log": ');
  if (at <= head[0].length) return undefined;
  let log: unknown;
  try {
    log = JSON.parse(line.slice(at + ', "log": '.length, -1));
  } catch {
    return undefined;
  }
  if (typeof log !== 'string') return undefined;
  return { id: Number(head[1]), ok: true, resultJson: line.slice(head[0].length, at), log };
}

/** A success whose result is parsed from its JSON text only when read. */
function okJson(resultJson: string, log: string | undefined, pid: number): PythonResult {
  return parsedOnRead({ ok: true as const, resultJson, log: log ?? '', pid }, 'result', resultJson) as PythonResult;
}

function runnerPath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  // Sources run from worker/python; a build runs from <outDir>/worker/python, where tsc does not
  // copy the .py file: walk up to the package's source tree (PLAYFLOW_PYTHON_RUNNER overrides).
  if (process.env.PLAYFLOW_PYTHON_RUNNER) return process.env.PLAYFLOW_PYTHON_RUNNER;
  let dir = here;
  for (let i = 0; i < 6; i++) {
    for (const candidate of [join(dir, 'runner.py'), join(dir, 'worker', 'python', 'runner.py')]) if (existsSync(candidate)) return candidate;
    dir = dirname(dir);
  }
  return join(here, 'runner.py');
}

interface Pending {
  id: number;
  resolve: (r: PythonResult) => void;
  timer?: NodeJS.Timeout;
  cleanup: () => void;
}

class Interpreter {
  readonly child: ChildProcess;
  pid: number | undefined;
  calls = 0;
  ready: Promise<void>;
  alive = true;
  isReady = false;
  doomed = false;
  pending: Pending | null = null;
  /** The protocol line being received, as raw chunks: a large answer is joined once, not rescanned per chunk. */
  private parts: Buffer[] = [];
  private partsBytes = 0;
  private stderrTail = '';
  private readyResolve!: () => void;
  private readyReject!: (e: Error) => void;
  exitInfo = '';

  constructor(
    python: string,
    script: string,
    env: NodeJS.ProcessEnv,
    startTimeoutMs: number,
    private onExit: (it: Interpreter) => void,
    onStderr: ((pid: number | undefined, text: string) => void) | undefined,
    private readonly maxLineBytes: number,
    user: { uid: number; gid: number; home: string } | null,
  ) {
    this.ready = new Promise((res, rej) => {
      this.readyResolve = res;
      this.readyReject = rej;
    });
    this.ready.catch(() => {});
    // Its own process group (detached), so the interpreter and whatever it spawned are killed
    // together; the runner also dies with the worker (PR_SET_PDEATHSIG, see runner.py).
    this.child = spawn(python, ['-u', script], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: user ? { ...env, HOME: user.home } : env,
      detached: true,
      ...(user ? { uid: user.uid, gid: user.gid, cwd: user.home } : {}),
    });
    this.pid = this.child.pid;
    const startTimer = setTimeout(() => {
      this.readyReject(new Error(`python interpreter did not start within ${startTimeoutMs} ms`));
      this.kill();
    }, startTimeoutMs);
    this.ready.then(() => clearTimeout(startTimer), () => clearTimeout(startTimer));
    this.child.stdout!.on('data', (chunk: Buffer) => this.onData(chunk));
    this.child.stderr!.setEncoding('utf8');
    this.child.stderr!.on('data', (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-4000);
      onStderr?.(this.pid, chunk);
    });
    this.child.stdin!.on('error', () => {});
    this.child.on('error', (err) => {
      this.exitInfo = err.message;
      this.readyReject(new Error(`cannot start ${python}: ${err.message}`));
      this.finish();
    });
    this.child.on('exit', (code, signal) => {
      this.exitInfo = signal ? `killed by ${signal}` : `exited with code ${code}`;
      this.readyReject(new Error(`python interpreter ${this.exitInfo} before it was ready${this.stderrTail ? `: ${this.stderrTail.trim()}` : ''}`));
      this.finish();
    });
  }

  private finish(): void {
    if (!this.alive) return;
    this.alive = false;
    const p = this.pending;
    this.pending = null;
    if (p) {
      p.cleanup();
      const tail = this.stderrTail.trim();
      p.resolve({
        ok: false,
        pid: this.pid,
        log: '',
        error: { type: 'InterpreterExit', code: 'crash', traceback: null, message: `python interpreter ${this.exitInfo} during the call (the worker replaced it)${tail ? `; stderr: ${tail.slice(-1000)}` : ''}` },
      });
    }
    this.onExit(this);
  }

  private onData(chunk: Buffer): void {
    let from = 0;
    for (let nl = chunk.indexOf(10, from); nl >= 0; nl = chunk.indexOf(10, from)) {
      this.parts.push(chunk.subarray(from, nl));
      const line = Buffer.concat(this.parts).toString('utf8');
      this.parts = [];
      this.partsBytes = 0;
      from = nl + 1;
      this.onLine(line);
    }
    if (from < chunk.length) {
      this.parts.push(chunk.subarray(from));
      this.partsBytes += chunk.length - from;
      if (this.partsBytes > this.maxLineBytes) this.overflow();
    }
  }

  /** An answer beyond the limit: the call fails, the interpreter (still writing it) is replaced. */
  private overflow(): void {
    this.parts = [];
    this.partsBytes = 0;
    const p = this.pending;
    this.pending = null;
    this.kill();
    if (!p) return;
    p.cleanup();
    p.resolve({
      ok: false, pid: this.pid, log: '',
      error: { type: 'ResultTooLarge', code: 'too_large', traceback: null, message: `the python call's result is larger than ${this.maxLineBytes} bytes of JSON (WORKER_MAX_RESULT_BYTES)` },
    });
  }

  private onLine(line: string): void {
    if (!line.trim()) return;
    let msg: any = line.length >= RAW_RESULT_MIN_CHARS ? splitResultLine(line) : undefined;
    try {
      msg ??= JSON.parse(line);
    } catch {
      return;
    }
    if (msg.ready) {
      this.pid = msg.pid ?? this.pid;
      this.isReady = true;
      this.readyResolve();
      return;
    }
    const p = this.pending;
    if (!p || msg.id !== p.id) return;
    this.pending = null;
    p.cleanup();
    if (msg.ok && typeof msg.resultJson === 'string') p.resolve(okJson(msg.resultJson, msg.log, this.pid!));
    else if (msg.ok) p.resolve({ ok: true, result: msg.result as Json, log: msg.log ?? '', pid: this.pid! });
    else {
      if (msg.recycle) this.kill();
      p.resolve({ ok: false, error: msg.error, log: msg.log ?? '', pid: this.pid });
    }
  }

  send(id: number, req: PythonRequest): void {
    this.calls++;
    this.child.stdin!.write(`${JSON.stringify({ id, ...req })}\n`);
  }

  /** Kills the interpreter and its process group (processes the user code started). */
  kill(): void {
    this.doomed = true;
    if (this.child.pid !== undefined) {
      try {
        process.kill(-this.child.pid, 'SIGKILL');
      } catch {
        // the group is gone already
      }
    }
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

interface Waiter {
  take: (it: Interpreter) => void;
  fail: (e: Error) => void;
}

export class PythonPool {
  readonly size: number;
  private readonly maxCalls: number;
  private readonly python: string;
  private readonly script: string = runnerPath();
  private readonly env: NodeJS.ProcessEnv;
  private readonly startTimeoutMs: number;
  private readonly maxResultBytes: number;
  private readonly user: { uid: number; gid: number; home: string } | null = null;
  private readonly onStderr?: PythonPoolOptions['onStderr'];
  private all = new Set<Interpreter>();
  private idle: Interpreter[] = [];
  private waiters: Waiter[] = [];
  private nextId = 1;
  private closed = false;
  private startFailures = 0;
  private lastStartError: Error | null = null;

  constructor(opts: PythonPoolOptions = {}) {
    this.size = Math.max(1, opts.size ?? 2);
    this.maxCalls = Math.max(1, opts.maxCallsPerProcess ?? DEFAULT_MAX_CALLS);
    this.python = opts.python ?? process.env.PLAYFLOW_PYTHON ?? 'python3';
    this.startTimeoutMs = opts.startTimeoutMs ?? 20_000;
    this.maxResultBytes = opts.maxResultBytes ?? 64 * 1024 * 1024;
    this.onStderr = opts.onStderr;
    // User code must not see the worker's secrets (API token, broker URL with credentials): pass
    // only what an interpreter needs, proxies and CA bundles, and the names in WORKER_PYTHON_ENV.
    const env: NodeJS.ProcessEnv = {};
    const extra = new Set((process.env.WORKER_PYTHON_ENV ?? '').split(',').map((x) => x.trim()).filter(Boolean));
    for (const [k, v] of Object.entries(process.env)) {
      if (v === undefined) continue;
      if (extra.has(k) || /^(PATH|HOME|LANG|LC_.*|TZ|TMPDIR|VIRTUAL_ENV|PYENV_.*|SSL_CERT_.*|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|(HTTPS?|NO|ALL)_PROXY|(https?|no|all)_proxy)$/.test(k) || k.startsWith('PYTHON')) env[k] = v;
    }
    this.env = { ...env, ...opts.env, PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1' };
    if (opts.user) {
      // A home of its own, and a copy of the runner it can read wherever the worker is installed.
      const home = mkdtempSync(join(tmpdir(), 'playflow-python-'));
      chmodSync(home, 0o700);
      chownSync(home, opts.user.uid, opts.user.gid);
      const dir = mkdtempSync(join(tmpdir(), 'playflow-runner-'));
      chmodSync(dir, 0o755);
      const script = join(dir, 'runner.py');
      copyFileSync(this.script, script);
      chmodSync(script, 0o644);
      this.script = script;
      this.user = { ...opts.user, home };
    }
  }

  /** Spawns the warm interpreters and waits until they are ready. */
  async start(): Promise<void> {
    this.fill();
    await Promise.all([...this.all].map((it) => it.ready.catch(() => {})));
    if (this.idle.length === 0 && this.lastStartError) throw this.lastStartError;
  }

  get stats() {
    return { size: this.size, alive: this.all.size, idle: this.idle.length, waiting: this.waiters.length, pids: [...this.all].map((i) => i.pid) };
  }

  private fill(): void {
    if (this.closed) return;
    while (this.all.size < this.size) this.spawnOne();
  }

  private spawnOne(): Interpreter {
    const it = new Interpreter(this.python, this.script, this.env, this.startTimeoutMs, (dead) => this.onExit(dead), this.onStderr, this.maxResultBytes, this.user);
    this.all.add(it);
    it.ready.then(
      () => {
        this.startFailures = 0;
        this.lastStartError = null;
        this.release(it);
      },
      (err: Error) => {
        this.lastStartError = err;
      },
    );
    return it;
  }

  private onExit(it: Interpreter): void {
    const wasKnown = this.all.delete(it);
    this.idle = this.idle.filter((x) => x !== it);
    if (!it.isReady) {
      this.startFailures++;
      this.lastStartError = new Error(`python interpreter could not start (${this.python}): ${it.exitInfo}`);
    }
    if (!wasKnown || this.closed) return;
    if (this.startFailures >= 3) {
      // python3 cannot start: fail the callers instead of spinning; the next call tries again.
      const err = this.lastStartError ?? new Error('python interpreter cannot start');
      for (const w of this.waiters.splice(0)) w.fail(err);
      return;
    }
    this.fill();
  }

  private release(it: Interpreter): void {
    if (!it.alive || it.doomed) return;
    if (this.closed) {
      it.kill();
      return;
    }
    if (it.calls >= this.maxCalls) {
      // Exactly maxCalls per interpreter: retire it now; fill() starts its replacement.
      this.all.delete(it);
      it.kill();
      this.fill();
      return;
    }
    const w = this.waiters.shift();
    if (w) w.take(it);
    else this.idle.push(it);
  }

  private acquire(signal?: AbortSignal): Promise<Interpreter> {
    if (this.closed) return Promise.reject(new Error('python pool is closed'));
    const it = this.idle.pop();
    if (it) return Promise.resolve(it);
    if (this.startFailures >= 3) {
      this.startFailures = 0;
    }
    this.fill();
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        take: (i) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(i);
        },
        fail: (e) => {
          signal?.removeEventListener('abort', onAbort);
          reject(e);
        },
      };
      const onAbort = () => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(new Error('cancelled'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(w);
    });
  }

  /** Runs one call. Never rejects for a failure of user code; rejects only when the pool cannot run it. */
  async call(req: PythonRequest, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<PythonResult> {
    const it = await this.acquire(opts.signal);
    const id = this.nextId++;
    return new Promise<PythonResult>((resolve) => {
      const onAbort = () => {
        if (it.pending?.id !== id) return;
        it.pending = null;
        cleanup();
        resolve({ ok: false, pid: it.pid, log: '', error: { type: 'Cancelled', code: 'cancelled', traceback: null, message: 'python call cancelled (interpreter replaced)' } });
        it.kill();
      };
      const cleanup = () => {
        if (pending.timer) clearTimeout(pending.timer);
        opts.signal?.removeEventListener('abort', onAbort);
      };
      const pending: Pending = {
        id,
        resolve: (r) => {
          resolve(r);
          setImmediate(() => this.release(it));
        },
        cleanup,
      };
      if (opts.timeoutMs) {
        pending.timer = setTimeout(() => {
          if (it.pending?.id !== id) return;
          it.pending = null;
          cleanup();
          resolve({ ok: false, pid: it.pid, log: '', error: { type: 'Timeout', code: 'timeout', traceback: null, message: `python call timed out after ${opts.timeoutMs! / 1000}s (interpreter killed and replaced)` } });
          it.kill();
        }, opts.timeoutMs);
      }
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      it.pending = pending;
      it.send(id, req);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.waiters.splice(0)) w.fail(new Error('python pool is closed'));
    const all = [...this.all];
    this.all.clear();
    this.idle = [];
    await Promise.all(
      all.map(
        (it) =>
          new Promise<void>((res) => {
            if (!it.alive) return res();
            it.child.once('exit', () => res());
            it.child.stdin!.end();
            setTimeout(() => it.kill(), 2000).unref();
          }),
      ),
    );
  }
}
