import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { TemporalSecurity } from '../config/connection';
import { NativeConnection } from '@temporalio/worker';
import { catalogLocation, describeLocation, openCatalog, type CatalogLocation } from '../catalog/open';
import type { Catalog } from '../catalog/catalog';
import { LocalFileStorage } from '../storage/local-files';
import { PostgresStorage } from '../storage/postgres';
import { MariadbStorage } from '../storage/mariadb';
import type { StorageDriver } from '../storage/driver';
import { assertNodesHoldAllShards, byNodeNumber, nodeName, nodeNumber } from '../storage/nodes';
import { statePaths, TASK_QUEUE, type Config } from './config';
import { ensureReconcileSchedule, reconcileScheduleId, removeReconcileSchedule } from './reconcile-schedule';
import { DevServer } from '../servers/dev-server';
import { registerSearchAttributes } from '../servers/search-attributes';
import { createLogger, type Logger } from './logger';
import { installRuntime } from './telemetry';
import { startCatalogGauges, startTrashBytesGauge } from './gauges';
import { createStorageNodeWorker, createTableFateWorker, type TableFateWorker } from './worker';
import { withWorkflowBundle } from './workflow-bundle';
import { InvalidInputError } from '../domain/errors';
import { redactUrl, type StorageDriverName } from '../domain/deployment';
import { storageQueue } from '../domain/operations';
import { catalogNotReady, temporalNotUp, untilAvailable } from './waiting';

/** Resolves on the first Ctrl-C or SIGTERM. */
function untilInterrupted(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
}

/** A Temporal server to connect to: its address, and TLS and API key for a secured one (secrets: never logged). */
type TemporalServer = { address: string } & TemporalSecurity;

/** EX_SOFTWARE: after a fatal storage error. A supervisor must not restart blindly; an operator looks first. */
export const EXIT_FATAL = 70;

/**
 * Refuses a storage configuration that would strand shards: a node directory beyond TABLEFATE_STORAGE_NODES
 * that still holds shard files.
 */
async function checkStorageNodes(config: Config): Promise<void> {
  await assertNodesHoldAllShards(statePaths(config.home).storage, config.storageNodes);
}

/**
 * With remote storage the nodes' files are out of reach, so the catalog says which nodes hold shards: a node
 * count that leaves a table's shards beyond it is refused, as the local check refuses stranded files.
 */
async function checkPlacements(catalog: Catalog, config: Config): Promise<void> {
  const stranded = new Map<string, number[]>();
  for (const table of await catalog.listTables({ includeTrashed: true })) {
    for (const node of new Set(table.placement.map((p) => p.node))) {
      if (nodeNumber(node) >= config.storageNodes) stranded.set(node, [...(stranded.get(node) ?? []), table.id]);
    }
  }
  if (stranded.size === 0) return;
  const nodes = [...stranded.keys()].sort(byNodeNumber);
  const list = nodes
    .map(
      (node) =>
        `${node} holds shards of table${stranded.get(node)!.length === 1 ? '' : 's'} ${stranded.get(node)!.slice(0, 5).join(', ')}${stranded.get(node)!.length > 5 ? ', ...' : ''}`,
    )
    .join('; ');
  throw new Error(
    `TABLEFATE_STORAGE_NODES=${config.storageNodes} leaves shards behind: ${list}; ` +
      `set TABLEFATE_STORAGE_NODES to at least ${nodeNumber(nodes[nodes.length - 1]!) + 1}, or move those tables away first`,
  );
}

/** Creates (or brings up to date) the reconcile schedule, unless TABLEFATE_RECONCILE_SECONDS=0. */
async function scheduleReconciler(config: Config, server: TemporalServer, catalogId: string, logger: Logger): Promise<void> {
  const connection = await Connection.connect(server);
  try {
    const client = new Client({ connection, namespace: config.temporalNamespace });
    if (config.reconcileSeconds === 0) {
      // Off means off: a schedule an earlier start made must not go on repairing behind an operator's back.
      const removed = await removeReconcileSchedule(client, catalogId);
      logger.info({ schedule: reconcileScheduleId(catalogId), removed }, 'reconciler schedule off (TABLEFATE_RECONCILE_SECONDS=0)');
      return;
    }
    const opts = { catalogId, taskQueue: TASK_QUEUE, everySeconds: config.reconcileSeconds };
    const outcome = await ensureReconcileSchedule(client, opts);
    logger.info({ schedule: reconcileScheduleId(catalogId), everySeconds: config.reconcileSeconds, outcome }, 'reconciler scheduled');
  } finally {
    await connection.close();
  }
}

