/**
 * Webhook triggers: a named hook starts the playbook at its path with the delivery's JSON body as
 * payload. A delivery is authenticated by an HMAC-SHA256 signature of its raw body under the
 * hook's secret (GitHub's `X-Hub-Signature-256: sha256=<hex>`), compared in constant time; the
 * secret is sealed like credentials and never leaves this module. An optional filter (the
 * condition language of `when:`) decides on the body whether the delivery starts anything; a
 * delivery id (`X-Idempotency-Key`, `Idempotency-Key` or `X-GitHub-Delivery`) makes a redelivery
 * answer the first execution instead of starting another (the execution's Idempotency-Key,
 * migration 211, namespaced by the hook).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { JsonObject } from '../../playbook/types.js';
import { checkTemplate, evalCondition } from '../../playbook/template/index.js';
import type { Cipher } from '../crypto.js';
import { AppError, badRequest, notFound } from '../errors.js';
import type { Db, ExecutionService } from '../services.js';
import * as store from '../store/hooks.js';
import type { HookDeliveryResult, HookSpec } from '../../common/contract/hooks.js';
import type { HookView } from '../store/hooks.js';

export type { HookView } from '../store/hooks.js';

export const HOOK_NAME = /^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,252}$/;
/** Shortest secret accepted: a guessable secret makes the signature worthless. */
export const MIN_SECRET_LENGTH = 16;
export const SIGNATURE_HEADER = 'x-hub-signature-256';
/** Headers naming a delivery, first found wins. */
export const DELIVERY_HEADERS = ['x-idempotency-key', 'idempotency-key', 'x-github-delivery'] as const;
/** Headers a filter never sees (credentials of the caller, the signature). */
const HIDDEN_HEADERS = new Set(['authorization', 'cookie', 'proxy-authorization', SIGNATURE_HEADER, 'x-hub-signature']);

export type { HookSpec };

export interface Delivery {
  raw: Buffer;
  body: unknown;
  headers: Record<string, string | string[] | undefined>;
}

export type DeliveryResult = HookDeliveryResult;

const isObject = (v: unknown): v is JsonObject => v !== null && typeof v === 'object' && !Array.isArray(v);

export class HookService {
  constructor(
    private readonly db: Db,
    private readonly cipher: Cipher,
    private readonly executions: ExecutionService,
  ) {}

  async put(name: string, spec: HookSpec): Promise<{ hook: HookView; created: boolean }> {
    checkName(name);
    if (!isObject(spec)) throw badRequest('the hook must be a JSON object');
    const path = typeof spec.path === 'string' ? spec.path.trim().replace(/^\/+|\/+$/g, '') : '';
    if (!path) throw badRequest('path is required: the catalog path of the playbook the hook starts', { field: 'path' });
    const version = spec.version ?? null;
    if (version !== null && (!Number.isInteger(version) || version < 1)) throw badRequest('version must be a positive integer or null', { field: 'version' });
    const filter = spec.filter == null || spec.filter === '' ? null : spec.filter;
    if (filter !== null) {
      if (typeof filter !== 'string') throw badRequest('filter must be a string: a condition on the body, e.g. body.action == "opened"', { field: 'filter' });
      const problem = checkTemplate(filter, { expression: true, field: 'filter' });
      if (problem) throw badRequest(`filter is not a valid condition: ${problem.message}`, { field: 'filter' });
    }
    const insecure = spec.insecure ?? false;
    if (typeof insecure !== 'boolean') throw badRequest('insecure must be true or false', { field: 'insecure' });
    const secret = spec.secret;
    if (secret !== undefined) {
      if (typeof secret !== 'string' || secret.length < MIN_SECRET_LENGTH || secret.length > 1024) {
        throw badRequest(`secret must be a string of ${MIN_SECRET_LENGTH} to 1024 characters (e.g. \`openssl rand -hex 32\`)`, { field: 'secret' });
      }
      if (insecure) throw badRequest('insecure: true means deliveries are not signed; send either a secret or insecure: true', { field: 'insecure' });
    }
    return this.db.tx(async (client) => {
      const existing = await store.get(client, name);
      if (!insecure && secret === undefined && !existing?.has_secret) {
        throw badRequest('secret is required: deliveries are authenticated by an HMAC-SHA256 signature with it (or set insecure: true to accept unsigned deliveries)', { field: 'secret' });
      }
      const { hookId, created } = await store.upsert(client, { name, path, version, filter, insecure });
      if (insecure) await store.dropSecret(client, hookId);
      else if (secret !== undefined) await store.setSecret(client, hookId, this.cipher.current.id, this.cipher.encrypt(secret, 'hook_secret'));
      return { hook: store.toView((await store.get(client, name))!), created };
    });
  }

