import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, type Activities } from '../activities';
import type { Catalog } from '../catalog/catalog';
import type { StorageDriver } from '../storage/driver';
import { TASK_QUEUE } from './config';
import type { Logger } from './logger';

export interface TableFateWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  catalog: Catalog;
  storage: StorageDriver;
  defaultRetentionSeconds: number;
  logger: Logger;
  taskQueue?: string;
  /** Called after a fatal storage error, once the worker has begun to stop (the CLI sets the exit code). */
  onFatal?: (err: Error) => void;
  /** How many attempts a transient storage fault gets before the step fails. */
  storageRetryAttempts?: number;
  /** How long an orphan set is left alone before the reconciler collects it. */
  orphanGraceSeconds?: number;
  /** The worker's clock (tests skew it: table times must not depend on it). */
  now?: () => number;
  /**
   * Wraps the activities before the worker runs them: tests use it to run every call twice (each must be
   * idempotent) or to kill the process at a chosen point.
   */
  wrapActivities?: (activities: Activities) => Activities;
  /** A prebuilt workflow bundle (tests build it once per file); otherwise the workflows are bundled here. */
  workflowBundle?: WorkerOptions['workflowBundle'];
}

/**
 * A worker that runs tablefate's workflows and activities. If storage reports that a set of files could be
 * neither renamed nor put back, the worker stops at once rather than act on damaged data.
 */
/**
 * How long the catalog keeps the journal of a run's calls. A run needs its entries until it has closed; a
 * workflow task lost longer ago than this (every worker down for a month) finds no entry and, no longer
 * holding its lock, stops without touching anything.
 */
const JOURNAL_KEEP_MS = 30 * 24 * 3600 * 1000;

export async function createTableFateWorker(opts: TableFateWorkerOptions): Promise<Worker> {
  const pruned = await opts.catalog.pruneJournal(Date.now() - JOURNAL_KEEP_MS);
  if (pruned > 0) opts.logger.info({ pruned }, 'pruned old catalog journal entries');
  let stopWorker = () => undefined as void;
  const activities = createActivities({
    catalog: opts.catalog,
    storage: opts.storage,
    defaultRetentionSeconds: opts.defaultRetentionSeconds,
    now: opts.now,
    storageRetryAttempts: opts.storageRetryAttempts,
    orphanGraceSeconds: opts.orphanGraceSeconds,
    onFatal: (err) => {
      opts.logger.fatal({ err }, 'storage is in an unknown state; stopping the worker');
      stopWorker();
      opts.onFatal?.(err);
    },
  });
  const worker = await Worker.create({
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue ?? TASK_QUEUE,
    activities: opts.wrapActivities ? opts.wrapActivities(activities) : activities,
    ...(opts.workflowBundle
      ? { workflowBundle: opts.workflowBundle }
      : { workflowsPath: require.resolve('../workflows') }),
  });
  stopWorker = () => {
    if (worker.getState() === 'RUNNING') worker.shutdown();
  };
  return worker;
}
