import { Client } from 'pg';
import { Harness } from './support/harness';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { installGuard } from '../storage/postgres-guard';

/*
 * `drop --namespace shop` with the PostgreSQL driver: every table tablefate keeps in the schema goes into the trash as
 * one, with their views, and the schema itself, with what else it holds (a sequence of its own, a function, a type), is
 * set aside in the same transaction; a recall of any of them brings the whole of it back, under its name or another. Judged
 * by what a user's own client sees: pg_namespace by oid, pg_class, grants, a function called, a sequence's next value.
 */

let server: TestPostgres;
let h: Harness;
let db: Client;

beforeAll(async () => {
  server = await sharedPostgres();
  const url = await server.freshDatabase('namespace');
  db = new Client({ connectionString: url });
  await db.connect();
  h = await Harness.start({ postgresNodes: [url] });
  // With the guard on, as a DBA runs it: the namespace's own moves pass it, and it keeps what they set aside.
  await installGuard(db, 'node-0');
});

afterAll(async () => {
  await h?.close();
  await db?.end();
  await server?.stop();
});

const rows = async (sql: string, params: unknown[] = []) => (await db.query(sql, params)).rows as Array<Record<string, unknown>>;
const schemaOid = async (name: string) =>
  ((await rows('SELECT oid::int8 AS oid FROM pg_namespace WHERE nspname = $1', [name]))[0]?.oid as string | undefined) ?? null;
const schemaOf = async (oid: unknown) => (await rows('SELECT nspname FROM pg_namespace WHERE oid = $1', [oid]))[0]?.nspname ?? null;

/** A schema as an application leaves it: two kept tables, a view, a sequence of its own, a function, a type, a grant. */
async function shop(schema: string) {
  const orders = await h.client.create({ table: `${schema}.orders`, columns: 'id int PRIMARY KEY, total int' });
  const items = await h.client.create({ table: `${schema}.items`, columns: `order_id int REFERENCES ${schema}.orders (id), sku text` });
  await db.query(`INSERT INTO ${schema}.orders VALUES (1, 10), (2, 20);
    INSERT INTO ${schema}.items VALUES (1, 'pen'), (2, 'ink');
    CREATE VIEW ${schema}.big_orders AS SELECT id FROM ${schema}.orders WHERE total > 15;
    CREATE SEQUENCE ${schema}.tickets START 100;
    SELECT nextval('${schema}.tickets');
    CREATE FUNCTION ${schema}.double(x int) RETURNS int LANGUAGE sql AS 'SELECT x * 2';
    CREATE TYPE ${schema}.mood AS ENUM ('ok', 'sad');
    DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'shop_reader') THEN CREATE ROLE shop_reader; END IF; END $$;
    GRANT USAGE ON SCHEMA ${schema} TO shop_reader`);
  return { orders, items, oid: await schemaOid(schema) };
}

test('a namespace goes into the trash whole, its schema set aside with what it holds, and comes back whole under its name', async () => {
  const { orders, items, oid } = await shop('shop');
  const trashed = await h.client.trash({ namespace: 'shop', retentionSeconds: 3600 });
  expect(trashed).toMatchObject({ state: 'TRASHED', namespace: 'shop' });
  expect([orders.id, items.id]).toContain(trashed.id);
  expect(trashed.notes).toEqual(
    expect.arrayContaining([
      expect.stringMatching(/moved into the trash with it: view shop\.big_orders/),
      expect.stringMatching(/schema shop moved into the trash with them, holding 1 function, 1 sequence, 1 type/),
    ]),
  );
  for (const table of [orders, items]) expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'TRASHED' });
  // The name is free, and nothing of it is reachable under it.
  expect(await schemaOid('shop')).toBeNull();
  expect(await schemaOf(oid)).toBe(`tablefate_ns_${oid!}`);
  await db.query('CREATE SCHEMA shop_probe; DROP SCHEMA shop_probe');

  const back = await h.client.undelete({ table: items.id });
  expect(back).toMatchObject({ id: items.id, state: 'READY', namespace: 'shop', name: 'items' });
  expect(await schemaOf(oid)).toBe('shop');
  expect(await rows('SELECT id FROM shop.big_orders')).toEqual([{ id: 2 }]);
  expect(await rows('SELECT shop.double(21) AS d')).toEqual([{ d: 42 }]);
  expect(await rows(`SELECT nextval('shop.tickets')::int AS n`)).toEqual([{ n: 101 }]);
  expect(await rows(`SELECT 'sad'::shop.mood::text AS m`)).toEqual([{ m: 'sad' }]);
  expect(await rows(`SELECT has_schema_privilege('shop_reader', 'shop', 'USAGE') AS usage`)).toEqual([{ usage: true }]);
  expect(await rows('SELECT count(*)::int AS n FROM shop.items JOIN shop.orders ON orders.id = order_id')).toEqual([{ n: 2 }]);
  expect(await rows('SELECT count(*)::int AS n FROM tablefate.shards WHERE parked_schema IS NOT NULL')).toEqual([{ n: 0 }]);
});

