import { Client } from 'pg';
import { Harness } from './support/harness';
import { startCrashingWorker } from './support/crashing-worker';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import type { TableInfo } from '../domain/table';

/*
 * `drop --cascade` with the PostgreSQL driver: a table goes into the trash with what depends on it, as PostgreSQL's own
 * `DROP ... CASCADE` would drop it, but kept: its views and materialized views (to any depth) move with it, whole, and
 * live tables' foreign keys, policies and defaults on it are detached; a recall puts every one back. Judged by what a
 * user's own client sees on the node: pg_class by oid, pg_constraint, pg_policies, column defaults, rows.
 */

let server: TestPostgres;
let h: Harness;
let db: Client;
let url: string;

beforeAll(async () => {
  server = await sharedPostgres();
  url = await server.freshDatabase('cascade');
  db = new Client({ connectionString: url });
  await db.connect();
  // (A lost workflow task is taken again after 3 s instead of the server's 10: the crash tests wait that long.)
  h = await Harness.start({ postgresNodes: [url], workflowTaskTimeoutMs: 3_000 });
});

afterAll(async () => {
  await h?.close();
  await db?.end();
  await server?.stop();
});

const rows = async (sql: string) => (await db.query(sql)).rows as Array<Record<string, unknown>>;
const oidOf = async (name: string) => (await rows(`SELECT to_regclass('${name}')::oid::int8 AS oid`))[0]!.oid as string | null;
/** Where the relation of `oid` is: schema.name, or null when there is none. */
const whereIs = async (oid: unknown) =>
  (
    await rows(
      `SELECT format('%I.%I', n.nspname, c.relname) AS at FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ${String(oid)}`,
    )
  )[0]?.at ?? null;
/** What live tables have on <schema>.items, as psql's \d would list it. */
const onItems = async (schema: string) => ({
  keys: await rows(
    `SELECT conname, convalidated FROM pg_constraint WHERE conrelid = '${schema}.orders'::regclass AND contype = 'f' ORDER BY conname`,
  ),
  policies: await rows(`SELECT policyname, qual FROM pg_policies WHERE schemaname = '${schema}' AND tablename = 'orders'`),
  defaults: await rows(
    `SELECT column_name, column_default FROM information_schema.columns WHERE table_schema = '${schema}' AND table_name = 'orders' AND column_name = 'ticket'`,
  ),
});

/** <schema>.items with a view, a view on the view, a materialized view with an index, and <schema>.orders keyed to it. */
async function family(schema: string): Promise<{ table: TableInfo; oids: Record<string, unknown> }> {
  const table = await h.client.create({ table: `${schema}.items`, columns: 'id serial PRIMARY KEY, title text NOT NULL' });
  await db.query(`INSERT INTO ${schema}.items (title) VALUES ('pen'), ('ink'), ('nib');
    CREATE VIEW ${schema}.items_v AS SELECT id, upper(title) AS title FROM ${schema}.items;
    CREATE VIEW ${schema}.items_vv AS SELECT count(*) AS n FROM ${schema}.items_v;
    CREATE MATERIALIZED VIEW ${schema}.items_mv AS SELECT id, title FROM ${schema}.items;
    CREATE UNIQUE INDEX items_mv_id ON ${schema}.items_mv (id);
    CREATE TABLE ${schema}.orders (id int PRIMARY KEY, item_id int REFERENCES ${schema}.items (id) ON DELETE CASCADE,
                                   ticket bigint DEFAULT nextval('${schema}.items_id_seq'));
    ALTER TABLE ${schema}.orders ENABLE ROW LEVEL SECURITY;
    CREATE POLICY orders_known ON ${schema}.orders USING (item_id IN (SELECT id FROM ${schema}.items));
    INSERT INTO ${schema}.orders (id, item_id) VALUES (1, 1), (2, 2)`);
  const oids: Record<string, unknown> = {};
  for (const name of ['items', 'items_v', 'items_vv', 'items_mv', 'items_mv_id'])
    oids[`${schema}.${name}`] = await oidOf(`${schema}.${name}`);
  return { table, oids };
}

