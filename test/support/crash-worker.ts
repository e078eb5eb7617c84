/**
 * A tablefate worker that kills itself (SIGKILL) right after the N-th call of one activity has done its work,
 * before the workflow task that asked for it can complete: the crash every step must survive, at a point a
 * test chooses. Run as a child process (`node --require tsx/cjs test/support/crash-worker.ts`) with:
 *   CRASH_HOME, CRASH_ADDRESS, CRASH_TASK_QUEUE, CRASH_BUNDLE (a workflow bundle file),
 *   CRASH_AFTER (activity name, or `catalog.<method>` for a call of the catalog's inside whatever activity makes it: a
 *   state change that rides with a shard call, say; unset: never), CRASH_ON_CALL (default 1), CRASH_FAULT (optional
 *   `op:shard:kind`),
 *   CRASH_POSTGRES_URLS (optional: the PostgreSQL storage driver on these nodes' databases, comma-separated),
 *   CRASH_MARIADB_URLS (optional: the MariaDB storage driver on these nodes' servers, comma-separated), with
 *   CRASH_AFTER_STATEMENT (optional: a pattern; the worker dies right after the CRASH_ON_CALL-th statement of a move
 *   that matches it, in the middle of the move),
 *   CRASH_NODE_WORKERS=1 (optional: each node served by a storage-node worker of its own in this process, as with
 *   `--storage remote`, rather than in the workflow task of the orchestrating worker).
 */
import path from 'node:path';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { SqliteCatalog } from '../../catalog/sqlite';
import { LocalFileStorage } from '../../storage/local-files';
import { PostgresStorage } from '../../storage/postgres';
import { MariadbStorage } from '../../storage/mariadb';
import { nodeName } from '../../storage/nodes';
import type { StorageOp } from '../../storage/faults';
import { createStorageNodeWorker, createTableFateWorker, TableFateWorker } from '../../worker/worker';
import { createLogger } from '../../worker/logger';
import type { Activities } from '../../activities';

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const home = env('CRASH_HOME');
  // Unset: a worker that only dies when killed (a deploy's old worker).
  const crashAfter = process.env.CRASH_AFTER;
  const onCall = Number(process.env.CRASH_ON_CALL ?? '1');
  const catalog = new SqliteCatalog(path.join(home, 'catalog.sqlite'));
  const files = new LocalFileStorage({ root: path.join(home, 'storage') });
  const nodesOf = (urls: string) => urls.split(',').map((url, k) => ({ node: nodeName(k), url }));
  const statement = process.env.CRASH_AFTER_STATEMENT ? new RegExp(process.env.CRASH_AFTER_STATEMENT) : undefined;
  let statements = 0;
  const afterStatement = (sql: string) => {
    if (statement?.test(sql) && ++statements === onCall) process.kill(process.pid, 'SIGKILL');
  };
  const storage = process.env.CRASH_POSTGRES_URLS
    ? new PostgresStorage(nodesOf(process.env.CRASH_POSTGRES_URLS), catalog.id)
    : process.env.CRASH_MARIADB_URLS
      ? new MariadbStorage(nodesOf(process.env.CRASH_MARIADB_URLS), catalog.id, afterStatement)
      : files;
  if (process.env.CRASH_FAULT) {
    const [op, shard, kind] = process.env.CRASH_FAULT.split(':');
    files.faults.inject({ op: op as StorageOp, shard: Number(shard), kind: kind as 'permanent' | 'transient' });
  }
  let calls = 0;
  const dieAfter =
    <A extends unknown[], R>(original: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const result = await original(...args);
      if (++calls === onCall) process.kill(process.pid, 'SIGKILL');
      return result;
    };
  const inCatalog = crashAfter?.startsWith('catalog.') ? (crashAfter.slice('catalog.'.length) as keyof SqliteCatalog) : undefined;
  if (inCatalog) {
    const methods = catalog as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const method = methods[inCatalog]!.bind(catalog);
    methods[inCatalog] = dieAfter(method);
  }
  const wrap = (activities: Activities): Activities => {
    if (!crashAfter || inCatalog) return activities;
    const wrapped: Record<string, unknown> = { ...activities };
    wrapped[crashAfter] = dieAfter(wrapped[crashAfter] as (...args: unknown[]) => Promise<unknown>);
    return wrapped as Activities;
  };
  const connection = await NativeConnection.connect({ address: env('CRASH_ADDRESS') });
  const taskQueue = env('CRASH_TASK_QUEUE');
  const nodeWorkers = process.env.CRASH_NODE_WORKERS === '1';
  const worker = await createTableFateWorker({
    connection,
    namespace: 'default',
    catalog,
    storage: nodeWorkers ? { nodes: storage.nodes } : storage,
    defaultRetentionSeconds: 3600,
    logger: createLogger('error'),
    taskQueue,
    workflowBundle: { codePath: env('CRASH_BUNDLE') },
    wrapActivities: wrap,
    storageDriver: process.env.CRASH_POSTGRES_URLS ? 'postgres' : 'files',
  });
  const nodes = nodeWorkers
    ? await Promise.all(
        files.nodes.map((node) =>
          createStorageNodeWorker({
            connection,
            namespace: 'default',
            catalog,
            storage: new LocalFileStorage({ root: files.root, nodes: [node] }),
            node,
            logger: createLogger('error'),
            taskQueue,
            wrapActivities: wrap,
          }),
        ),
      )
    : [];
  process.stdout.write('ready\n');
  await new TableFateWorker([...worker.workers, ...nodes.flatMap((n) => n.workers)]).run();
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exit(1);
});
