/**
 * Runs every benchmark one after another and prints their figures (`npm run bench`, after a
 * build). Each runs in its own process so one's pools and caches do not warm another's.
 * Not part of `npm test`: benchmarks print, they never assert.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const benches: Array<[string, string[]]> = [
  ['engine.js', []],
  ['python.js', ['500']],
  ['server.js', ['100', '3']],
  ['decision-write.js', []],
  ['pipelined-end.js', []],
  ['starts.js', []],
  ['fibo.js', ['5']],
  ['http-loop.js', ['1000', '64']],
  ['executions.js', ['--executions', '500', '--clients', '32']],
  ['tiering.js', []],
  ['reads.js', ['3000']],
  ['templates.js', []],
  ['console-open.js', ['5']],
  ['loops.js', ['engine', '20000', '2000']],
];

let failed = 0;
for (const [file, args] of benches) {
  process.stdout.write(`\n== bench/${file.replace('.js', '.ts')} ${args.join(' ')}\n`);
  const r = spawnSync(process.execPath, [fileURLToPath(new URL(file, import.meta.url)), ...args], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exitCode = failed ? 1 : 0;