/** Where the storage nodes are served: in this process from `$TABLEFATE_HOME/storage` (local), or by their own workers (remote). */
export type StorageMode = 'local' | 'remote';

/** The storage nodes shards are placed on: node-0 .. node-{TABLEFATE_STORAGE_NODES - 1}. */
export function configuredNodes(config: Config): string[] {
  return Array.from({ length: config.storageNodes }, (_, k) => nodeName(k));
}

/**
 * Runs a worker against `server` until interrupted: the catalog, and with local storage the storage nodes under
 * the state directory. The worker stops when `stop` settles, or by itself after a fatal storage error. Returns
 * the process exit code: 0, or EXIT_FATAL after a fatal storage error.
 */
export async function runWorker(
  config: Config,
  server: TemporalServer,
  logger: Logger,
  stop: Promise<unknown>,
  mode: StorageMode = 'local',
  onPolling?: () => void,
): Promise<number> {
  const paths = statePaths(config.home);
  // The PostgreSQL driver's nodes are made once the catalog is open: its id says whose shard tables are whose.
  let storage: StorageDriver | { nodes: string[] } | undefined;
  if (mode === 'remote') {
    storage = { nodes: configuredNodes(config) };
  } else if (config.storageDriver === 'files') {
    await checkStorageNodes(config);
    const local = new LocalFileStorage({ root: paths.storage, nodeCount: config.storageNodes });
    await warnQuarantined(local, logger);
    storage = local;
  }
  const location = catalogLocation(config.catalogUrl, config.home);
  return serveUntil(location, { mustExist: false }, server, logger, stop, async (connection, catalog, onFatal, atClose) => {
    logger.info({ catalog: describeLocation(location), id: catalog.id }, 'catalog open');
    if (mode === 'remote') await checkPlacements(catalog, config);
    if (!storage) {
      const tables = tableStorage(
        config.storageDriver,
        config.storageUrls.map((url, k) => ({ node: nodeName(k), url })),
        catalog.id,
      );
      atClose(() => tables.close());
      storage = tables;
    }
    const served = storage;
    const worker = await withWorkflowBundle((codePath) =>
      createTableFateWorker({
        connection,
        namespace: config.temporalNamespace,
        catalog,
        storage: served,
        defaultRetentionSeconds: config.defaultRetentionSeconds,
        storageRetryAttempts: config.storageRetryAttempts,
        orphanGraceSeconds: config.orphanGraceSeconds,
        maxCachedWorkflows: config.workflowCache,
        storageDriver: config.storageDriver,
        logger,
        onFatal,
        workflowBundle: { codePath },
      }),
    );
    if (config.metricsAddress) {
      const gauges = [startCatalogGauges({ catalog, connection, namespace: config.temporalNamespace, taskQueue: TASK_QUEUE, logger })];
      if ('createShard' in served) gauges.push(startTrashBytesGauge({ catalog, storage: served, logger }));
      atClose(() => Promise.resolve(gauges.forEach((stop) => stop())));
    }
    await scheduleReconciler(config, server, catalog.id, logger);
    const polling = () => {
      logger.info(
        {
          address: server.address,
          tls: server.tls !== undefined,
          apiKey: server.apiKey !== undefined,
          namespace: config.temporalNamespace,
          home: config.home,
          storage: mode,
          driver: config.storageDriver,
          nodes: served.nodes,
        },
        'worker polling',
      );
      onPolling?.();
    };
    return { worker, polling };
  });
}

/**
 * Opens the catalog and a connection to `server` (waiting for either that is not there yet), starts the worker `start`
 * builds, says it is polling once the server lists it among its queues' pollers, runs it until `stop` settles (or it
 * stops by itself after a fatal storage error), and closes both. Returns the process exit code.
 */
