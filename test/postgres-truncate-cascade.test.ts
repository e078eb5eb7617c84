import { execFile } from 'node:child_process';
import { Client } from 'pg';
import { postgresProgram } from '../servers/local-postgres';
import { HasDependentsError } from '../domain/errors';
import { Harness } from './support/harness';
import { sharedPostgres, type TestPostgres } from './support/postgres';

/*
 * `truncate --cascade` with the PostgreSQL driver, as `TRUNCATE ... CASCADE`: the tables whose keys reference the table
 * (and theirs in turn) truncated with it, in one transaction, each into a trash entry of its own. Judged by what a user's
 * own client sees: every table of the family empty and, to pg_dump, what it was, its keys pointing at the other empty
 * tables; the rows back, whole, with their keys between them, under names of their own.
 */

let server: TestPostgres;
let h: Harness;
let url: string;
/** A user's own client: default settings. */
let user: Client;

beforeAll(async () => {
  server = await sharedPostgres();
  url = await server.freshDatabase('pgcascade');
  user = new Client({ connectionString: url });
  await user.connect();
  h = await Harness.start({ postgresNodes: [url] });
});

afterAll(async () => {
  await h?.close();
  await user?.end();
  await server?.stop();
});

const count = async (table: string) => (await user.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]!.n;

/** pg_dump's schema of a table, without its header. */
function dumped(table: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(postgresProgram('pg_dump'), ['--schema-only', '-t', table, url], (err, stdout, stderr) =>
      err
        ? reject(new Error(`pg_dump ${table}: ${err.message}\n${stderr}`))
        : resolve(stdout.replace(/^-- Dumped (from|by) .*$/gm, '').replace(/^\\(un)?restrict .*$/gm, '')),
    );
  });
}

/** Each foreign key of the schema's tables: the table it is on, and the table it references, as PostgreSQL has them now. */
async function keysOf(schema: string): Promise<string[]> {
  const { rows } = await user.query<{ key: string }>(
    `SELECT k.conname || ': ' || k.conrelid::regclass || ' -> ' || k.confrelid::regclass AS key
       FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE k.contype = 'f' AND n.nspname = $1 ORDER BY 1`,
    [schema],
  );
  return rows.map((row) => row.key);
}

