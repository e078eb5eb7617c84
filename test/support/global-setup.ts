import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { DevServer } from '../../worker/dev-server';
import { findTemporalCli } from '../../worker/go-tools';
import { WORKFLOW_BUNDLE_ENV, WORKFLOW_CODE } from '../../worker/workflow-bundle';
import { SHARED_POSTGRES_ENV, startPostgres, type TestPostgres } from './postgres';
import { quietBundlerLogger } from './quiet-bundler';

/** What global-teardown.ts needs; kept on globalThis, which jest shares between global setup and teardown. */
export interface GlobalTestServer {
  server: DevServer;
  postgres: TestPostgres;
  tempDir: string;
}

export const GLOBAL_KEY = '__tablefateTestServer';

export function globalTestServer(): GlobalTestServer | undefined {
  return (globalThis as Record<string, unknown>)[GLOBAL_KEY] as GlobalTestServer | undefined;
}

/**
 * What every integration test file shares, started once for the run (the unit project starts nothing): a headless
 * Temporal dev server on a fresh db, a PostgreSQL server (each file makes databases of its own on it), and the
 * workflow bundle, written to a file that every harness and every worker process the tests start loads instead of
 * bundling again (webpack takes seconds of a busy core each time). The three start side by side.
 */
export default async function globalSetup(): Promise<void> {
  // The project's state dir, so the cached CLI binary (or a build of it) is reused across runs.
  const projectStateDir = path.resolve(__dirname, '../../.tablefate');
  const tempDir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-test-'));
  const bundleFile = path.join(tempDir, 'workflows.js');

  const started = await Promise.allSettled([
    findTemporalCli({ stateDir: projectStateDir }).then((cli) => {
      process.env.TEMPORAL_CLI_PATH = cli;
      return DevServer.start({ stateDir: tempDir, cliPath: cli, headless: true, namespace: 'default' });
    }),
    startPostgres(),
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
  (globalThis as Record<string, unknown>)[GLOBAL_KEY] = { server, postgres, tempDir } satisfies GlobalTestServer;

  // Jest's workers, and the processes the tests start with the environment, inherit these.
  process.env.TEMPORAL_ADDRESS = server.address;
  process.env.TEMPORAL_NAMESPACE = 'default';
  process.env[SHARED_POSTGRES_ENV] = postgres.url;
  process.env[WORKFLOW_BUNDLE_ENV] = bundleFile;
}
