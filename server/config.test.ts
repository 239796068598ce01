import { describe, expect, it } from 'vitest';
import { ConfigError, describeConfig, loadConfig } from './config.js';

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    const c = loadConfig({});
    expect(c.port).toBe(8082);
    expect(c.serverUrl).toBe('http://localhost:8082');
    expect(c.broker).toEqual({ url: 'nats://127.0.0.1:4222', stream: 'FLOW_COMMANDS', subject: 'flow.commands', consumer: 'worker-pool' });
    expect(c.sqlApi).toBe(true);
    expect(c.apiToken).toBeUndefined();
    expect(c.publicEndpoints).toEqual(['metrics']);
    expect(loadConfig({ PLAYFLOW_PUBLIC_ENDPOINTS: 'none' }).publicEndpoints).toEqual([]);
    expect(loadConfig({ PLAYFLOW_PUBLIC_ENDPOINTS: 'docs' }).publicEndpoints).toEqual(['docs']);
    expect(c.logLevel).toBe('info');
  });

  it('reads the server URL from its three names in order', () => {
    expect(loadConfig({ FLOW_SERVER_URL: 'http://c:1', SERVER_URL_FOR_WORKERS: 'http://b:1/' }).serverUrl).toBe('http://b:1');
    expect(loadConfig({ SERVER_API_URL: 'http://a:1', FLOW_SERVER_URL: 'http://c:1' }).serverUrl).toBe('http://a:1');
    expect(loadConfig({ PORT: '9000' }).serverUrl).toBe('http://localhost:9000');
  });

  it('reads token, SQL switch, public endpoints, key, level', () => {
    const c = loadConfig({
      PLAYFLOW_API_TOKEN: 't', PLAYFLOW_SQL_API: 'off', PLAYFLOW_PUBLIC_ENDPOINTS: 'metrics, docs',
      PLAYFLOW_ENCRYPTION_KEY: 'k', LOG_LEVEL: 'DEBUG', BROKER_URL: 'memory',
    });
    expect(c).toMatchObject({ apiToken: 't', sqlApi: false, publicEndpoints: ['metrics', 'docs'], encryptionKey: 'k', logLevel: 'debug' });
    expect(c.broker.url).toBe('memory');
    const d = describeConfig(c);
    expect(JSON.stringify(d)).not.toContain('"t"');
    expect(d.apiToken).toBe('set');
  });

  it('names the variable of a malformed value', () => {
    expect(() => loadConfig({ PORT: 'abc' })).toThrow(ConfigError);
    expect(() => loadConfig({ PORT: '70000' })).toThrow(/PORT/);
    expect(() => loadConfig({ PLAYFLOW_SQL_API: 'maybe' })).toThrow(/PLAYFLOW_SQL_API/);
    expect(() => loadConfig({ DATABASE_URL: 'mysql://x' })).toThrow(/DATABASE_URL/);
    expect(() => loadConfig({ LOG_LEVEL: 'loud' })).toThrow(/LOG_LEVEL/);
    expect(() => loadConfig({ PLAYFLOW_PUBLIC_ENDPOINTS: 'everything' })).toThrow(/PLAYFLOW_PUBLIC_ENDPOINTS/);
  });

  it('masks passwords when described', () => {
    const d = describeConfig(loadConfig({ DATABASE_URL: 'postgres://u:secret@h/db', BROKER_URL: 'nats://user:pw@h:4222' }));
    expect(JSON.stringify(d)).not.toContain('secret');
    expect(JSON.stringify(d)).not.toContain('pw@');
  });
});
