import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Connection } from '@temporalio/client';
import { ensureNamespace as ensureServedNamespace } from '../../servers/namespaces';
import { TASK_QUEUE } from '../../domain/deployment';
import { CliProcess } from './cli';
import { testServerAddress } from './test-server';
import { waitFor } from './wait';

/** Registers a Temporal namespace of a test file's own (if it is not there yet) and waits until the server serves it. */
export async function ensureNamespace(connection: Connection, namespace: string): Promise<void> {
  await ensureServedNamespace(connection, namespace, { retentionMs: 24 * 3600 * 1000, timeoutMs: 30_000 });
}

/**
 * Starts `tablefate worker` as a child process with `env` and waits until the server sees this very process
 * polling the tablefate task queue of `env.TEMPORAL_NAMESPACE`.
 */
export async function startCliWorker(connection: Connection, env: NodeJS.ProcessEnv, options: readonly string[] = []): Promise<CliProcess> {
  const namespace = env.TEMPORAL_NAMESPACE ?? 'default';
  const worker = CliProcess.start(['worker', ...options], env);
  await waitFor(
    async () => {
      if (worker.exitStatus) {
        throw new Error(`tablefate worker exited early (${JSON.stringify(worker.exitStatus)}); stderr: ${worker.stderr}`);
      }
      const queue = await connection.workflowService.describeTaskQueue({ namespace, taskQueue: { name: TASK_QUEUE } });
      return (queue.pollers ?? []).map((p) => p.identity ?? '');
    },
    (identities) => identities.some((id) => id.startsWith(`${worker.pid}@`)),
    { timeoutMs: 90_000, intervalMs: 250, what: `tablefate worker ${worker.pid} to poll` },
  );
  return worker;
}

/**
 * A state directory of a test file's own (a temp dir named after `prefix`), and the environment its commands and its
 * `tablefate worker` run in: the shared test server, the file's Temporal `namespace`, warnings only, no reconcile
 * schedule (it would repair things under the tests, and outlive them on the shared server).
 */
export async function cliTestHome(prefix: string, namespace: string): Promise<{ home: string; env: NodeJS.ProcessEnv }> {
  const home = await fs.promises.mkdtemp(path.join(os.tmpdir(), `tablefate-${prefix}-`));
  const env = {
    ...process.env,
    TABLEFATE_HOME: home,
    TEMPORAL_ADDRESS: testServerAddress(),
    TEMPORAL_NAMESPACE: namespace,
    TABLEFATE_LOG_LEVEL: 'warn',
    TABLEFATE_RECONCILE_SECONDS: '0',
  };
  return { home, env };
}