test('a family of three: refused without --cascade; with it, all three empty, the same to pg_dump, keys between the empty ones; the rows back with their keys', async () => {
  const orders = await h.client.create({ table: 'shop.orders', shards: 1, columns: 'id serial primary key, customer text not null' });
  const items = await h.client.create({
    table: 'shop.items',
    shards: 1,
    columns: 'id serial primary key, order_id int not null constraint items_order_fk references shop.orders on delete cascade, sku text',
  });
  const shipments = await h.client.create({
    table: 'shop.shipments',
    shards: 1,
    columns: 'id serial primary key, item_id int constraint shipments_item_fk references shop.items on delete set null',
  });
  await user.query("INSERT INTO shop.orders (customer) SELECT 'c' || g FROM generate_series(1, 3) g");
  await user.query("INSERT INTO shop.items (order_id, sku) SELECT 1 + g % 3, 'sku' || g FROM generate_series(1, 6) g");
  await user.query('INSERT INTO shop.shipments (item_id) SELECT id FROM shop.items');
  await user.query('CREATE VIEW shop.order_lines AS SELECT o.customer, i.sku FROM shop.orders o JOIN shop.items i ON i.order_id = o.id');
  const before = { orders: await dumped('shop.orders'), items: await dumped('shop.items'), shipments: await dumped('shop.shipments') };
  const keysBefore = await keysOf('shop');

  const refused = await h.client.truncate({ table: 'shop.orders' }).catch((err: unknown) => err);
  expect(refused).toBeInstanceOf(HasDependentsError);
  expect((refused as Error).message).toMatch(/foreign key items_order_fk of shop\.items references it/);
  expect(await count('shop.items')).toBe(6);

  const entry = await h.client.truncate({ table: 'shop.orders', cascade: true });
  expect(entry).toMatchObject({ state: 'TRASHED', truncatedFrom: orders.id, name: 'orders' });
  const listed = await h.client.list({ includeTrashed: true });
  const entryOf = (id: number) => listed.find((t) => t.truncatedFrom === id && t.state === 'TRASHED')!;
  expect(entryOf(items.id)).toBeDefined();
  expect(entryOf(shipments.id)).toBeDefined();
  expect(entry.notes?.join('\n')).toContain(`shop.items (table ${items.id}): its rows are table ${entryOf(items.id).id}, TRASHED`);
  expect(entry.notes?.join('\n')).toContain(
    `shop.shipments (table ${shipments.id}): its rows are table ${entryOf(shipments.id).id}, TRASHED`,
  );

  // The three live, empty, under their ids; to pg_dump what they were; their keys point at one another's empty twins.
  for (const t of [orders, items, shipments]) expect(await h.client.describe({ table: t.id })).toMatchObject({ state: 'READY' });
  expect([await count('shop.orders'), await count('shop.items'), await count('shop.shipments')]).toEqual([0, 0, 0]);
  expect({ orders: await dumped('shop.orders'), items: await dumped('shop.items'), shipments: await dumped('shop.shipments') }).toEqual(
    before,
  );
  expect(await keysOf('shop')).toEqual(keysBefore);
  // Ids go on; a key refuses an order that is not there; the view reads the empty tables.
  await user.query("INSERT INTO shop.orders (customer) VALUES ('new')");
  expect((await user.query('SELECT id FROM shop.orders')).rows).toEqual([{ id: 4 }]);
  await expect(user.query("INSERT INTO shop.items (order_id, sku) VALUES (1, 'x')")).rejects.toThrow(/items_order_fk/);
  await user.query("INSERT INTO shop.items (order_id, sku) VALUES (4, 'fresh')");
  expect((await user.query('SELECT * FROM shop.order_lines')).rows).toEqual([{ customer: 'new', sku: 'fresh' }]);
  expect(await h.catalog.listLocks()).toEqual([]);

  // The rows back under names of their own: the items' key points at the orders recalled, not at the live table.
  await h.client.undelete({ table: entryOf(items.id).id, newName: 'shop.items_before' });
  await h.client.undelete({ table: entry.id, newName: 'shop.orders_before' });
  expect([await count('shop.orders_before'), await count('shop.items_before')]).toEqual([3, 6]);
  expect(await keysOf('shop')).toEqual([...keysBefore, 'items_order_fk: shop.items_before -> shop.orders_before'].sort());
  await user.query('DELETE FROM shop.orders_before WHERE id = 1');
  expect(await count('shop.items_before')).toBe(4);
});

