import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { Harness } from './support/harness';
import { startCrashingWorker } from './support/crashing-worker';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import type { TableInfo } from '../domain/table';

/*
 * `rename` with the PostgreSQL driver: the table itself is renamed (`ALTER TABLE ... RENAME`, `SET SCHEMA`) under the
 * table's lock, drained as a drop is. Judged by what a service's own client sees on the node: the same table (its oid)
 * under the new name, its rows, grants and the views on it; nothing at the old name; and, taken back, nothing changed.
 */

let server: TestPostgres;
let h: Harness;
let urls: string[];
const nodes: Client[] = [];
/** A role of this run's (roles are the whole server's), to see grants travel. */
const reader = `rename_reader_${randomBytes(3).toString('hex')}`;

beforeAll(async () => {
  server = await sharedPostgres();
  urls = [await server.freshDatabase('rename'), await server.freshDatabase('rename')];
  for (const url of urls) {
    const client = new Client({ connectionString: url });
    await client.connect();
    nodes.push(client);
  }
  // (A lost workflow task is taken again after 3 s instead of the server's 10: the crash test waits that long.)
  h = await Harness.start({ postgresNodes: urls, workflowTaskTimeoutMs: 3_000 });
});

afterAll(async () => {
  await h?.close();
  await nodes[0]?.query(`DROP OWNED BY ${reader}; DROP ROLE IF EXISTS ${reader}`).catch(() => undefined);
  for (const client of nodes) await client.end();
  await server?.stop();
});

const nodeOf = (table: TableInfo, shard = 0) => nodes[Number(table.placement[shard]!.node.replace('node-', ''))]!;
const urlOf = (table: TableInfo, shard = 0) => urls[Number(table.placement[shard]!.node.replace('node-', ''))]!;
const rows = async (client: Client, sql: string) => (await client.query(sql)).rows as Array<Record<string, unknown>>;
const oidOf = async (client: Client, name: string) => (await rows(client, `SELECT to_regclass('${name}')::oid::int8 AS oid`))[0]!.oid;
/** Where each shard's table is, by the oid it had: schema.name. */
const whereIs = async (client: Client, oid: unknown) =>
  (
    await rows(
      client,
      `SELECT format('%I.%I', n.nspname, c.relname) AS at FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ${String(oid)}`,
    )
  )[0]?.at;

