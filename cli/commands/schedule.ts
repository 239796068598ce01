/**
 * `playflow schedule …`: schedules through the server's API.
 *
 *   playflow schedule set <name> --cron '0 0 2 * * *' --path team/etl [--timezone Europe/Berlin]
 *       [--version N] [--payload <json|@file>] [--concurrency Allow|Forbid|Replace]
 *       [--missed RunOnce|Skip] [--starting-deadline <s>] [--suspend]
 *   playflow schedule list [--path p] · get <name> · ticks <name> · suspend|resume <name> · delete <name>
 */
import type { Command } from 'commander';
import type { ScheduleSpec, ScheduleView } from '../../common/protocol.js';
import { fields, table } from '../output.js';
import { action, apiOptions, clientFrom, CliError, parseJsonObject, printBody, println, type ApiOptions, wholeNumber } from './common.js';

function specOf(s: ScheduleView): ScheduleSpec {
  return {
    cron: s.cron, timezone: s.timezone, path: s.path, version: s.version, payload: s.payload, concurrency_policy: s.concurrency_policy,
    missed_runs: s.missed_runs, starting_deadline_seconds: s.starting_deadline_seconds, suspend: s.suspend,
  };
}

function describe(s: ScheduleView): string {
  return fields([
    ['Name', s.name], ['Source', s.source], ['Cron', `${s.cron} (${s.timezone})`], ['Playbook', `${s.path}${s.version ? ` version ${s.version}` : ' (latest)'}`],
    ['Concurrency', s.concurrency_policy], ['Missed runs', `${s.missed_runs}${s.starting_deadline_seconds ? `, deadline ${s.starting_deadline_seconds} s` : ''}`],
    ['Suspended', s.suspend ? 'yes' : 'no'], ['Next run', s.next_run ?? ''], ['Last run', s.last_run ?? ''], ['Last execution', s.last_execution_id ?? ''],
  ]);
}

export function register(program: Command): void {
  const schedule = program.command('schedule').description('Schedules: start playbooks on a cron');

  apiOptions(
    schedule.command('set <name>')
      .description('Create or replace a schedule')
      .requiredOption('--cron <expr>', "cron: 5 fields, or 6 with seconds first ('*/10 * * * * *')")
      .requiredOption('--path <path>', 'catalog path of the playbook')
      .option('--timezone <tz>', 'IANA time zone of the cron', 'UTC')
      .option('--version <n>', 'pin a catalog version (default: the latest at each tick)')
      .option('--payload <json>', 'payload of each execution: a JSON object, or @file.json', '{}')
      .option('--concurrency <policy>', 'Allow, Forbid or Replace', 'Allow')
      .option('--missed <policy>', 'missed ticks: RunOnce or Skip', 'RunOnce')
      .option('--starting-deadline <seconds>', 'a tick later than this counts as missed')
      .option('--suspend', 'create it suspended'),
  ).action(action(async (name: string, opts: ApiOptions & {
    cron: string; path: string; timezone: string; version?: string; payload: string; concurrency: string; missed: string; startingDeadline?: string; suspend?: boolean;
  }) => {
    const spec: ScheduleSpec = {
      cron: opts.cron, path: opts.path, timezone: opts.timezone, version: wholeNumber(opts.version, '--version', 1) ?? null,
      payload: await parseJsonObject(opts.payload, '--payload') as never, concurrency_policy: opts.concurrency as never,
      missed_runs: opts.missed as never, starting_deadline_seconds: wholeNumber(opts.startingDeadline, '--starting-deadline') ?? null, suspend: Boolean(opts.suspend),
    };
    const s = await clientFrom(opts).putSchedule(name, spec);
    if (!printBody(opts, s)) println(`schedule ${s.name}: next run ${s.next_run ?? 'never'}${s.suspend ? ' (suspended)' : ''}`);
  }));

  apiOptions(schedule.command('list').description('List schedules').option('--path <path>', 'only those of this playbook path'))
    .action(action(async (opts: ApiOptions & { path?: string }) => {
      const res = await clientFrom(opts).listSchedules({ path: opts.path });
      if (printBody(opts, res)) return;
      process.stdout.write(table(
        ['name', 'source', 'cron', 'timezone', 'playbook', 'suspended', 'next_run', 'last_run'],
        res.schedules.map((s) => [s.name, s.source, s.cron, s.timezone, s.path, s.suspend ? 'yes' : 'no', s.next_run, s.last_run]),
        'No schedules.',
      ));
    }));

  apiOptions(schedule.command('get <name>').description('Show a schedule'))
    .action(action(async (name: string, opts: ApiOptions) => {
      const s = await clientFrom(opts).getSchedule(name);
      if (!printBody(opts, s)) process.stdout.write(describe(s));
    }));

  apiOptions(schedule.command('ticks <name>').description('Decided ticks, newest first').option('--limit <n>', 'at most this many'))
    .action(action(async (name: string, opts: ApiOptions & { limit?: string }) => {
      const res = await clientFrom(opts).scheduleTicks(name, wholeNumber(opts.limit, '--limit', 1));
      if (printBody(opts, res)) return;
      process.stdout.write(table(['tick', 'outcome', 'execution_id', 'reason'], res.ticks.map((t) => [t.tick, t.outcome, t.execution_id, t.reason]), 'No ticks yet.'));
    }));

  for (const [verb, suspend] of [['suspend', true], ['resume', false]] as const) {
    apiOptions(schedule.command(`${verb} <name>`).description(suspend ? 'Stop firing (ticks meanwhile are not run)' : 'Fire again from the next tick'))
      .action(action(async (name: string, opts: ApiOptions) => {
        const client = clientFrom(opts);
        const cur = await client.getSchedule(name);
        if (cur.source !== 'api') throw new CliError(`schedule ${name} is declared by ${cur.source}; change it there`);
        const s = await client.putSchedule(name, { ...specOf(cur), suspend });
        if (!printBody(opts, s)) println(`schedule ${s.name}: ${s.suspend ? 'suspended' : `next run ${s.next_run}`}`);
      }));
  }

  apiOptions(schedule.command('delete <name>').description('Delete a schedule declared through the API'))
    .action(action(async (name: string, opts: ApiOptions) => {
      const res = await clientFrom(opts).deleteSchedule(name);
      if (!printBody(opts, res)) println(`schedule ${name} deleted`);
    }));
}
