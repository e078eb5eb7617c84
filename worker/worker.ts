import { OPERATION_STEPS } from '../workflows/operations';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createActivities, createStorageActivities, STORAGE_ACTIVITY_NAMES, type Activities, type StepParts } from '../activities';
import type { Catalog } from '../catalog/catalog';
import { storageQueue } from '../domain/operations';
import type { FatalStorageError, StorageDriver } from '../storage/driver';
import { TASK_QUEUE } from './config';
import { DEFAULT_WORKFLOW_CACHE } from '../domain/limits';
import type { Logger } from './logger';
import { WORKFLOW_CODE } from './workflow-bundle';
import { activityLogFields } from './telemetry';
import { createContractActivities } from '../contract/activities';
import { tablefateServiceHandler } from '../contract/nexus';
import type { StorageDriverName } from '../domain/deployment';
import { Client } from '@temporalio/client';
import { contractClient } from '../contract/sdk';
import { SqlDoor } from './sql-door';
import { PostgresStorage } from '../storage/postgres';

export interface TableFateWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  catalog: Catalog;
  /**
   * The storage nodes served in this process (every one, from local directories), or, with `nodes` instead, none:
   * each node's own worker serves it (`tablefate storage-node`).
   */
  storage: StorageDriver | { nodes: readonly string[] };
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
  /** Wraps the parts the executor's steps are made of (test/engine/: to record each part, fail it, or run it twice). */
  wrapStepParts?: (parts: StepParts) => StepParts;
  /** A prebuilt workflow bundle (tests build it once per file); otherwise the workflows are bundled here. */
  workflowBundle?: WorkerOptions['workflowBundle'];
  /** How many workflow runs the worker keeps in memory between their tasks (DEFAULT_WORKFLOW_CACHE, TABLEFATE_WORKFLOW_CACHE). */
  maxCachedWorkflows?: number;
  /** The deployment's storage driver (TABLEFATE_STORAGE_DRIVER): what the contract's calls may ask for (columns, adopt). */
  storageDriver: StorageDriverName;
}

/**
 * The Temporal workers of one process, run and stopped together: an orchestrating worker polls the deployment's
 * queue, a storage node's worker the node's own queue.
 */
export class TableFateWorker {
  /** `beside`: what runs as long as the workers do (the SQL doors of the nodes served here). */
  constructor(
    readonly workers: readonly Worker[],
    private readonly beside: ReadonlyArray<{ start(): Promise<void>; stop(): Promise<void> }> = [],
  ) {}