test('the table itself takes the new name, then another schema: the same oid, its rows, grants and views; the old name is free', async () => {
  const table = await h.client.create({ table: 'shop.orders', columns: 'id serial PRIMARY KEY, amount int' });
  const db = nodeOf(table);
  await db.query(`INSERT INTO shop.orders (amount) VALUES (10), (20);
    CREATE VIEW shop.orders_v AS SELECT count(*) AS n FROM shop.orders;
    CREATE ROLE ${reader}; GRANT SELECT ON shop.orders TO ${reader}`);
  const oid = await oidOf(db, 'shop.orders');

  const renamed = await h.client.rename({ table: 'shop.orders', newName: 'shop.orders_2025' });
  expect(renamed).toMatchObject({ id: table.id, namespace: 'shop', name: 'orders_2025', state: 'READY' });
  expect(await whereIs(db, oid)).toBe('shop.orders_2025');
  expect(await oidOf(db, 'shop.orders')).toBeNull();
  expect(await rows(db, 'SELECT amount FROM shop.orders_2025 ORDER BY id')).toEqual([{ amount: 10 }, { amount: 20 }]);
  // The view follows the table (it names it by oid); the grant is the table's; its serial goes on.
  expect(await rows(db, 'SELECT n::int FROM shop.orders_v')).toEqual([{ n: 2 }]);
  expect(await rows(db, `SELECT has_table_privilege('${reader}', 'shop.orders_2025', 'SELECT') AS can`)).toEqual([{ can: true }]);
  expect(await rows(db, 'INSERT INTO shop.orders_2025 (amount) VALUES (30) RETURNING id')).toEqual([{ id: 3 }]);

  // Into a schema that does not exist yet: made, as a create would.
  const archived = await h.client.rename({ table: table.id, newName: 'archive.orders' });
  expect(archived).toMatchObject({ id: table.id, namespace: 'archive', name: 'orders' });
  expect(await whereIs(db, oid)).toBe('archive.orders');
  expect(await rows(db, `SELECT schema_name AS schema, table_name AS name FROM tablefate.shards WHERE table_oid = ${String(oid)}`)).toEqual(
    [{ schema: 'archive', name: 'orders' }],
  );

  // The old name is free for a new table; the renamed one drops and comes back under its new name.
  expect((await h.client.create({ table: 'shop.orders', columns: 'id int' })).id).toBeGreaterThan(table.id);
  await db.query('DROP VIEW shop.orders_v');
  await h.client.trash({ table: 'archive.orders', retentionSeconds: 3600 });
  expect(await h.client.undelete({ table: table.id })).toMatchObject({ namespace: 'archive', name: 'orders', state: 'READY' });
  expect(await whereIs(db, oid)).toBe('archive.orders');
  expect(await rows(db, 'SELECT count(*)::int AS n FROM archive.orders')).toEqual([{ n: 3 }]);
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('a table of several shards renames each shard table; one name taken on a node: every shard back as it was', async () => {
  const table = await h.client.create({ table: 'shop.events', shards: 2, columns: 'id int' });
  const oids = await Promise.all([0, 1].map((k) => oidOf(nodeOf(table, k), `shop.events_${k}`)));

  // A table tablefate did not place holds the second shard's new name: the rename is NameTaken, and the first shard's
  // table, renamed already, goes back.
  await nodeOf(table, 1).query('CREATE TABLE shop.log_1 (x int)');
  await expect(h.client.rename({ table: 'shop.events', newName: 'shop.log' })).rejects.toMatchObject({
    type: 'NameTaken',
    message: expect.stringContaining('shop.log_1 is taken: a table tablefate did not place is there') as unknown,
  });
  expect(await h.catalog.getTable(table.id)).toMatchObject({ namespace: 'shop', name: 'events', state: 'READY' });
  expect(await Promise.all([0, 1].map((k) => whereIs(nodeOf(table, k), oids[k])))).toEqual(['shop.events_0', 'shop.events_1']);
  expect(await oidOf(nodeOf(table, 1), 'shop.log_1')).not.toBeNull();

  await nodeOf(table, 1).query('DROP TABLE shop.log_1');
  expect(await h.client.rename({ table: 'shop.events', newName: 'shop.log' })).toMatchObject({ name: 'log' });
  expect(await Promise.all([0, 1].map((k) => whereIs(nodeOf(table, k), oids[k])))).toEqual(['shop.log_0', 'shop.log_1']);
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('a rename waits for a session using the table up to --drain-timeout, then is TableBusy naming it, and nothing changed', async () => {
  const table = await h.client.create({ table: 'ops.jobs', columns: 'id int' });
  const db = nodeOf(table);
  const holder = new Client({ connectionString: urlOf(table), application_name: 'nightly-report' });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT * FROM ops.jobs');
    const started = Date.now();
    await expect(h.client.rename({ table: 'ops.jobs', newName: 'ops.tasks', drainTimeoutSeconds: 1 })).rejects.toMatchObject({
      type: 'TableBusy',
      message: expect.stringContaining('application "nightly-report"') as unknown,
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(await h.catalog.getTable(table.id)).toMatchObject({ name: 'jobs', state: 'READY' });
    expect(await oidOf(db, 'ops.jobs')).not.toBeNull();

    // Waiting, it queues no reader behind it: another session reads the table while the rename waits for the holder.
    const renaming = h.client.rename({ table: 'ops.jobs', newName: 'ops.tasks', drainTimeoutSeconds: 30 });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await db.query("SET lock_timeout = '200ms'");
    expect(await rows(db, 'SELECT count(*)::int AS n FROM ops.jobs')).toEqual([{ n: 0 }]);
    await db.query('RESET lock_timeout');
    await holder.query('COMMIT');
    expect(await renaming).toMatchObject({ name: 'tasks' });
    expect(await oidOf(db, 'ops.tasks')).not.toBeNull();
  } finally {
    await holder.end();
  }
});

test('a name too long for PostgreSQL (with its shard suffix) is refused before anything starts', async () => {
  const table = await h.client.create({ table: 'shop.wide', shards: 2, columns: 'id int' });
  const long = `t${'x'.repeat(61)}`;
  await expect(h.client.rename({ table: 'shop.wide', newName: `shop.${long}` })).rejects.toMatchObject({
    type: 'InvalidInput',
    message: expect.stringContaining('over 63 bytes') as unknown,
  });
  expect(await h.catalog.getTable(table.id)).toMatchObject({ name: 'wide' });
  // One shard: the same name fits.
  const one = await h.client.create({ table: 'shop.narrow', columns: 'id int' });
  expect(await h.client.rename({ table: one.id, newName: `shop.${long}` })).toMatchObject({ name: long });
  expect(await oidOf(nodeOf(one), `shop.${long}`)).not.toBeNull();
});

test('a worker killed after the rename call: the next one finishes it, the table renamed once', async () => {
  const table = await h.client.create({ table: 'crash.items', columns: 'id int' });
  const db = nodeOf(table);
  await db.query('INSERT INTO crash.items VALUES (1)');
  const oid = await oidOf(db, 'crash.items');
  await h.stopWorker();
  const crashing = await startCrashingWorker({
    on: h,
    activity: 'runStepsHere',
    env: { CRASH_POSTGRES_URLS: urls.join(','), CRASH_ON_CALL: '1' },
  });
  const answer = h.client.rename({ table: 'crash.items', newName: 'crash.things' }, { timeoutMs: 120_000 });
  expect(await crashing.exited).toBe('SIGKILL');
  await h.startWorker();
  expect(await answer).toMatchObject({ id: table.id, name: 'things', state: 'READY' });
  expect(await whereIs(db, oid)).toBe('crash.things');
  expect(await rows(db, 'SELECT id FROM crash.things')).toEqual([{ id: 1 }]);
  expect(await h.catalog.listLocks()).toEqual([]);
});
