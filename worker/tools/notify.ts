/**
 * Legacy `slack` (notify.slack) and `webhook` (notify.webhook) kinds, over the http tool's
 * transport (same envelope, error and timeout semantics).
 *   slack: webhook*, message*, channel, username, icon_emoji, attachments — POSTed as JSON
 *          `{text, channel, username, icon_emoji, attachments}`.
 *   webhook: url*, data* (object/list → JSON; string → raw body), method (default POST),
 *          headers, timeout (30), verify (true).
 */
import type { JsonObject, Tool } from '../../playbook/types.js';
import { DEFAULT_HTTP_TIMEOUT_S, boolField, httpOutcome, timeoutMs } from './http.js';
import { isObject, str } from './json.js';
import { param, required } from './params.js';
import { ToolConfigError, type ToolContext, type ToolOutcome } from './types.js';

export async function runSlack(tool: Tool, ctx: ToolContext): Promise<ToolOutcome> {
  const url = str(required(tool, ctx, 'webhook', 'notify.slack') ?? param(tool, ctx, 'webhook_url'))!;
  const body: JsonObject = { text: str(required(tool, ctx, 'message', 'notify.slack'))! };
  for (const f of ['channel', 'username', 'icon_emoji', 'attachments', 'blocks'] as const) {
    const v = param(tool, ctx, f);
    if (v !== undefined && v !== null) body[f] = v;
  }
  return httpOutcome({
    method: 'POST',
    url,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
    timeoutMs: timeoutMs(param(tool, ctx, 'timeout'), DEFAULT_HTTP_TIMEOUT_S),
    verify: boolField(param(tool, ctx, 'verify'), true),
    signal: ctx.signal,
  });
}

export async function runWebhook(tool: Tool, ctx: ToolContext): Promise<ToolOutcome> {
  const url = str(param(tool, ctx, 'url') ?? param(tool, ctx, 'endpoint'));
  if (!url) throw new ToolConfigError('notify.webhook needs url');
  const data = required(tool, ctx, 'data', 'notify.webhook');
  const method = String(param(tool, ctx, 'method') ?? 'POST').toUpperCase();
  const h = param(tool, ctx, 'headers');
  if (h !== undefined && h !== null && !isObject(h)) throw new ToolConfigError('headers must be an object');
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries((h as JsonObject | undefined) ?? {})) if (v !== null) headers[k] = str(v)!;
  const raw = typeof data === 'string';
  if (!raw && !Object.keys(headers).some((k) => k.toLowerCase() === 'content-type')) headers['Content-Type'] = 'application/json';
  return httpOutcome({
    method,
    url,
    headers,
    body: raw ? data : JSON.stringify(data),
    timeoutMs: timeoutMs(param(tool, ctx, 'timeout'), DEFAULT_HTTP_TIMEOUT_S),
    verify: boolField(param(tool, ctx, 'verify'), true),
    signal: ctx.signal,
  });
}