  /** Runs every worker until all have stopped; the first to stop for good (a fatal error) stops the others. */
  async run(): Promise<void> {
    const results = await Promise.allSettled([
      ...this.workers.map((w) => w.run().finally(() => this.shutdown())),
      ...this.beside.map((service) => service.start()),
    ]);
    await Promise.allSettled(this.beside.map((service) => service.stop()));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  shutdown(): void {
    for (const worker of this.workers) if (worker.getState() === 'RUNNING') worker.shutdown();
  }

  getState(): ReturnType<Worker['getState']> {
    return this.workers[0]!.getState();
  }

  /**
   * Resolves once the server lists each of this process's workers among its queue's pollers (DescribeTaskQueue, the
   * question a client asks before it starts anything): from then on a command typed finds a worker. Each queue is
   * asked for the kind of task it serves: workflow tasks on the orchestrating queue, activity tasks on a node's.
   * Gives up (false) once `stopped` settles or the worker stops.
   */
  async untilPolling(stopped: Promise<unknown>): Promise<boolean> {
    let over = false;
    void stopped.finally(() => (over = true));
    for (const worker of this.workers) {
      const { connection, namespace, taskQueue, identity } = worker.options;
      const kind = worker.options.workflowBundle || worker.options.workflowsPath ? TASK_QUEUE_TYPE.workflow : TASK_QUEUE_TYPE.activity;
      for (;;) {
        if (over || !['INITIALIZED', 'RUNNING'].includes(worker.getState())) return false;
        const queue = await connection!.workflowService
          .describeTaskQueue({ namespace, taskQueue: { name: taskQueue }, taskQueueType: kind })
          .catch(() => undefined);
        if (queue?.pollers?.some((p) => p.identity === identity)) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    return true;
  }
}

/** Temporal's TaskQueueType values (temporal.api.enums.v1): which pollers DescribeTaskQueue lists. */
const TASK_QUEUE_TYPE = { workflow: 1, activity: 2 } as const;

/**
 * How long the catalog keeps the journal of a run's calls. A run needs its entries until it has closed; a
 * workflow task lost longer ago than this (every worker down for a month) finds no entry and, no longer
 * holding its lock, stops without touching anything.
 */
const JOURNAL_KEEP_MS = 30 * 24 * 3600 * 1000;

/**
 * What a storage node's worker sets beside its queue: heartbeats go out at least every second, so that a cancel
 * request (which comes back with a heartbeat) stops a long shard change within about a second, not within 80 % of
 * its heartbeat timeout; the change's compensation waits for that.
 */
const STORAGE_WORKER_OPTIONS = { maxHeartbeatThrottleInterval: '1 second' } as const;

const isLocal = (storage: TableFateWorkerOptions['storage']): storage is StorageDriver => 'createShard' in storage;

function pick<T extends object>(from: T, names: readonly string[], keep: boolean): Partial<T> {
  return Object.fromEntries(Object.entries(from).filter(([name]) => names.includes(name) === keep)) as Partial<T>;
}

/**
 * An orchestrating worker: runs tablefate's workflows and the catalog's activities. With local storage it also
 * serves every node's queue in this process. If storage reports that a set of files could be neither renamed nor
 * put back, every worker of the process stops at once rather than act on damaged data.
 */
export async function createTableFateWorker(opts: TableFateWorkerOptions): Promise<TableFateWorker> {
  const pruned = await opts.catalog.pruneJournal(Date.now() - JOURNAL_KEEP_MS);
  if (pruned > 0) opts.logger.info({ pruned }, 'pruned old catalog journal entries');
  // Expired leases block nothing; a day after they expired they are forgotten (a lease's holder may still ask after it).
  const leases = await opts.catalog.pruneLeases(Date.now() - 24 * 3600_000);
  if (leases > 0) opts.logger.info({ leases }, 'forgot leases that expired over a day ago');
  const taskQueue = opts.taskQueue ?? TASK_QUEUE;
  let stop = () => undefined as void;
  const onFatal = (err: FatalStorageError) => {
    opts.logger.fatal({ err }, 'storage is in an unknown state; stopping the worker');
    stop();
    opts.onFatal?.(err);
  };
  const local = isLocal(opts.storage) ? opts.storage : undefined;
  const orchestration = createActivities({
    catalog: opts.catalog,
    operations: OPERATION_STEPS,
    nodes: opts.storage.nodes,
    ...(local ? { storage: local } : {}),
    storageRetryAttempts: opts.storageRetryAttempts,
    defaultRetentionSeconds: opts.defaultRetentionSeconds,
    now: opts.now,
    onFatal,
    wrapStepParts: opts.wrapStepParts,
  });
  const storageActivities = local
    ? createStorageActivities({
        catalog: opts.catalog,
        storage: local,
        storageRetryAttempts: opts.storageRetryAttempts,
        orphanGraceSeconds: opts.orphanGraceSeconds,
        onFatal,
      })
    : undefined;
  const all = { ...orchestration, ...storageActivities } as Activities;
  const activities = opts.wrapActivities ? opts.wrapActivities(all) : all;
  // The contract's calls (workflows/contract.ts): the SDK's own, run here for services in other languages.
  const contractDeps = { catalog: opts.catalog, taskQueue, storageDriver: opts.storageDriver } as const;
  const contract = createContractActivities(contractDeps);
  const common = { connection: opts.connection, namespace: opts.namespace, interceptors: { activity: [activityLogFields] } };
  const workers = [
    await Worker.create({
      ...common,
      taskQueue,
      maxCachedWorkflows: opts.maxCachedWorkflows ?? DEFAULT_WORKFLOW_CACHE,
      activities: { ...pick(activities, STORAGE_ACTIVITY_NAMES, false), ...contract },
      // The same calls as the Nexus service `tablefate`, for workflows that reach this queue through an endpoint.
      nexusServices: [tablefateServiceHandler(contractDeps)],
      ...(opts.workflowBundle
        ? { workflowBundle: opts.workflowBundle }
        : {
            workflowsPath: WORKFLOW_CODE.workflowsPath,
            interceptors: { ...common.interceptors, workflowModules: WORKFLOW_CODE.workflowInterceptorModules },
          }),
    }),
  ];
  if (local) {
    const storageOnly = pick(activities, STORAGE_ACTIVITY_NAMES, true);
    for (const node of local.nodes) {
      workers.push(
        await Worker.create({ ...common, ...STORAGE_WORKER_OPTIONS, taskQueue: storageQueue(taskQueue, node), activities: storageOnly }),
      );
    }
  }
  const group = new TableFateWorker(workers, sqlDoors(opts, opts.storage, taskQueue));
  stop = () => group.shutdown();
  return group;
}

/**
 * The SQL door of each PostgreSQL node served here (worker/sql-door.ts), taking requests as this process's SDK: in an
 * orchestrating worker with the nodes in-process, and in each node's own worker (`tablefate storage-node`).
 */
function sqlDoors(
  opts: Pick<TableFateWorkerOptions, 'connection' | 'namespace' | 'catalog' | 'logger' | 'storageDriver'>,
  storage: unknown,
  taskQueue: string,
): SqlDoor[] {
  if (!(storage instanceof PostgresStorage)) return [];
  const client = new Client({ connection: opts.connection, namespace: opts.namespace });
  const callerFor = (identity: string) =>
    contractClient({ catalog: opts.catalog, taskQueue, storageDriver: opts.storageDriver }, client, identity);
  return storage.urls.map(
    ({ node, url }) =>
      new SqlDoor({
        node,
        url,
        catalogId: opts.catalog.id,
        callerFor,
        logger: opts.logger,
        tableOf: async (tableId) => (await opts.catalog.getTable(tableId)) ?? null,
        prepare: () => storage.prepareNode(node),
      }),
  );
}

export interface StorageNodeWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  catalog: Catalog;
  /** The driver of this node alone. */
  storage: StorageDriver;
  node: string;
  logger: Logger;
  taskQueue?: string;
  onFatal?: (err: Error) => void;
  storageRetryAttempts?: number;
  orphanGraceSeconds?: number;
  wrapActivities?: (activities: Activities) => Activities;
}

/** A storage node's worker: serves its node's queue only, with the storage activities only. */
export async function createStorageNodeWorker(opts: StorageNodeWorkerOptions): Promise<TableFateWorker> {
  let stop = () => undefined as void;
  const activities = createStorageActivities({
    catalog: opts.catalog,
    storage: opts.storage,
    storageRetryAttempts: opts.storageRetryAttempts,
    orphanGraceSeconds: opts.orphanGraceSeconds,
    onFatal: (err) => {
      opts.logger.fatal({ err, node: opts.node }, 'storage is in an unknown state; stopping the storage node');
      stop();
      opts.onFatal?.(err);
    },
  });
  const wrapped = opts.wrapActivities ? opts.wrapActivities(activities as Activities) : activities;
  const worker = await Worker.create({
    connection: opts.connection,
    namespace: opts.namespace,
    ...STORAGE_WORKER_OPTIONS,
    interceptors: { activity: [activityLogFields] },
    taskQueue: storageQueue(opts.taskQueue ?? TASK_QUEUE, opts.node),
    activities: pick(wrapped, STORAGE_ACTIVITY_NAMES, true),
  });
  const group = new TableFateWorker([worker], sqlDoors({ ...opts, storageDriver: 'postgres' }, opts.storage, opts.taskQueue ?? TASK_QUEUE));
  stop = () => group.shutdown();
  return group;
}
