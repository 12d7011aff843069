import { defineConfig } from 'vitest/config';

// Integration tests start real engine and worker processes; two cores means little parallelism.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    teardownTimeout: 10_000,
    reporters: ['default'],
  },
});
