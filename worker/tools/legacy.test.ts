import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsonObject } from '../../playbook/types.js';
import { runTool } from './index.js';
import { configureFile } from './file.js';
import { closePythonPool } from './python.js';
import { credentialTable, json, makeCtx, startHttpServer, startSmtpServer, type LocalServer } from '../testing/helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'pf-file-'));
let hooks: LocalServer;
let smtp: Awaited<ReturnType<typeof startSmtpServer>>;

beforeAll(async () => {
  hooks = await startHttpServer((req, res) => {
    if (req.url === '/fail') return json(res, 500, { error: 'hook broke' });
    if (req.url === '/slack') { res.writeHead(200, { 'content-type': 'text/plain' }); return res.end('ok'); }
    json(res, 200, { received: req.body ? JSON.parse(req.body) : null, method: req.method, auth: req.headers['x-sig'] ?? null });
  });
  smtp = await startSmtpServer();
});
afterAll(async () => {
  configureFile({ root: undefined });
  await hooks.close();
  await smtp.close();
  await closePythonPool();
  rmSync(dir, { recursive: true, force: true });
});

describe('file tool', () => {
  it('write / read / append / delete in json, yaml, csv and text', async () => {
    const p = (n: string) => join(dir, n);
    const ctx = makeCtx();
    expect((await runTool({ kind: 'file', operation: 'write', path: p('a.json'), data: [{ x: 1 }] }, ctx)).response).toMatchObject({ format: 'json', mode: 'w' });
    await runTool({ kind: 'file', operation: 'append', path: p('a.json'), data: { x: 2 } }, ctx);
    expect((await runTool({ kind: 'file', operation: 'read', path: p('a.json') }, ctx)).response).toEqual({ path: p('a.json'), format: 'json', data: [{ x: 1 }, { x: 2 }] });

    await runTool({ kind: 'file', operation: 'write', path: p('b.yml'), data: { k: ['v'] } }, ctx);
    expect(readFileSync(p('b.yml'), 'utf8')).toBe('k:\n  - v\n');
    expect(((await runTool({ kind: 'file', operation: 'file.read', path: p('b.yml') }, ctx)).response as any).data).toEqual({ k: ['v'] });

    await runTool({ kind: 'file', operation: 'write', path: p('c.csv'), data: [{ id: 1, name: 'a, "b"' }] }, ctx);
    await runTool({ kind: 'file', operation: 'write', mode: 'a', path: p('c.csv'), data: [{ id: 2, name: 'line\nbreak' }] }, ctx);
    expect(readFileSync(p('c.csv'), 'utf8')).toBe('id,name\n1,"a, ""b"""\n2,"line\nbreak"\n');
    expect(((await runTool({ kind: 'file', operation: 'read', path: p('c.csv') }, ctx)).response as any).data).toEqual([{ id: '1', name: 'a, "b"' }, { id: '2', name: 'line\nbreak' }]);

    await runTool({ kind: 'file', operation: 'write', path: p('d.txt'), data: 'héllo', encoding: 'latin1' }, ctx);
    expect(readFileSync(p('d.txt')).length).toBe(5);
    await runTool({ kind: 'file', operation: 'append', path: p('d.txt'), data: '!', encoding: 'latin1', format: 'text' }, ctx);
    expect(((await runTool({ kind: 'file', operation: 'read', path: p('d.txt'), encoding: 'iso-8859-1' }, ctx)).response as any).data).toBe('héllo!');

    expect((await runTool({ kind: 'file', operation: 'delete', path: p('d.txt') }, ctx)).response).toEqual({ path: p('d.txt'), deleted: true });
    expect(existsSync(p('d.txt'))).toBe(false);
    expect((await runTool({ kind: 'file', operation: 'delete', path: p('d.txt') }, ctx)).response).toMatchObject({ deleted: false });
    expect((await runTool({ kind: 'file', operation: 'read', path: p('nope.txt') }, ctx)).error?.code).toBe('not_found');
    expect((await runTool({ kind: 'file', operation: 'write', path: p('x'), data: 'x', mode: 'r+' }, ctx)).error?.code).toBe('bad_config');
  });

  it('a configured file root confines paths', async () => {
    configureFile({ root: dir });
    try {
      const ok = await runTool({ kind: 'file', operation: 'write', path: '/sub/in.txt', data: 'in' }, makeCtx());
      expect(ok.error).toBeUndefined();
      expect(readFileSync(join(dir, 'sub', 'in.txt'), 'utf8')).toBe('in');
      const escape = await runTool({ kind: 'file', operation: 'read', path: '../../etc/passwd' }, makeCtx());
      expect(escape.error?.message).toMatch(/outside/);
    } finally {
      configureFile({ root: undefined });
    }
  });

  it("refuses the worker's process files (its environment holds its API token), with or without a root", async () => {
    const read = async (path: string) => (await runTool({ kind: 'file', operation: 'read', path }, makeCtx())).error;
    expect(await read('/proc/self/environ')).toMatchObject({ code: 'bad_config', message: "path /proc/self/environ is one of the worker's process files or its service-account token, which a playbook cannot read or write" });
    expect((await read(`/proc/${process.pid}/environ`))?.code).toBe('bad_config');
    configureFile({ root: dir });
    try {
      symlinkSync('/proc', join(dir, 'p'));
      expect((await read('p/self/environ'))?.message).toMatch(/one of the worker's process files/);
    } finally {
      configureFile({ root: undefined });
    }
  });
});

describe('transform tool', () => {
  const ctx = makeCtx({ template: { workload: { factor: 10 } } });
  it('map / filter / reduce / merge with template expressions', async () => {
    const data = [{ n: 1 }, { n: 2 }, { n: 3 }];
    expect((await runTool({ kind: 'transform', operation: 'map', data, function: 'item.n * workload.factor' }, ctx)).response).toEqual([10, 20, 30]);
    expect((await runTool({ kind: 'transform', operation: 'transform.map', data, function: '{{ {"v": item.n, "i": index} }}' }, ctx)).response).toEqual([{ v: 1, i: 0 }, { v: 2, i: 1 }, { v: 3, i: 2 }]);
    expect((await runTool({ kind: 'transform', operation: 'filter', data, condition: 'item.n >= 2' }, ctx)).response).toEqual([{ n: 2 }, { n: 3 }]);
    expect((await runTool({ kind: 'transform', operation: 'reduce', data, function: 'acc + item.n', initial: 100 }, ctx)).response).toBe(106);
    expect((await runTool({ kind: 'transform', operation: 'merge', objects: [{ a: 1, b: 1 }, { b: 2 }, null, { c: 3 }] }, ctx)).response).toEqual({ a: 1, b: 2, c: 3 });
  });
  it('never evaluates JavaScript', async () => {
    const out = await runTool({ kind: 'transform', operation: 'map', data: [1], function: "item.constructor.constructor('return process')()" }, ctx);
    expect(out.error).toBeDefined();
    expect(JSON.stringify(out)).not.toMatch(/v20\./);
  });
});

describe('console, webhook, slack, email', () => {
  it('console.print: message as log and response', async () => {
    const out = await runTool({ kind: 'console', operation: 'print', message: 'hi there' }, makeCtx());
    expect(out).toEqual({ response: { message: 'hi there' }, log: 'hi there\n' });
  });

  it('notify.webhook posts JSON (method and headers configurable); non-2xx is an error with status', async () => {
    const out = await runTool({ kind: 'webhook', url: `${hooks.url}/hook`, data: { event: 'done' }, headers: { 'X-Sig': 's1' } }, makeCtx());
    expect((out.response as any).data).toEqual({ received: { event: 'done' }, method: 'POST', auth: 's1' });
    const put = await runTool({ kind: 'webhook', url: `${hooks.url}/hook`, data: { a: 1 }, method: 'put' }, makeCtx());
    expect((put.response as any).data.method).toBe('PUT');
    const bad = await runTool({ kind: 'webhook', url: `${hooks.url}/fail`, data: {} }, makeCtx());
    expect(bad.error).toMatchObject({ status: 500, data: { error: 'hook broke' } });
  });

  it('notify.slack posts text/channel/username/icon_emoji/attachments to the webhook', async () => {
    const before = hooks.requests.length;
    const out = await runTool({ kind: 'slack', webhook: `${hooks.url}/slack`, message: 'deployed', channel: '#ops', username: 'bot', icon_emoji: ':rocket:', attachments: [{ text: 'a' }] }, makeCtx());
    expect((out.response as any).data).toBe('ok');
    expect(JSON.parse(hooks.requests[before].body)).toEqual({ text: 'deployed', channel: '#ops', username: 'bot', icon_emoji: ':rocket:', attachments: [{ text: 'a' }] });
  });

  it('notify.email sends through SMTP with auth from a credential', async () => {
    const ctx = makeCtx({ resolveAuth: credentialTable({ smtp: { type: 'basic', data: { host: '127.0.0.1', port: smtp.port, username: 'mailer', password: 'pw' } } }) });
    const out = await runTool({
      kind: 'email', auth: 'smtp', to: ['a@example.com', 'b@example.com'], cc: 'c@example.com', bcc: 'd@example.com',
      from: 'noreply@example.com', subject: 'Report', body: 'All good', attachments: [{ filename: 'r.txt', content: 'data' }],
    }, ctx);
    expect(out.error).toBeUndefined();
    expect((out.response as any).accepted).toEqual(['a@example.com', 'b@example.com', 'c@example.com', 'd@example.com']);
    const m = smtp.messages.at(-1)!;
    expect(m.auth).toBe('mailer:pw');
    expect(m.from).toBe('noreply@example.com');
    expect(m.data).toContain('Subject: Report');
    expect(m.data).toContain('All good');
    expect(m.data).toContain('r.txt');
    expect(m.data).not.toMatch(/^Bcc:/m);
  });

  it('notify.email with smtp config on the tool; missing host is a config error', async () => {
    const out = await runTool({ kind: 'email', smtp: { host: '127.0.0.1', port: smtp.port }, to: 'x@example.com', subject: 's', body: 'b', from: 'f@example.com' }, makeCtx());
    expect(out.error).toBeUndefined();
    expect((await runTool({ kind: 'email', to: 'x@example.com', subject: 's', body: 'b' }, makeCtx())).error?.code).toBe('bad_config');
  });

  it('notify.email falls back to the worker\'s SMTP_* settings', async () => {
    Object.assign(process.env, { SMTP_HOST: '127.0.0.1', SMTP_PORT: String(smtp.port), SMTP_FROM: 'worker@example.com' });
    try {
      const out = await runTool({ kind: 'email', operation: 'send', to: ['oncall@example.com'], subject: 'Nightly', body: '3 failed' }, makeCtx());
      expect(out.error).toBeUndefined();
      expect(smtp.messages.at(-1)).toMatchObject({ from: 'worker@example.com', to: ['oncall@example.com'] });
    } finally {
      for (const k of ['SMTP_HOST', 'SMTP_PORT', 'SMTP_FROM']) delete process.env[k];
    }
  });
});

describe('workbook tool', () => {
  const workbook: JsonObject[] = [
    { name: 'double', tool: { kind: 'python', code: 'def main(x, factor):\n    return x * factor', args: { factor: '{{ workload.factor }}' } } },
    { name: 'greet', tool: { kind: 'console', message: 'hello {{ args.who }}' } },
    { name: 'self', tool: { kind: 'workbook', name: 'self' } },
  ];
  const ctx = makeCtx({ workbook, template: { workload: { factor: 3 } }, args: { x: 5 } });
  it('runs the named task with args merged into its tool config and templates rendered', async () => {
    expect((await runTool({ kind: 'workbook', name: 'double' }, ctx)).response).toBe(15);
    expect((await runTool({ kind: 'workbook', task: 'double', args: { x: 7 } }, ctx)).response).toBe(21);
    expect((await runTool({ kind: 'workbook', name: 'greet', with: { who: 'ann' } }, ctx)).log).toBe('hello ann\n');
  });
  it('an unknown task or a recursive task is a clear error', async () => {
    expect((await runTool({ kind: 'workbook', name: 'missing' }, ctx)).error?.message).toMatch(/not found \(tasks: double, greet, self\)/);
    expect((await runTool({ kind: 'workbook', name: 'self' }, ctx)).error?.code).toBe('bad_config');
  });
  it('unsupported kinds and playbook kinds are errors, not throws', async () => {
    expect((await runTool({ kind: 'playbook', path: 'x' }, makeCtx())).error?.code).toBe('bad_config');
    expect((await runTool({ kind: 'nope' as any }, makeCtx())).error?.code).toBe('unsupported_kind');
  });
});
