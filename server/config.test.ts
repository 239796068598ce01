import { describe, expect, it } from 'vitest';
import { checkExposure, ConfigError, describeConfig, loadConfig } from './config.js';

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    const c = loadConfig({});
    expect(c.port).toBe(8082);
    expect(c.serverUrl).toBe('http://localhost:8082');
    expect(c.broker).toEqual({ url: 'nats://127.0.0.1:4222', stream: 'FLOW_COMMANDS', subject: 'flow.commands', consumer: 'worker-pool' });
    expect(c.sqlApi).toBe(false);
    expect(c.allowAnonymous).toBe(false);
    expect(c.host).toBe('0.0.0.0');
    expect(c.apiToken).toBeUndefined();
    expect(c.publicEndpoints).toEqual(['metrics']);
    expect(loadConfig({ PLAYFLOW_PUBLIC_ENDPOINTS: 'none' }).publicEndpoints).toEqual([]);
    expect(loadConfig({ PLAYFLOW_PUBLIC_ENDPOINTS: 'docs' }).publicEndpoints).toEqual(['docs']);
    expect(c.logLevel).toBe('info');
    expect(c.maxBodyBytes).toBe(10 * 1024 * 1024);
  });

  it('PLAYFLOW_MAX_BODY_BYTES: bytes from 1024 to 1 GiB, else an error naming it', () => {
    expect(loadConfig({ PLAYFLOW_MAX_BODY_BYTES: '104857600' }).maxBodyBytes).toBe(104857600);
    for (const bad of ['10MB', '-1', '1.5', '100', String(2 * 1024 ** 3)]) {
      expect(() => loadConfig({ PLAYFLOW_MAX_BODY_BYTES: bad })).toThrow(/PLAYFLOW_MAX_BODY_BYTES.*expected bytes from 1024 to 1073741824/);
    }
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

  it('refuses an open API on a non-loopback address unless PLAYFLOW_ALLOW_ANONYMOUS=true', () => {
    expect(() => checkExposure(loadConfig({}))).toThrow(/PLAYFLOW_API_TOKEN.*HOST=0\.0\.0\.0.*PLAYFLOW_ALLOW_ANONYMOUS=true/);
    expect(() => checkExposure(loadConfig({ HOST: '10.1.2.3' }))).toThrow(ConfigError);
    for (const host of ['127.0.0.1', 'localhost', '::1', '[::1]', '127.0.0.2']) expect(() => checkExposure(loadConfig({ HOST: host }))).not.toThrow();
    expect(() => checkExposure(loadConfig({ PLAYFLOW_ALLOW_ANONYMOUS: 'true' }))).not.toThrow();
    expect(() => checkExposure(loadConfig({ PLAYFLOW_API_TOKEN: 't' }))).not.toThrow();
  });

  it('reads the template budgets, naming a malformed one', () => {
    expect(loadConfig({}).templateLimits).toEqual({});
    expect(loadConfig({ PLAYFLOW_TEMPLATE_MAX_OUTPUT: '1_000', PLAYFLOW_TEMPLATE_MAX_MS: '250' }).templateLimits).toEqual({ maxOutput: 1000, maxMs: 250 });
    expect(() => loadConfig({ PLAYFLOW_TEMPLATE_MAX_STEPS: '-5' })).toThrow(/PLAYFLOW_TEMPLATE_MAX_STEPS/);
    expect(() => loadConfig({ PLAYFLOW_TEMPLATE_MAX_DEPTH: '1e3' })).toThrow(/PLAYFLOW_TEMPLATE_MAX_DEPTH/);
  });

  it('the SQL API is off by default and never without the token', () => {
    expect(() => checkExposure(loadConfig({ HOST: '127.0.0.1', PLAYFLOW_SQL_API: 'on' }))).toThrow(/PLAYFLOW_SQL_API.*PLAYFLOW_API_TOKEN/);
    expect(() => checkExposure(loadConfig({ PLAYFLOW_SQL_API: 'on', PLAYFLOW_API_TOKEN: 't' }))).not.toThrow();
    expect(() => loadConfig({ PLAYFLOW_SQL_API_URL: 'http://x' })).toThrow(/PLAYFLOW_SQL_API_URL/);
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
