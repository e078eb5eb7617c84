import { Client, Pool } from 'pg';
import { HasDependentsError, NameTakenError, ShardMissingError, TableBusyError } from '../domain/errors';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { PostgresStorage } from '../storage/postgres';
import { GARBAGE_SCHEMA, parkedName, TRASH_SCHEMA, type ShardTableId } from '../storage/postgres-record';
import { PostgresTables } from '../storage/postgres-tables';

/*
 * The PostgreSQL driver's moves (storage/postgres-tables.ts) on a real server, judged by what a user's own client
 * sees: rows, indexes, constraints, defaults, grants, and "relation does not exist" where a trashed table was.
 */

let server: TestPostgres;
let pool: Pool;
let url: string;
let user: Client;
let tables: PostgresTables;

beforeAll(async () => {
  server = await sharedPostgres();
  url = await server.freshDatabase('pgtables');
  pool = new Pool({ connectionString: url, max: 4 });
  user = new Client({ connectionString: url });
  await user.connect();
  tables = new PostgresTables(pool);
  await tables.prepare();
  await tables.prepare(); // twice: idempotent
  await user.query('CREATE ROLE reporting NOLOGIN').catch(() => undefined);
});

afterAll(async () => {
  await user?.end();
  await pool?.end();
  await server?.stop();
});

const shard = (tableId: number, shard = 0): ShardTableId => ({ catalogId: 'cat1', tableId, shard });
const rowsOf = async (sql: string) => (await user.query(sql)).rows as Array<Record<string, unknown>>;
const indexesOf = (schema: string, table: string) =>
  rowsOf(`SELECT indexname FROM pg_indexes WHERE schemaname = '${schema}' AND tablename = '${table}' ORDER BY 1`).then((r) =>
    r.map((x) => x.indexname),
  );
const relationsIn = (schema: string) =>
  rowsOf(`SELECT relname FROM pg_class WHERE relnamespace = '${schema}'::regnamespace ORDER BY 1`).then((r) => r.map((x) => x.relname));

test('a trashed table is gone from its schema at once; recalled, its rows, indexes, constraints, defaults and grants are back', async () => {
  const id = shard(1);
  await tables.create(
    id,
    { schema: 'shop', table: 'orders' },
    {
      columns:
        "id bigint generated always as identity primary key, code serial unique, total numeric(12,2) not null check (total >= 0), note text default 'none'",
    },
  );
  await tables.create(id, { schema: 'shop', table: 'orders' }, { columns: 'ignored int' }); // a retry finds it made
  await user.query('CREATE INDEX orders_total ON shop.orders (total)');
  await user.query('GRANT SELECT ON shop.orders TO reporting');
  await user.query('INSERT INTO shop.orders (total) VALUES (1.50), (2.25)');
  const before = await rowsOf('SELECT * FROM shop.orders ORDER BY id');
  const indexes = await indexesOf('shop', 'orders');
  expect(indexes).toEqual(['orders_code_key', 'orders_pkey', 'orders_total']);

  await tables.move(id, 'trash');
  await tables.move(id, 'trash'); // again: already there
  await expect(user.query('SELECT * FROM shop.orders')).rejects.toThrow('relation "shop.orders" does not exist');
  expect(await relationsIn('shop')).toEqual([]);
  expect((await tables.locate(id))?.area).toBe('trash');

  await tables.move(id, 'live', { schema: 'shop', table: 'orders' });
  expect(await rowsOf('SELECT * FROM shop.orders ORDER BY id')).toEqual(before);
  expect(await indexesOf('shop', 'orders')).toEqual(indexes);
  // The defaults and sequences work as before, and the check still holds.
  expect(await rowsOf('INSERT INTO shop.orders (total) VALUES (3) RETURNING id, code, note')).toEqual([{ id: '3', code: 3, note: 'none' }]);
  await expect(user.query('INSERT INTO shop.orders (total) VALUES (-1)')).rejects.toThrow(/orders_total_check/);
  expect(await rowsOf("SELECT has_table_privilege('reporting', 'shop.orders', 'SELECT') AS can")).toEqual([{ can: true }]);
});