async function serveUntil(
  location: CatalogLocation,
  opts: { mustExist: boolean },
  server: TemporalServer,
  logger: Logger,
  stop: Promise<unknown>,
  start: (
    connection: NativeConnection,
    catalog: Catalog,
    onFatal: (err: Error) => void,
    atClose: (close: () => Promise<void>) => void,
  ) => Promise<{ worker: TableFateWorker; polling: () => void }>,
): Promise<number> {
  const catalog = await untilAvailable(() => openCatalog(location, opts), catalogNotReady(describeLocation(location)), logger, stop);
  if (!catalog) return 0;
  let fatal: Error | undefined;
  // What the worker opened beside the catalog (a PostgreSQL storage node's connections), closed once it has stopped.
  const closers: Array<() => Promise<void>> = [];
  try {
    const connection = await untilAvailable(() => NativeConnection.connect(server), temporalNotUp(server.address), logger, stop);
    if (!connection) return 0;
    try {
      const { worker, polling } = await start(
        connection,
        catalog,
        (err) => {
          fatal ??= err;
        },
        (close) => closers.push(close),
      );
      await runUntil(worker, stop, polling);
    } finally {
      await connection.close();
      for (const close of closers) await close().catch((err: unknown) => logger.warn({ err }, 'closing storage failed'));
    }
  } finally {
    await catalog.close();
  }
  return exitAfter(fatal, logger);
}

async function warnQuarantined(storage: LocalFileStorage, logger: Logger): Promise<void> {
  for (const marker of await storage.listQuarantined()) {
    logger.warn(
      { node: marker.node, since: marker.since, reason: marker.reason },
      `${marker.node} is quarantined: operations on it fail until \`tablefate quarantine clear ${marker.node}\``,
    );
  }
}

/**
 * Runs the worker until `stop` settles or it stops by itself, then lets it finish what it has in hand; `polling` is
 * told once the server lists it as polling.
 */
async function runUntil(worker: TableFateWorker, stop: Promise<unknown>, polling: () => void): Promise<void> {
  const running = worker.run();
  void worker.untilPolling(Promise.race([stop, running.catch(() => undefined)])).then((yes) => yes && polling());
  await Promise.race([stop, running]);
  worker.shutdown();
  await running;
}

function exitAfter(fatal: Error | undefined, logger: Logger): number {
  if (!fatal) return 0;
  logger.fatal(
    { err: fatal, exitCode: EXIT_FATAL },
    'stopped after a fatal storage error; the node is quarantined: inspect it, then run `tablefate quarantine clear <node>`',
  );
  return EXIT_FATAL;
}

/** Where a storage node's shards are: files under a directory, tables in a PostgreSQL database, or in a MariaDB server. */
export type NodeStore = { dir: string } | { postgres: string } | { mariadb: string };

/** The storage of a driver whose shards are real tables, one node per url. */
function tableStorage(driver: StorageDriverName, urls: ReadonlyArray<{ node: string; url: string }>, catalogId: string) {
  return driver === 'mariadb' ? new MariadbStorage(urls, catalogId) : new PostgresStorage(urls, catalogId);
}

/**
 * `tablefate storage-node <node> --dir <root>` (or `--postgres <url>`): the worker that owns one storage node, its
 * files under `<root>/<node>` (or its tables in that database). It polls the node's own queue and touches nothing
 * else; before each change it checks in the catalog that the calling operation still holds the table's lock, so it
 * needs the catalog (which the orchestrating workers create: it must exist).
 */
