/**
 * Two projects. `unit`: pure code and the storage driver on real files, no server of any kind (test/unit/;
 * `npx jest --selectProjects unit` runs in seconds). `integration`: everything else, against the Temporal dev
 * server, the PostgreSQL server and the workflow bundle its global setup starts once for the run (a project's
 * global setup runs only when one of its tests is selected).
 */
const shared = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['@swc/jest'] },
};

/** @type {import('jest').Config} */
module.exports = {
  projects: [
    {
      ...shared,
      displayName: 'unit',
      testMatch: ['<rootDir>/test/unit/**/*.test.ts'],
    },
    {
      ...shared,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/unit/'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
  ],
  // Two files at a time on the shared servers (each file has its own task queues, namespaces and databases):
  // most of a file's time is spent waiting on timers, processes and the server, not on a core.
  maxWorkers: 2,
  testTimeout: 120000,
  verbose: true,
};
