/**
 * A pool of warm python3 interpreters running worker/python/runner.py, outside the worker's
 * process. Each interpreter serves one call at a time over line-delimited JSON. Interpreters are
 * spawned when the pool starts (a call never pays for an interpreter start unless every warm one
 * is gone), recycled after `maxCallsPerProcess` calls, and replaced at once when one crashes,
 * exits (`os._exit`, `sys.exit`), times out (killed) or its call is cancelled.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Json, JsonObject } from '../../playbook/types.js';

export interface PythonPoolOptions {
  /** Warm interpreters kept ready. Default 2. */
  size?: number;
  /** Recycle an interpreter after this many calls. Default 200. */
  maxCallsPerProcess?: number;
  /** Interpreter binary. Default env PLAYFLOW_PYTHON or `python3`. */
  python?: string;
  /** Extra environment for the interpreters (of the worker's own environment only PATH, HOME, locale, proxies, CA bundles, PYTHON* and the names listed in WORKER_PYTHON_ENV are passed on). */
  env?: Record<string, string>;
  /** How long an interpreter may take to start. Default 20 s. */
  startTimeoutMs?: number;
  onStderr?: (pid: number | undefined, text: string) => void;
}

export interface PythonRequest {
  code: string;
  args?: JsonObject;
  libs?: Record<string, string>;
}

export type PythonResult =
  | { ok: true; result: Json; log: string; pid: number }
  | { ok: false; error: { type: string; message: string; code: string; traceback: string | null }; log: string; pid?: number };

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
  /** Past maxCallsPerProcess, a replacement is starting. */
  retiring = false;
  /** The replacement is warm: kill this one as soon as it is idle. */
  retired = false;
  pending: Pending | null = null;
  private buf = '';
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
    onStderr?: (pid: number | undefined, text: string) => void,
  ) {
    this.ready = new Promise((res, rej) => {
      this.readyResolve = res;
      this.readyReject = rej;
    });
    this.ready.catch(() => {});
    this.child = spawn(python, ['-u', script], { stdio: ['pipe', 'pipe', 'pipe'], env });
    this.pid = this.child.pid;
    const startTimer = setTimeout(() => {
      this.readyReject(new Error(`python interpreter did not start within ${startTimeoutMs} ms`));
      this.kill();
    }, startTimeoutMs);
    this.ready.then(() => clearTimeout(startTimer), () => clearTimeout(startTimer));
    this.child.stdout!.setEncoding('utf8');
    this.child.stdout!.on('data', (chunk: string) => this.onData(chunk));
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

  private onData(chunk: string): void {
    this.buf += chunk;
    let nl: number;
    while ((nl = this.buf.indexOf('\n')) >= 0) {
      const line = this.buf.slice(0, nl);
      this.buf = this.buf.slice(nl + 1);
      if (!line.trim()) continue;
      let msg: any;
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      if (msg.ready) {
        this.pid = msg.pid ?? this.pid;
        this.isReady = true;
        this.readyResolve();
        continue;
      }
      const p = this.pending;
      if (!p || msg.id !== p.id) continue;
      this.pending = null;
      p.cleanup();
      if (msg.ok) p.resolve({ ok: true, result: msg.result as Json, log: msg.log ?? '', pid: this.pid! });
      else {
        if (msg.recycle) this.kill();
        p.resolve({ ok: false, error: msg.error, log: msg.log ?? '', pid: this.pid });
      }
    }
  }

  send(id: number, req: PythonRequest): void {
    this.calls++;
    this.child.stdin!.write(`${JSON.stringify({ id, ...req })}\n`);
  }

  kill(): void {
    this.doomed = true;
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
  private readonly script = runnerPath();
  private readonly env: NodeJS.ProcessEnv;
  private readonly startTimeoutMs: number;
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
    this.maxCalls = Math.max(1, opts.maxCallsPerProcess ?? 200);
    this.python = opts.python ?? process.env.PLAYFLOW_PYTHON ?? 'python3';
    this.startTimeoutMs = opts.startTimeoutMs ?? 20_000;
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
    const it = new Interpreter(this.python, this.script, this.env, this.startTimeoutMs, (dead) => this.onExit(dead), this.onStderr);
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
    if (it.retired) {
      this.all.delete(it);
      it.kill();
      return;
    }
    if (it.calls >= this.maxCalls && !it.retiring) {
      // Recycle without a cold call: the interpreter keeps serving until its replacement is warm.
      it.retiring = true;
      const replacement = this.spawnOne();
      replacement.ready.then(
        () => {
          it.retired = true;
          if (!it.pending) {
            this.idle = this.idle.filter((x) => x !== it);
            this.all.delete(it);
            it.kill();
          }
        },
        () => {
          it.retiring = false; // try again after its next call
        },
      );
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
