/** Raw HTTP calls to the fake API server, for tests that check status codes, bodies and headers. */
import { Agent, fetch, type Headers } from 'undici';

// The fake's HTTPS certificate is self-signed, as kubeconfigs for it skip verification.
const insecure = new Agent({ connect: { rejectUnauthorized: false } });
export interface Reply {
  status: number;
  body: any;
  headers: Headers;
}

export function caller(baseUrl: () => string, token = 'test') {
  return async (method: string, path: string, body?: unknown, contentType = 'application/json', accept?: string): Promise<Reply> => {
    const res = await fetch(baseUrl() + path, {
      method,
      dispatcher: insecure,
      headers: {
        Authorization: `Bearer ${token}`,
        ...(body !== undefined ? { 'Content-Type': contentType } : {}),
        ...(accept ? { Accept: accept } : {}),
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };
}