test('without --cascade a table anything depends on is refused, naming each and the flag; with it, all of it goes and comes back', async () => {
  const { table, oids } = await family('shop');
  const before = await onItems('shop');
  await expect(h.client.trash({ table: 'shop.items', retentionSeconds: 3600 })).rejects.toMatchObject({
    type: 'HasDependents',
    message: expect.stringMatching(
      /view shop\.items_v, .*view shop\.items_vv.*foreign key orders_item_id_fkey of shop\.orders.*policy orders_known of shop\.orders.*--cascade/,
    ) as unknown,
  });
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY' });
  for (const [name, oid] of Object.entries(oids)) expect(await whereIs(oid)).toBe(name);
  expect(await onItems('shop')).toEqual(before);

  // With it: the views in the trash with the table, the rest detached; then a recall puts every one back.
  const trashed = await h.client.trash({ table: 'shop.items', retentionSeconds: 3600, cascade: true });
  expect(trashed).toMatchObject({ state: 'TRASHED' });
  expect(trashed.notes).toEqual([
    'shop.items: moved into the trash with it: materialized view shop.items_mv, view shop.items_v, view shop.items_vv',
    'shop.items: detached until its recall: default of shop.orders.ticket, foreign key orders_item_id_fkey of shop.orders, policy orders_known of shop.orders',
  ]);
  for (const oid of Object.values(oids)) expect(await whereIs(oid)).toMatch(/^tablefate_trash\./);
  expect(await oidOf('shop.items_v')).toBeNull();
  // One entry in the trash, with what it took along, for as long as it is there.
  expect((await h.client.list({ includeTrashed: true })).find((t) => t.id === table.id)?.family).toEqual(trashed.notes);
  expect((await h.client.describe({ table: table.id })).family).toEqual(trashed.notes);
  expect(await onItems('shop')).toEqual({ keys: [], policies: [], defaults: [{ column_name: 'ticket', column_default: null }] });
  // As after a real DROP ... CASCADE: orders keeps its rows, and takes one that names no item.
  await db.query('INSERT INTO shop.orders (id, item_id, ticket) VALUES (3, 3, 0)');
  expect(await rows('SELECT count(*)::int AS n FROM shop.orders')).toEqual([{ n: 3 }]);

  const back = await h.client.undelete({ table: table.id });
  expect(back).toMatchObject({ state: 'READY', namespace: 'shop', name: 'items' });
  expect(back.family).toBeUndefined();
  for (const [name, oid] of Object.entries(oids)) expect(await whereIs(oid)).toBe(name);
  expect(await rows('SELECT n::int FROM shop.items_vv')).toEqual([{ n: 3 }]);
  expect(await rows('SELECT title FROM shop.items_v ORDER BY id')).toEqual([{ title: 'PEN' }, { title: 'INK' }, { title: 'NIB' }]);
  expect(await onItems('shop')).toEqual(before);
  // Its sequence goes on where it was (three items; the orders' two tickets took 4 and 5).
  expect(await rows(`SELECT nextval('shop.items_id_seq')::int AS next`)).toEqual([{ next: 6 }]);
  expect(await rows('SELECT count(*)::int AS n FROM tablefate.shards WHERE family IS NOT NULL')).toEqual([{ n: 0 }]);
});

test('a key whose rows no longer match comes back NOT VALID, said; a purge drops the family with the table', async () => {
  const { table, oids } = await family('dept');
  await h.client.trash({ table: 'dept.items', retentionSeconds: 3600, cascade: true });
  await db.query('INSERT INTO dept.orders (id, item_id) VALUES (9, 999)');
  const back = await h.client.undelete({ table: table.id });
  expect(back.notes).toEqual([expect.stringMatching(/^dept\.items: foreign key orders_item_id_fkey of dept\.orders is back NOT VALID/)]);
  expect((await onItems('dept')).keys).toEqual([{ conname: 'orders_item_id_fkey', convalidated: false }]);
  // Enforced for new rows all the same.
  await expect(db.query('INSERT INTO dept.orders (id, item_id) VALUES (10, 1000)')).rejects.toMatchObject({ code: '23503' });

  await db.query('DELETE FROM dept.orders WHERE id = 9');
  await h.client.trash({ table: 'dept.items', retentionSeconds: 3600, cascade: true });
  expect(await h.client.purge({ tableId: table.id })).toMatchObject({ state: 'PURGED' });
  for (const oid of Object.values(oids)) expect(await whereIs(oid)).toBeNull();
  expect(
    await rows(
      "SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname IN ('tablefate_trash', 'tablefate_garbage')",
    ),
  ).toEqual([{ n: 0 }]);
  expect(await onItems('dept')).toMatchObject({ keys: [], policies: [] });
});

test('recalled under another name: the views come with it; what names it by its old name is said, not put back', async () => {
  const { table, oids } = await family('ren');
  await h.client.trash({ table: 'ren.items', retentionSeconds: 3600, cascade: true });
  const back = await h.client.undelete({ table: table.id, newName: 'ren.items_old' });
  expect(await whereIs(oids['ren.items'])).toBe('ren.items_old');
  expect(await whereIs(oids['ren.items_v'])).toBe('ren.items_v');
  expect(await rows('SELECT n::int FROM ren.items_vv')).toEqual([{ n: 3 }]);
  expect(back.notes).toEqual(
    ['default of ren.orders.ticket', 'foreign key orders_item_id_fkey of ren.orders', 'policy orders_known of ren.orders'].map(
      (what): unknown => expect.stringContaining(`${what} was not put back: it names the table as ren.items, not ren.items_old`),
    ),
  );
});