test('two trashed tables of one name do not collide, and one recalls under a new name into another schema', async () => {
  const first = shard(2);
  const second = shard(3);
  await tables.create(first, { schema: 'app', table: 'events' }, { columns: 'id serial primary key, body text' });
  await user.query("INSERT INTO app.events (body) VALUES ('first')");
  await tables.move(first, 'trash');
  await tables.create(second, { schema: 'app', table: 'events' }, { columns: 'id serial primary key, body text' });
  await user.query("INSERT INTO app.events (body) VALUES ('second')");
  await tables.move(second, 'trash');
  expect((await relationsIn(TRASH_SCHEMA)).length).toBeGreaterThanOrEqual(6); // two tables, their keys and sequences

  // A new app.events meanwhile: the first comes back as archive.events_old, its index named after it.
  await tables.create(shard(4), { schema: 'app', table: 'events' }, { columns: 'id serial primary key' });
  await tables.move(first, 'live', { schema: 'archive', table: 'events_old' });
  expect(await rowsOf('SELECT body FROM archive.events_old')).toEqual([{ body: 'first' }]);
  expect(await indexesOf('archive', 'events_old')).toEqual(['events_pkey']);
  // The second back beside the new one: its original names are taken there, so it takes names after itself.
  await tables.move(second, 'live', { schema: 'app', table: 'events_2' });
  expect(await rowsOf('SELECT body FROM app.events_2')).toEqual([{ body: 'second' }]);
  expect(await indexesOf('app', 'events_2')).toEqual(['events_2_pkey']);
  expect(await indexesOf('app', 'events')).toEqual(['events_pkey']);
});

test('purge: garbage, then dropped, leaves nothing in any schema and no record', async () => {
  const id = shard(5);
  await tables.create(id, { schema: 'tmp', table: 'scratch' }, { columns: 'id int primary key' });
  await tables.move(id, 'trash');
  await tables.move(id, 'garbage');
  expect((await tables.locate(id))?.schema).toBe(GARBAGE_SCHEMA);
  expect(await tables.bytes(id)).toBeGreaterThan(0);
  await tables.drop(id);
  await tables.drop(id); // again: nothing left is success
  expect(await tables.locate(id)).toBeNull();
  expect(await relationsIn(GARBAGE_SCHEMA)).toEqual([]);
  expect(await rowsOf(`SELECT count(*)::int AS n FROM tablefate.shards WHERE table_id = 5`)).toEqual([{ n: 0 }]);
});

test("a user's table under a tablefate name is never touched: create and recall onto it are refused", async () => {
  await user.query('CREATE SCHEMA IF NOT EXISTS crm; CREATE TABLE crm.customers (id int); INSERT INTO crm.customers VALUES (7)');
  await expect(tables.create(shard(6), { schema: 'crm', table: 'customers' }, { columns: 'x int' })).rejects.toBeInstanceOf(NameTakenError);
  await tables.create(shard(7), { schema: 'crm', table: 'leads' }, { columns: 'id int' });
  await tables.move(shard(7), 'trash');
  await expect(tables.move(shard(7), 'live', { schema: 'crm', table: 'customers' })).rejects.toThrow(
    /crm\.customers is taken: a table tablefate did not place/,
  );
  expect(await rowsOf('SELECT * FROM crm.customers')).toEqual([{ id: 7 }]);
  expect((await tables.locate(shard(7)))?.area).toBe('trash');
  // Dropped by hand and made again by a user under the shard's old name: not ours, so missing.
  await tables.move(shard(7), 'live', { schema: 'crm', table: 'leads' });
  await user.query('DROP TABLE crm.leads; CREATE TABLE crm.leads (id int)');
  expect((await tables.locate(shard(7)))?.drift).toMatch(/crm\.leads was dropped outside tablefate/);
  await expect(tables.move(shard(7), 'trash')).rejects.toBeInstanceOf(ShardMissingError);
  expect(await rowsOf(`SELECT to_regclass('crm.leads') IS NOT NULL AS there`)).toEqual([{ there: true }]);
});

