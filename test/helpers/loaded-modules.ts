/**
 * Which modules a Node.js process resolves as it starts: a resolve hook, registered with `--import`
 * before anything else loads, writes each resolved URL to stderr. The start tests of the CLI and the
 * worker check with it that heavy libraries wait for the commands and steps that need them.
 */
import { execFile } from 'node:child_process';

const HOOK = `data:text/javascript,${encodeURIComponent(`
import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent(\`
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  process.stderr.write('LOADED ' + r.url + '\\\\n');
  return r;
}\`));
`)}`;

/**
 * The URLs of the modules `node <args>` resolved. It may exit with an error (a command that cannot
 * reach its server); only a run that recorded nothing is a failure.
 */
export function loadedModules(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--import', HOOK, ...args], { env, timeout: 30_000 }, (err, _stdout, stderr) => {
      const urls = stderr.split('\n').filter((l) => l.startsWith('LOADED ')).map((l) => l.slice(7));
      if (urls.length === 0) reject(err ?? new Error(`no module recorded: ${stderr}`));
      else resolve(urls);
    });
  });
}
