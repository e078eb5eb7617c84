import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { SqliteCatalog } from '../../catalog/sqlite';
import { PostgresCatalog } from '../../catalog/postgres';
import type { Catalog } from '../../catalog/catalog';
import { catalogPath } from '../../domain/deployment';
import { LocalFileStorage } from '../../storage/local-files';
import type { RenameOps } from '../../storage/rename-set';
import type { ShardReport, StorageDriver } from '../../storage/driver';
import { PostgresStorage } from '../../storage/postgres';
import { MariadbStorage } from '../../storage/mariadb';
import { nodeName } from '../../storage/nodes';
import type { TableInfo } from '../../domain/table';
import type { Backoff, LockWaitPolicy } from '../../domain/backoff';
import type { ReconcileInput, ReconcileReport } from '../../domain/health';
import type { reconcileTables } from '../../workflows';
import { TableFateClient } from '../../client/client';
import { createStorageNodeWorker, createTableFateWorker, type TableFateWorker } from '../../worker/worker';
import type { Activities } from '../../activities';
import { createLogger } from '../../worker/logger';
import { WORKFLOW_BUNDLE_ENV, WORKFLOW_CODE } from '../../worker/workflow-bundle';
import { quietBundlerLogger } from './quiet-bundler';
import { taskTimeoutInterceptor } from './task-timeout';
import { testNamespace, testServerAddress } from './test-server';

// Expected failures (TableExists, NameTaken, ...) are what these tests provoke; only errors are worth showing.
Runtime.install({ logger: new DefaultLogger('ERROR') });

/** The bundled code (a worker takes it as `workflowBundle`; replays too). */
type WorkflowBundle = { code: string };
let bundle: Promise<WorkflowBundle> | undefined;

/**
 * The file of today's workflow bundle, for a worker in a child process: the one jest's global setup built for the
 * run (webpack is the slow part of starting a worker), or, outside jest, one bundled now into a temp file.
 */
export async function workflowBundleFile(): Promise<string> {
  const built = process.env[WORKFLOW_BUNDLE_ENV];
  if (built) return built;
  const file = path.join(await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-bundle-')), 'workflows.js');
  await fs.promises.writeFile(file, (await workflowBundle()).code);
  return file;
}

/** Today's workflow bundle: the run's (see workflowBundleFile), read once per test file; outside jest, bundled once. */
export function workflowBundle(): Promise<WorkflowBundle> {
  const built = process.env[WORKFLOW_BUNDLE_ENV];
  bundle ??= built
    ? fs.promises.readFile(built, 'utf8').then((code) => ({ code }))
    : bundleWorkflowCode({ ...WORKFLOW_CODE, logger: quietBundlerLogger });
  return bundle;
}

export interface HarnessOptions {
  /** The server to use; the shared test server by default. */
  address?: string;
  /** An existing state directory (to carry a table across a server restart); a new temp one by default. */
  home?: string;
  taskQueue?: string;
  startWorker?: boolean;
  /** Storage's file renames, to make them fail (see storage/rename-set.ts). */
  renameOps?: RenameOps;
  /** Run every activity call twice, each time it is called (Accumulo's FlakyFate): all must be idempotent. */
  everyCallTwice?: boolean;
  /** A clock for the worker's activities other than the real one (workflow time must not depend on it). */
  activityClock?: () => number;
  /** How the client's operations wait for a busy table (DEFAULT_LOCK_WAIT when absent). */
  lockWait?: LockWaitPolicy;
  /** How the client's trashes retry a purge at expiry that fails (DEFAULT_EXPIRY_RETRY when absent). */
  expiryRetry?: Backoff;
  /** How long the reconciler leaves an orphan set alone (the worker's default, an hour, when absent). */
  orphanGraceSeconds?: number;
  /**
   * `local` (default): the worker serves every storage node in-process. `remote`: it serves none, and each node
   * has a storage-node worker of its own (startNode, stopNode), as `tablefate storage-node` runs it.
   */
  storage?: 'local' | 'remote';
  /** A PostgreSQL catalog (a database the test made) instead of the SQLite file under the state directory. */
  catalogUrl?: string;
  /**
   * The PostgreSQL storage driver instead of files: each node's database url, node-0 first (the worker serves them
   * all in-process; `storage` must stay `local`).
   */
  postgresNodes?: string[];
  /** The MariaDB storage driver instead of files: each node's server url, node-0 first (in-process, as postgresNodes). */
  mariadbNodes?: string[];
  /**
   * The workflow task timeout, in ms, of every workflow this harness's clients start (the server's 10 s when
   * absent): for tests that wait for a task to expire or to hand over. Changeable later: `workflowTaskTimeoutMs`.
   */
  workflowTaskTimeoutMs?: number;
}

/** The storage driver a harness's worker and clients serve. */
const driverOf = (opts: HarnessOptions) => (opts.postgresNodes ? 'postgres' : opts.mariadbNodes ? 'mariadb' : 'files');

/** Each activity does its work twice and answers the second time: what a retry after a lost answer does. */
function twice(activities: Activities): Activities {
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(activities) as Array<[string, (...args: unknown[]) => Promise<unknown>]>) {
    wrapped[name] = async (...args: unknown[]) => {
      await fn(...args);
      return fn(...args);
    };
  }
  return wrapped as Activities;
}

