import { describe, expect, it } from 'vitest';
import { ConfigError } from '../common/config.js';
import { loadWorkerConfig } from './config.js';

describe('worker configuration', () => {
  it('eager dispatch is on unless WORKER_EAGER_DISPATCH says off', () => {
    expect(loadWorkerConfig({}).eagerDispatch).toBe(true);
    for (const v of ['on', 'true', '1', 'yes', 'ON']) expect(loadWorkerConfig({ WORKER_EAGER_DISPATCH: v }).eagerDispatch).toBe(true);
    for (const v of ['off', 'false', '0', 'no', ' Off ']) expect(loadWorkerConfig({ WORKER_EAGER_DISPATCH: v }).eagerDispatch).toBe(false);
  });

  it('refuses anything else, naming the variable', () => {
    expect(() => loadWorkerConfig({ WORKER_EAGER_DISPATCH: 'sometimes' })).toThrow(ConfigError);
    expect(() => loadWorkerConfig({ WORKER_EAGER_DISPATCH: 'sometimes' })).toThrow(/WORKER_EAGER_DISPATCH.*expected on or off, got "sometimes"/);
  });

  it('a WORKER_ID the server would refuse on every claim is refused at start, with the contract rule', () => {
    expect(loadWorkerConfig({ WORKER_ID: 'w-0' }).workerId).toBe('w-0');
    for (const bad of ['execution:12', 'w'.repeat(201)]) {
      expect(() => loadWorkerConfig({ WORKER_ID: bad })).toThrow(ConfigError);
      expect(() => loadWorkerConfig({ WORKER_ID: bad })).toThrow(/WORKER_ID.*not start with 'execution:'/);
    }
  });
});
