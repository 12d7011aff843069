import { defineConfig } from 'vitest/config';

// The unit tests that exercise src/routing/route-table.ts, for `npm run mutation` (stryker.config.json).
export default defineConfig({
  test: {
    include: ['test/unit/routing.test.ts'],
    pool: 'forks',
    maxWorkers: 1,
  },
});