test('a table tablefate does not keep references one of the family: refused, naming it and its key, nothing changed', async () => {
  await h.client.create({ table: 'crm.accounts', shards: 1, columns: 'id int primary key' });
  await h.client.create({ table: 'crm.contacts', shards: 1, columns: 'id int primary key, account_id int references crm.accounts' });
  await user.query('CREATE TABLE crm.notes (contact_id int CONSTRAINT notes_contact_fk REFERENCES crm.contacts)');
  await user.query('INSERT INTO crm.accounts VALUES (1); INSERT INTO crm.contacts VALUES (1, 1); INSERT INTO crm.notes VALUES (1)');

  const refused = await h.client.truncate({ table: 'crm.accounts', cascade: true }).catch((err: unknown) => err);
  expect(refused).toBeInstanceOf(HasDependentsError);
  expect((refused as Error).message).toBe(
    'crm.accounts cannot be truncated with --cascade: crm.notes (its key notes_contact_fk references crm.contacts) is not a table ' +
      'tablefate keeps, and its rows could not come back: adopt it, or drop its key, first',
  );
  expect([await count('crm.accounts'), await count('crm.contacts'), await count('crm.notes')]).toEqual([1, 1, 1]);
  expect((await h.client.list({ includeTrashed: true })).filter((t) => t.truncatedFrom !== undefined && t.namespace === 'crm')).toEqual([]);
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('keys in a circle: both tables truncated, the twins keyed to each other both ways', async () => {
  await h.client.create({ table: 'ring.a', shards: 1, columns: 'id int primary key, b_id int' });
  await h.client.create({ table: 'ring.b', shards: 1, columns: 'id int primary key, a_id int constraint b_a_fk references ring.a' });
  await user.query('ALTER TABLE ring.a ADD CONSTRAINT a_b_fk FOREIGN KEY (b_id) REFERENCES ring.b DEFERRABLE INITIALLY DEFERRED');
  await user.query('BEGIN; INSERT INTO ring.a VALUES (1, 1); INSERT INTO ring.b VALUES (1, 1); COMMIT');
  const keysBefore = await keysOf('ring');

  await h.client.truncate({ table: 'ring.b', cascade: true });
  expect([await count('ring.a'), await count('ring.b')]).toEqual([0, 0]);
  expect(await keysOf('ring')).toEqual(keysBefore);
  await expect(user.query('INSERT INTO ring.b VALUES (2, 1)')).rejects.toThrow(/b_a_fk/);
});

test('recalled in place, the referencing table first: each table its rows again, the keys between them back, what was written since in the trash', async () => {
  const parent = await h.client.create({ table: 'inv.parts', shards: 1, columns: 'id int primary key' });
  const child = await h.client.create({
    table: 'inv.bins',
    shards: 1,
    columns: 'part_id int not null constraint bins_part_fk references inv.parts, qty int',
  });
  await user.query(
    'INSERT INTO inv.parts SELECT generate_series(1, 4); INSERT INTO inv.bins SELECT g, 10 * g FROM generate_series(1, 4) g',
  );
  const entry = await h.client.truncate({ table: 'inv.parts', cascade: true });
  const childEntry = (await h.client.list({ includeTrashed: true })).find((t) => t.truncatedFrom === child.id && t.state === 'TRASHED')!;
  await user.query('INSERT INTO inv.parts VALUES (9); INSERT INTO inv.bins VALUES (9, 90)');

  // The parent first is refused as its drop would be: the live table's key on it is named; nothing changes.
  const refused = await h.client.undelete({ table: entry.id, inPlace: true }).catch((err: unknown) => err);
  expect(refused).toBeInstanceOf(HasDependentsError);
  expect((refused as Error).message).toMatch(/bins_part_fk/);
  expect([await count('inv.parts'), await count('inv.bins')]).toEqual([1, 1]);

  await h.client.undelete({ table: childEntry.id, inPlace: true });
  await h.client.undelete({ table: entry.id, inPlace: true });
  expect((await user.query('SELECT part_id, qty FROM inv.bins ORDER BY 1')).rows).toEqual(
    [1, 2, 3, 4].map((g) => ({ part_id: g, qty: 10 * g })),
  );
  expect(await count('inv.parts')).toBe(4);
  expect(await keysOf('inv')).toEqual(['bins_part_fk: inv.bins -> inv.parts']);
  await expect(user.query('INSERT INTO inv.bins VALUES (7, 1)')).rejects.toThrow(/bins_part_fk/);
  // What was written to the twins since waits in the trash, as the tables they were.
  expect(await h.client.describe({ table: parent.id })).toMatchObject({ state: 'TRASHED' });
  expect(await h.client.describe({ table: child.id })).toMatchObject({ state: 'TRASHED' });
  await h.client.undelete({ table: child.id, newName: 'inv.bins_since' });
  await h.client.undelete({ table: parent.id, newName: 'inv.parts_since' });
  expect((await user.query('SELECT part_id, qty FROM inv.bins_since')).rows).toEqual([{ part_id: 9, qty: 90 }]);
  expect(await keysOf('inv')).toEqual(['bins_part_fk: inv.bins -> inv.parts', 'bins_part_fk: inv.bins_since -> inv.parts_since']);
});