test('a move that fails half way changes nothing: the transaction takes its renames back', async () => {
  const id = shard(8);
  await tables.create(id, { schema: 'ops', table: 'jobs' }, { columns: 'id int primary key, at timestamptz' });
  await user.query('INSERT INTO ops.jobs VALUES (1, now())');
  // Something in the trash schema under the shard's parked name: the move renames the table and its index there,
  // then fails to set its schema.
  await user.query(`CREATE TABLE ${TRASH_SCHEMA}.${parkedName(id)} (x int)`);
  await expect(tables.move(id, 'trash')).rejects.toThrow(/already exists/);
  expect(await tables.locate(id)).toMatchObject({ area: 'live', schema: 'ops', table: 'jobs' });
  expect(await indexesOf('ops', 'jobs')).toEqual(['jobs_pkey']);
  expect(await rowsOf('SELECT id FROM ops.jobs')).toEqual([{ id: 1 }]);
  await user.query(`DROP TABLE ${TRASH_SCHEMA}.${parkedName(id)}`);
  await tables.move(id, 'trash');
  expect((await tables.locate(id))?.area).toBe('trash');
});

test("a table that a view or another table's foreign key depends on is not trashed, and nothing changes", async () => {
  const id = shard(9);
  // Its own foreign key (to itself) is no dependent: it moves with the table.
  await tables.create(id, { schema: 'dep', table: 'orders' }, { columns: 'id int primary key, parent int references dep.orders (id)' });
  await user.query('INSERT INTO dep.orders VALUES (1, null), (2, 1)');
  await user.query('CREATE SCHEMA report; CREATE VIEW report.big_orders AS SELECT id FROM dep.orders WHERE id > 1');
  await user.query('CREATE MATERIALIZED VIEW report.order_count AS SELECT count(*) AS n FROM dep.orders');
  await user.query('CREATE TABLE dep.lines (order_id int CONSTRAINT lines_order_fk REFERENCES dep.orders (id))');

  const refused = tables.move(id, 'trash');
  await expect(refused).rejects.toBeInstanceOf(HasDependentsError);
  await expect(refused).rejects.toThrow(
    'dep.orders cannot be trashed while others depend on it: view report.big_orders, materialized view report.order_count, ' +
      'foreign key lines_order_fk of dep.lines; drop them first, or drop with --cascade',
  );
  expect(await tables.locate(id)).toMatchObject({ area: 'live', schema: 'dep', table: 'orders' });
  expect(await rowsOf('SELECT id FROM report.big_orders')).toEqual([{ id: 2 }]);
  expect(await rowsOf('SELECT id, parent FROM dep.orders ORDER BY id')).toEqual([
    { id: 1, parent: null },
    { id: 2, parent: 1 },
  ]);
  expect(await indexesOf('dep', 'orders')).toEqual(['orders_pkey']);

  await user.query('DROP VIEW report.big_orders; DROP MATERIALIZED VIEW report.order_count');
  await user.query('ALTER TABLE dep.lines DROP CONSTRAINT lines_order_fk');
  await tables.move(id, 'trash');
  expect((await tables.locate(id))?.area).toBe('trash');
});

/** A session of its own that has read the table in a transaction it keeps open: it holds ACCESS SHARE until it ends. */
async function holder(table: string, applicationName: string): Promise<{ client: Client; pid: number }> {
  const client = new Client({ connectionString: url, application_name: applicationName });
  await client.connect();
  await client.query('BEGIN');
  await client.query(`SELECT count(*) FROM ${table}`);
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return { client, pid: rows[0]!.pid };
}

async function within<T>(ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)));
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('drain: the trash waits for a transaction that read the table, new readers are not blocked meanwhile, and it completes after', async () => {
  const id = shard(10);
  await tables.create(id, { schema: 'drain', table: 'events' }, { columns: 'id int primary key' });
  await user.query('INSERT INTO drain.events VALUES (1), (2)');
  const reader = await holder('drain.events', 'long-report');
  const other = new Client({ connectionString: url });
  await other.connect();
  try {
    let moved = false;
    const move = tables.move(id, 'trash').then(() => (moved = true));
    for (let i = 0; i < 5; i++) {
      await pause(100);
      expect((await within(2_000, other.query('SELECT count(*)::int AS n FROM drain.events'))).rows).toEqual([{ n: 2 }]);
    }
    expect(moved).toBe(false);
    expect((await tables.locate(id))?.area).toBe('live');

    await reader.client.query('COMMIT');
    await within(2_000, move);
    expect((await tables.locate(id))?.area).toBe('trash');
    await expect(other.query('SELECT * FROM drain.events')).rejects.toThrow('relation "drain.events" does not exist');
  } finally {
    await reader.client.end();
    await other.end();
  }
});

