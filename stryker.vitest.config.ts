import { defineConfig } from 'vitest/config';

// The unit tests that exercise src/routing/route-table.ts and the modules it decides with, for `npm run mutation`
// (stryker.config.mjs).
export default defineConfig({
  test: {
    include: ['test/unit/routing.test.ts'],
    pool: 'forks',
    maxWorkers: 1,
  },
});