/**
 * Everything a test of the product needs, real: a state directory with a SQLite catalog (or a PostgreSQL one) and storage nodes
 * on disk, a worker polling a task queue of its own on a real dev server, and the SDK client.
 */
export class Harness {
  worker: TableFateWorker | undefined;
  /** Fatal errors the worker stopped for. */
  readonly fatalErrors: Error[] = [];
  private running: Promise<void> | undefined;
  /** The storage-node workers running (remote storage only), by node. */
  private readonly nodeWorkers = new Map<string, { worker: TableFateWorker; running: Promise<void> }>();
  /** The workflow task timeout of the workflows this harness's clients start from now on (HarnessOptions). */
  workflowTaskTimeoutMs: number | undefined;
  readonly client: TableFateClient;
  /** The storage driver the worker serves: `storage`'s files, or PostgreSQL (HarnessOptions.postgresNodes). */
  readonly driver: StorageDriver;

  private constructor(
    readonly home: string,
    readonly address: string,
    readonly taskQueue: string,
    readonly catalog: Catalog,
    readonly storage: LocalFileStorage,
    readonly connection: Connection,
    private readonly ownsHome: boolean,
    private readonly opts: HarnessOptions,
  ) {
    this.workflowTaskTimeoutMs = opts.workflowTaskTimeoutMs;
    const nodesOf = (urls: string[]) => urls.map((url, i) => ({ node: nodeName(i), url }));
    this.driver = opts.postgresNodes
      ? new PostgresStorage(nodesOf(opts.postgresNodes), catalog.id)
      : opts.mariadbNodes
        ? new MariadbStorage(nodesOf(opts.mariadbNodes), catalog.id)
        : storage;
    this.client = new TableFateClient({
      client: this.temporalClient(connection),
      catalog,
      taskQueue,
      lockWait: opts.lockWait,
      expiryRetry: opts.expiryRetry,
      storageDriver: driverOf(opts),
    });
  }

  get temporal(): Client {
    return this.temporalClient(this.connection);
  }

  /** A Temporal client on `connection` whose starts carry this harness's workflow task timeout. */
  private temporalClient(connection: Connection): Client {
    const interceptors = { workflow: [taskTimeoutInterceptor(() => this.workflowTaskTimeoutMs)] };
    return new Client({ connection, namespace: testNamespace(), interceptors });
  }