  async get(name: string): Promise<HookView> {
    const row = await store.get(this.db.pool, name);
    if (!row) throw notFound(`hook '${name}' not found`);
    return store.toView(row);
  }

  async list(path?: string): Promise<{ hooks: HookView[]; count: number }> {
    const rows = await store.list(this.db.pool, path);
    return { hooks: rows.map(store.toView), count: rows.length };
  }

  async remove(name: string): Promise<void> {
    if (!(await store.remove(this.db.pool, name))) throw notFound(`hook '${name}' not found`);
  }

  /**
   * A delivery: signature first (nothing is read from the body, nothing stored before it holds),
   * then the filter, then the start (a redelivery answers the first execution).
   */
  async deliver(name: string, d: Delivery): Promise<DeliveryResult> {
    const row = typeof name === 'string' && HOOK_NAME.test(name) ? await store.get(this.db.pool, name) : null;
    if (!row) throw notFound(`hook '${name}' not found`);
    if (!row.insecure) {
      const sealed = await store.secretOf(this.db.pool, row.hook_id);
      if (!sealed || !verifySignature(this.cipher.decrypt<string>(sealed, 'hook_secret'), d.raw, header(d.headers, SIGNATURE_HEADER))) {
        throw new AppError(401, 'bad_signature', `missing or wrong signature: send ${SIGNATURE_HEADER}: sha256=<hex HMAC-SHA256 of the raw body with the hook's secret>`);
      }
    }
    if (!isObject(d.body)) throw badRequest('the delivery body must be a JSON object (it becomes the payload)', { field: 'body' });
    const deliveryId = DELIVERY_HEADERS.map((h) => header(d.headers, h)).find((v) => v !== undefined && v !== '');
    if (deliveryId !== undefined && deliveryId.length > 150) throw badRequest('the delivery id header is longer than 150 characters');
    if (row.filter !== null && !this.matches(row.filter, d)) return { started: false, hook: name, reason: 'filter' };
    const res = await this.executions.start({
      path: row.path, payload: d.body, ...(row.version ? { version: row.version } : {}),
      ...(deliveryId !== undefined ? { idempotency_key: `hook:${row.hook_id}:${deliveryId}` } : {}),
    }, { hook_id: row.hook_id });
    if ((res as { replayed?: boolean }).replayed) return { started: false, hook: name, reason: 'replayed', execution_id: res.execution_id };
    return { started: true, execution_id: res.execution_id, hook: name, path: res.path, version: res.version };
  }

  /** The filter with `body` (also as `payload`) and the delivery's headers (lower-case names, credentials left out). */
  private matches(filter: string, d: Delivery): boolean {
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(d.headers)) {
      if (v === undefined || HIDDEN_HEADERS.has(k.toLowerCase())) continue;
      headers[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
    }
    try {
      return evalCondition(filter, { body: d.body, payload: d.body, headers });
    } catch (e) {
      throw badRequest(`the hook's filter failed: ${(e as Error).message}`, { field: 'filter' });
    }
  }
}

/** `sha256=<hex>` against HMAC-SHA256(secret, raw); constant time in the digest's content. */
export function verifySignature(secret: string, raw: Buffer, sent: string | undefined): boolean {
  if (!sent) return false;
  const m = /^sha256=([0-9a-fA-F]{64})$/.exec(sent.trim());
  if (!m) return false;
  const expected = createHmac('sha256', secret).update(raw).digest();
  return timingSafeEqual(expected, Buffer.from(m[1], 'hex'));
}

/** What a sender puts in X-Hub-Signature-256 (tests, the CLI's `hook sign`). */
export function sign(secret: string, raw: Buffer | string): string {
  return `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`;
}

function header(headers: Delivery['headers'], name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function checkName(name: string): void {
  if (typeof name !== 'string' || !HOOK_NAME.test(name)) {
    throw badRequest(`hook name '${name}' is invalid: letters, digits and _ . @ + -, starting with a letter or digit, at most 253`, { field: 'name' });
  }
}
