import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { SqliteCatalog } from '../catalog/sqlite';
import { LocalFileStorage } from '../storage/local-files';
import { PostgresStorage } from '../storage/postgres';
import { MariadbStorage } from '../storage/mariadb';
import { startLocalMariadb } from '../servers/local-mariadb';
import { HOST } from '../servers/local-host';
import { nodeName } from '../storage/nodes';
import type { StorageDriverName } from '../domain/deployment';
import { startPostgres } from '../test/support/postgres';
import { TableFateClient } from '../client/client';
import { DevServer, EMBEDDED_DYNAMIC_CONFIG } from '../servers/dev-server';
import { createTableFateWorker } from '../worker/worker';
import { TemporalCluster } from '../servers/cluster';
import { createLogger } from '../worker/logger';

/** What a benchmark runs against: its own dev server and state directory, a worker in this process, a client. */
/** A table as each driver makes it by default in a bench: 4 shards of files, or one PostgreSQL or MariaDB table with two columns. */
export const benchShapeOf = (driver: StorageDriverName): { shards: number; columns?: string } =>
  driver === 'files' ? { shards: 4 } : { shards: 1, columns: 'id bigint primary key, payload text' };

export interface Bench {
  temporal: Client;
  client: TableFateClient;
  catalog: SqliteCatalog;
  /** The connection the worker uses, for a benchmark's own extra workers. */
  workerConnection: NativeConnection;
  /** Runs `extra` beside tablefate's worker until close. */
  alsoRun(extra: Worker): void;
  /** With the PostgreSQL driver: the url of its one storage node's database, for the benchmark's own rows. */
  nodeUrl?: string;
  /** With the MariaDB driver: the url of its one storage node's server, for the benchmark's own rows. */
  mariadbUrl?: string;
  /** The environment a `tablefate` command needs to use this bench's server and state (TABLEFATE_HOME, TEMPORAL_ADDRESS). */
  cliEnv: NodeJS.ProcessEnv;
  close(): Promise<void>;
}

/** The Temporal server a benchmark runs on: its address, and how to stop it. */
interface BenchServer {
  address: string;
  stop(): Promise<void>;
}

/**
 * A dev server of the run's own, or (`cluster`) a Temporal cluster as `tablefate cluster up` makes it (frontend, two
 * history processes, matching, worker, on a PostgreSQL of its own under the run's directory; deploy/temporal's
 * configuration as it is).
 */
async function startServer(
  dir: string,
  temporal: 'dev' | 'cluster',
  dynamicConfig: Record<string, number>,
  onePartition: boolean,
): Promise<BenchServer> {
  if (temporal === 'dev') {
    const server = await DevServer.start({
      stateDir: dir,
      headless: true,
      cliPath: process.env.TEMPORAL_CLI_PATH,
      log: () => undefined,
      dynamicConfig,
      onePartition,
    });
    return server;
  }
  // Its own PostgreSQL as `cluster up` makes one without --postgres: durable, as a user's (the tests' throwaway one runs
  // with fsync off). As root that server runs as the postgres user, who must reach the directory.
  await fs.promises.chmod(dir, 0o755);
  const cluster = await TemporalCluster.up({
    stateDir: path.join(dir, 'temporal'),
    toolDir: path.resolve(__dirname, '..', '.tablefate'),
    headless: true,
    historyProcesses: 2,
    log: () => undefined,
  });
  return { address: cluster.address, stop: () => cluster.down() };
}

/** Starts it all; `close` stops it all and removes the state directory. */
export async function startBench(
  opts: {
    dynamicConfig?: Record<string, number>;
    /** Temporal's four partitions per task queue instead of the one `tablefate dev` gives a new state. */
    fourPartitions?: boolean;
    driver?: StorageDriverName;
    temporal?: 'dev' | 'cluster';
    /** The worker's activities wrapped (bench/trace.ts times each call). */
    wrapActivities?: Parameters<typeof createTableFateWorker>[0]['wrapActivities'];
    /** The parts of the worker's step calls wrapped (bench/trace.ts times each catalog and shard call inside them). */
    wrapStepParts?: Parameters<typeof createTableFateWorker>[0]['wrapStepParts'];
  } = {},
): Promise<Bench> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-bench-'));
  const server = await startServer(dir, opts.temporal ?? 'dev', opts.dynamicConfig ?? EMBEDDED_DYNAMIC_CONFIG, !opts.fourPartitions);
  const catalog = new SqliteCatalog(path.join(dir, 'catalog.sqlite'));
  // The PostgreSQL driver on a server of its own (one node: the moves, not the placement, are what is measured).
  const postgres = opts.driver === 'postgres' ? await startPostgres() : undefined;
  const nodeUrl = postgres ? await postgres.freshDatabase('bench') : undefined;
  // The MariaDB driver on a server of its own, as the tests start one (servers/local-mariadb.ts), under the run's directory.
  const mariadb = opts.driver === 'mariadb' ? await startLocalMariadb({ parent: dir }) : undefined;
  const mariadbUrl = mariadb ? `mariadb://root@${HOST}:${mariadb.port}/` : undefined;
  const storage = nodeUrl
    ? new PostgresStorage([{ node: nodeName(0), url: nodeUrl }], catalog.id)
    : mariadbUrl
      ? new MariadbStorage([{ node: nodeName(0), url: mariadbUrl }], catalog.id)
      : new LocalFileStorage({ root: path.join(dir, 'storage') });
  const workerConnection = await NativeConnection.connect({ address: server.address });
  const worker = await createTableFateWorker({
    connection: workerConnection,
    namespace: 'default',
    catalog,
    storage,
    defaultRetentionSeconds: 3600,
    logger: createLogger('error'),
    storageDriver: opts.driver ?? 'files',
    wrapActivities: opts.wrapActivities,
    wrapStepParts: opts.wrapStepParts,
  });
  const workers: Array<{ shutdown(): void }> = [worker];
  const running: Array<Promise<void>> = [worker.run()];
  const connection = await Connection.connect({ address: server.address });
  const temporal = new Client({ connection });
  return {
    temporal,
    client: new TableFateClient({ client: temporal, catalog, storageDriver: opts.driver }),
    nodeUrl,
    mariadbUrl,
    cliEnv: { ...process.env, TABLEFATE_HOME: dir, TEMPORAL_ADDRESS: server.address },
    catalog,
    workerConnection,
    alsoRun(extra) {
      workers.push(extra);
      running.push(extra.run());
    },
    async close() {
      for (const w of workers) w.shutdown();
      await Promise.all(running);
      await workerConnection.close();
      await connection.close();
      await catalog.close();
      if (storage instanceof PostgresStorage || storage instanceof MariadbStorage) await storage.close();
      await postgres?.stop();
      await mariadb?.stop();
      await server.stop();
      await fs.promises.rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The floor every measurement is compared with (bench/floor-workflow.ts) served beside tablefate's worker: same process,
 * same connection, its own queue. Answers a function that runs one floor workflow to its end.
 */
export async function startFloor(bench: Bench, taskQueue: string): Promise<(workflowId: string) => Promise<void>> {
  bench.alsoRun(
    await Worker.create({
      connection: bench.workerConnection,
      namespace: 'default',
      taskQueue,
      workflowsPath: require.resolve('./floor-workflow'),
      activities: { noop: () => Promise.resolve() },
    }),
  );
  return (workflowId) => bench.temporal.workflow.execute('floorWorkflow', { taskQueue, workflowId });
}
