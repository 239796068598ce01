/**
 * `playflow credential …`: stored credentials through the server's API (spec "Credentials").
 *
 *   playflow credential create <name> --type <type> [--data <json|@file>] [--from-literal k=v ...]
 *                              [--description d] [--tag t ...] [--schema <json|@file>]
 *                              [--scope-path <glob> ...] [--scope-namespace <ns> ...] [--no-scope]
 *   playflow credential list [--type t] [--tag t] [--search text] [--limit n]
 *   playflow credential get <name|id> [--include-data]
 *   playflow credential delete <name|id>
 *
 * create is an upsert by name (the API's POST). Secret data is never printed unless
 * `get --include-data` asks for it: create and list answer with metadata only, and get without
 * the flag does not even ask the server for it. A schema validation failure (400) prints each of
 * the server's messages. `playflow credentials rotate-key|verify-key` (cli/commands/secrets.ts)
 * are the database-side key maintenance commands; both groups live side by side.
 */
import type { Command } from 'commander';
import type { JsonObject } from '../../playbook/types.js';
import type { CredentialMeta, CredentialWithData } from '../../client/secrets.js';
import { CREDENTIAL_TYPES } from '../../common/contract/secret-kinds.js';
import { fields, indent, table, toJson } from '../output.js';
import { action, apiOptions, CliError, parseJsonObject, printBody, println, secretsClientFrom, type ApiOptions, wholeNumber } from './common.js';

const collect = (v: string, prev: string[] = []): string[] => [...prev, v];

/** `key=value` (value may contain `=`); the key must be non-empty. */
export function parseLiteral(s: string, flag: string): [string, string] {
  const i = s.indexOf('=');
  if (i <= 0) throw new CliError(`${flag} expects key=value, got ${JSON.stringify(s)}`);
  return [s.slice(0, i), s.slice(i + 1)];
}

function describe(c: CredentialWithData): string {
  let out = fields([
    ['Name', c.name],
    ['ID', c.id],
    ['Type', c.type],
    ['Description', c.description ?? ''],
    ['Tags', c.tags.join(', ')],
    ['Scope', c.scope ? [c.scope.paths?.length ? `paths ${c.scope.paths.join(', ')}` : '', c.scope.namespaces?.length ? `namespaces ${c.scope.namespaces.join(', ')}` : ''].filter(Boolean).join('; ') : 'every playbook'],
    ['Created', c.created_at],
    ['Updated', c.updated_at],
  ]);
  if (Object.keys(c.meta ?? {}).length) out += `Meta:\n${indent(toJson(c.meta))}`;
  if (c.schema) out += `Schema:\n${indent(toJson(c.schema))}`;
  if (c.data !== undefined) out += `Data:\n${indent(toJson(c.data))}`;
  return out;
}

