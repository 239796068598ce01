/**
 * `playflow catalog …`: register a playbook from a file; get, list, show the versions of and
 * delete catalog entries.
 *
 *   playflow catalog register playbook <file> [--path <catalog path>]
 *   playflow catalog get playbook <path> [--version N]
 *   playflow catalog list [--prefix p] [--limit N]
 *   playflow catalog versions <path>                    (live versions, newest first)
 *   playflow catalog delete playbook <path> [--owner Kind/namespace/name]
 *
 * `delete` removes every version of the path (a soft delete: running executions keep theirs;
 * registering again starts over); with --owner only when that resource owns the path (409
 * `owned_by_other` otherwise). Every command takes -o table|json|yaml (cli/output.ts): json/yaml
 * print the API body as is.
 */
import type { Command } from 'commander';
import { table } from '../output.js';
import { action, apiOptions, clientFrom, CliError, printBody, println, readPlaybookFile, type ApiOptions, wholeNumber } from './common.js';

export function register(program: Command): void {
  const catalog = program.command('catalog').description('Playbook catalog: register, get, list, versions, delete');

  const reg = catalog.command('register').description('Register a resource in the catalog');
  apiOptions(
    reg.command('playbook <file>')
      .description('Register a playbook YAML file (a new version unless the content is unchanged)')
      .option('--path <path>', 'catalog path (default: metadata.path, else metadata.name)'),
  ).action(action(async (file: string, opts: ApiOptions & { path?: string }) => {
    const content = await readPlaybookFile(file);
    if (!content.trim()) throw new CliError(`playbook file '${file}' is empty`);
    const res = await clientFrom(opts).registerPlaybook(content, opts.path);
    if (printBody(opts, res)) return;
    println(`${res.created ? 'registered' : 'unchanged'}: ${res.path} version ${res.version} (catalog_id ${res.catalog_id})`);
    for (const w of res.warnings) println(`  warning: ${w.path || '(document)'}: ${w.message}`);
  }));

  const get = catalog.command('get').description('Show a catalog resource');
  apiOptions(
    get.command('playbook <path>')
      .description('Show a playbook (latest version unless --version)')
      .option('--version <n>', 'a specific version'),
  ).action(action(async (path: string, opts: ApiOptions & { version?: string }) => {
    const entry = await clientFrom(opts).getPlaybook(path, wholeNumber(opts.version, '--version', 1));
    if (printBody(opts, entry)) return;
    println(`# ${entry.path} version ${entry.version} (catalog_id ${entry.catalog_id}, ${entry.created_at})`);
    process.stdout.write(entry.content.endsWith('\n') ? entry.content : `${entry.content}\n`);
  }));

  apiOptions(
    catalog.command('list')
      .description('List playbooks (latest version of each path)')
      .option('--prefix <prefix>', 'only paths starting with this')
      .option('--limit <n>', 'at most this many'),
  ).action(action(async (opts: ApiOptions & { prefix?: string; limit?: string }) => {
    const res = await clientFrom(opts).listPlaybooks({ prefix: opts.prefix, limit: wholeNumber(opts.limit, '--limit', 1) });
    if (printBody(opts, res)) return;
    process.stdout.write(table(
      ['path', 'version', 'name', 'catalog_id', 'created'],
      res.playbooks.map((p) => [p.path, p.version, p.name, p.catalog_id, p.created_at]),
      'No playbooks found.',
    ));
  }));

  apiOptions(
    catalog.command('versions <path>')
      .description('List the live versions of a playbook path, newest first'),
  ).action(action(async (path: string, opts: ApiOptions) => {
    const res = await clientFrom(opts).playbookHistory(path);
    if (printBody(opts, res)) return;
    process.stdout.write(table(
      ['version', 'catalog_id', 'created'],
      res.versions.map((v) => [v.version, v.catalog_id, v.created_at]),
      `No versions of ${res.path}.`,
    ));
  }));

  const del = catalog.command('delete').description('Remove a resource from the catalog');
  apiOptions(
    del.command('playbook <path>')
      .description('Remove every version of a playbook path (running executions keep their version)')
      .option('--owner <owner>', 'Kind/namespace/name: remove only when this resource owns the path (409 otherwise)'),
  ).action(action(async (path: string, opts: ApiOptions & { owner?: string }) => {
    if (opts.owner !== undefined && !/^[^/]+\/[^/]+\/[^/]+$/.test(opts.owner)) {
      throw new CliError(`--owner must be Kind/namespace/name, got ${JSON.stringify(opts.owner)}`);
    }
    const res = await clientFrom(opts).deletePlaybook(path, opts.owner);
    if (printBody(opts, res)) return;
    println(`deleted: ${res.path}`);
  }));
}
