import fs from 'node:fs';
import { Connection } from '@temporalio/client';
import { Client } from 'pg';
import { jsonOf, runCli, runCliInProcess, type CliProcess, type CliResult } from './support/cli';
import { cliTestHome, ensureNamespace, startCliWorker } from './support/cli-worker';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { testServerAddress } from './support/test-server';
import type { ReconcileReport } from '../domain/health';
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
  ({ home, env } = await cliTestHome('pgcli', NAMESPACE));
  // (Info, not warnings only: what the worker logs is searched for the password too.)
  env = {
    ...env,
    TABLEFATE_LOG_LEVEL: 'info',
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
  expect(files.stderr).toContain('columns and like are for the postgres and mariadb storage drivers');
});

test('`tablefate doctor` surveys the PostgreSQL nodes: healthy exits 0; a table moved or recorded behind its back is named with its node, exit 1', async () => {
  const seen = (r: CliResult) => ({ code: r.code, stdout: r.stdout, stderr: r.stderr });
  const moved = jsonOf<TableInfo>(await cli('create', 'ops.moved', '--columns', 'id int', '--json'));
  const healthy = await runCli(['doctor'], { env });
  expect(seen(healthy)).toEqual({ code: 0, stdout: 'healthy: nothing for the reconciler to do\n', stderr: '' });

  // Behind tablefate's back: a live shard table moved into its trash by hand (not where tablefate put it: an outside
  // change), and on the other node a stray table in the trash that a record written by hand gives to a table id this
  // catalog never had (where that record says: an orphan).
  const home = nodeOf(moved);
  const other = psql.find((client) => client !== home)!;
  const otherNode = `node-${psql.indexOf(other)}`;
  await home.query('ALTER TABLE ops.moved SET SCHEMA tablefate_trash');
  const [{ catalog_id: catalogId }] = (await home.query<{ catalog_id: string }>('SELECT DISTINCT catalog_id FROM tablefate.shards'))
    .rows as [{ catalog_id: string }];
  await other.query('CREATE TABLE tablefate_trash.stray (id int)');
  await other.query(
    "INSERT INTO tablefate.shards (table_oid, catalog_id, table_id, shard) VALUES ('tablefate_trash.stray'::regclass, $1, 999999, 0)",
    [catalogId],
  );
  try {
    const text = await runCli(['doctor'], { env });
    expect({ code: text.code, stderr: text.stderr }).toEqual({ code: 1, stderr: '' });
    expect(text.stdout.trimEnd().split('\n').sort()).toEqual([
      expect.stringMatching(
        new RegExp(`^orphan {8}shard t999999-s0 in trash on ${otherNode}: no table 999999 in the catalog: collect it after \\d{4}-`),
      ) as unknown,
      `outside-change table ${moved.id} (ops.moved) shard 0 on ${moved.placement[0]!.node}: ops.moved was moved outside tablefate to schema tablefate_trash (as moved)`,
    ]);

    const json = await runCli(['doctor', '--json'], { env });
    expect({ code: json.code, stderr: json.stderr }).toEqual({ code: 1, stderr: '' });
    const report = JSON.parse(json.stdout) as ReconcileReport & { healthy: boolean };
    expect(report).toMatchObject({ healthy: false, skippedNodes: [], actions: [] });
    expect(report.findings).toHaveLength(2);
    expect(report.findings).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          kind: 'outside-change',
          table: expect.objectContaining({ id: moved.id }) as unknown,
          node: moved.placement[0]!.node,
          differences: ['ops.moved was moved outside tablefate to schema tablefate_trash (as moved)'],
        }),
        expect.objectContaining({
          kind: 'orphan',
          collectable: false,
          set: expect.objectContaining({ tableId: 999_999, shard: 0, node: otherNode, area: 'trash' }) as unknown,
        }),
      ]),
    );
    // No password in what the doctor printed, nor in what the worker did, which surveyed the nodes through those urls.
    for (const out of [healthy, text, json, worker!]) expect(out.stdout + out.stderr).not.toContain(PASSWORD);
    // The doctor only looked: both tables are where the hand put them.
    expect((await home.query("SELECT to_regclass('tablefate_trash.moved') IS NOT NULL AS there")).rows).toEqual([{ there: true }]);
    expect((await other.query("SELECT to_regclass('tablefate_trash.stray') IS NOT NULL AS there")).rows).toEqual([{ there: true }]);
  } finally {
    await home.query('ALTER TABLE tablefate_trash.moved SET SCHEMA ops');
    await other.query('DELETE FROM tablefate.shards WHERE table_id = 999999; DROP TABLE tablefate_trash.stray');
  }
  expect(seen(await cli('doctor'))).toEqual({ code: 0, stdout: 'healthy: nothing for the reconciler to do\n', stderr: '' });
});

