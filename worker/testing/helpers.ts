/** Test helpers for the worker's suites (local servers, contexts). Not used in production code. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JsonObject } from '../../playbook/types.js';
import { type AuthData, type ResolveAuth, type ToolContext } from '../tools/types.js';
import { silentLogger } from '../../common/logger.js';

export function makeCtx(over: Partial<ToolContext> = {}): ToolContext {
  return {
    args: {},
    execution_id: '1',
    step: 'test',
    resolveAuth: async () => {
      throw new Error('no credentials in this test');
    },
    signal: new AbortController().signal,
    logger: silentLogger,
    ...over,
  };
}

/** A resolver over a fixed table of credential name → data (the shape GET /api/credential returns). */
export function credentialTable(table: Record<string, { type: string; data: JsonObject }>): ResolveAuth {
  return async (auth): Promise<AuthData> => {
    const name = typeof auth === 'string' ? auth : auth && typeof auth === 'object' && !Array.isArray(auth) ? (auth.credential as string) : undefined;
    const c = name ? table[name] : undefined;
    if (!c) throw new Error(`credential ${String(name)} not found`);
    return { credential_key: name!, credential_type: c.type, data: c.data };
  };
}

export interface Recorded {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export type Handler = (req: Recorded, res: http.ServerResponse) => void;

export interface LocalServer {
  url: string;
  requests: Recorded[];
  close(): Promise<void>;
}

function listen(server: http.Server | https.Server, scheme: string, requests: Recorded[]): Promise<LocalServer> {
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `${scheme}://127.0.0.1:${port}`,
        requests,
        close: () => new Promise<void>((r) => { (server as http.Server).closeAllConnections?.(); server.close(() => r()); }),
      });
    });
  });
}

function wrap(handler: Handler, requests: Recorded[]) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rec = { method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      requests.push(rec);
      handler(rec, res);
    });
  };
}

export function startHttpServer(handler: Handler): Promise<LocalServer> {
  const requests: Recorded[] = [];
  return listen(http.createServer(wrap(handler, requests)), 'http', requests);
}

/** HTTPS with a self-signed certificate made by openssl for this run. */
export function startHttpsServer(handler: Handler): Promise<LocalServer & { cert: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'pf-tls-'));
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    const key = readFileSync(join(dir, 'key.pem'));
    const cert = readFileSync(join(dir, 'cert.pem'));
    const requests: Recorded[] = [];
    return listen(https.createServer({ key, cert }, wrap(handler, requests)), 'https', requests).then((s) => ({ ...s, cert: cert.toString('utf8') }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

export interface SmtpMessage {
  from: string;
  to: string[];
  data: string;
  auth?: string;
}

/** A tiny SMTP server (EHLO, AUTH PLAIN, MAIL, RCPT, DATA, QUIT) recording what it receives. */
export async function startSmtpServer(): Promise<{ port: number; messages: SmtpMessage[]; close(): Promise<void> }> {
  const net = await import('node:net');
  const messages: SmtpMessage[] = [];
  const sockets = new Set<import('node:net').Socket>();
  const server = net.createServer((sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    let buf = '';
    let inData = false;
    let cur: SmtpMessage = { from: '', to: [], data: '' };
    let auth: string | undefined;
    const reply = (s: string) => sock.write(`${s}\r\n`);
    reply('220 localhost ESMTP test');
    sock.on('data', (chunk) => {
      buf += chunk.toString('utf8');
      while (true) {
        if (inData) {
          const end = buf.indexOf('\r\n.\r\n');
          if (end < 0) return;
          cur.data = buf.slice(0, end);
          buf = buf.slice(end + 5);
          inData = false;
          messages.push({ ...cur, auth });
          cur = { from: '', to: [], data: '' };
          reply('250 OK queued');
          continue;
        }
        const nl = buf.indexOf('\r\n');
        if (nl < 0) return;
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 2);
        const cmd = line.slice(0, 4).toUpperCase();
        if (cmd === 'EHLO' || cmd === 'HELO') reply('250-localhost\r\n250-AUTH PLAIN\r\n250 8BITMIME');
        else if (cmd === 'AUTH') {
          auth = Buffer.from(line.split(' ')[2] ?? '', 'base64').toString('utf8').split('\u0000').slice(1).join(':');
          reply('235 Authentication successful');
        } else if (cmd === 'MAIL') { cur.from = line.slice(10).replace(/[<>]/g, '').split(' ')[0]; reply('250 OK'); }
        else if (cmd === 'RCPT') { cur.to.push(line.slice(8).replace(/[<>]/g, '').split(' ')[0]); reply('250 OK'); }
        else if (cmd === 'DATA') { inData = true; reply('354 End data with <CR><LF>.<CR><LF>'); }
        else if (cmd === 'QUIT') { reply('221 Bye'); sock.end(); }
        else if (cmd === 'RSET' || cmd === 'NOOP') reply('250 OK');
        else reply('502 Command not implemented');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    messages,
    close: () => new Promise<void>((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }),
  };
}
