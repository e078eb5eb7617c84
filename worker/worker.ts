import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities } from '../activities';
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
  /** A prebuilt workflow bundle (tests build it once per file); otherwise the workflows are bundled here. */
  workflowBundle?: WorkerOptions['workflowBundle'];
}

/**
 * A worker that runs tablefate's workflows and activities. If storage reports that a set of files could be
 * neither renamed nor put back, the worker stops at once rather than act on damaged data.
 */
export async function createTableFateWorker(opts: TableFateWorkerOptions): Promise<Worker> {
  let stopWorker = () => undefined as void;
  const activities = createActivities({
    catalog: opts.catalog,
    storage: opts.storage,
    defaultRetentionSeconds: opts.defaultRetentionSeconds,
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
    activities,
    ...(opts.workflowBundle
      ? { workflowBundle: opts.workflowBundle }
      : { workflowsPath: require.resolve('../workflows') }),
  });
  stopWorker = () => {
    if (worker.getState() === 'RUNNING') worker.shutdown();
  };
  return worker;
}