test('a view taken while the table was in the trash: the member comes back beside it, said', async () => {
  const table = await h.client.create({ table: 'side.items', columns: 'id int' });
  const view = await (async () => {
    await db.query('CREATE VIEW side.items_v AS SELECT id FROM side.items');
    return oidOf('side.items_v');
  })();
  await h.client.trash({ table: 'side.items', retentionSeconds: 3600, cascade: true });
  await db.query('CREATE VIEW side.items_v AS SELECT 1 AS one');
  const back = await h.client.undelete({ table: table.id });
  expect(await whereIs(view)).toBe('side.items_v_2');
  expect(back.notes).toEqual([expect.stringContaining('view side.items_v came back as side.items_v_2: its name was taken meanwhile')]);
});

test('what no drop can keep is refused even with --cascade, named; nothing changes', async () => {
  const table = await h.client.create({ table: 'fn.items', columns: 'id int' });
  await db.query(`CREATE VIEW fn.items_v AS SELECT id FROM fn.items;
    CREATE FUNCTION fn.item_count() RETURNS bigint LANGUAGE sql BEGIN ATOMIC SELECT count(*) FROM fn.items; END`);
  await expect(h.client.trash({ table: 'fn.items', retentionSeconds: 3600, cascade: true })).rejects.toMatchObject({
    type: 'HasDependents',
    message: expect.stringMatching(/function fn\.item_count\(\).*a drop cannot keep them/) as unknown,
  });
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY' });
  expect(await oidOf('fn.items_v')).not.toBeNull();
});

test('--cascade with the files driver is refused before anything starts', async () => {
  const files = await Harness.start({ address: h.address });
  try {
    await files.client.create({ table: 'plain.items' });
    await expect(files.client.trash({ table: 'plain.items', cascade: true })).rejects.toMatchObject({ type: 'InvalidInput' });
  } finally {
    await files.close();
  }
});

test.each([
  ['after its move (the drain and the move, in one lost task)', '1'],
  ['after its commit (in one lost task)', '2'],
])('a worker killed %s: the next one ends it TRASHED, the family whole in the trash and recorded, moved once', async (_when, call) => {
  const schema = `crash${call}`;
  const { table, oids } = await family(schema);
  await h.stopWorker();
  const crashing = await startCrashingWorker({
    on: h,
    activity: 'runStepsHere',
    env: { CRASH_POSTGRES_URLS: url, CRASH_ON_CALL: call },
  });
  const answer = h.client.trash({ table: `${schema}.items`, cascade: true, retentionSeconds: 3600 }, { timeoutMs: 120_000 });
  expect(await crashing.exited).toBe('SIGKILL');
  await h.startWorker();
  const trashed = await answer;
  expect(trashed).toMatchObject({ state: 'TRASHED' });
  for (const oid of Object.values(oids)) expect(await whereIs(oid)).toMatch(/^tablefate_trash\./);
  expect(await onItems(schema)).toEqual({ keys: [], policies: [], defaults: [{ column_name: 'ticket', column_default: null }] });
  expect((await h.catalog.getTable(table.id))?.family).toEqual([
    `${schema}.items: moved into the trash with it: materialized view ${schema}.items_mv, view ${schema}.items_v, view ${schema}.items_vv`,
    `${schema}.items: detached until its recall: default of ${schema}.orders.ticket, foreign key orders_item_id_fkey of ${schema}.orders, policy orders_known of ${schema}.orders`,
  ]);
  expect(await h.catalog.listLocks()).toEqual([]);
  // And it comes back whole.
  await h.client.undelete({ table: table.id });
  for (const [name, oid] of Object.entries(oids)) expect(await whereIs(oid)).toBe(name);
  expect((await onItems(schema)).keys).toEqual([{ conname: 'orders_item_id_fkey', convalidated: true }]);
});