  static async start(opts: HarnessOptions = {}): Promise<Harness> {
    const home = opts.home ?? (await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-home-')));
    const address = opts.address ?? testServerAddress();
    const taskQueue = opts.taskQueue ?? `tablefate-test-${randomUUID()}`;
    // Test files share one Temporal namespace, and workflow ids derive from table ids (trash:<id>): give each
    // catalog its own id range so that two files never address the same workflow.
    const firstTableId = 1000 * Math.floor(1 + Math.random() * 1_000_000);
    const catalog = opts.catalogUrl
      ? await PostgresCatalog.open(opts.catalogUrl, { firstTableId })
      : new SqliteCatalog(catalogPath(home), { firstTableId });
    const storage = new LocalFileStorage({ root: path.join(home, 'storage'), renameOps: opts.renameOps });
    const connection = await Connection.connect({ address });
    const harness = new Harness(home, address, taskQueue, catalog, storage, connection, !opts.home, opts);
    if (opts.startWorker ?? true) {
      await harness.startWorker();
      if (opts.storage === 'remote') for (const node of storage.nodes) await harness.startNode(node);
    }
    return harness;
  }

  /**
   * Starts the worker, on today's workflow code or on `workflows`, the frozen code of an earlier release
   * (released-workflows.ts): a run started on one and finished on the other is what a deploy does to it. With
   * `storage`, another storage mode than the harness was started with (a deploy that moves the nodes out).
   */
  async startWorker(opts: { workflows?: { code: string }; storage?: HarnessOptions['storage'] } = {}): Promise<void> {
    if (this.worker) return;
    const connection = await NativeConnection.connect({ address: this.address });
    const worker = await createTableFateWorker({
      connection,
      namespace: testNamespace(),
      catalog: this.catalog,
      storage: (opts.storage ?? this.opts.storage) === 'remote' ? { nodes: this.driver.nodes } : this.driver,
      defaultRetentionSeconds: 7 * 24 * 3600,
      logger: createLogger('warn'),
      taskQueue: this.taskQueue,
      workflowBundle: opts.workflows ?? (await workflowBundle()),
      onFatal: (err) => this.fatalErrors.push(err),
      now: this.opts.activityClock,
      orphanGraceSeconds: this.opts.orphanGraceSeconds,
      wrapActivities: this.opts.everyCallTwice ? twice : undefined,
      storageDriver: driverOf(this.opts),
    });
    this.worker = worker;
    this.running = worker.run().finally(() => connection.close());
  }

  /** Resolves when the worker has stopped by itself (after a fatal error). */
  async workerStopped(): Promise<void> {
    await this.running;
    this.worker = undefined;
    this.running = undefined;
  }

  async stopWorker(): Promise<void> {
    if (!this.worker) return;
    this.worker.shutdown();
    await this.running;
    this.worker = undefined;
    this.running = undefined;
  }

  /** Starts the worker of one storage node (remote storage): it serves that node's directory alone. */
  async startNode(node: string): Promise<void> {
    if (this.nodeWorkers.has(node)) return;
    const connection = await NativeConnection.connect({ address: this.address });
    const worker = await createStorageNodeWorker({
      connection,
      namespace: testNamespace(),
      catalog: this.catalog,
      storage: new LocalFileStorage({ root: this.storage.root, nodes: [node], renameOps: this.opts.renameOps }),
      node,
      logger: createLogger('warn'),
      taskQueue: this.taskQueue,
      orphanGraceSeconds: this.opts.orphanGraceSeconds,
      onFatal: (err) => this.fatalErrors.push(err),
    });
    this.nodeWorkers.set(node, { worker, running: worker.run().finally(() => connection.close()) });
  }

  /** Resolves when the worker of `node` has stopped by itself (after a fatal error). */
  async nodeStopped(node: string): Promise<void> {
    const entry = this.nodeWorkers.get(node);
    if (!entry) return;
    await entry.running;
    this.nodeWorkers.delete(node);
  }

  /** Stops the worker of one storage node, as if its host went down: its queue keeps what is sent to it. */
  async stopNode(node: string): Promise<void> {
    const entry = this.nodeWorkers.get(node);
    if (!entry) return;
    this.nodeWorkers.delete(node);
    entry.worker.shutdown();
    await entry.running;
  }

  /** Runs one reconcile pass on this harness's worker, as the schedule would (or, with `report`, as the doctor does). */
  reconcile(mode: ReconcileInput['mode'] = 'repair'): Promise<ReconcileReport> {
    return this.temporal.workflow.execute<typeof reconcileTables>('reconcileTables', {
      workflowId: `reconcile@${this.catalog.id}-${randomUUID()}`,
      taskQueue: this.taskQueue,
      args: [{ catalogId: this.catalog.id, mode }],
    });
  }

  /** What the storage driver reports for every shard of a table (area, size, checksum), in shard order. */
  shardReports(table: TableInfo): Promise<ShardReport[]> {
    return Promise.all(table.placement.map((p) => this.driver.inspect({ tableId: table.id, ...p })));
  }

  /** Where each shard of a table is: live, trash, garbage, or null (gone). */
  async shardAreas(table: TableInfo): Promise<Array<ShardReport['area']>> {
    return (await this.shardReports(table)).map((report) => report.area);
  }

  async close(): Promise<void> {
    await this.stopWorker();
    for (const node of [...this.nodeWorkers.keys()]) await this.stopNode(node);
    await this.connection.close();
    await this.catalog.close();
    if (this.driver instanceof PostgresStorage || this.driver instanceof MariadbStorage) await this.driver.close();
    if (this.ownsHome) await fs.promises.rm(this.home, { recursive: true, force: true });
  }
}
