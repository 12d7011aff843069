// Mutation testing of the route table's ownership decisions against their unit tests
// (README.md, Development). Run with `npm run mutation`; it is not part of `npm test` or CI.
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  plugins: ['@stryker-mutator/vitest-runner'],
  vitest: { configFile: 'stryker.vitest.config.ts', related: false },
  mutate: ['src/routing/route-table.ts', 'src/routing/route-ownership.ts', 'src/routing/middleware-bindings.ts', 'src/routing/map-members.ts'],
  coverageAnalysis: 'perTest',
  concurrency: 2,
  timeoutMS: 20_000,
  reporters: ['clear-text', 'progress'],
  // Below 90 % the run fails: the route table decides who holds a route or function.
  thresholds: { high: 95, low: 90, break: 90 },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
