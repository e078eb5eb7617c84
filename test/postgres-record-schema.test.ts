import { Client, Pool } from 'pg';
import { sharedPostgres, withClient, type TestPostgres } from './support/postgres';
import { parkedName, type ShardTableId } from '../storage/postgres-record';
import { RECORD_MIGRATIONS, UNVERSIONED_RECORD_COLUMNS } from '../storage/postgres-record-schema';
import { PostgresTables } from '../storage/postgres-tables';

/*
 * The record a storage node keeps of the tables tablefate placed (tablefate.shards), migrated as the catalog's schema
 * is (catalog/pg-migrations.ts): a new node gets every migration once, however many workers prepare it together; a
 * node whose record was made before its versions were recorded is placed at the version its columns are, and brought
 * to this code's with its rows as they were.
 */

let server: TestPostgres;
beforeAll(async () => {
  server = await sharedPostgres();
});
afterAll(async () => {
  await server?.stop();
});

const LATEST = RECORD_MIGRATIONS.at(-1)!.version;
/** The last version a record could be at before versions were recorded: its columns are the record's ever since. */
const LAST_UNVERSIONED = Math.max(...Object.keys(UNVERSIONED_RECORD_COLUMNS).map(Number));
const ALL_VERSIONS = RECORD_MIGRATIONS.map((m) => m.version);
const shard = (tableId: number): ShardTableId => ({ catalogId: 'cat1', tableId, shard: 0 });

/** What the record's prepare ran on a node before the record's versions were recorded, word for word. */
const UNVERSIONED_PREPARE = {
  schemas: 'CREATE SCHEMA tablefate; CREATE SCHEMA tablefate_trash; CREATE SCHEMA tablefate_garbage',
  record: `CREATE TABLE IF NOT EXISTS "tablefate"."shards" (
           table_oid oid PRIMARY KEY,
           catalog_id text NOT NULL,
           table_id bigint NOT NULL,
           shard integer NOT NULL,
           live_names jsonb,
           changed_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
           UNIQUE (catalog_id, table_id, shard))`,
  names: `ALTER TABLE "tablefate"."shards" ADD COLUMN IF NOT EXISTS schema_name text, ADD COLUMN IF NOT EXISTS table_name text,
             ADD COLUMN IF NOT EXISTS owner_name text, ADD COLUMN IF NOT EXISTS foreign_keys jsonb,
             ADD COLUMN IF NOT EXISTS notes jsonb;
          UPDATE "tablefate"."shards" s SET schema_name = n.nspname, table_name = c.relname, owner_name = pg_catalog.pg_get_userbyid(c.relowner)
             FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE c.oid = s.table_oid AND s.schema_name IS NULL`,
};

