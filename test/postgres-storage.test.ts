import { Client } from 'pg';
import { Harness } from './support/harness';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import type { TableInfo } from '../domain/table';

/*
 * The whole life of a table whose shards are real PostgreSQL tables (storage/postgres.ts), through the workflows, on a
 * worker that serves two PostgreSQL nodes, judged by what a service's own PostgreSQL client sees on each node.
 */

let server: TestPostgres;
let h: Harness;
const nodes: Client[] = [];

beforeAll(async () => {
  server = await sharedPostgres();
  const urls = [await server.freshDatabase('pgnode'), await server.freshDatabase('pgnode')];
  for (const url of urls) {
    const client = new Client({ connectionString: url });
    await client.connect();
    nodes.push(client);
  }
  h = await Harness.start({ postgresNodes: urls });
});

afterAll(async () => {
  await h?.close();
  for (const client of nodes) await client.end();
  await server?.stop();
});

/** A service's client on the node that holds `shard` of `table`. */
const nodeOf = (table: TableInfo, shard = 0) => nodes[Number(table.placement[shard]!.node.replace('node-', ''))]!;
const rows = async (client: Client, sql: string) => (await client.query(sql)).rows as Array<Record<string, unknown>>;

test('create, fill, drop, recall under a new name: the rows come back, and a query of the dropped name fails meanwhile', async () => {
  const table = await h.client.create({ table: 'shop.orders', shards: 1, columns: 'id int primary key, total numeric(12,2) not null' });
  expect(table).toMatchObject({ namespace: 'shop', name: 'orders', state: 'READY', shards: 1 });
  const service = nodeOf(table);
  await service.query('INSERT INTO shop.orders VALUES (1, 9.50), (2, 20)');

  // The same create again is the same table; another definition of that name is refused.
  expect(await h.client.create({ table: 'shop.orders', shards: 1, columns: 'id int primary key, total numeric(12,2) not null' })).toEqual(
    table,
  );
  await expect(h.client.create({ table: 'shop.orders', shards: 1, columns: 'id bigint' })).rejects.toMatchObject({
    type: 'TableExists',
    message: expect.stringContaining('with columns (id int primary key') as unknown,
  });

  const trashed = await h.client.trash({ table: 'shop.orders', retentionSeconds: 3600 });
  expect(trashed.state).toBe('TRASHED');
  await expect(service.query('SELECT * FROM shop.orders')).rejects.toThrow('relation "shop.orders" does not exist');
  expect(await h.shardAreas(table)).toEqual(['trash']);

  const recalled = await h.client.undelete({ table: table.id, newName: 'archive.orders_old' });
  expect(recalled).toMatchObject({ namespace: 'archive', name: 'orders_old', state: 'READY' });
  expect(await rows(service, 'SELECT id, total FROM archive.orders_old ORDER BY id')).toEqual([
    { id: 1, total: '9.50' },
    { id: 2, total: '20.00' },
  ]);
  expect(await rows(service, "SELECT indexname FROM pg_indexes WHERE schemaname = 'archive'")).toEqual([{ indexname: 'orders_pkey' }]);
});

test('a table of two shards is two tables, <name>_0 and <name>_1, each on its placed node; a purge leaves neither', async () => {
  const table = await h.client.create({ table: 'metrics.points', shards: 2, columns: 'at timestamptz, value float8' });
  for (const shard of [0, 1]) {
    await nodeOf(table, shard).query(`INSERT INTO metrics.points_${shard} VALUES (now(), ${shard})`);
  }
  const before = await h.shardReports(table);
  expect(before.map((r) => r.area)).toEqual(['live', 'live']);
  expect(before.every((r) => r.bytes > 0)).toBe(true);

  await h.client.trash({ table: 'metrics.points', retentionSeconds: 3600 });
  const purged = await h.client.purge({ tableId: table.id });
  expect(purged.state).toBe('PURGED');
  expect(await h.shardAreas(table)).toEqual([null, null]);
  for (const client of nodes) {
    const left = await rows(
      client,
      "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname IN ('metrics', 'tablefate_trash', 'tablefate_garbage')",
    );
    expect(left).toEqual([]);
  }
});

test('a recall onto a name a user took by hand meanwhile is refused, and leaves both tables as they were', async () => {
  const table = await h.client.create({ table: 'crm.leads', shards: 1, columns: 'id int' });
  const service = nodeOf(table);
  await service.query('INSERT INTO crm.leads VALUES (1)');
  await h.client.trash({ table: 'crm.leads', retentionSeconds: 3600 });
  await service.query('CREATE TABLE crm.leads (mine text); INSERT INTO crm.leads VALUES ($$the user$$)');

  await expect(h.client.undelete({ table: table.id })).rejects.toMatchObject({
    type: 'NameTaken',
    message: expect.stringContaining('crm.leads is taken') as unknown,
  });
  expect(await rows(service, 'SELECT mine FROM crm.leads')).toEqual([{ mine: 'the user' }]);
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'TRASHED' });
  expect(await h.shardAreas(table)).toEqual(['trash']);
});