export function register(program: Command): void {
  const credential = program.command('credential').description('Stored credentials: create, list, get, delete (through the server API)');

  apiOptions(
    credential.command('create <name>')
      .description('Create a credential, or update the one with this name (data is encrypted at rest)')
      .requiredOption('--type <type>', CREDENTIAL_TYPES.join(', '))
      .option('--data <json>', 'the secret data: a JSON object, or @file.json')
      .option('--from-literal <key=value>', 'one data field as a string (repeatable; added to --data)', collect)
      .option('--description <text>', 'human description')
      .option('--tag <tag>', 'a searchable tag (repeatable)', collect)
      .option('--schema <json>', 'validation schema for data ({fields, required, types}): JSON or @file.json')
      .option('--scope-path <glob>', 'only playbooks whose path matches may use it, e.g. team-a/** (repeatable)', collect)
      .option('--scope-namespace <ns>', 'only playbooks owned by a resource in this namespace may use it (repeatable)', collect)
      .option('--no-scope', 'remove the scope: every playbook may use it (without any scope option, an update keeps the stored scope)'),
  ).action(action(async (name: string, opts: ApiOptions & {
    type: string; data?: string; fromLiteral?: string[]; description?: string; tag?: string[]; schema?: string;
    scopePath?: string[]; scopeNamespace?: string[]; scope?: boolean;
  }) => {
    if (!(CREDENTIAL_TYPES as readonly string[]).includes(opts.type)) throw new CliError(`--type must be one of ${CREDENTIAL_TYPES.join(', ')}, got ${JSON.stringify(opts.type)}`);
    if (opts.data === undefined && !opts.fromLiteral?.length) throw new CliError('no data: give --data <json|@file> and/or --from-literal key=value');
    const data: JsonObject = opts.data === undefined ? {} : (await parseJsonObject(opts.data, '--data')) as JsonObject;
    for (const lit of opts.fromLiteral ?? []) {
      const [k, v] = parseLiteral(lit, '--from-literal');
      data[k] = v;
    }
    const schema = opts.schema === undefined ? undefined : (await parseJsonObject(opts.schema, '--schema')) as JsonObject;
    if (opts.scope === false && (opts.scopePath?.length || opts.scopeNamespace?.length)) throw new CliError('--no-scope cannot be combined with --scope-path or --scope-namespace');
    const scope = opts.scope === false ? null
      : opts.scopePath?.length || opts.scopeNamespace?.length
        ? { ...(opts.scopePath?.length ? { paths: opts.scopePath } : {}), ...(opts.scopeNamespace?.length ? { namespaces: opts.scopeNamespace } : {}) }
        : undefined;
    const res = await secretsClientFrom(opts).putCredential({ name, type: opts.type, data, description: opts.description, tags: opts.tag, schema, ...(scope !== undefined ? { scope } : {}) });
    if (printBody(opts, res)) return;
    // The API answers 201 (created) or 200 (updated); an update moves updated_at past created_at.
    println(`credential ${res.name} ${res.created_at === res.updated_at ? 'created' : 'updated'} (id ${res.id}, type ${res.type})`);
  }));

  apiOptions(
    credential.command('list')
      .description('List credentials (metadata only, never data)')
      .option('--type <type>', 'only this type')
      .option('--tag <tag>', 'only credentials with this tag')
      .option('--search <text>', 'text search on name and description')
      .option('--limit <n>', 'at most this many (server default 50)')
      .option('--offset <n>', 'skip this many'),
  ).action(action(async (opts: ApiOptions & { type?: string; tag?: string; search?: string; limit?: string; offset?: string }) => {
    const res = await secretsClientFrom(opts).listCredentials({
      type: opts.type, tag: opts.tag, q: opts.search, limit: wholeNumber(opts.limit, '--limit', 1), offset: wholeNumber(opts.offset, '--offset'),
    });
    if (printBody(opts, res)) return;
    process.stdout.write(table(
      ['id', 'name', 'type', 'tags', 'description', 'updated'],
      res.credentials.map((c: CredentialMeta) => [c.id, c.name, c.type, c.tags.join(','), c.description, c.updated_at]),
      'No credentials found.',
    ));
    if (res.total > res.offset + res.count) println(`(${res.count} of ${res.total}; use --limit/--offset for more)`);
  }));

  apiOptions(
    credential.command('get <name_or_id>')
      .description('Show a credential (metadata; the decrypted data only with --include-data)')
      .option('--include-data', 'also fetch and print the decrypted data'),
  ).action(action(async (identifier: string, opts: ApiOptions & { includeData?: boolean }) => {
    const res = await secretsClientFrom(opts).getCredential(identifier, { include_data: opts.includeData });
    // The server sends data only when asked; never show it otherwise, whatever the answer holds.
    const shown: CredentialWithData = opts.includeData ? res : (({ data: _d, cache: _c, ...meta }) => meta)(res);
    if (printBody(opts, shown)) return;
    process.stdout.write(describe(shown));
  }));

  apiOptions(
    credential.command('delete <name_or_id>').description('Delete a credential'),
  ).action(action(async (identifier: string, opts: ApiOptions) => {
    const res = await secretsClientFrom(opts).deleteCredential(identifier);
    if (printBody(opts, res)) return;
    println(`credential ${res.name} deleted (id ${res.id})`);
  }));
}
