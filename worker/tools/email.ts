/**
 * Legacy `email` kind (notify.email), SMTP through nodemailer. Parameters: to*, subject*, body*
 * (plain text; `html` optional), from, cc, bcc, attachments (list of `{filename, content}` with
 * optional `encoding: base64` and `content_type`, or `{filename, path}` read from the worker's
 * file root).
 * SMTP server: tool `smtp: {host, port, secure, user, password}` or top-level host/port/secure,
 * else the `auth` credential's data (`host`/`smtp_host`, `port`/`smtp_port`, `username`/`user`,
 * `password`, `secure`, `from`), else the worker's SMTP settings (env SMTP_HOST, SMTP_PORT,
 * SMTP_USER, SMTP_PASSWORD, SMTP_SECURE, SMTP_FROM) — so a legacy notify.email with no server
 * in the playbook works. Port default 587 (465 implies secure). `verify: false` accepts any TLS
 * certificate.
 * Response: `{message_id, accepted, rejected, response}`.
 */
import type { Json, JsonObject, Tool } from '../../playbook/types.js';
import { loadAuth, pick } from './auth-ref.js';
import { resolvePath } from './file.js';
import { boolField } from './http.js';
import { isObject, str } from './json.js';
import { param, required } from './params.js';
import { ToolConfigError, fail, ok, type ToolContext, type ToolOutcome } from './types.js';

function addresses(v: Json | undefined): string[] | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (Array.isArray(v)) return v.map((x) => str(x)!).filter(Boolean);
  return String(v).split(',').map((s) => s.trim()).filter(Boolean);
}

function attachmentsOf(v: Json | undefined) {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw new ToolConfigError('attachments must be a list');
  return v.map((a, i) => {
    if (!isObject(a)) throw new ToolConfigError(`attachments[${i}] must be an object`);
    const filename = str(a.filename ?? a.name);
    const contentType = str(a.content_type ?? a.contentType);
    if (typeof a.path === 'string') return { filename, path: resolvePath(a.path), contentType };
    if (a.content === undefined || a.content === null) throw new ToolConfigError(`attachments[${i}] needs content or path`);
    const encoding = str(a.encoding);
    return { filename, content: str(a.content)!, encoding: encoding === 'base64' ? 'base64' : undefined, contentType };
  });
}

export async function runEmail(tool: Tool, ctx: ToolContext): Promise<ToolOutcome> {
  const to = addresses(required(tool, ctx, 'to', 'notify.email'));
  const subject = str(required(tool, ctx, 'subject', 'notify.email'))!;
  const body = str(required(tool, ctx, 'body', 'notify.email'))!;
  const smtpCfg: JsonObject = isObject(tool.smtp) ? tool.smtp : {};
  const auth = await loadAuth(tool.auth, ctx);
  const a: JsonObject = auth?.data ?? {};
  const env = process.env;
  const e = (name: string) => (env[name] === undefined || env[name] === '' ? undefined : env[name]);
  // Precedence: the tool's smtp block / fields, then the auth credential, then the worker's SMTP_* settings.
  const host = str(pick(smtpCfg, 'host') ?? tool.host ?? pick(a, 'smtp_host', 'host')) ?? e('SMTP_HOST');
  if (!host) throw new ToolConfigError('notify.email needs an SMTP host (tool smtp.host, host, the auth credential, or SMTP_HOST)');
  const port = Number(pick(smtpCfg, 'port') ?? tool.port ?? pick(a, 'smtp_port', 'port') ?? e('SMTP_PORT') ?? 587);
  const secure = boolField(pick(smtpCfg, 'secure') ?? tool.secure ?? pick(a, 'secure') ?? e('SMTP_SECURE'), port === 465);
  const user = str(pick(smtpCfg, 'user', 'username') ?? pick(a, 'username', 'user', 'smtp_user')) ?? e('SMTP_USER');
  const pass = str(pick(smtpCfg, 'password') ?? pick(a, 'password', 'smtp_password')) ?? e('SMTP_PASSWORD');
  const verify = boolField(tool.verify, true);
  // loaded on the first email: most workers never send one, and it is 250 modules to start
  const { default: nodemailer } = await import('nodemailer');
  const transport = nodemailer.createTransport({
    host,
    port,
    secure,
    auth: user ? { user, pass } : undefined,
    tls: { rejectUnauthorized: verify },
    connectionTimeout: 15_000,
    greetingTimeout: 15_000,
    socketTimeout: 30_000,
  });
  try {
    const info = await transport.sendMail({
      from: str(param(tool, ctx, 'from') ?? pick(a, 'from', 'sender')) ?? e('SMTP_FROM') ?? user,
      to,
      cc: addresses(param(tool, ctx, 'cc')),
      bcc: addresses(param(tool, ctx, 'bcc')),
      subject,
      text: body,
      html: str(param(tool, ctx, 'html')),
      attachments: attachmentsOf(param(tool, ctx, 'attachments')) as any,
    });
    return ok({
      message_id: info.messageId ?? null,
      accepted: (info.accepted ?? []).map(String),
      rejected: (info.rejected ?? []).map(String),
      response: info.response ?? null,
    });
  } catch (err) {
    const e = err as Error & { code?: string; responseCode?: number };
    return fail(`email: ${e.message}`, { code: e.code === 'ETIMEDOUT' ? 'timeout' : e.responseCode ? 'smtp_error' : 'network', ...(e.responseCode ? { status: e.responseCode } : {}) });
  } finally {
    transport.close();
  }
}