test('drain deadline: a holder that stays makes the move TableBusy, naming it, and the table is untouched', async () => {
  const id = shard(11);
  await tables.create(id, { schema: 'drain', table: 'ledger' }, { columns: 'id int primary key, amount int' });
  await user.query('CREATE INDEX ledger_amount ON drain.ledger (amount); INSERT INTO drain.ledger VALUES (1, 10)');
  const reader = await holder('drain.ledger', 'nightly-export');
  try {
    const started = Date.now();
    const busy = tables.move(id, 'trash', undefined, { drainTimeoutMs: 500 });
    await expect(busy).rejects.toBeInstanceOf(TableBusyError);
    await expect(busy).rejects.toThrow(
      new RegExp(
        `drain\\.ledger is still in use after 500 ms of waiting: held by pid ${reader.pid} \\(user \\w+, application "nightly-export", since \\d{4}-`,
      ),
    );
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(await tables.locate(id)).toMatchObject({ area: 'live', schema: 'drain', table: 'ledger' });
    expect(await rowsOf('SELECT * FROM drain.ledger')).toEqual([{ id: 1, amount: 10 }]);
    expect(await indexesOf('drain', 'ledger')).toEqual(['ledger_amount', 'ledger_pkey']);
  } finally {
    await reader.client.end();
  }
});

test("a drain stops when its watcher aborts, with the watcher's reason, after a heartbeat on every try", async () => {
  const id = shard(12);
  await tables.create(id, { schema: 'drain', table: 'audit' }, { columns: 'id int' });
  const reader = await holder('drain.audit', 'auditor');
  try {
    const controller = new AbortController();
    let beats = 0;
    const move = tables.move(id, 'trash', undefined, { watch: { signal: controller.signal, beat: () => beats++ } });
    await pause(300);
    controller.abort(new Error('activity cancelled'));
    await expect(within(1_000, move)).rejects.toThrow('activity cancelled');
    expect(beats).toBeGreaterThanOrEqual(2);
    expect((await tables.locate(id))?.area).toBe('live');
  } finally {
    await reader.client.end();
  }
});

describe('sessions the server ends, and schemas made at once', () => {
  const storageFor = async () => {
    const dbUrl = await server.freshDatabase('pgcuts');
    return { dbUrl, storage: new PostgresStorage([{ node: 'node-0', url: dbUrl }], 'cat-cuts') };
  };
  const ref = (tableId: number, namespace: string, name: string) => ({
    tableId,
    shard: 0,
    node: 'node-0',
    table: { namespace, name, shards: 1, params: { shards: 1, columns: 'id int' } },
  });

  test('first creates in a new schema, three at once, all succeed: none trips on the schema another is making', async () => {
    const { storage } = await storageFor();
    try {
      const refused: unknown[] = [];
      for (let round = 0; round < 20; round++) {
        const outcomes = await Promise.allSettled([1, 2, 3].map((k) => storage.createShard(ref(round * 10 + k, `fresh${round}`, `t${k}`))));
        for (const o of outcomes) if (o.status === 'rejected') refused.push(o.reason);
      }
      expect(refused).toEqual([]);
    } finally {
      await storage.close();
    }
  });

  test('a storage session ended by the server mid-change fails that change only: the process hears no stray error, and a retry finishes it', async () => {
    const { dbUrl, storage } = await storageFor();
    const stray: unknown[] = [];
    const hear = (err: unknown) => stray.push(err);
    process.on('uncaughtException', hear);
    const cutter = new Client({ connectionString: dbUrl });
    await cutter.connect();
    let cutting = true;
    let cuts = 0;
    const cuttingDone = (async () => {
      while (cutting) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        const { rowCount } = await cutter.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tablefate storage node-0' AND datname = current_database()",
        );
        cuts += rowCount ?? 0;
      }
    })();
    const steps = (r: ReturnType<typeof ref>) => [
      () => storage.createShard(r),
      () => storage.moveShard(r, 'live', 'trash'),
      () => storage.moveShard(r, 'trash', 'live'),
    ];
    try {
      let failed = 0;
      for (let i = 1; i <= 40; i++) {
        for (const step of steps(ref(i, 'cut', `t${i}`))) await step().catch(() => failed++);
      }
      cutting = false;
      await cuttingDone;
      expect(cuts).toBeGreaterThan(0);
      expect(failed).toBeGreaterThan(0);
      // With the sessions left alone, every change made again converges: each table live under its name, once.
      for (let i = 1; i <= 40; i++) for (const step of steps(ref(i, 'cut', `t${i}`))) await step();
      const live = new Client({ connectionString: dbUrl });
      await live.connect();
      const { rows } = await live.query(
        "SELECT count(*)::int AS n FROM pg_class WHERE relnamespace = 'cut'::regnamespace AND relkind = 'r'",
      );
      await live.end();
      expect(rows).toEqual([{ n: 40 }]);
      expect(stray).toEqual([]);
    } finally {
      cutting = false;
      await cuttingDone;
      process.off('uncaughtException', hear);
      await cutter.end();
      await storage.close();
    }
  }, 60_000);
});

