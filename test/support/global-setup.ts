import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { DevServer } from '../../servers/dev-server';
import { TemporalCluster } from '../../servers/cluster';
import { findTemporalCli } from '../../servers/go-tools';
import { WORKFLOW_BUNDLE_ENV, WORKFLOW_CODE } from '../../worker/workflow-bundle';
import { SHARED_POSTGRES_ENV, startPostgres, type TestPostgres } from './postgres';
import { quietBundlerLogger } from './quiet-bundler';

/** What global-teardown.ts needs; kept on globalThis, which jest shares between global setup and teardown. */
export interface GlobalTestServer {
  /** Stops the Temporal server (or cluster) and PostgreSQL. */
  stop(): Promise<void>;
  tempDir: string;
}

export const GLOBAL_KEY = '__tablefateTestServer';

export function globalTestServer(): GlobalTestServer | undefined {
  return (globalThis as Record<string, unknown>)[GLOBAL_KEY] as GlobalTestServer | undefined;
}

/** The project's state dir, so the cached Temporal binaries (or a build of them) are reused across runs. */
const PROJECT_STATE_DIR = path.resolve(__dirname, '../../.tablefate');

/** A Temporal server for the run, on the run's PostgreSQL if it needs one: its address and how to stop it. */
type StartTemporal = (tempDir: string, postgres: Promise<TestPostgres>) => Promise<{ address: string; stop: () => Promise<void> }>;

/**
 * What every integration test file shares, started once for the run (the unit project starts nothing): a headless
 * Temporal dev server on a fresh db, a PostgreSQL server (each file makes databases of its own on it), and the
 * workflow bundle, written to a file that every harness and every worker process the tests start loads instead of
 * bundling again (webpack takes seconds of a busy core each time). The three start side by side.
 */
export default function globalSetup(): Promise<void> {
  return setUpShared(async (tempDir) => {
    const cli = await findTemporalCli({ stateDir: PROJECT_STATE_DIR });
    process.env.TEMPORAL_CLI_PATH = cli;
    const server = await DevServer.start({ stateDir: tempDir, cliPath: cli, headless: true, namespace: 'default' });
    return { address: server.address, stop: () => server.stop() };
  });
}

/**
 * The same for `npm run test:cluster` (jest.cluster.config.js), with a Temporal cluster instead of the dev server, as
 * `tablefate cluster up` makes it: frontend, two history processes, matching and worker, on the run's PostgreSQL.
 */
export function clusterSetup(): Promise<void> {
  return setUpShared(async (tempDir, postgres) => {
    process.env.TEMPORAL_CLI_PATH = await findTemporalCli({ stateDir: PROJECT_STATE_DIR });
    const cluster = await TemporalCluster.up({
      stateDir: path.join(tempDir, 'temporal'),
      toolDir: PROJECT_STATE_DIR,
      postgresUrl: (await postgres).url,
      headless: true,
      historyProcesses: 2,
      log: () => undefined,
    });
    return { address: cluster.address, stop: () => cluster.down() };
  });
}

async function setUpShared(startTemporal: StartTemporal): Promise<void> {
  const tempDir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-test-'));
  const bundleFile = path.join(tempDir, 'workflows.js');
  const postgresStarting = startPostgres();
  const started = await Promise.allSettled([
    startTemporal(tempDir, postgresStarting),
    postgresStarting,
    bundleWorkflowCode({ ...WORKFLOW_CODE, logger: quietBundlerLogger }).then((bundle) => fs.promises.writeFile(bundleFile, bundle.code)),
  ]);
  const [serverStart, postgresStart, bundled] = started;
  if (serverStart.status === 'rejected' || postgresStart.status === 'rejected' || bundled.status === 'rejected') {
    // Leave nothing running behind a failed setup (jest runs no teardown then).
    if (serverStart.status === 'fulfilled') await serverStart.value.stop().catch(() => undefined);
    if (postgresStart.status === 'fulfilled') await postgresStart.value.stop().catch(() => undefined);
    await fs.promises.rm(tempDir, { recursive: true, force: true });
    throw [serverStart, postgresStart, bundled].flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []))[0];
  }
  const server = serverStart.value;
  const postgres = postgresStart.value;
  const stop = async () => {
    // The server first: a cluster's databases are on this PostgreSQL.
    await server.stop();
    await postgres.stop();
  };
  (globalThis as Record<string, unknown>)[GLOBAL_KEY] = { stop, tempDir } satisfies GlobalTestServer;

  // Jest's workers, and the processes the tests start with the environment, inherit these.
  process.env.TEMPORAL_ADDRESS = server.address;
  process.env.TEMPORAL_NAMESPACE = 'default';
  process.env[SHARED_POSTGRES_ENV] = postgres.url;
  process.env[WORKFLOW_BUNDLE_ENV] = bundleFile;
}