test("two drops of one table at once, one with cascade: each is answered as it asked, never with the other's cascade", async () => {
  const table = await h.client.create({ table: 'twice.items', columns: 'id int' });
  await db.query('CREATE VIEW twice.items_v AS SELECT id FROM twice.items');
  const untilDraining = () =>
    (async () => {
      for (;;) {
        if ((await h.catalog.getTable(table.id))?.state === 'DRAINING') return;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();

  // A drop without cascade waits for a lease; one with cascade joins it, hears its refusal, and then runs its own.
  let lease = await h.client.acquireLease(table.id, { ttlSeconds: 60, holder: 'test' });
  const plain = h.client.trash({ table: 'twice.items', retentionSeconds: 3600 });
  await untilDraining();
  const cascaded = h.client.trash({ table: 'twice.items', retentionSeconds: 3600, cascade: true });
  await new Promise((resolve) => setTimeout(resolve, 500));
  await h.client.releaseLease(lease.id);
  // Refused by its own run; or, when the cascade's own run has answered by the time it reads its run's end (the two
  // share the drop's id), told that another request trashed the table with cascade: never answered TRASHED.
  const refused = await plain.then(
    () => undefined,
    (err: Error & { type?: string }) => err,
  );
  if (refused?.type === 'WrongState') expect(refused.message).toContain('trashed meanwhile by another request, with cascade');
  else expect(refused).toMatchObject({ type: 'HasDependents' });
  expect(await cascaded).toMatchObject({ state: 'TRASHED', notes: ['twice.items: moved into the trash with it: view twice.items_v'] });
  await h.client.undelete({ table: table.id });

  // The other way round: the drop without cascade joins one with it, and is told so rather than answered TRASHED.
  lease = await h.client.acquireLease(table.id, { ttlSeconds: 60, holder: 'test' });
  const first = h.client.trash({ table: 'twice.items', retentionSeconds: 3600, cascade: true });
  await untilDraining();
  // (Its refusal is taken as it comes: it may come while the test still awaits the first.)
  const second = h.client.trash({ table: 'twice.items', retentionSeconds: 3600 }).then(
    () => undefined,
    (err: Error & { type?: string }) => err,
  );
  await new Promise((resolve) => setTimeout(resolve, 500));
  await h.client.releaseLease(lease.id);
  expect(await first).toMatchObject({ state: 'TRASHED' });
  expect(await second).toMatchObject({
    type: 'WrongState',
    message: expect.stringContaining('was trashed meanwhile by another request, with cascade') as unknown,
  });
});

test('a recall refused on one shard takes back the others with their family: the table is whole in the trash, and recalled later', async () => {
  const table = await h.client.create({ table: 'halves.items', shards: 2, columns: 'id int' });
  await db.query('CREATE VIEW halves.items_v AS SELECT id FROM halves.items_0');
  const view = await oidOf('halves.items_v');
  await h.client.trash({ table: 'halves.items', retentionSeconds: 3600, cascade: true });
  await db.query('CREATE TABLE halves.items_1 (x int)');
  await expect(h.client.undelete({ table: table.id })).rejects.toMatchObject({ type: 'NameTaken' });
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'TRASHED' });
  expect(await whereIs(view)).toMatch(/^tablefate_trash\./);
  await db.query('DROP TABLE halves.items_1');
  expect(await h.client.undelete({ table: table.id })).toMatchObject({ state: 'READY' });
  expect(await whereIs(view)).toBe('halves.items_v');
});

test("a view made on the family's materialized view while the move waits for it is taken along too, never left behind", async () => {
  const table = await h.client.create({ table: 'race.items', columns: 'id int primary key' });
  await db.query('CREATE MATERIALIZED VIEW race.items_mv AS SELECT count(*) AS n FROM race.items');
  const mv = await oidOf('race.items_mv');
  const user = new Client({ connectionString: url, application_name: 'the user' });
  await user.connect();
  try {
    // The user's view on the materialized view, not committed yet: the drop reads the family without it, then waits.
    await user.query('BEGIN');
    await user.query('CREATE VIEW race.items_mv_n AS SELECT n FROM race.items_mv');
    const late = (await user.query<{ oid: string }>(`SELECT 'race.items_mv_n'::regclass::oid::int8 AS oid`)).rows[0]!.oid;
    const drop = h.client.trash({ table: 'race.items', retentionSeconds: 3600, cascade: true });
    for (;;) {
      const { rows } = await db.query('SELECT 1 FROM pg_locks WHERE relation = $1 AND NOT granted', [mv]);
      if (rows.length > 0) break;
    }
    await user.query('COMMIT');
    expect(await drop).toMatchObject({
      state: 'TRASHED',
      notes: ['race.items: moved into the trash with it: materialized view race.items_mv, view race.items_mv_n'],
    });
    expect(await whereIs(late)).toMatch(/^tablefate_trash\./);
    expect(await h.client.purge({ tableId: table.id })).toMatchObject({ state: 'PURGED' });
  } finally {
    await user.end();
  }
});

test("a purge of a table of two shards on one node, a view reading both: each shard's drop takes the view once, and it ends PURGED", async () => {
  for (let round = 0; round < 3; round++) {
    const table = await h.client.create({ table: `pair.items${round}`, shards: 2, columns: 'id int' });
    await db.query(`CREATE VIEW pair.items${round}_v AS SELECT id FROM pair.items${round}_0 UNION ALL SELECT id FROM pair.items${round}_1`);
    const view = await oidOf(`pair.items${round}_v`);
    await h.client.trash({ table: `pair.items${round}`, retentionSeconds: 3600, cascade: true });
    expect(await h.client.purge({ tableId: table.id })).toMatchObject({ state: 'PURGED' });
    expect(await whereIs(view)).toBeNull();
  }
});
