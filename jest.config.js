/**
 * Three projects. `unit`: pure code and the storage driver on real files, no server of any kind (test/unit/;
 * `npx jest --selectProjects unit` runs in seconds). `engine`: the step executor's every way through each operation
 * (a failure, a cancel, a lost workflow task at each part; every part run twice), each file on a Temporal server of
 * its own that the SDK's test environment starts (test/engine/; its global setup makes the workflow bundle once; no
 * PostgreSQL). `integration`: everything else, against the Temporal dev server, the PostgreSQL server and the
 * workflow bundle its global setup starts once for the run (a project's global setup runs only when one of its tests
 * is selected).
 */
const fs = require('node:fs');
const path = require('node:path');

/**
 * The run's temp files (every test's home, catalog and file storage, the servers' state, the processes the tests start)
 * go to memory where there is room, unless TMPDIR says otherwise: the catalogs, the storage and the Temporal server
 * sync every commit to files that the run throws away. (Jest's workers, and what they start, inherit TMPDIR.)
 */
function memoryTmpdir() {
  const shm = '/dev/shm';
  try {
    const { bavail, bsize } = fs.statfsSync(shm);
    if (bavail * bsize < 4 * 1024 ** 3) return undefined;
    const dir = path.join(shm, 'tablefate-tests');
    fs.mkdirSync(dir, { recursive: true });
    return dir;
  } catch {
    return undefined;
  }
}
const memory = process.env.TMPDIR ? undefined : memoryTmpdir();
if (memory) process.env.TMPDIR = memory;

/**
 * What `npm test` leaves to suites of their own, for their time, which `.ci/run` runs after it: the crash-point tests
 * (`npm run test:cluster`, jest.cluster.config.js) and the chaos runner's short forms (`npm run test:chaos`,
 * jest.chaos.config.js).
 */
const ELSEWHERE = [
  '<rootDir>/test/crash-points.test.ts',
  '<rootDir>/test/truncate-crash.test.ts',
  '<rootDir>/test/truncate-cascade-crash.test.ts',
  '<rootDir>/test/mariadb-crash.test.ts',
  '<rootDir>/test/chaos.test.ts',
];

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
      displayName: 'engine',
      testMatch: ['<rootDir>/test/engine/**/*.test.ts'],
      // The engine's workflow bundle, made once for the run (webpack takes seconds of a busy core each time).
      globalSetup: '<rootDir>/test/engine/global-setup.ts',
      globalTeardown: '<rootDir>/test/engine/global-teardown.ts',
    },
    {
      ...shared,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/**/*.test.ts'],
      // test/cluster/ is `npm run test:cluster`'s (jest.cluster.config.js), with a Temporal cluster of its own, and so are
      // the crash-point tests, which kill a worker process at each point (some 100 s of a core each run here): they run
      // there on the cluster, where the history and matching services are processes of their own. The chaos short forms
      // are `npm run test:chaos`'s.
      testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/unit/', '<rootDir>/test/engine/', '<rootDir>/test/cluster/', ...ELSEWHERE],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
  ],
  // Three files at a time, on two cores: files keep to their own task queues, namespaces and databases on the shared
  // servers, and most of a file's time is waiting on servers. Each failure more files at a time have shown was a real
  // defect that load exposed, not the files meeting: a trash handed the answer of a recalled trash (isTrashSince in
  // client/trash.ts); a reconcile survey lost with a SIGKILLed worker waited out its minute (it beats now:
  // activities/heartbeat.ts).
  maxWorkers: 3,
  testTimeout: 120000,
  verbose: true,
};