/** The record's columns (with their types, defaults and nullability) and constraints, as PostgreSQL has them. */
async function recordShape(c: Client) {
  const columns = await c.query(
    `SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull, pg_catalog.pg_get_expr(d.adbin, d.adrelid) AS dflt
       FROM pg_catalog.pg_attribute a LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
      WHERE a.attrelid = 'tablefate.shards'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
  );
  const constraints = await c.query(
    `SELECT conname, pg_catalog.pg_get_constraintdef(oid) AS definition FROM pg_catalog.pg_constraint
      WHERE conrelid = 'tablefate.shards'::regclass ORDER BY conname`,
  );
  return { columns: columns.rows, constraints: constraints.rows };
}

const versionsOf = async (c: Client) =>
  (await c.query<{ version: number }>('SELECT version FROM tablefate.shards_migrations ORDER BY version')).rows.map((r) => r.version);
const recordRows = async (c: Client) => (await c.query<Record<string, unknown>>('SELECT * FROM tablefate.shards ORDER BY table_id')).rows;

/** Prepares the node at `url` from `workers` pools at once (each a worker of this code), then closes them. */
async function prepareFrom(url: string, workers = 1): Promise<void> {
  const pools = Array.from({ length: workers }, () => new Pool({ connectionString: url, max: 2 }));
  try {
    await Promise.all(pools.map((pool) => new PostgresTables(pool).prepare()));
  } finally {
    await Promise.all(pools.map((pool) => pool.end()));
  }
}

/** The record's columns added by migrations since records had versions (each null in a record made before them). */
const ADDED_SINCE = ['family', 'keys_to_validate', 'partition_of', 'partition', 'parked_schema'];
/** A shape or row without the columns added since versions. */
const withoutAdded = <T extends Record<string, unknown>>(row: T) =>
  Object.fromEntries(Object.entries(row).filter(([key]) => !ADDED_SINCE.includes(key)));

test('a new node: four workers preparing it at once apply each migration once, and make the record as it was before its versions, and the columns added since', async () => {
  const url = await server.freshDatabase('record');
  await prepareFrom(url, 4);
  await prepareFrom(url); // again: nothing to do
  const unversioned = await server.freshDatabase('record');
  await withClient(unversioned, async (c) => {
    for (const statement of Object.values(UNVERSIONED_PREPARE)) await c.query(statement);
  });
  await withClient(url, async (c) => {
    expect(await versionsOf(c)).toEqual(ALL_VERSIONS);
    const shape = await recordShape(c);
    // What the migrations make is what a node prepared before versions has, column for column, constraint for constraint,
    // and then the columns added since.
    const added = (col: { attname: string }) => ADDED_SINCE.includes(col.attname);
    expect({ ...shape, columns: shape.columns.filter((col: { attname: string }) => !added(col)) }).toEqual(
      await withClient(unversioned, recordShape),
    );
    expect(shape.columns.map((col: { attname: string }) => col.attname)).toEqual([
      ...UNVERSIONED_RECORD_COLUMNS[LAST_UNVERSIONED]!,
      ...ADDED_SINCE,
    ]);
  });
});

test('a node prepared before versions, with tables live and trashed: placed at version 2, its rows kept, and its tables move as before', async () => {
  const url = await server.freshDatabase('record');
  const lines = parkedName(shard(2));
  const keys = [{ name: 'lines_order_fk', definition: 'FOREIGN KEY (order_id) REFERENCES shop.orders(id)' }];
  await withClient(url, async (c) => {
    for (const statement of Object.values(UNVERSIONED_PREPARE)) await c.query(statement);
    // shop.orders live; shop.lines in the trash, its index parked and its foreign key to orders detached.
    await c.query(`CREATE SCHEMA shop; CREATE TABLE shop.orders (id int PRIMARY KEY); INSERT INTO shop.orders VALUES (1), (2);
      CREATE TABLE tablefate_trash.${lines} (id int, order_id int); CREATE UNIQUE INDEX ${lines}_i0 ON tablefate_trash.${lines} (id);
      INSERT INTO tablefate_trash.${lines} VALUES (10, 1), (11, 2)`);
    await c.query(
      `INSERT INTO tablefate.shards (table_oid, catalog_id, table_id, shard, live_names, schema_name, table_name, owner_name, foreign_keys, notes)
       VALUES ('shop.orders'::regclass, 'cat1', 1, 0, NULL, 'shop', 'orders', current_user, NULL, '["a note for the doctor"]'),
              ($1::regclass, 'cat1', 2, 0, $2, 'tablefate_trash', $3, current_user, $4, NULL)`,
      [`tablefate_trash.${lines}`, JSON.stringify({ table: 'lines', [`${lines}_i0`]: 'lines_pkey' }), lines, JSON.stringify(keys)],
    );
  });
  const before = await withClient(url, recordRows);

  await prepareFrom(url, 3);

  await withClient(url, async (c) => {
    expect(await versionsOf(c)).toEqual(ALL_VERSIONS);
    const after = await recordRows(c);
    expect(after.map(withoutAdded)).toEqual(before);
    expect(after.map((row) => ADDED_SINCE.map((column) => row[column]))).toEqual(before.map(() => ADDED_SINCE.map(() => null)));
  });
  const pool = new Pool({ connectionString: url, max: 2 });
  try {
    const tables = new PostgresTables(pool);
    expect(await tables.audit('cat1')).toEqual([
      expect.objectContaining({ tableId: 1, differences: ['shop.orders: a note for the doctor'] }),
      expect.objectContaining({ tableId: 2, expected: expect.objectContaining({ schema: 'tablefate_trash', table: lines }) as unknown }),
    ]);
    // Recalled from the trash as it was trashed: under its name, its index's name and its foreign key back.
    expect(await tables.move(shard(2), 'live', { schema: 'shop', table: 'lines' })).toEqual({ notes: [] });
    await withClient(url, async (c) => {
      expect((await c.query('SELECT * FROM shop.lines ORDER BY id')).rows).toEqual([
        { id: 10, order_id: 1 },
        { id: 11, order_id: 2 },
      ]);
      expect((await c.query("SELECT indexname FROM pg_indexes WHERE tablename = 'lines'")).rows).toEqual([{ indexname: 'lines_pkey' }]);
      expect((await c.query("SELECT convalidated FROM pg_constraint WHERE conname = 'lines_order_fk'")).rows).toEqual([
        { convalidated: true },
      ]);
    });
    expect(await tables.locate(shard(1))).toMatchObject({ area: 'live', schema: 'shop', table: 'orders' });
  } finally {
    await pool.end();
  }
});

test('a node whose record predates its names: placed at version 1, then given each table name as it is now', async () => {
  const url = await server.freshDatabase('record');
  await withClient(url, async (c) => {
    await c.query(UNVERSIONED_PREPARE.schemas);
    await c.query(UNVERSIONED_PREPARE.record);
    await c.query('CREATE SCHEMA shop; CREATE TABLE shop.orders (id int)');
    await c.query("INSERT INTO tablefate.shards (table_oid, catalog_id, table_id, shard) VALUES ('shop.orders'::regclass, 'cat1', 1, 0)");
  });
  await prepareFrom(url);
  await withClient(url, async (c) => {
    expect(await versionsOf(c)).toEqual(ALL_VERSIONS);
    expect(
      (await c.query('SELECT table_id, schema_name, table_name, owner_name = current_user AS owned FROM tablefate.shards')).rows,
    ).toEqual([{ table_id: '1', schema_name: 'shop', table_name: 'orders', owned: true }]);
  });
});

test("a record whose columns are no version's, or whose version is newer than this code, is refused with nothing changed", async () => {
  const odd = await server.freshDatabase('record');
  await withClient(odd, async (c) => {
    await c.query(UNVERSIONED_PREPARE.schemas);
    await c.query(UNVERSIONED_PREPARE.record);
    await c.query('ALTER TABLE tablefate.shards ADD COLUMN extra int');
  });
  await expect(prepareFrom(odd)).rejects.toThrow(
    /tablefate\.shards has the columns .*extra, not those of any version of tablefate's record/,
  );
  expect(
    await withClient(
      odd,
      async (c) => (await c.query<{ t: string | null }>("SELECT to_regclass('tablefate.shards_migrations') AS t")).rows,
    ),
  ).toEqual([{ t: null }]);

  const newer = await server.freshDatabase('record');
  await prepareFrom(newer);
  await withClient(newer, (c) => c.query('INSERT INTO tablefate.shards_migrations (version, applied_at) VALUES ($1, 0)', [LATEST + 1]));
  await expect(prepareFrom(newer)).rejects.toThrow(/newer than this tablefate knows/);
});
