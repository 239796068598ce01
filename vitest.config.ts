import { defineConfig } from 'vitest/config';

// Suites talk to the real PostgreSQL and NATS of the machine; each makes its own database and
// stream names, so files may run in parallel. Two cores: keep the fork count small.
export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**', 'dist/**'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