test('recalled into another namespace: the schema and its tables come back under the new name, each table its own name', async () => {
  const { orders, items, oid } = await shop('store');
  await h.client.trash({ namespace: 'store', retentionSeconds: 3600 });
  const back = await h.client.undelete({ table: orders.id, newNamespace: 'store_2025' });
  expect(back).toMatchObject({ namespace: 'store_2025', name: 'orders', state: 'READY' });
  expect(await h.catalog.getTable(items.id)).toMatchObject({ namespace: 'store_2025', name: 'items', state: 'READY' });
  expect(await schemaOf(oid)).toBe('store_2025');
  expect(await rows('SELECT store_2025.double(2) AS d')).toEqual([{ d: 4 }]);
  expect(await rows('SELECT count(*)::int AS n FROM store_2025.items')).toEqual([{ n: 2 }]);
  // Its view came with its table into the new schema, and nothing was left under the old name.
  expect(await rows('SELECT id FROM store_2025.big_orders')).toEqual([{ id: 2 }]);
  expect(await schemaOid('store')).toBeNull();
});

test('a table of the schema tablefate does not keep refuses the drop, named, and nothing changes', async () => {
  const { orders, oid } = await shop('mixed');
  await db.query('CREATE TABLE mixed.scratch (x int)');
  await expect(h.client.trash({ namespace: 'mixed', retentionSeconds: 3600 })).rejects.toMatchObject({
    type: 'HasDependents',
    message: expect.stringMatching(
      /schema mixed still holds tables its drop does not take: mixed\.scratch; .*tablefate adopt mixed\.scratch/,
    ) as unknown,
  });
  expect(await h.catalog.getTable(orders.id)).toMatchObject({ state: 'READY' });
  expect(await schemaOf(oid)).toBe('mixed');
  expect(await rows('SELECT count(*)::int AS n FROM mixed.big_orders')).toEqual([{ n: 1 }]);
  await expect(h.client.trash({ namespace: 'nothing_here' })).rejects.toMatchObject({ type: 'TableNotFound' });
});

test('a schema of that name made meanwhile refuses the recall; the whole of it stays in the trash, and purges take it all', async () => {
  const { orders, items, oid } = await shop('again');
  await h.client.trash({ namespace: 'again', retentionSeconds: 3600 });
  await db.query('CREATE SCHEMA again');
  await expect(h.client.undelete({ table: orders.id })).rejects.toMatchObject({
    type: 'NameTaken',
    message: expect.stringContaining('schema again was made while') as unknown,
  });
  for (const table of [orders, items]) expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'TRASHED' });
  expect(await schemaOf(oid)).toBe(`tablefate_ns_${oid!}`);
  // The guard keeps what the schema holds while its tables wait: a DBA's DROP SCHEMA of it is refused, naming the way back.
  await expect(db.query(`DROP SCHEMA tablefate_ns_${oid!} CASCADE`)).rejects.toMatchObject({
    code: '42501',
    message: expect.stringContaining(`schema tablefate_ns_${oid!} holds what a namespace's drop set aside`) as unknown,
  });

  // The first purge keeps the schema for the other table of the drop; the last takes it.
  await h.client.purge({ tableId: orders.id });
  expect(await schemaOf(oid)).toBe(`tablefate_ns_${oid!}`);
  await h.client.purge({ tableId: items.id });
  expect(await schemaOf(oid)).toBeNull();
});

test("two drops of a namespace's one table at once, one of the whole namespace: each is answered as it asked, or refused", async () => {
  const table = await h.client.create({ table: 'both.items', columns: 'id int' });
  const oid = await schemaOid('both');
  const untilDraining = async () => {
    while ((await h.catalog.getTable(table.id))?.state !== 'DRAINING') await new Promise((resolve) => setTimeout(resolve, 50));
  };
  const settled = <T>(call: Promise<T>) =>
    call.then(
      (answer) => ({ answer }),
      (error: Error & { type?: string }) => ({ error }),
    );

  // A drop of the table waits for a lease; the namespace's drop joins its run, which leaves the schema where it is.
  let lease = await h.client.acquireLease(table.id, { ttlSeconds: 60, holder: 'test' });
  const plain = h.client.trash({ table: 'both.items', retentionSeconds: 3600 });
  await untilDraining();
  const whole = settled(h.client.trash({ namespace: 'both', retentionSeconds: 3600 }));
  await new Promise((resolve) => setTimeout(resolve, 500));
  await h.client.releaseLease(lease.id);
  expect(await plain).toMatchObject({ state: 'TRASHED' });
  expect(await whole).toMatchObject({
    error: {
      type: 'WrongState',
      message: expect.stringContaining('trashed meanwhile by another request, alone: namespace both stays') as unknown,
    },
  });
  expect(await schemaOf(oid)).toBe('both');
  await h.client.undelete({ table: table.id });

  // The other way round: the table's drop joins the namespace's, and is told that the schema went too.
  lease = await h.client.acquireLease(table.id, { ttlSeconds: 60, holder: 'test' });
  const first = h.client.trash({ namespace: 'both', retentionSeconds: 3600 });
  await untilDraining();
  const second = settled(h.client.trash({ table: 'both.items', retentionSeconds: 3600 }));
  await new Promise((resolve) => setTimeout(resolve, 500));
  await h.client.releaseLease(lease.id);
  expect(await first).toMatchObject({ state: 'TRASHED', notes: [expect.stringContaining('schema both moved into the trash with them')] });
  expect(await second).toMatchObject({
    error: {
      type: 'WrongState',
      message: expect.stringContaining('trashed meanwhile by another request, with its whole namespace both') as unknown,
    },
  });
  expect(await schemaOf(oid)).not.toBe('both');
});
