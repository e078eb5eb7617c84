/**
 * `npm run test:chaos`: the chaos runner's short forms (test/chaos.test.ts), with the files driver, with PostgreSQL and
 * with MariaDB, each run with a Temporal dev server, a worker child and, for PostgreSQL, a server of its own (the run's
 * PostgreSQL is started by the test when no run shares one), for MariaDB a server per node: workers SIGKILLed, a server
 * restarted, storage connections cut. Not in `npm test`, for their time (some 200 s, a core's worth of it); `.ci/run`
 * runs it after `npm test`. The long runs are `npm run chaos` (test/chaos/run.ts).
 */
/** @type {import('jest').Config} */
module.exports = {
  displayName: 'chaos',
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['@swc/jest'] },
  testMatch: ['<rootDir>/test/chaos.test.ts'],
  testTimeout: 180000,
  verbose: true,
};
