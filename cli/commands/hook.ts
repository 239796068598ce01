/**
 * `playflow hook …`: webhook triggers through the server's API.
 *
 *   playflow hook set <name> --path team/etl [--version N] [--filter "body.action == 'opened'"]
 *       [--secret-env VAR | --secret-file FILE | --generate-secret | --insecure]
 *   playflow hook list [--path p] · get <name> · delete <name>
 *   playflow hook send <name> --payload <json|@file> [--secret-env VAR | --secret-file FILE] [--delivery <id>]
 *
 * The secret is never taken as a command-line value (it would show in `ps` and shell history):
 * from an environment variable (default PLAYFLOW_HOOK_SECRET) or a file, or generated and printed once.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import type { HookList, HookView } from '../../common/contract/hooks.js';
import { fields, table } from '../output.js';
import { action, apiOptions, clientFrom, CliError, fileErrorReason, parseJsonObject, printBody, println, type ApiOptions, wholeNumber } from './common.js';


interface SecretOptions { secretEnv?: string; secretFile?: string }

const path = (name: string) => `/api/hooks/${encodeURIComponent(name)}`;

async function readSecret(opts: SecretOptions): Promise<string | undefined> {
  if (opts.secretFile) {
    try {
      return (await readFile(opts.secretFile, 'utf8')).trim();
    } catch (err) {
      throw new CliError(`cannot read --secret-file '${opts.secretFile}': ${fileErrorReason(err)}`);
    }
  }
  const name = opts.secretEnv ?? 'PLAYFLOW_HOOK_SECRET';
  const v = process.env[name];
  if (opts.secretEnv && !v) throw new CliError(`--secret-env ${name}: the variable is not set`);
  return v || undefined;
}

function describe(h: HookView): string {
  return fields([
    ['Name', h.name], ['Playbook', `${h.path}${h.version ? ` version ${h.version}` : ' (latest)'}`], ['Filter', h.filter ?? ''],
    ['Signed', h.insecure ? 'no (insecure)' : h.secret_set ? 'yes (X-Hub-Signature-256)' : 'no secret'], ['URL', h.url],
  ]);
}

export function register(program: Command): void {
  const hook = program.command('hook').description('Webhook triggers: signed HTTP deliveries start playbooks');

  apiOptions(
    hook.command('set <name>')
      .description('Create or replace a webhook trigger')
      .requiredOption('--path <path>', 'catalog path of the playbook a delivery starts')
      .option('--version <n>', 'pin a catalog version (default: the latest at each delivery)')
      .option('--filter <expr>', "condition on the delivery (body, headers), e.g. \"body.action == 'opened'\"")
      .option('--secret-env <var>', 'read the secret from this environment variable (default PLAYFLOW_HOOK_SECRET)')
      .option('--secret-file <file>', 'read the secret from this file')
      .option('--generate-secret', 'generate a random secret and print it once')
      .option('--insecure', 'accept unsigned deliveries (no secret)'),
  ).action(action(async (name: string, opts: ApiOptions & SecretOptions & { path: string; version?: string; filter?: string; generateSecret?: boolean; insecure?: boolean }) => {
    let secret = opts.generateSecret ? randomBytes(32).toString('hex') : await readSecret(opts);
    if (opts.insecure) secret = undefined;
    const body = { path: opts.path, version: wholeNumber(opts.version, '--version', 1) ?? null, filter: opts.filter ?? null, ...(secret ? { secret } : {}), ...(opts.insecure ? { insecure: true } : {}) };
    const h = await clientFrom(opts).request<HookView>('PUT', path(name), { body });
    if (printBody(opts, opts.generateSecret ? { ...h, secret } : h)) return;
    println(`hook ${h.name}: POST ${h.url} starts ${h.path}${h.insecure ? ' (unsigned deliveries accepted)' : ''}`);
    if (opts.generateSecret) println(`secret (shown once): ${secret}`);
  }));

  apiOptions(hook.command('list').description('List webhook triggers').option('--path <path>', 'only those of this playbook path'))
    .action(action(async (opts: ApiOptions & { path?: string }) => {
      const res = await clientFrom(opts).request<HookList>('GET', '/api/hooks', { query: { path: opts.path } });
      if (printBody(opts, res)) return;
      process.stdout.write(table(['name', 'playbook', 'version', 'signed', 'filter'],
        res.hooks.map((h) => [h.name, h.path, h.version, h.insecure ? 'no' : 'yes', h.filter]), 'No hooks.'));
    }));

  apiOptions(hook.command('get <name>').description('Show a webhook trigger (never its secret)'))
    .action(action(async (name: string, opts: ApiOptions) => {
      const h = await clientFrom(opts).request<HookView>('GET', path(name));
      if (!printBody(opts, h)) process.stdout.write(describe(h));
    }));

  apiOptions(hook.command('delete <name>').description('Delete a webhook trigger'))
    .action(action(async (name: string, opts: ApiOptions) => {
      const res = await clientFrom(opts).request('DELETE', path(name));
      if (!printBody(opts, res)) println(`hook ${name} deleted`);
    }));

  apiOptions(
    hook.command('send <name>')
      .description('Deliver a payload to a hook as a sender would: signed with the secret')
      .option('--payload <json>', 'the body: a JSON object, or @file.json', '{}')
      .option('--secret-env <var>', 'sign with the secret in this environment variable (default PLAYFLOW_HOOK_SECRET)')
      .option('--secret-file <file>', 'sign with the secret in this file')
      .option('--delivery <id>', 'delivery id (X-Idempotency-Key): a repeat answers the first execution'),
  ).action(action(async (name: string, opts: ApiOptions & SecretOptions & { payload: string; delivery?: string }) => {
    const payload = await parseJsonObject(opts.payload, '--payload');
    const secret = await readSecret(opts);
    // the client sends JSON.stringify of the body: those exact bytes are signed
    const headers: Record<string, string> = {};
    if (secret) headers['x-hub-signature-256'] = `sha256=${createHmac('sha256', secret).update(JSON.stringify(payload)).digest('hex')}`;
    if (opts.delivery) headers['x-idempotency-key'] = opts.delivery;
    const res = await clientFrom(opts).request<{ started: boolean; execution_id?: string; reason?: string }>('POST', path(name), { body: payload, headers });
    if (printBody(opts, res)) return;
    if (res.started) println(`started execution ${res.execution_id}`);
    else println(res.reason === 'replayed' ? `already delivered: execution ${res.execution_id}` : 'not started: the filter did not match');
  }));
}