test('adopt through the command line: a table made with psql becomes a tablefate table, describe and ls show its size, and each refusal has its exit code', async () => {
  const db = psql[1]!;
  await db.query(`CREATE SCHEMA billing; CREATE TABLE billing.invoices (id int PRIMARY KEY, total numeric);
    INSERT INTO billing.invoices SELECT g, g * 1.5 FROM generate_series(1, 500) g;
    CREATE VIEW billing.totals AS SELECT sum(total) FROM billing.invoices`);
  const adopted = jsonOf<TableInfo>(await cli('adopt', 'billing.invoices', '--node', 'node-1', '--json'));
  expect(adopted).toMatchObject({ namespace: 'billing', name: 'invoices', state: 'READY', placement: [{ shard: 0, node: 'node-1' }] });

  const measured = String(
    ((await db.query("SELECT pg_total_relation_size('billing.invoices')::int8 AS bytes")).rows[0] as { bytes: string }).bytes,
  );
  const described = jsonOf<TableInfo>(await cli('describe', 'billing.invoices', '--json'));
  expect(described.bytes).toBe(Number(measured));
  const text = await cli('describe', 'billing.invoices');
  expect(text.stdout).toMatch(new RegExp(`^size +[0-9]+ kB \\(${measured} bytes\\)$`, 'm'));
  expect(jsonOf<TableInfo[]>(await cli('ls', '--json')).find((t) => t.id === adopted.id)?.bytes).toBe(Number(measured));

  // The view that reads it keeps its drop from happening until the view is gone.
  const refused = await cli('drop', 'billing.invoices');
  expect({ code: refused.code, stderr: refused.stderr }).toEqual({
    code: 4,
    stderr: expect.stringContaining(
      'HasDependents: billing.invoices cannot be trashed while others depend on it: view billing.totals',
    ) as unknown,
  });
  const again = await cli('adopt', 'billing.invoices', '--node', 'node-0');
  expect({ code: again.code, stderr: again.stderr }).toEqual({ code: 4, stderr: expect.stringContaining('TableExists') as unknown });
  const missing = await cli('adopt', 'billing.nothing');
  expect({ code: missing.code, stderr: missing.stderr }).toEqual({ code: 3, stderr: expect.stringContaining('TableNotFound') as unknown });
  const view = await cli('adopt', 'billing.totals', '--node', 'node-1');
  expect({ code: view.code, stderr: view.stderr }).toEqual({ code: 2, stderr: expect.stringContaining('it is a view') as unknown });
  const own = await cli('adopt', 'tablefate.shards');
  expect({ code: own.code, stderr: own.stderr }).toEqual({ code: 2, stderr: expect.stringContaining("tablefate's own") as unknown });

  // With --cascade the view goes along: the answer says so, and ls -a and describe show it while the table is in the trash.
  const cascaded = await cli('drop', 'billing.invoices', '--cascade');
  expect({ code: cascaded.code, stdout: cascaded.stdout }).toEqual({
    code: 0,
    stdout: expect.stringMatching(/^note +billing\.invoices: moved into the trash with it: view billing\.totals$/m) as unknown,
  });
  expect((await cli('describe', String(adopted.id))).stdout).toMatch(
    /^with +billing\.invoices: moved into the trash with it: view billing\.totals$/m,
  );
  const listed = (await cli('ls', '-a')).stdout.split('\n').find((line) => line.startsWith(`${adopted.id} `));
  expect(listed).toMatch(/TRASHED .* moved into the trash with it: view billing\.totals$/);
  expect(jsonOf<TableInfo>(await cli('recall', String(adopted.id), '--json')).family).toBeUndefined();
  expect((await db.query('SELECT count(*)::int AS n FROM billing.totals')).rows).toEqual([{ n: 1 }]);
});

test('a table made in psql under a name with capitals, a space and a dot: adopted, dropped and recalled as psql writes it', async () => {
  const db = psql[0]!;
  await db.query(
    `CREATE SCHEMA "Legacy"; CREATE TABLE "Legacy"."Old Orders.2024" (id int); INSERT INTO "Legacy"."Old Orders.2024" VALUES (7)`,
  );
  const place = async () =>
    (
      await db.query<{ at: string }>(
        `SELECT format('%I.%I', n.nspname, c.relname) AS at FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE c.oid = $1`,
        [oid],
      )
    ).rows[0]?.at;
  const oid = (await db.query<{ oid: string }>(`SELECT '"Legacy"."Old Orders.2024"'::regclass::oid::int8 AS oid`)).rows[0]!.oid;
  const adopted = jsonOf<TableInfo>(await cli('adopt', '"Legacy"."Old Orders.2024"', '--json'));
  expect(adopted).toMatchObject({ namespace: 'Legacy', name: 'Old Orders.2024', state: 'READY' });
  expect((await cli('describe', '"Legacy"."Old Orders.2024"')).stdout).toMatch(/^name +"Legacy"\."Old Orders\.2024"$/m);
  const bare = await cli('drop', 'Legacy.Old');
  expect({ code: bare.code, stderr: bare.stderr }).toEqual({
    code: 2,
    stderr: expect.stringContaining('"Legacy" has capitals') as unknown,
  });
  expect((await cli('drop', '"Legacy"."Old Orders.2024"')).code).toBe(0);
  expect(await place()).toMatch(/^tablefate_trash\./);
  expect((await cli('recall', String(adopted.id))).code).toBe(0);
  expect(await place()).toBe('"Legacy"."Old Orders.2024"');
  expect((await db.query('SELECT id FROM "Legacy"."Old Orders.2024"')).rows).toEqual([{ id: 7 }]);
});
