/** Small HTTP helpers for the providers: JSON/form requests with a timeout, no logging of bodies. */
import { SecretProviderError } from './types.js';

export interface HttpAnswer {
  status: number;
  text: string;
  json: unknown;
}

export async function httpCall(
  provider: string,
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number; signal?: AbortSignal },
): Promise<HttpAnswer> {
  const signals = [AbortSignal.timeout(init.timeoutMs ?? 30_000)];
  if (init.signal) signals.push(init.signal);
  let res: Response;
  try {
    res = await fetch(url, { method: init.method ?? 'GET', headers: init.headers, body: init.body, signal: AbortSignal.any(signals) });
  } catch (err) {
    throw new SecretProviderError(provider, `request to ${new URL(url).origin} failed: ${(err as Error).message}`);
  }
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json };
}

/** Error text of a failed answer: the provider's error code/message, never a secret (bodies of failures carry none). */
export function failure(provider: string, what: string, a: HttpAnswer): SecretProviderError {
  const j = a.json as Record<string, any> | undefined;
  const detail = j?.error?.message ?? j?.error_description ?? j?.message ?? j?.Message ?? j?.__type ?? (typeof j?.error === 'string' ? j.error : undefined);
  return new SecretProviderError(provider, `${what} answered HTTP ${a.status}${detail ? `: ${String(detail).slice(0, 300)}` : ''}`, a.status);
}

export const form = (o: Record<string, string>) => new URLSearchParams(o).toString();

export const trimSlash = (s: string) => s.replace(/\/+$/, '');

export function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}