test('a family move made again (its first answer lost) finds it made and says again what it took along, from its record', async () => {
  const id = shard(91);
  await tables.create(id, { schema: 'fam', table: 'items' }, { columns: 'id int primary key' });
  await user.query(`CREATE VIEW fam.items_v AS SELECT id FROM fam.items;
    CREATE TABLE fam.orders (item_id int REFERENCES fam.items (id))`);
  const first = await tables.move(id, 'trash', undefined, { cascade: true });
  expect(first.notes).toEqual([
    'moved into the trash with it: view fam.items_v',
    'detached until its recall: foreign key orders_item_id_fkey of fam.orders',
  ]);
  expect(await tables.move(id, 'trash', undefined, { cascade: true })).toEqual(first);
  // Recalled, the family is back and its record cleared: the same move again says nothing more.
  await tables.move(id, 'live', { schema: 'fam', table: 'items' });
  expect(await tables.move(id, 'live', { schema: 'fam', table: 'items' })).toEqual({ notes: [] });
  expect(await rowsOf(`SELECT conname FROM pg_constraint WHERE conrelid = 'fam.orders'::regclass AND contype = 'f'`)).toEqual([
    { conname: 'orders_item_id_fkey' },
  ]);
});

test('keys a recall put back NOT VALID are validated from its record: a recall made again after a crash before that validates them', async () => {
  const id = shard(92);
  await user.query('CREATE TABLE fam.vendors (id int primary key); INSERT INTO fam.vendors VALUES (1)');
  await tables.create(id, { schema: 'fam', table: 'supplies' }, { columns: 'id int, vid int references fam.vendors' });
  await user.query('INSERT INTO fam.supplies VALUES (1, 1)');
  await tables.move(id, 'trash');
  await tables.move(id, 'live', { schema: 'fam', table: 'supplies' });
  const validated = () =>
    rowsOf(`SELECT convalidated FROM pg_constraint WHERE conrelid = 'fam.supplies'::regclass AND conname = 'supplies_vid_fkey'`);
  expect(await validated()).toEqual([{ convalidated: true }]);
  // As a crash between the recall's commit and the validation leaves it: back NOT VALID, left to validate.
  await user.query(`ALTER TABLE fam.supplies DROP CONSTRAINT supplies_vid_fkey;
    ALTER TABLE fam.supplies ADD CONSTRAINT supplies_vid_fkey FOREIGN KEY (vid) REFERENCES fam.vendors (id) NOT VALID`);
  await user.query(
    `UPDATE tablefate.shards SET keys_to_validate = '[{"name": "supplies_vid_fkey", "definition": "FOREIGN KEY (vid) REFERENCES fam.vendors(id)"}]'
      WHERE table_id = 92`,
  );
  expect(await tables.move(id, 'live', { schema: 'fam', table: 'supplies' })).toEqual({ notes: [] });
  expect(await validated()).toEqual([{ convalidated: true }]);
  expect(await rowsOf('SELECT keys_to_validate FROM tablefate.shards WHERE table_id = 92')).toEqual([{ keys_to_validate: null }]);
});
