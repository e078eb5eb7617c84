import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { CliProcess, jsonOf, runCli } from './support/cli';
import { ensureNamespace, startCliWorker } from './support/cli-worker';
import { sharedPostgres, withClient, type TestPostgres } from './support/postgres';
import { testServerAddress } from './support/test-server';
import type { TableInfo } from '../domain/table';

/*
 * Off one host: the catalog in PostgreSQL (a real server this file starts), a `tablefate worker` with its storage
 * in its own state directory, and the command line run from another directory with an empty TABLEFATE_HOME: it
 * needs only the Temporal settings and the catalog URL.
 */

const NAMESPACE = 'tablefate-postgres-test';

let pg: TestPostgres;
let connection: Connection;
let worker: CliProcess | undefined;
let workerHome: string;
let clientDir: string;
let clientEnv: NodeJS.ProcessEnv;

beforeAll(async () => {
  pg = await sharedPostgres();
  const url = await pg.freshDatabase('deployment');
  connection = await Connection.connect({ address: testServerAddress() });
  await ensureNamespace(connection, NAMESPACE);
  workerHome = fs.mkdtempSync(path.join(os.tmpdir(), 'tablefate-pg-worker-'));
  clientDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablefate-pg-client-'));
  const common = { TEMPORAL_ADDRESS: testServerAddress(), TEMPORAL_NAMESPACE: NAMESPACE, TABLEFATE_CATALOG_URL: url };
  worker = await startCliWorker(connection, {
    ...process.env,
    ...common,
    TABLEFATE_HOME: workerHome,
    TABLEFATE_LOG_LEVEL: 'info',
    TABLEFATE_RECONCILE_SECONDS: '0',
  });
  // The client's environment: nothing of the worker's, an empty state directory of its own.
  clientEnv = { PATH: process.env.PATH, ...common, TABLEFATE_HOME: path.join(clientDir, 'empty-home') };
});

afterAll(async () => {
  if (worker && !worker.exitStatus) await worker.stop('SIGINT');
  await connection?.close();
  await pg?.stop();
  for (const dir of [workerHome, clientDir]) if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const cli = (...args: string[]) => runCli([...args, '--json'], { env: clientEnv, cwd: clientDir });

test('a client with only the catalog URL and the Temporal settings runs a table through its whole life, from another directory', async () => {
  const created = jsonOf<TableInfo>(await cli('create', 'pg.orders', '--shards', '3'));
  expect(created).toMatchObject({ name: 'orders', state: 'READY', shards: 3 });
  const trashed = jsonOf<TableInfo>(await cli('drop', 'pg.orders', '-r', '3600'));
  expect(trashed.state).toBe('TRASHED');
  expect(jsonOf<TableInfo[]>(await cli('ls', '-a')).map((t) => [t.id, t.state])).toEqual([[created.id, 'TRASHED']]);
  const restored = jsonOf<TableInfo>(await cli('recall', String(created.id), 'pg.orders2'));
  expect(restored).toMatchObject({ name: 'orders2', state: 'READY' });
  jsonOf<TableInfo>(await cli('drop', 'pg.orders2'));
  expect(jsonOf<TableInfo>(await cli('purge', String(created.id))).state).toBe('PURGED');
  const doctor = await cli('doctor');
  expect(doctor.code).toBe(0);

  // The client made no file anywhere: its directory and its (never created) state directory are empty.
  expect(fs.readdirSync(clientDir)).toEqual([]);
  // The worker's log names the catalog without its password.
  expect(worker!.stderr).toContain('catalog open');
});

test('a catalog URL with no tablefate schema behind it is CatalogNotFound (exit 6), naming it without its password, and creates nothing', async () => {
  const empty = await pg.freshDatabase('empty');
  // (The test server trusts its clients: a password is accepted, and must never be shown.)
  const url = new URL(empty);
  url.password = 's3cret';
  const withPassword = url.toString();
  const r = await runCli(['ls'], { env: { ...clientEnv, TABLEFATE_CATALOG_URL: withPassword }, cwd: clientDir });
  expect(r.code).toBe(6);
  expect(r.stderr).toMatch(/CatalogNotFound: no tablefate catalog in postgres:\/\//);
  expect(r.stderr).not.toContain('s3cret');
  const tables = await withClient(empty, (c) => c.query<{ n: string }>(`SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'public'`));
  expect(Number(tables.rows[0]!.n)).toBe(0);
});
