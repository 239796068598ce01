/**
 * Examples in every command's `--help` (after the options, as gh and kubectl show them). Kept in
 * one table keyed by the command path so a test can check that no command lacks one
 * (test/cli/help.test.ts); registerCommands attaches them after every group is registered. The
 * entry '' is `playflow --help` itself.
 * `dev` documents itself in cli/commands/dev.ts.
 */
import type { Command } from 'commander';

export const EXAMPLES: Record<string, string[]> = {
  // `playflow --help`: the first commands a new user types.
  '': [
    'playflow dev examples/hello_world.yaml --payload \'{"name": "Ada"}\'',
    'playflow catalog register playbook examples/hello_world.yaml   # against SERVER_API_URL (default http://localhost:8082)',
    'playflow run playbook examples/hello_world --wait',
    'playflow execution list -o yaml',
  ],
  'server start': [
    '# API server on :8082 against PostgreSQL and NATS',
    'DATABASE_URL=postgres://postgres@db:5432/playflow BROKER_URL=nats://nats:4222 \\',
    '  PLAYFLOW_ENCRYPTION_KEY=$(openssl rand -base64 32) playflow server start',
    'playflow server start --port 9000 --host 127.0.0.1',
  ],
  'catalog register playbook': [
    'playflow catalog register playbook examples/hello_world.yaml',
    'playflow catalog register playbook ./etl.yaml --path team/etl -o json',
  ],
  'catalog get playbook': [
    'playflow catalog get playbook examples/hello_world',
    'playflow catalog get playbook team/etl --version 2 -o yaml',
  ],
  'catalog list': [
    'playflow catalog list',
    'playflow catalog list --prefix team/ -o json',
  ],
  'catalog versions': [
    'playflow catalog versions examples/hello_world',
    'playflow catalog versions team/etl -o json',
  ],
  'catalog delete playbook': [
    'playflow catalog delete playbook team/etl',
    'playflow catalog delete playbook team/etl --owner Playbook/team-a/etl -o json',
  ],
  'run playbook': [
    'playflow run playbook examples/hello_world --payload \'{"name": "Ada"}\'',
    'playflow run playbook team/etl --payload @input.json --wait',
  ],
  'execution status': [
    'playflow execution status 4821',
    'playflow execution status 4821 --watch',
    'playflow execution status 4821 -o json | jq .result',
  ],
  'execution list': [
    'playflow execution list',
    'playflow execution list --status failed --path team/etl --limit 20 -o yaml',
    'playflow execution list --parent 4821',
    'playflow execution list --limit 50 --offset 50',
  ],
  'execution events': [
    'playflow execution events 4821',
    'playflow execution events 4821 --after 10 -o json',
  ],
  'execution cancel': ['playflow execution cancel 4821'],
  'execution retry': [
    'playflow execution retry 4821 --wait',
    'playflow execution retry 4821 --args \'{"load": {"batch": 50}}\' --payload \'{"date": "2026-11-01"}\'',
  ],
  'schedule set': [
    "playflow schedule set nightly-etl --cron '0 30 2 * * *' --timezone Europe/Berlin --path team/etl --concurrency Forbid",
    "playflow schedule set poll --cron '*/10 * * * * *' --path team/poll --payload @input.json --missed Skip",
  ],
  'schedule list': ['playflow schedule list', 'playflow schedule list --path team/etl -o json'],
  'schedule get': ['playflow schedule get nightly-etl'],
  'schedule ticks': ['playflow schedule ticks nightly-etl --limit 20'],
  'schedule suspend': ['playflow schedule suspend nightly-etl'],
  'schedule resume': ['playflow schedule resume nightly-etl'],
  'schedule delete': ['playflow schedule delete nightly-etl'],
  'hook set': [
    "playflow hook set github-pr --path ci/on-pr --secret-file ./hook-secret --filter \"body.action == 'opened'\"",
    'playflow hook set deploy --path team/deploy --generate-secret',
  ],
  'hook list': ['playflow hook list', 'playflow hook list --path ci/on-pr -o json'],
  'hook get': ['playflow hook get github-pr'],
  'hook delete': ['playflow hook delete github-pr'],
  'hook send': ["playflow hook send github-pr --payload '{\"action\": \"opened\"}' --secret-file ./hook-secret --delivery test-1"],
  'execution rerun': [
    'playflow execution rerun 4821',
    'playflow execution rerun 4821 --payload @input.json --wait',
  ],
  'worker list': ['playflow worker list', 'playflow worker list -o json'],
  'worker start': [
    'SERVER_API_URL=http://playflow:8082 BROKER_URL=nats://nats:4222 playflow worker start --v2',
    'playflow worker start --v2 --concurrency 16 --metrics-port 9090',
  ],
  'operator start': [
    'playflow operator start',
    'playflow operator start --namespaces team-a,team-b --no-leader-elect',
  ],
  'operator ensure-secrets': [
    '# what the chart\'s pre-install/pre-upgrade Job runs: create only what is absent',
    'playflow operator ensure-secrets --namespace playflow \\',
    '  --spec \'[{"name": "playflow-encryption", "keys": {"key": {"random": "base64", "bytes": 32}}}]\'',
  ],
  'playbook validate': [
    'playflow playbook validate examples/hello_world.yaml',
    'playflow playbook validate playbooks/ --strict -o json',
  ],
  'playbook convert': [
    'playflow playbook convert playbooks/              # dry run: what would change, what cannot',
    'playflow playbook convert playbooks/ --write      # rewrite in place',
    'playflow playbook convert playbooks/ --check      # CI: fail while anything is left to convert',
  ],
  'playbook normalize': [
    'playflow playbook normalize legacy.yaml',
    'playflow playbook normalize legacy.yaml -o json',
  ],
  'credentials rotate-key': [
    '# 1) every server runs with the new key and the old one as previous, 2) rotate, 3) drop the old key',
    'PLAYFLOW_ENCRYPTION_KEY=$NEW PLAYFLOW_ENCRYPTION_KEY_PREVIOUS=$OLD playflow credentials rotate-key --database-url $DATABASE_URL',
  ],
  'credentials verify-key': ['PLAYFLOW_ENCRYPTION_KEY=$KEY playflow credentials verify-key --database-url $DATABASE_URL'],
  'credential create': [
    'playflow credential create pg_prod --type postgres --data @pg.json --tag prod',
    'playflow credential create stripe --type api_key --from-literal api_key=sk_live_… --description "Stripe live key"',
    'playflow credential create svc --type custom --data \'{"user": "u"}\' --schema \'{"required": ["user"]}\'',
  ],
  'credential list': [
    'playflow credential list',
    'playflow credential list --type postgres --tag prod --search billing -o json',
  ],
  'credential get': [
    'playflow credential get pg_prod',
    'playflow credential get 12 --include-data -o json',
  ],
  'credential delete': ['playflow credential delete pg_prod'],
  'vars get': [
    'playflow vars get 4821',
    'playflow vars get 4821 user_id -o json',
  ],
  'vars set': [
    'playflow vars set 4821 greeting=hello retries=3 \'filters={"region": "eu"}\'',
    'playflow vars set 4821 code=\'"007"\'   # a JSON string: keeps the quotes off and the leading zeros on',
  ],
  'vars delete': ['playflow vars delete 4821 greeting'],
};

/** The space-separated path of a command below the program (`catalog register playbook`). */
export function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** Every command without subcommands, depth first. */
export function leafCommands(cmd: Command): Command[] {
  return cmd.commands.length === 0 ? [cmd] : cmd.commands.flatMap(leafCommands);
}

export function addExamples(program: Command): void {
  for (const cmd of [program, ...leafCommands(program)]) {
    const lines = EXAMPLES[commandPath(cmd)];
    if (lines) cmd.addHelpText('after', `\nExamples:\n${lines.map((l) => `  ${l.startsWith('#') || l.startsWith('  ') ? l : `$ ${l}`}`).join('\n')}\n`);
  }
}