export async function storageNodeCommand(config: Config, node: string, store: NodeStore): Promise<number> {
  const nodes = configuredNodes(config);
  if (!nodes.includes(node)) {
    throw new InvalidInputError(
      `storage node ${JSON.stringify(node)} is not one of the ${nodes.length} configured (TABLEFATE_STORAGE_NODES=${config.storageNodes}: ${nodes.join(', ')})`,
    );
  }
  const logger = createLogger(config.logLevel, { component: 'tablefate', node }, config.logFormat);
  installRuntime(logger, config.logLevel, config.metricsAddress);
  const stop = untilInterrupted();
  let files: LocalFileStorage | undefined;
  if ('dir' in store) {
    files = new LocalFileStorage({ root: store.dir, nodes: [node] });
    await warnQuarantined(files, logger);
  }
  const location = catalogLocation(config.catalogUrl, config.home);
  const server: TemporalServer = { address: config.temporalAddress, ...config.temporalSecurity };
  return serveUntil(location, { mustExist: true }, server, logger, stop, async (connection, catalog, onFatal, atClose) => {
    let storage: StorageDriver;
    if (files) {
      storage = files;
    } else {
      const tables =
        'mariadb' in store
          ? new MariadbStorage([{ node, url: store.mariadb }], catalog.id)
          : new PostgresStorage([{ node, url: (store as { postgres: string }).postgres }], catalog.id);
      atClose(() => tables.close());
      storage = tables;
    }
    if (config.metricsAddress) {
      const stopGauge = startTrashBytesGauge({ catalog, storage, logger });
      atClose(() => Promise.resolve(stopGauge()));
    }
    const worker = await createStorageNodeWorker({
      connection,
      namespace: config.temporalNamespace,
      catalog,
      storage,
      node,
      logger,
      storageRetryAttempts: config.storageRetryAttempts,
      orphanGraceSeconds: config.orphanGraceSeconds,
      onFatal,
    });
    const polling = () =>
      logger.info(
        {
          address: server.address,
          namespace: config.temporalNamespace,
          ...(files
            ? { dir: path.join(files.root, node) }
            : 'mariadb' in store
              ? { mariadb: redactUrl(store.mariadb) }
              : { postgres: redactUrl((store as { postgres: string }).postgres) }),
          queue: storageQueue(TASK_QUEUE, node),
          catalog: describeLocation(location),
        },
        'storage node polling',
      );
    return { worker, polling };
  });
}

/**
 * `tablefate worker`: a worker alone, against TEMPORAL_ADDRESS. It makes sure the search attributes exist
 * first (a server that tablefate did not start may lack them); without them every start would fail.
 */
export async function workerCommand(config: Config, mode: StorageMode = 'local'): Promise<number> {
  if (mode === 'local' && config.storageDriver === 'files') await checkStorageNodes(config);
  const logger = createLogger(config.logLevel, { component: 'tablefate' }, config.logFormat);
  installRuntime(logger, config.logLevel, config.metricsAddress);
  const server: TemporalServer = { address: config.temporalAddress, ...config.temporalSecurity };
  const interrupted = untilInterrupted();
  // Started before the server (a compose file, a boot): wait for it, then make sure of the search attributes.
  const up = await untilAvailable(() => NativeConnection.connect(server), temporalNotUp(server.address), logger, interrupted);
  if (!up) return 0;
  await up.close();
  const connection = await Connection.connect(server);
  try {
    const added = await registerSearchAttributes(connection, config.temporalNamespace);
    if (added.length > 0) logger.info({ added }, 'registered search attributes');
  } finally {
    await connection.close();
  }
  return runWorker(config, server, logger, interrupted, mode);
}

export interface DevOptions {
  headless: boolean;
  port: number;
  uiPort: number;
}

/**
 * `tablefate dev`: the embedded default. A Temporal dev server persisted under the state directory (its db
 * file is reused, so timers and histories survive a restart) plus a worker, in the foreground until Ctrl-C.
 */
export async function devCommand(config: Config, opts: DevOptions, print: (line: string) => void): Promise<number> {
  // Before the server starts: a configuration that strands shards is refused without starting anything.
  await checkStorageNodes(config);
  const logger = createLogger(config.logLevel, { component: 'tablefate' }, config.logFormat);
  installRuntime(logger, config.logLevel, config.metricsAddress);
  const interrupted = untilInterrupted();
  const server = await DevServer.start({
    stateDir: config.home,
    port: opts.port,
    uiPort: opts.uiPort,
    headless: opts.headless,
    namespace: config.temporalNamespace,
    log: print,
  });
  try {
    print(`Temporal dev server: ${server.address} (db ${server.dbFile}, log ${server.logFile})`);
    print(server.uiUrl ? `Temporal web UI: ${server.uiUrl}` : 'Temporal web UI: off (--headless)');
    return await runWorker(config, { address: server.address }, logger, interrupted, 'local', () =>
      print(`tablefate worker running; state in ${config.home}. Ctrl-C to stop.`),
    );
  } finally {
    print('stopping the worker and the dev server ...');
    await server.stop();
  }
}
