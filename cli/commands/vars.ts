/**
 * `playflow vars …`: execution variables through the server's API (spec "Variables").
 *
 *   playflow vars get <execution_id> [<var_name>]
 *   playflow vars set <execution_id> <name>=<value> ... [--type user_defined] [--source-step s]
 *   playflow vars delete <execution_id> <name>
 *
 * A value is read as JSON when it parses (`n=3`, `ok=true`, `o={"a":1}`, `s='"3"'`), else taken as
 * the literal string (`greeting=hello`). `vars get <id>` lists without touching access tracking;
 * `vars get <id> <name>` counts an access (the API's behaviour). `vars delete` of a variable that
 * does not exist exits 1.
 */
import type { Command } from 'commander';
import type { Json } from '../../playbook/types.js';
import type { VarRead } from '../../client/secrets.js';
import { brief, fields, indent, table, toJson } from '../output.js';
import { action, apiOptions, CliError, printBody, println, secretsClientFrom, type ApiOptions } from './common.js';
import { parseLiteral } from './credential.js';
import { checkId } from './execution.js';
import { VAR_TYPES } from '../../common/contract/secret-kinds.js';

/** JSON when it parses, else the string itself. */
export function parseVarValue(text: string): Json {
  try {
    return JSON.parse(text) as Json;
  } catch {
    return text;
  }
}

function describe(v: VarRead): string {
  return fields([
    ['Execution', v.execution_id],
    ['Name', v.var_name],
    ['Type', v.type],
    ['Source step', v.source_step ?? ''],
    ['Created', v.created_at],
    ['Accessed', v.accessed_at],
    ['Access count', v.access_count],
  ]) + `Value:\n${indent(toJson(v.value))}`;
}

export function register(program: Command): void {
  const vars = program.command('vars').description('Execution variables: get, set, delete (through the server API)');

  apiOptions(
    vars.command('get <execution_id> [var_name]')
      .description("Show an execution's variables, or one of them"),
  ).action(action(async (id: string, name: string | undefined, opts: ApiOptions) => {
    const client = secretsClientFrom(opts);
    if (name !== undefined) {
      const v = await client.getVar(checkId(id), name);
      if (printBody(opts, v)) return;
      process.stdout.write(describe(v));
      return;
    }
    const res = await client.listVars(checkId(id));
    if (printBody(opts, res)) return;
    process.stdout.write(table(
      ['name', 'type', 'source_step', 'value'],
      Object.entries(res.variables).map(([n, v]) => [n, v.type, v.source_step, brief(v.value, 80)]),
      `No variables in execution ${res.execution_id}.`,
    ));
  }));

  apiOptions(
    vars.command('set <execution_id> <assignments...>')
      .description('Set variables (create or overwrite): name=value, the value JSON when it parses, else a string')
      .option('--type <var_type>', `variable type: ${VAR_TYPES.join(', ')}`, 'user_defined')
      .option('--source-step <step>', 'record this step as the source'),
  ).action(action(async (id: string, assignments: string[], opts: ApiOptions & { type: string; sourceStep?: string }) => {
    if (!(VAR_TYPES as readonly string[]).includes(opts.type)) throw new CliError(`--type must be one of ${VAR_TYPES.join(', ')}, got ${JSON.stringify(opts.type)}`);
    const variables: Record<string, Json> = {};
    for (const a of assignments) {
      const [k, v] = parseLiteral(a, 'vars set');
      variables[k] = parseVarValue(v);
    }
    const res = await secretsClientFrom(opts).setVars(checkId(id), variables, { var_type: opts.type as never, source_step: opts.sourceStep });
    if (printBody(opts, res)) return;
    println(`set ${res.variables_set} variable${res.variables_set === 1 ? '' : 's'} on execution ${res.execution_id}: ${res.var_names.join(', ')}`);
  }));

  apiOptions(
    vars.command('delete <execution_id> <var_name>').description('Delete a variable'),
  ).action(action(async (id: string, name: string, opts: ApiOptions) => {
    const res = await secretsClientFrom(opts).deleteVar(checkId(id), name);
    const printed = printBody(opts, res);
    if (!res.deleted) throw new CliError(`variable '${name}' not found in execution ${res.execution_id}`);
    if (!printed) println(`variable ${name} deleted from execution ${res.execution_id}`);
  }));
}
