/**
 * The server URL an API command uses: an address without http:// or https:// is refused with a
 * message naming where it came from and what to write instead, credentials masked.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CliError, DEFAULT_SERVER, serverUrl } from './common.js';

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('serverUrl', () => {
  it('takes --server, else SERVER_API_URL, else the default', () => {
    vi.stubEnv('SERVER_API_URL', 'https://flows.example:8443');
    expect(serverUrl({ server: 'http://127.0.0.1:8082' })).toBe('http://127.0.0.1:8082');
    expect(serverUrl({})).toBe('https://flows.example:8443');
    vi.stubEnv('SERVER_API_URL', '');
    expect(serverUrl({})).toBe(DEFAULT_SERVER);
  });

  it("reads the reference implementation's names too, SERVER_API_URL first, and names the one it used", () => {
    vi.stubEnv('SERVER_API_URL', '');
    vi.stubEnv('SERVER_URL_FOR_WORKERS', 'http://workers.example:8082');
    vi.stubEnv('FLOW_SERVER_URL', 'http://flow.example:8082');
    expect(serverUrl({})).toBe('http://workers.example:8082');
    vi.stubEnv('SERVER_URL_FOR_WORKERS', '');
    expect(serverUrl({})).toBe('http://flow.example:8082');
    vi.stubEnv('SERVER_API_URL', 'http://api.example:8082');
    expect(serverUrl({})).toBe('http://api.example:8082');
    vi.stubEnv('SERVER_API_URL', '');
    vi.stubEnv('FLOW_SERVER_URL', 'flow.example:8082');
    expect(() => serverUrl({})).toThrow('FLOW_SERVER_URL must be an http:// or https:// URL, got "flow.example:8082"; did you mean http://flow.example:8082?');
  });

  it('refuses a host:port without a scheme, naming the option and the URL meant', () => {
    expect(() => serverUrl({ server: '127.0.0.1:8082' })).toThrow(CliError);
    expect(() => serverUrl({ server: '127.0.0.1:8082' })).toThrow('--server must be an http:// or https:// URL, got "127.0.0.1:8082"; did you mean http://127.0.0.1:8082?');
    // `localhost:8082` parses as a URL whose scheme is `localhost:`
    expect(() => serverUrl({ server: 'localhost:8082' })).toThrow('did you mean http://localhost:8082?');
  });

  it('names SERVER_API_URL when the address came from there, and refuses other schemes', () => {
    vi.stubEnv('SERVER_API_URL', 'ftp://flows.example/');
    expect(() => serverUrl({})).toThrow('SERVER_API_URL must be an http:// or https:// URL, got "ftp://flows.example/"; did you mean http://flows.example/?');
  });

  it('masks credentials written without a scheme', () => {
    let message = '';
    try {
      serverUrl({ server: 'admin:s3cret@10.0.0.5:8082' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('did you mean http://***@10.0.0.5:8082?');
    expect(message).not.toContain('s3cret');
  });
});
