import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { Client } from 'pg';
import { jsonOf, runCliInProcess, type CliProcess } from './support/cli';
import { ensureNamespace, startCliWorker } from './support/cli-worker';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { testServerAddress } from './support/test-server';
import type { TableInfo } from '../domain/table';

/*
 * "Protect your PostgreSQL tables", as the README's quick start walks it: a `tablefate worker` (a child process) with
 * TABLEFATE_STORAGE_DRIVER=postgres and a database per storage node, the command line, and psql's view of the rows.
 * Its own Temporal namespace: its `tablefate` task queue is not the one test/cli.test.ts's worker polls.
 */

const NAMESPACE = 'tablefate-postgres-cli-test';
/** In every url: a password (the test server trusts local connections, so any will do) that must never be printed. */
const PASSWORD = 'pg-secret-7f3a';

let server: TestPostgres;
let home: string;
let env: NodeJS.ProcessEnv;
let connection: Connection;
let worker: CliProcess | undefined;
const psql: Client[] = [];

const withPassword = (url: string) => url.replace('postgres://postgres@', `postgres://postgres:${PASSWORD}@`);
const cli = (...args: string[]) => runCliInProcess(args, { env });

beforeAll(async () => {
  server = await sharedPostgres();
  const urls = [await server.freshDatabase('pgcli'), await server.freshDatabase('pgcli')];
  expect(urls.every((u) => u.startsWith('postgres://postgres@'))).toBe(true);
  for (const url of urls) {
    const client = new Client({ connectionString: url });
    await client.connect();
    psql.push(client);
  }
  home = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-pgcli-'));
  env = {
    ...process.env,
    TABLEFATE_HOME: home,
    TEMPORAL_ADDRESS: testServerAddress(),
    TEMPORAL_NAMESPACE: NAMESPACE,
    TABLEFATE_LOG_LEVEL: 'info',
    TABLEFATE_RECONCILE_SECONDS: '0',
    TABLEFATE_STORAGE_DRIVER: 'postgres',
    TABLEFATE_STORAGE_URLS: urls.map(withPassword).join(','),
  };
  connection = await Connection.connect({ address: testServerAddress() });
  await ensureNamespace(connection, NAMESPACE);
  worker = await startCliWorker(connection, env);
});

afterAll(async () => {
  try {
    if (worker && !worker.exitStatus) expect(await worker.stop('SIGINT')).toEqual({ code: 0, signal: null });
  } finally {
    for (const client of psql) await client.end();
    await connection?.close();
    await server?.stop();
    if (home) await fs.promises.rm(home, { recursive: true, force: true });
  }
});

/** psql on the node that holds the table's only shard. */
const nodeOf = (table: TableInfo) => psql[Number(table.placement[0]!.node.replace('node-', ''))]!;

test('create with --columns, insert with psql, drop, recall: the rows are back; no password is ever printed', async () => {
  const created = jsonOf<TableInfo>(await cli('create', 'shop.orders', '--columns', 'id int primary key, total numeric(12,2)', '--json'));
  expect(created).toMatchObject({ namespace: 'shop', name: 'orders', shards: 1, state: 'READY' });
  const db = nodeOf(created);
  await db.query('INSERT INTO shop.orders VALUES (1, 10.00), (2, 32.50)');

  expect(jsonOf<TableInfo>(await cli('drop', 'shop.orders', '--json')).state).toBe('TRASHED');
  await expect(db.query('SELECT * FROM shop.orders')).rejects.toThrow('relation "shop.orders" does not exist');

  expect(jsonOf<TableInfo>(await cli('recall', 'shop.orders', '--json')).state).toBe('READY');
  expect((await db.query('SELECT id, total FROM shop.orders ORDER BY id')).rows).toEqual([
    { id: 1, total: '10.00' },
    { id: 2, total: '32.50' },
  ]);

  // --like copies the structure of a table each shard's node has (a template every node keeps, here).
  for (const node of psql) {
    await node.query("CREATE SCHEMA templates; CREATE TABLE templates.line (id int primary key, sku text not null default 'none')");
  }
  const like = jsonOf<TableInfo>(await cli('create', 'shop.lines', '--like', 'templates.line', '--json'));
  expect(like.state).toBe('READY');
  const lines = nodeOf(like);
  expect((await lines.query('INSERT INTO shop.lines (id) VALUES (1) RETURNING sku')).rows).toEqual([{ sku: 'none' }]);
  expect((await lines.query("SELECT indexname FROM pg_indexes WHERE schemaname = 'shop' AND tablename = 'lines'")).rows).toEqual([
    { indexname: 'lines_pkey' },
  ]);
  // A definition PostgreSQL refuses is invalid input (exit 2); one that would leave its parentheses never reaches it.
  const unknownType = await cli('create', 'shop.odd', '--columns', 'id integr');
  expect({ code: unknownType.code, stderr: unknownType.stderr }).toEqual({
    code: 2,
    stderr: expect.stringMatching(/^tablefate: InvalidInput: the column definitions: type "integr" does not exist/) as unknown,
  });
  const injected = await cli('create', 'shop.evil', '--columns', 'id int); drop table shop.orders; --');
  expect({ code: injected.code, stderr: injected.stderr }).toEqual({
    code: 2,
    stderr: expect.stringMatching(/^tablefate: InvalidInput: .*close a parenthesis they did not open/) as unknown,
  });
  expect((await db.query('SELECT count(*)::int AS n FROM shop.orders')).rows).toEqual([{ n: 2 }]);

  expect(worker!.stdout + worker!.stderr).not.toContain(PASSWORD);
  // The worker's logs (on stderr) say which driver it serves, without the urls' passwords.
  expect(worker!.stderr).toContain('"driver":"postgres"');
});

test('the configuration is checked before anything starts, and never echoes a url', async () => {
  const noUrls = await runCliInProcess(['ls'], { env: { ...env, TABLEFATE_STORAGE_URLS: undefined } });
  expect(noUrls.code).toBe(2);
  expect(noUrls.stderr).toContain('TABLEFATE_STORAGE_URLS: the postgres driver needs one url per storage node');
  const bad = await runCliInProcess(['ls'], { env: { ...env, TABLEFATE_STORAGE_URLS: `mysql://root:${PASSWORD}@db/x` } });
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain('entry 1 is not a postgres:// url');
  expect(bad.stderr).not.toContain(PASSWORD);
  const files = await runCliInProcess(['create', 'shop.flat', '--columns', 'id int'], {
    env: { ...env, TABLEFATE_STORAGE_DRIVER: 'files', TABLEFATE_STORAGE_URLS: undefined },
  });
  expect(files.code).toBe(2);
  expect(files.stderr).toContain('columns and like are for the postgres storage driver');
});
