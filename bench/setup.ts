import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, type Worker } from '@temporalio/worker';
import { SqliteCatalog } from '../catalog/sqlite';
import { LocalFileStorage } from '../storage/local-files';
import { PostgresStorage } from '../storage/postgres';
import { nodeName } from '../storage/nodes';
import type { StorageDriverName } from '../domain/deployment';
import { startPostgres } from '../test/support/postgres';
import { TableFateClient } from '../client/client';
import { DevServer, EMBEDDED_DYNAMIC_CONFIG } from '../worker/dev-server';
import { createTableFateWorker } from '../worker/worker';
import { createLogger } from '../worker/logger';

/** What a benchmark runs against: its own dev server and state directory, a worker in this process, a client. */
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
  close(): Promise<void>;
}

/** Starts it all; `close` stops it all and removes the state directory. */
export async function startBench(opts: { dynamicConfig?: Record<string, number>; driver?: StorageDriverName } = {}): Promise<Bench> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-bench-'));
  const server = await DevServer.start({
    stateDir: dir,
    headless: true,
    cliPath: process.env.TEMPORAL_CLI_PATH,
    log: () => undefined,
    dynamicConfig: opts.dynamicConfig ?? EMBEDDED_DYNAMIC_CONFIG,
  });
  const catalog = new SqliteCatalog(path.join(dir, 'catalog.sqlite'));
  // The PostgreSQL driver on a server of its own (one node: the moves, not the placement, are what is measured).
  const postgres = opts.driver === 'postgres' ? await startPostgres() : undefined;
  const nodeUrl = postgres ? await postgres.freshDatabase('bench') : undefined;
  const storage = nodeUrl
    ? new PostgresStorage([{ node: nodeName(0), url: nodeUrl }], catalog.id)
    : new LocalFileStorage({ root: path.join(dir, 'storage') });
  const workerConnection = await NativeConnection.connect({ address: server.address });
  const worker = await createTableFateWorker({
    connection: workerConnection,
    namespace: 'default',
    catalog,
    storage,
    defaultRetentionSeconds: 3600,
    logger: createLogger('error'),
  });
  const workers: Array<{ shutdown(): void }> = [worker];
  const running: Array<Promise<void>> = [worker.run()];
  const connection = await Connection.connect({ address: server.address });
  const temporal = new Client({ connection });
  return {
    temporal,
    client: new TableFateClient({ client: temporal, catalog, storageDriver: opts.driver }),
    nodeUrl,
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
      if (storage instanceof PostgresStorage) await storage.close();
      await postgres?.stop();
      await server.stop();
      await fs.promises.rm(dir, { recursive: true, force: true });
    },
  };
}
