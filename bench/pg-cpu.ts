/**
 * CPU time of the PostgreSQL backends serving one database (Linux /proc; NaN elsewhere or when
 * the backends' /proc entries are not readable). Backends are found in pg_stat_activity by
 * database name at each reading, so pool connections opened during a run are counted from zero
 * and those closed during it are lost: keep pools warm across the measured interval. The
 * postmaster's shared helpers (WAL writer, checkpointer) serve every database and are left out.
 */
import pg from 'pg';
import { processCpuMs } from './proc-cpu.js';

export interface PgCpu {
  /** Per backend pid, CPU ms so far. */
  read(): Promise<Map<number, number>>;
  /** CPU ms the backends used between two readings (new backends count from zero). */
  since(before: Map<number, number>, after: Map<number, number>): number;
  close(): Promise<void>;
}

export async function pgCpu(databaseUrl: string): Promise<PgCpu> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  return {
    async read() {
      const { rows } = await client.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
      return new Map(rows.map((r) => [r.pid, processCpuMs(r.pid)]));
    },
    since(before, after) {
      let sum = 0;
      for (const [pid, ms] of after) sum += ms - (before.get(pid) ?? 0);
      return sum;
    },
    close: () => client.end(),
  };
}
