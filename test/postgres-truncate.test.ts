import { execFile } from 'node:child_process';
import { Client } from 'pg';
import { postgresProgram } from '../servers/local-postgres';
import { HasDependentsError, TableBusyError } from '../domain/errors';
import { Harness } from './support/harness';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import type { TableInfo } from '../domain/table';

/*
 * `truncate` with the PostgreSQL driver, through the SDK and the workflows on the real dev server, judged by what a
 * user's own client sees: the table at its name is empty, and is to pg_dump and psql's \d+ what it was; ids go on where
 * they were; the truncated rows come back, whole, under a name of their own.
 */

let server: TestPostgres;
let h: Harness;
let urls: string[];
/** A user's own client on each node: default settings. */
const users: Client[] = [];

beforeAll(async () => {
  server = await sharedPostgres();
  urls = [await server.freshDatabase('pgtrunc'), await server.freshDatabase('pgtrunc')];
  for (const url of urls) {
    const client = new Client({ connectionString: url });
    await client.connect();
    users.push(client);
  }
  await users[0]!.query(`DO $$ BEGIN CREATE ROLE trunc_svc NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
  h = await Harness.start({ postgresNodes: urls });
});

afterAll(async () => {
  await h?.close();
  for (const client of users) await client.end();
  await server?.stop();
});

/** What each of the table's nodes holds in tablefate's trash: its relations' names. */
const trashedOn = (table: TableInfo) =>
  Promise.all(
    table.placement.map(async (_, shard) =>
      (
        await userOn(table, shard).query<{ name: string }>(
          "SELECT c.relname AS name FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = 'tablefate_trash' ORDER BY 1",
        )
      ).rows.map((row) => row.name),
    ),
  );
const userOn = (table: TableInfo, shard = 0) => users[Number(table.placement[shard]!.node.replace('node-', ''))]!;
const urlOn = (table: TableInfo, shard = 0) => urls[Number(table.placement[shard]!.node.replace('node-', ''))]!;

/** One of PostgreSQL's own programs on a node's database: what it prints. */
function run(program: 'psql' | 'pg_dump', args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(postgresProgram(program), args, { env: { ...process.env, PGCLIENTENCODING: 'UTF8' } }, (err, stdout, stderr) =>
      err ? reject(new Error(`${program} ${args.join(' ')}: ${err.message}\n${stderr}`)) : resolve(stdout),
    );
  });
}

/** What a user's own tools show of a table's definition: pg_dump's schema of it, psql's \d+ and \dp. */
async function seenBy(url: string, name: string): Promise<{ dump: string; described: string; privileges: string }> {
  const dump = await run('pg_dump', ['--schema-only', '-t', name, url]);
  return {
    dump: dump.replace(/^-- Dumped (from|by) .*$/gm, '').replace(/^\\(un)?restrict .*$/gm, ''),
    described: await run('psql', ['-X', '-c', `\\d+ ${name}`, url]),
    privileges: await run('psql', ['-X', '-c', `\\dp ${name}`, url]),
  };
}

test('the table at its name is empty and the same to pg_dump and psql; ids go on; the rows come back whole under a name of their own', async () => {
  const table = await h.client.create({
    table: 'shop.orders',
    shards: 1,
    columns: 'id serial primary key, sku text not null unique, total numeric(12,2) check (total >= 0), placed timestamptz default now()',
  });
  const user = userOn(table);
  await user.query('CREATE INDEX orders_placed ON shop.orders (placed)');
  await user.query("COMMENT ON TABLE shop.orders IS 'what customers bought'");
  await user.query('GRANT SELECT, INSERT ON shop.orders TO trunc_svc');
  await user.query('GRANT USAGE ON SEQUENCE shop.orders_id_seq TO trunc_svc');
  await user.query("INSERT INTO shop.orders (sku, total) SELECT 'sku-' || g, g FROM generate_series(1, 100) g");
  const before = await seenBy(urlOn(table), 'shop.orders');
  const rowsBefore = (await user.query('SELECT id, sku, total FROM shop.orders ORDER BY id')).rows;

  const entry = await h.client.truncate({ table: 'shop.orders' });
  expect(entry).toMatchObject({ namespace: 'shop', name: 'orders', state: 'TRASHED', truncatedFrom: table.id });

  // What a user sees at the name: no row, and the same table.
  expect((await user.query('SELECT count(*)::int AS n FROM shop.orders')).rows).toEqual([{ n: 0 }]);
  expect(await seenBy(urlOn(table), 'shop.orders')).toEqual(before);
  // Ids go on above every one handed out: no id twice.
  const { rows: next } = await user.query<{ id: number }>("INSERT INTO shop.orders (sku, total) VALUES ('sku-new', 1) RETURNING id");
  expect(next[0]!.id).toBe(101);
  expect(await h.client.describe({ table: 'shop.orders' })).toMatchObject({ id: table.id, state: 'READY' });

  // The rows, recalled under a name of their own, whole; the table keeps what was written to it since.
  const recalled = await h.client.undelete({ table: entry.id, newName: 'shop.orders_before' });
  expect(recalled).toMatchObject({ id: entry.id, state: 'READY', name: 'orders_before' });
  expect((await user.query('SELECT id, sku, total FROM shop.orders_before ORDER BY id')).rows).toEqual(rowsBefore);
  expect((await user.query('SELECT sku FROM shop.orders')).rows).toEqual([{ sku: 'sku-new' }]);
  // (Its own sequence came back with it, and does not hand out the twin's ids.)
  const { rows: theirs } = await user.query<{ id: number }>("INSERT INTO shop.orders_before (sku, total) VALUES ('sku-x', 1) RETURNING id");
  expect(theirs[0]!.id).toBe(101);
});

test('a table of two shards: each shard table truncated on its node; the entry has both', async () => {
  const table = await h.client.create({ table: 'metrics.points', shards: 2, columns: 'at int, value float8' });
  for (const shard of [0, 1])
    await userOn(table, shard).query(`INSERT INTO metrics.points_${shard} SELECT g, g FROM generate_series(1, 10) g`);
  const entry = await h.client.truncate({ table: table.id });
  for (const shard of [0, 1]) {
    expect((await userOn(table, shard).query(`SELECT count(*)::int AS n FROM metrics.points_${shard}`)).rows).toEqual([{ n: 0 }]);
  }
  expect(await h.shardAreas(entry)).toEqual(['trash', 'trash']);
  expect(await h.shardAreas(table)).toEqual(['live', 'live']);
  const reports = await h.shardReports(entry);
  expect(reports.every((r) => r.bytes > 0)).toBe(true);
});

/** The row of a shard's table in pg_class as a user reads it: any ALTER of the table (a move) writes a new one. */
const classRowOf = async (table: TableInfo, shard: number, name: string) =>
  (await userOn(table, shard).query<{ xmin: string }>(`SELECT xmin::text FROM pg_class WHERE oid = '${name}'::regclass`)).rows[0]!.xmin;

test('a table of two shards, one of which a materialized view reads: refused before either shard is emptied, every row in place', async () => {
  const table = await h.client.create({ table: 'metrics.viewed', shards: 2, columns: 'at int, value float8' });
  for (const shard of [0, 1])
    await userOn(table, shard).query(`INSERT INTO metrics.viewed_${shard} SELECT g, g FROM generate_series(1, 10) g`);
  await userOn(table, 1).query('CREATE MATERIALIZED VIEW metrics.viewed_1_v AS SELECT * FROM metrics.viewed_1');
  const trashedBefore = await trashedOn(table);
  // (Emptied and taken back, shard 0's table would have moved twice: a writer of it in between would have kept its rows
  // in the twin, and the truncate could not have been taken back.)
  const untouched = await classRowOf(table, 0, 'metrics.viewed_0');
  const refused = h.client.truncate({ table: table.id });
  await expect(refused).rejects.toBeInstanceOf(HasDependentsError);
  await expect(refused).rejects.toThrow(
    /metrics\.viewed_1 cannot be truncated into the trash while others depend on it: materialized view/,
  );
  expect(await classRowOf(table, 0, 'metrics.viewed_0')).toBe(untouched);
  expect(await h.client.describe({ table: table.id })).toMatchObject({ state: 'READY' });
  for (const shard of [0, 1]) {
    expect((await userOn(table, shard).query(`SELECT count(*)::int AS n FROM metrics.viewed_${shard}`)).rows).toEqual([{ n: 10 }]);
  }
  expect(await h.shardAreas(table)).toEqual(['live', 'live']);
  // Nothing of the truncate is left in the trash on either node.
  expect(await trashedOn(table)).toEqual(trashedBefore);
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('views on the table read its empty twin, to pg_dump and psql the same views; the recalled rows have none', async () => {
  const table = await h.client.create({ table: 'shop.items', shards: 1, columns: 'id int primary key, name text' });
  const user = userOn(table);
  await user.query("INSERT INTO shop.items VALUES (1, 'a'), (2, 'b')");
  await user.query(`
    CREATE VIEW shop.items_v WITH (security_barrier) AS SELECT * FROM shop.items WHERE id > 0 WITH LOCAL CHECK OPTION;
    COMMENT ON VIEW shop.items_v IS 'the items';
    CREATE VIEW shop.items_vv AS SELECT name FROM shop.items_v;
    ALTER VIEW shop.items_v OWNER TO trunc_svc;
    GRANT SELECT, INSERT ON shop.items TO trunc_svc;
    GRANT SELECT ON shop.items_v TO PUBLIC`);
  const views = ['shop.items_v', 'shop.items_vv'];
  const before = await Promise.all(views.map((view) => seenBy(urlOn(table), view)));

  const entry = await h.client.truncate({ table: 'shop.items' });

  expect(await Promise.all(views.map((view) => seenBy(urlOn(table), view)))).toEqual(before);
  expect((await user.query('SELECT count(*)::int AS n FROM shop.items_vv')).rows).toEqual([{ n: 0 }]);
  await user.query("INSERT INTO shop.items_v VALUES (3, 'c')");
  expect((await user.query('SELECT name FROM shop.items_vv')).rows).toEqual([{ name: 'c' }]);
  // Bound to the twin, by oid: nothing reads the rows in the trash.
  const { rows: bound } = await user.query(
    `SELECT DISTINCT r.ev_class::regclass::text AS view, d.refobjid = 'shop.items'::regclass AS twin FROM pg_depend d
       JOIN pg_rewrite r ON r.oid = d.objid WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid IN (
         SELECT oid FROM pg_class WHERE relnamespace IN ('shop'::regnamespace, 'tablefate_trash'::regnamespace) AND relkind = 'r')
        AND r.ev_class::regclass::text LIKE 'shop.items_v%'`,
  );
  expect(bound).toEqual([{ view: 'shop.items_v', twin: true }]);

  // Recalled under a name of its own, the table has the truncated rows and no view: they read the twin, as after
  // PostgreSQL's TRUNCATE.
  await h.client.undelete({ table: entry.id, newName: 'shop.items_before' });
  expect((await user.query('SELECT id FROM shop.items_before ORDER BY id')).rows).toEqual([{ id: 1 }, { id: 2 }]);
  expect((await user.query('SELECT count(*)::int AS n FROM shop.items_v')).rows).toEqual([{ n: 1 }]);
});

test('what no empty table could take over is refused before anything changes, named: a materialized view, a key to it', async () => {
  const table = await h.client.create({ table: 'shop.stock', shards: 1, columns: 'id int primary key, qty int' });
  const user = userOn(table);
  await user.query('INSERT INTO shop.stock VALUES (1, 10)');
  await user.query('CREATE MATERIALIZED VIEW shop.stock_total AS SELECT sum(qty) AS qty FROM shop.stock');
  const error = await h.client.truncate({ table: 'shop.stock' }).catch((err: unknown) => err);
  expect(error).toBeInstanceOf(HasDependentsError);
  expect((error as Error).message).toMatch(/materialized view shop\.stock_total reads it: PostgreSQL's TRUNCATE would leave its rows/);

  await user.query('DROP MATERIALIZED VIEW shop.stock_total');
  await user.query('CREATE TABLE shop.moves (stock_id int CONSTRAINT moves_stock_fk REFERENCES shop.stock)');
  const keyed = await h.client.truncate({ table: 'shop.stock' }).catch((err: unknown) => err);
  expect(keyed).toBeInstanceOf(HasDependentsError);
  expect((keyed as Error).message).toMatch(
    /^shop\.stock cannot be truncated into the trash: cannot truncate a table referenced in a foreign key constraint \(foreign key moves_stock_fk of shop\.moves references it\)/,
  );

  expect(await h.client.describe({ table: 'shop.stock' })).toMatchObject({ id: table.id, state: 'READY' });
  expect((await user.query('SELECT count(*)::int AS n FROM shop.stock')).rows).toEqual([{ n: 1 }]);
  expect(await h.catalog.listLocks()).toEqual([]);
  expect((await h.client.list({ includeTrashed: true })).filter((t) => t.truncatedFrom === table.id)).toEqual([]);
});

test('a session holding the table: the truncate drains as a drop does, naming it, then TableBusy; the table whole', async () => {
  const table = await h.client.create({ table: 'shop.busy', shards: 1, columns: 'id int' });
  const url = urlOn(table);
  const holder = new Client({ connectionString: url, application_name: 'trunc-holder' });
  await holder.connect();
  try {
    await holder.query('INSERT INTO shop.busy VALUES (1)');
    await holder.query('BEGIN');
    await holder.query('SELECT * FROM shop.busy');
    const error = await h.client.truncate({ table: 'shop.busy', drainTimeoutSeconds: 1 }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(TableBusyError);
    expect((error as Error).message).toMatch(/trunc-holder/);
    // Readers were never queued behind it: another session reads at once.
    expect((await userOn(table).query('SELECT count(*)::int AS n FROM shop.busy')).rows).toEqual([{ n: 1 }]);
    await holder.query('COMMIT');
  } finally {
    await holder.end();
  }
  expect(await h.client.describe({ table: 'shop.busy' })).toMatchObject({ state: 'READY' });
  const entry = await h.client.truncate({ table: 'shop.busy' });
  expect(entry.state).toBe('TRASHED');
});

test('recalled in place: the truncated rows are the table again under its name; those written since wait in the trash', async () => {
  const table = await h.client.create({ table: 'shop.ledger', shards: 1, columns: 'id serial primary key, note text' });
  const user = userOn(table);
  await user.query("INSERT INTO shop.ledger (note) SELECT 'old ' || g FROM generate_series(1, 5) g");
  const entry = await h.client.truncate({ table: 'shop.ledger' });
  await user.query("INSERT INTO shop.ledger (note) VALUES ('new')");
  const back = await h.client.undelete({ table: entry.id, inPlace: true });
  expect(back).toMatchObject({ id: entry.id, name: 'ledger', state: 'READY' });
  expect((await user.query('SELECT id, note FROM shop.ledger ORDER BY id')).rows.map((r: { note: string }) => r.note)).toEqual([
    'old 1',
    'old 2',
    'old 3',
    'old 4',
    'old 5',
  ]);
  expect(await h.client.describe({ table: table.id })).toMatchObject({ state: 'TRASHED' });
  await h.client.undelete({ table: table.id, newName: 'shop.ledger_since' });
  expect((await user.query('SELECT id, note FROM shop.ledger_since')).rows).toEqual([{ id: 6, note: 'new' }]);
});

test("its statistics objects: the twin's under their names; the truncated rows' back beside them, named after their new table", async () => {
  const table = await h.client.create({ table: 'shop.stated', shards: 1, columns: 'a int, b int' });
  const user = userOn(table);
  await user.query('CREATE STATISTICS shop.stated_ab ON a, b FROM shop.stated');
  await user.query('INSERT INTO shop.stated SELECT g, g FROM generate_series(1, 10) g');
  const entry = await h.client.truncate({ table: 'shop.stated' });
  await h.client.undelete({ table: entry.id, newName: 'shop.stated_before' });
  const { rows } = await user.query<{ stats: string; of: string }>(
    `SELECT format('%I.%I', n.nspname, x.stxname) AS stats, x.stxrelid::regclass::text AS of
       FROM pg_statistic_ext x JOIN pg_namespace n ON n.oid = x.stxnamespace WHERE x.stxname LIKE 'stated%' ORDER BY 1`,
  );
  expect(rows).toEqual([
    { stats: 'shop.stated_ab', of: 'shop.stated' },
    { stats: 'shop.stated_before_ab', of: 'shop.stated_before' },
  ]);
});
