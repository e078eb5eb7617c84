/**
 * `npm run test:cluster`: the lifecycle test again and the crash-point tests (a worker killed at each point of each
 * operation; not in `npm test`, for their time), on a Temporal cluster instead of the dev server (its
 * global setup brings one up as `tablefate cluster up` does: frontend, two history processes, matching and worker, on
 * the run's PostgreSQL), and the cluster's own tests (test/cluster/): its command line, and two chaos runs on clusters
 * of their own with the PostgreSQL catalog: three workers and three storage nodes, killing a worker and each history
 * process; the deployment off one host (two workers, three storage-node processes, the command line as caller),
 * killing a worker and a storage node.
 * One file at a time: the chaos run's cluster and workers take both cores.
 */
/** @type {import('jest').Config} */
module.exports = {
  displayName: 'cluster',
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['@swc/jest'] },
  testMatch: [
    '<rootDir>/test/lifecycle.test.ts',
    '<rootDir>/test/crash-points.test.ts',
    '<rootDir>/test/truncate-crash.test.ts',
    '<rootDir>/test/truncate-cascade-crash.test.ts',
    '<rootDir>/test/mariadb-crash.test.ts',
    '<rootDir>/test/cluster/**/*.test.ts',
  ],
  globalSetup: '<rootDir>/test/support/cluster-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  maxWorkers: 1,
  testTimeout: 120000,
  verbose: true,
};
