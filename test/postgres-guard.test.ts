import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { Connection } from '@temporalio/client';
import { Client, Pool } from 'pg';
import { jsonOf, runCliInProcess, type CliProcess } from './support/cli';
import { cliTestHome, ensureNamespace, startCliWorker } from './support/cli-worker';
import { asRole, connect, dbName, startGuardedNode, type GuardedNode } from './support/guarded-node';
import { testServerAddress } from './support/test-server';
import { PostgresStorage } from '../storage/postgres';
import { parkedName, type ShardTableId } from '../storage/postgres-record';
import { PostgresTables } from '../storage/postgres-tables';
import { GUARD_SCHEMA, GuardPrivilegeError, guardState, installGuard, removeGuard, type GuardNodeResult } from '../storage/postgres-guard';
import type { ShardRef } from '../storage/driver';
import type { TableInfo } from '../domain/table';

/*
 * The guard (storage/postgres-guard.ts): an event trigger pair that refuses bare DDL (psql's DROP TABLE, renames, moves)
 * reaching a table tablefate manages, and lets tablefate's own statements through. Judged as a user of psql sees it: the
 * statement fails naming the table and `tablefate drop`, and the table is whole (same oid, same place, same rows).
 */

const SUFFIX = randomBytes(4).toString('hex');
/** tablefate's worker, as it should run: no superuser, CONNECT and CREATE on the database. */
const WORKER = `guard_worker_${SUFFIX}`;
/** A service that owns a table tablefate adopted, and may not read tablefate's record. */
const OWNER = `guard_owner_${SUFFIX}`;
/** Never printed: in every url the command line is given (the test server trusts local connections). */
const PASSWORD = 'guard-secret-51c9';
const NAMESPACE = 'tablefate-postgres-guard-test';

let node: GuardedNode;
/** The node's database: `dba` is its superuser (psql), `tables` tablefate's worker's tables there. */
let url: string;
let dba: Client;
let tables: PostgresTables;

const as = (u: string, role: string) => asRole(u, role, PASSWORD);
/** A database of the test server where WORKER may create schemas. */
const database = (prefix: string) => node.database(prefix);

beforeAll(async () => {
  node = await startGuardedNode({ worker: WORKER, owner: OWNER, prefix: 'pgguard', password: PASSWORD });
  ({ url, dba, tables } = node);
});

afterAll(async () => {
  await node?.stop();
});

const shard = (tableId: number, n = 0): ShardTableId => ({ catalogId: 'cat1', tableId, shard: n });
const rowsOf = async (client: Client, sql: string) => (await client.query(sql)).rows as Array<Record<string, unknown>>;
/** What a table is now, to see it whole: its oid, where it is, and its rows. */
const stateOf = async (qualified: string) => ({
  oid: (await rowsOf(dba, `SELECT '${qualified}'::regclass::oid::int8 AS oid`))[0]!.oid,
  rows: await rowsOf(dba, `SELECT * FROM ${qualified} ORDER BY 1`),
});
const refusal = async (client: Client, sql: string): Promise<{ code?: string; message: string; hint?: string }> => {
  const err = (await client.query(sql).then(
    () => new Error(`${sql} was not refused`),
    (e: unknown) => e,
  )) as { code?: string; message: string; hint?: string };
  return { code: err.code, message: err.message, hint: err.hint };
};
/** The TRUNCATE half of a guard that is not there. */
const OFF = { functions: false, recordTrigger: null, covered: 0, uncovered: [] };
const guardObjects = async (client: Client) =>
  (
    await client.query<{ triggers: string[]; functions: string[]; schema: boolean }>(
      `SELECT ARRAY(SELECT evtname::text FROM pg_event_trigger ORDER BY 1) AS triggers,
              ARRAY(SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                     WHERE n.nspname = $1 ORDER BY 1) AS functions,
              EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS schema`,
      [GUARD_SCHEMA],
    )
  ).rows[0]!;

describe('installing', () => {
  test("needs a superuser: the worker's role is told which privilege it lacks and how to install, and nothing is installed", async () => {
    const other = await database('pgguardpriv');
    const worker = await connect(as(other, WORKER));
    try {
      const err = (await installGuard(worker, 'node-3').catch((e: unknown) => e)) as Error;
      expect(err).toBeInstanceOf(GuardPrivilegeError);
      expect(err).toMatchObject({ type: 'InvalidInput' });
      expect(err.message).toBe(
        `guard install on node-3: role ${WORKER} may not create event triggers (it is no superuser): PostgreSQL lets only a superuser run ` +
          "CREATE EVENT TRIGGER. Run it as one: tablefate guard install --node node-3 --url postgres://<superuser>@<host>/<the node's database>",
      );
      await expect(removeGuard(worker, 'node-3')).rejects.toThrow(`guard remove on node-3: role ${WORKER} may not drop event triggers`);
      expect(await guardObjects(worker)).toEqual({ triggers: [], functions: [], schema: false });
      expect(await guardState(worker)).toEqual({ installed: false, enabled: false, triggers: [], truncate: OFF });
    } finally {
      await worker.end();
    }
  });

  test('is idempotent: one trigger of each event, enabled, running SECURITY DEFINER functions with search_path pinned', async () => {
    await installGuard(dba, 'node-0');
    expect(await guardState(dba)).toEqual({
      installed: true,
      enabled: true,
      triggers: [
        { name: 'tablefate_guard_drop', event: 'sql_drop', enabled: true },
        { name: 'tablefate_guard_move', event: 'ddl_command_end', enabled: true },
      ],
      // (Its record's trigger, and the TRUNCATE trigger on the record itself: test/postgres-guard-truncate.test.ts.)
      truncate: { functions: true, recordTrigger: true, covered: 1, uncovered: [] },
    });
    const objects = await guardObjects(dba);
    expect(objects.triggers).toEqual(['tablefate_guard_drop', 'tablefate_guard_move']);
    expect(objects.functions).toHaveLength(13);
    const functions = await rowsOf(
      dba,
      `SELECT proname, prosecdef, proconfig FROM pg_proc WHERE pronamespace = '${GUARD_SCHEMA}'::regnamespace ORDER BY 1`,
    );
    const pinned = ['search_path=pg_catalog, pg_temp'];
    // (Those that put a trigger on a table, or take it off, ask for its lock briefly.)
    const brief = [...pinned, 'lock_timeout=100ms'];
    expect(functions).toEqual(
      [
        ['cover', brief],
        ['cover_recorded', pinned],
        ['governing', pinned],
        ['holds_for_trigger', pinned],
        ['keep_dropped_triggers', pinned],
        ['keep_triggers', pinned],
        ['record_names_places', pinned],
        ['refusal', pinned],
        ['refuse_drop', pinned],
        ['refuse_move', pinned],
        ['refuse_truncate', pinned],
        ['trigger_refusal', pinned],
        ['uncover', brief],
      ].map(([proname, proconfig]) => ({ proname, prosecdef: true, proconfig })),
    );
    // Nobody but their owner may call them (the triggers do, as the owner).
    expect(
      await rowsOf(
        dba,
        `SELECT bool_or(has_function_privilege('${WORKER}', oid, 'EXECUTE')) AS callable FROM pg_proc WHERE pronamespace = '${GUARD_SCHEMA}'::regnamespace`,
      ),
    ).toEqual([{ callable: false }]);
    expect(await rowsOf(dba, 'SELECT evtname, evtenabled FROM pg_event_trigger ORDER BY 1')).toEqual([
      { evtname: 'tablefate_guard_drop', evtenabled: 'A' },
      { evtname: 'tablefate_guard_move', evtenabled: 'A' },
    ]);
  });

  test("on a node tablefate has not prepared yet: tablefate's first prepare, create and drop go through, and are guarded from then on", async () => {
    const fresh = await database('pgguardfresh');
    const superuser = await connect(fresh);
    const workerPool = new Pool({ connectionString: as(fresh, WORKER), max: 1, options: '-c search_path=pg_catalog,pg_temp' });
    try {
      await installGuard(superuser, 'node-1');
      const freshTables = new PostgresTables(workerPool);
      await freshTables.prepare();
      await freshTables.create(shard(1), { schema: 'app', table: 'events' }, { columns: 'id int' });
      expect((await refusal(superuser, 'DROP TABLE app.events')).message).toContain(
        'app.events is a live table tablefate manages (table 1',
      );
      await freshTables.move(shard(1), 'trash');
      await freshTables.move(shard(1), 'garbage');
      await freshTables.drop(shard(1));
      expect(await freshTables.locate(shard(1))).toBeNull();
    } finally {
      await workerPool.end();
      await superuser.end();
    }
  });
});

describe('with the guard on', () => {
  let orders: string;
  let before: Awaited<ReturnType<typeof stateOf>>;

  beforeAll(async () => {
    await tables.create(shard(12), { schema: 'shop', table: 'orders' }, { columns: 'id int primary key, total numeric(12,2) not null' });
    await dba.query('INSERT INTO shop.orders VALUES (1, 9.50), (2, 20)');
    await dba.query('CREATE TABLE shop.scratch (id int)'); // the user's own, in the same schema
    orders = 'shop.orders';
    before = await stateOf(orders);
  });

  const stillWhole = async () => {
    expect(await stateOf(orders)).toEqual(before);
    expect((await tables.locate(shard(12)))?.drift).toBeUndefined();
  };

  test.each([
    ['DROP TABLE shop.orders', 'DROP TABLE', 'drop it'],
    ['DROP TABLE shop.scratch, shop.orders', 'DROP TABLE', 'drop it'],
    ['DROP SCHEMA shop CASCADE', 'DROP SCHEMA', 'drop it'],
    ['ALTER TABLE shop.orders RENAME TO orders_old', 'ALTER TABLE', 'leave it at shop.orders_old'],
    ['ALTER TABLE shop.orders SET SCHEMA public', 'ALTER TABLE', 'leave it at public.orders'],
    ['ALTER SCHEMA shop RENAME TO shop_old', 'ALTER SCHEMA', 'leave it at shop_old.orders'],
  ])("psql's %s is refused, naming the table and the tablefate call to make instead; the table stays whole", async (sql, tag, effect) => {
    const refused = await refusal(dba, sql);
    const advice = tag.startsWith('ALTER')
      ? '"tablefate rename 12 <schema.new_name>" renames or moves it'
      : tag === 'DROP SCHEMA'
        ? '"tablefate drop --namespace shop" trashes the schema whole instead, its tables, views and everything else it holds, and "tablefate recall" brings it all back'
        : 'drop it with "tablefate drop shop.orders" (in SQL: CALL tablefate_sql.drop(\'shop.orders\')): the trash keeps it, and "tablefate recall" brings it back';
    expect(refused).toEqual({
      code: '42501',
      message: `tablefate: shop.orders is a live table tablefate manages (table 12, shard 0): the guard refuses this ${tag}, which would ${effect}; ${advice}`,
      hint: expect.stringContaining("tablefate's guard (tablefate guard status) refuses DDL") as unknown,
    });
    await stillWhole();
    expect(await rowsOf(dba, "SELECT to_regclass('shop.scratch') IS NOT NULL AS there")).toEqual([{ there: true }]);
  });

  test('a session in replica mode is refused as well (the triggers fire always)', async () => {
    const replica = await connect(url);
    try {
      await replica.query('SET session_replication_role = replica');
      expect((await refusal(replica, 'DROP TABLE shop.orders')).message).toContain('shop.orders is a live table tablefate manages');
    } finally {
      await replica.end();
    }
    await stillWhole();
  });

  test('a managed table already out of place holds up DDL of itself only, until it is put back', async () => {
    await tables.create(shard(14), { schema: 'shop', table: 'drifted' }, { columns: 'id int' });
    await dba.query('BEGIN');
    try {
      await dba.query('ALTER EVENT TRIGGER tablefate_guard_move DISABLE');
      await dba.query('ALTER TABLE shop.drifted RENAME TO drifted_by_hand');
      await dba.query('ALTER EVENT TRIGGER tablefate_guard_move ENABLE ALWAYS');
      await dba.query('COMMIT');
    } catch (err) {
      await dba.query('ROLLBACK');
      throw err;
    }
    expect((await refusal(dba, 'ALTER TABLE shop.drifted_by_hand ADD COLUMN x int')).message).toBe(
      'tablefate: shop.drifted is a live table tablefate manages (table 14, shard 0): the guard refuses this ALTER TABLE, which would leave it ' +
        'at shop.drifted_by_hand; "tablefate rename 14 <schema.new_name>" renames or moves it',
    );
    // Everything else in the database, the drifted table's schema included, goes on.
    await dba.query(
      'CREATE TABLE shop.other (id int); ALTER TABLE shop.other RENAME TO other2; DROP TABLE shop.other2; ALTER TABLE shop.orders ADD COLUMN y int',
    );
    await dba.query('ALTER TABLE shop.orders DROP COLUMN y');
    await dba.query('ALTER TABLE shop.drifted_by_hand RENAME TO drifted'); // put back: passes
    expect((await tables.locate(shard(14)))?.drift).toBeUndefined();
    await tables.move(shard(14), 'trash');
    await stillWhole();
  });

  test("an adopted table's owner, who may drop it but not read tablefate's record, is refused as well; DROP OWNED BY it too", async () => {
    await dba.query(`CREATE SCHEMA crm AUTHORIZATION ${OWNER}`);
    const owner = await connect(as(url, OWNER));
    try {
      await owner.query('CREATE TABLE crm.clients (id int primary key, name text); INSERT INTO crm.clients VALUES (1, $$Ada$$)');
      await owner.query('CREATE TABLE crm.notes (id int)');
      await tables.adopt(shard(30), { schema: 'crm', table: 'clients' });
      const clients = await stateOf('crm.clients');
      expect(await refusal(owner, 'SELECT * FROM tablefate.shards')).toMatchObject({ message: 'permission denied for schema tablefate' });

      expect((await refusal(owner, 'DROP TABLE crm.clients')).message).toBe(
        'tablefate: crm.clients is a live table tablefate manages (table 30, shard 0): the guard refuses this DROP TABLE, which would drop it; ' +
          'drop it with "tablefate drop crm.clients" (in SQL: CALL tablefate_sql.drop(\'crm.clients\')): the trash keeps it, and "tablefate recall" brings it back',
      );
      expect((await refusal(owner, 'ALTER TABLE crm.clients RENAME TO customers')).message).toContain(
        'which would leave it at crm.customers',
      );
      expect((await refusal(dba, `DROP OWNED BY ${OWNER}`)).message).toContain(
        'crm.clients is a live table tablefate manages (table 30, shard 0): the guard refuses this DROP OWNED, which would drop it',
      );
      expect(await stateOf('crm.clients')).toEqual(clients);
      // Its own other table is its own business.
      await owner.query('DROP TABLE crm.notes');
    } finally {
      await owner.end();
    }
  });

  test("a cascade that would take a managed table's column is refused; the table's own DDL (columns, indexes, grants, comments) goes through", async () => {
    await dba.query("CREATE TYPE shop.mood AS ENUM ('calm'); ALTER TABLE shop.orders ADD COLUMN mood shop.mood");
    expect((await refusal(dba, 'DROP TYPE shop.mood CASCADE')).message).toBe(
      'tablefate: shop.orders is a live table tablefate manages (table 12, shard 0): the guard refuses this DROP TYPE, which would drop its ' +
        'column mood; drop the column by itself first (ALTER TABLE shop.orders DROP COLUMN mood)',
    );
    for (const sql of [
      'ALTER TABLE shop.orders DROP COLUMN mood',
      'DROP TYPE shop.mood',
      'ALTER TABLE shop.orders ADD COLUMN note text',
      'ALTER TABLE shop.orders RENAME COLUMN note TO remark',
      'CREATE INDEX orders_total ON shop.orders (total)',
      'ALTER INDEX shop.orders_total RENAME TO orders_by_total',
      `GRANT SELECT ON shop.orders TO ${OWNER}`,
      `ALTER TABLE shop.orders OWNER TO ${OWNER}`,
      `ALTER TABLE shop.orders OWNER TO ${WORKER}`,
      "COMMENT ON TABLE shop.orders IS 'orders'",
      'ALTER TABLE shop.orders DROP COLUMN remark',
      'DROP INDEX shop.orders_by_total',
    ])
      await dba.query(sql);
    await stillWhole();
  });

  test("tables in the trash, tablefate's record and its schemas are guarded too", async () => {
    await tables.create(shard(13), { schema: 'shop', table: 'lines' }, { columns: 'id int' });
    await tables.move(shard(13), 'trash');
    const parked = `tablefate_trash.${parkedName(shard(13))}`;
    expect((await refusal(dba, `DROP TABLE ${parked}`)).message).toBe(
      `tablefate: ${parked} is table 13 (shard 0) in tablefate's trash: the guard refuses this DROP TABLE, which would drop it; ` +
        '"tablefate purge 13" deletes it for good',
    );
    expect((await refusal(dba, `ALTER TABLE ${parked} SET SCHEMA shop`)).message).toBe(
      `tablefate: ${parked} is table 13 (shard 0) in tablefate's trash: the guard refuses this ALTER TABLE, which would leave it at ` +
        `shop.${parkedName(shard(13))}; "tablefate recall 13 [schema.name]" brings it back live`,
    );
    expect((await refusal(dba, 'DROP SCHEMA tablefate_trash CASCADE')).message).toBe(
      "tablefate: schema tablefate_trash is tablefate's own (its trash): the guard refuses this DROP SCHEMA, which would drop it",
    );
    expect((await refusal(dba, 'DROP SCHEMA tablefate_garbage')).message).toBe(
      "tablefate: schema tablefate_garbage is tablefate's own (its garbage): the guard refuses this DROP SCHEMA, which would drop it",
    );
    expect((await refusal(dba, 'DROP SCHEMA tablefate CASCADE')).message).toBe(
      "tablefate: schema tablefate is tablefate's own (its record of the tables it manages): the guard refuses this DROP SCHEMA, which would drop it",
    );
    expect((await refusal(dba, 'DROP TABLE tablefate.shards')).message).toBe(
      "tablefate: table tablefate.shards is tablefate's own (its record of the tables it manages): the guard refuses this DROP TABLE, which would drop it",
    );
    // (With the SQL door on the node, its trash view reads the record: PostgreSQL itself refuses the plain DROP then.)
    expect((await refusal(dba, 'DROP TABLE tablefate.shards CASCADE')).message).toBe(
      "tablefate: table tablefate.shards is tablefate's own (its record of the tables it manages): the guard refuses this DROP TABLE, which would drop it",
    );
    expect((await refusal(dba, 'ALTER TABLE tablefate.shards RENAME TO old_shards')).message).toBe(
      "tablefate: tablefate.shards is tablefate's record of the tables it manages: the guard refuses this ALTER TABLE, which would move it to tablefate.old_shards",
    );
    expect((await refusal(dba, 'ALTER SCHEMA tablefate RENAME TO tablefate_old')).message).toContain(
      'which would move it to tablefate_old.shards',
    );
    // The worker's role owns all of them: its DROP OWNED would take every one.
    expect((await refusal(dba, `DROP OWNED BY ${WORKER} CASCADE`)).message).toMatch(
      /^tablefate: schema tablefate(_trash|_garbage)? is tablefate's own/,
    );
    expect((await tables.locate(shard(13)))?.area).toBe('trash');
    await stillWhole();
  });

  test("tables tablefate does not manage are not the guard's business: dropped, renamed and moved as ever", async () => {
    await dba.query(
      'CREATE SCHEMA scratch; CREATE TABLE scratch.a (id int); CREATE TABLE scratch.b (id int); CREATE TABLE scratch.c (id int)',
    );
    await dba.query('ALTER TABLE scratch.a RENAME TO a2');
    await dba.query('ALTER TABLE scratch.a2 SET SCHEMA shop');
    await dba.query('DROP TABLE shop.a2, shop.scratch');
    await dba.query('ALTER SCHEMA scratch RENAME TO scratch2');
    await dba.query('DROP SCHEMA scratch2 CASCADE');
    // A stranger in tablefate's trash (not placed by tablefate) is not guarded either.
    await dba.query('CREATE TABLE tablefate_trash.stray (id int); DROP TABLE tablefate_trash.stray');
    expect(await rowsOf(dba, "SELECT count(*)::int AS n FROM pg_class WHERE relname IN ('a', 'a2', 'b', 'c', 'scratch', 'stray')")).toEqual(
      [{ n: 0 }],
    );
    await stillWhole();
  });

  test("every move of tablefate's still works: create, trash, recall under another name, garbage, drop, adopt and release", async () => {
    const id = shard(20);
    await tables.create(
      id,
      { schema: 'sales', table: 'items' },
      { columns: 'id serial primary key, sku text unique, order_id int references shop.orders' },
    );
    await dba.query("INSERT INTO sales.items (sku, order_id) VALUES ('a', 1), ('b', 2)");
    const items = await rowsOf(dba, 'SELECT * FROM sales.items ORDER BY id');
    await tables.move(id, 'trash');
    await expect(dba.query('SELECT 1 FROM sales.items')).rejects.toThrow('does not exist');
    await tables.move(id, 'live', { schema: 'archive', table: 'items_2025' });
    expect(await rowsOf(dba, 'SELECT * FROM archive.items_2025 ORDER BY id')).toEqual(items);
    // Its foreign key came back, validated.
    expect(
      await rowsOf(dba, "SELECT convalidated FROM pg_constraint WHERE conrelid = 'archive.items_2025'::regclass AND contype = 'f'"),
    ).toEqual([{ convalidated: true }]);
    await tables.move(id, 'live', { schema: 'archive', table: 'items_old' }); // from one live name to another
    await tables.move(id, 'trash');
    await tables.move(id, 'garbage');
    await tables.drop(id);
    expect(await tables.locate(id)).toBeNull();
    expect(await rowsOf(dba, "SELECT count(*)::int AS n FROM pg_class WHERE relname LIKE 'items%' OR relname LIKE '%t20_s0%'")).toEqual([
      { n: 0 },
    ]);

    // A create taken back drops what it made; an adopt taken back forgets the table and leaves it.
    await tables.create(shard(21), { schema: 'sales', table: 'gone' }, { columns: 'id int' });
    await tables.drop(shard(21));
    await dba.query(`CREATE TABLE sales.legacy (id int); INSERT INTO sales.legacy VALUES (7); ALTER TABLE sales.legacy OWNER TO ${WORKER}`);
    await tables.adopt(shard(22), { schema: 'sales', table: 'legacy' });
    expect((await refusal(dba, 'DROP TABLE sales.legacy')).message).toContain('sales.legacy is a live table tablefate manages (table 22');
    await tables.release(shard(22));
    await dba.query('ALTER TABLE sales.legacy RENAME TO legacy_old'); // released: the user's own again
    await dba.query('DROP TABLE sales.legacy_old');
    await stillWhole();
  });

  test('the storage driver with the guard on: a table of two shards lives, is trashed, recalled, purged; a misdrop names it by id', async () => {
    const storage = new PostgresStorage([{ node: 'node-0', url: as(url, WORKER) }], 'cat2');
    const refs = (name: string): ShardRef[] =>
      [0, 1].map((n) => ({
        tableId: 40,
        shard: n,
        node: 'node-0',
        table: { namespace: 'metrics', name, shards: 2, params: { shards: 2, columns: 'at int, value float8' } },
      }));
    try {
      for (const ref of refs('points')) await storage.createShard(ref);
      await dba.query('INSERT INTO metrics.points_0 VALUES (1, 0.5); INSERT INTO metrics.points_1 VALUES (2, 1.5)');
      expect((await refusal(dba, 'DROP TABLE metrics.points_1')).message).toBe(
        'tablefate: metrics.points_1 is a live table tablefate manages (table 40, shard 1): the guard refuses this DROP TABLE, which would drop it; ' +
          'drop it with "tablefate drop" of table 40 ("tablefate describe 40" names it): the trash keeps it, and "tablefate recall" brings it back',
      );
      for (const ref of refs('points')) await storage.moveShard(ref, 'live', 'trash');
      for (const ref of refs('points_old')) await storage.moveShard(ref, 'trash', 'live');
      expect(await rowsOf(dba, 'SELECT * FROM metrics.points_old_0 UNION ALL SELECT * FROM metrics.points_old_1 ORDER BY 1')).toEqual([
        { at: 1, value: 0.5 },
        { at: 2, value: 1.5 },
      ]);
      for (const ref of refs('points_old')) await storage.moveShard(ref, 'live', 'trash');
      for (const ref of refs('points_old')) await storage.markGarbage(ref);
      for (const ref of refs('points_old')) await storage.deleteGarbage(ref);
      expect((await storage.listSets()).sets).toEqual([]);
    } finally {
      await storage.close();
    }
    await stillWhole();
  });
});

describe('removing', () => {
  test('leaves nothing of the guard: no event trigger, function or schema; DROP TABLE of a managed table goes through again', async () => {
    await removeGuard(dba, 'node-0');
    await removeGuard(dba, 'node-0'); // again: nothing to remove
    expect(await guardObjects(dba)).toEqual({ triggers: [], functions: [], schema: false });
    expect(await guardState(dba)).toEqual({ installed: false, enabled: false, triggers: [], truncate: { ...OFF, recordTrigger: false } });
    expect(await rowsOf(dba, `SELECT count(*)::int AS n FROM pg_trigger WHERE tgname LIKE 'tablefate_guard%'`)).toEqual([{ n: 0 }]);
    await tables.create(shard(50), { schema: 'tmp', table: 'doomed' }, { columns: 'id int' });
    await dba.query('DROP TABLE tmp.doomed');
    expect((await tables.locate(shard(50)))?.drift).toBe('tmp.doomed was dropped outside tablefate');
    await installGuard(dba, 'node-0'); // back on, as the other tests of this file found it
  });
});

describe('the command line', () => {
  let home: string;
  let env: NodeJS.ProcessEnv;
  let urls: string[];
  let connection: Connection | undefined;
  let worker: CliProcess | undefined;
  const cli = (...args: string[]) => runCliInProcess(args, { env });
  const seen = (r: { code: number | null; stdout: string; stderr: string }) => ({ code: r.code, stdout: r.stdout, stderr: r.stderr });

  beforeAll(async () => {
    urls = [await database('pgguardcli'), await database('pgguardcli')];
    ({ home, env } = await cliTestHome('pgguard', NAMESPACE));
    env = { ...env, TABLEFATE_STORAGE_DRIVER: 'postgres', TABLEFATE_STORAGE_URLS: urls.map((u) => as(u, WORKER)).join(',') };
  });

  afterAll(async () => {
    try {
      if (worker && !worker.exitStatus) expect(await worker.stop('SIGINT')).toEqual({ code: 0, signal: null });
    } finally {
      await connection?.close();
      if (home) await fs.promises.rm(home, { recursive: true, force: true });
    }
  });

  const superuser = (k: number) => urls[k]!.replace('postgres://postgres@', `postgres://postgres:${PASSWORD}@`);
  const shown = (k: number) => `postgres://${WORKER}@127.0.0.1:${new URL(urls[k]!).port}/${dbName(urls[k]!)}`;

  test('guard status, install and remove: each node, exit codes, --json; a role that is no superuser is told what to do; no password printed', async () => {
    const off = await cli('guard', 'status');
    expect(seen(off)).toEqual({
      code: 1,
      stdout: [`NODE    GUARD  DATABASE`, `node-0  off    ${shown(0)}`, `node-1  off    ${shown(1)}`, ''].join('\n'),
      stderr: '',
    });

    const refused = await cli('guard', 'install');
    expect(seen(refused)).toEqual({
      code: 2,
      stdout: '',
      stderr:
        `tablefate: InvalidInput: guard install on node-0: role ${WORKER} may not create event triggers (it is no superuser): PostgreSQL lets ` +
        'only a superuser run CREATE EVENT TRIGGER. Run it as one: tablefate guard install --node node-0 --url ' +
        "postgres://<superuser>@<host>/<the node's database>\n",
    });
    const refusedJson = await cli('guard', 'install', '--json');
    expect({ code: refusedJson.code, error: (JSON.parse(refusedJson.stderr) as { error: string }).error }).toEqual({
      code: 2,
      error: 'InvalidInput',
    });

    for (const k of [0, 1]) {
      const installed = jsonOf<GuardNodeResult[]>(await cli('guard', 'install', '--node', `node-${k}`, '--url', superuser(k), '--json'));
      expect(installed).toEqual([
        expect.objectContaining({
          node: `node-${k}`,
          url: `postgres://postgres@127.0.0.1:${new URL(urls[k]!).port}/${dbName(urls[k]!)}`,
          installed: true,
          enabled: true,
        }),
      ]);
    }
    const on = await cli('guard', 'status', '--json');
    expect(on.code).toBe(0);
    expect((JSON.parse(on.stdout) as GuardNodeResult[]).map((r) => [r.node, r.installed, r.enabled, r.url])).toEqual([
      ['node-0', true, true, shown(0)],
      ['node-1', true, true, shown(1)],
    ]);
    expect(seen(await cli('guard', 'status', '--node', 'node-1'))).toEqual({
      code: 0,
      stdout: `NODE    GUARD  DATABASE\nnode-1  on     ${shown(1)}\n`,
      stderr: '',
    });

    // Disabled by hand: installed, not on (exit 1); install again enables it.
    const node1 = await connect(urls[1]!);
    try {
      await node1.query('ALTER EVENT TRIGGER tablefate_guard_drop DISABLE');
      const disabled = await cli('guard', 'status', '--node', 'node-1');
      expect({ code: disabled.code, stdout: disabled.stdout }).toEqual({
        code: 1,
        stdout: expect.stringContaining('node-1  installed, disabled (tablefate guard install enables it)') as unknown,
      });
    } finally {
      await node1.end();
    }
    expect((await cli('guard', 'install', '--node', 'node-1', '--url', superuser(1))).code).toBe(0);
    expect((await cli('guard', 'status', '--node', 'node-1')).code).toBe(0);

    const usage = [
      [['guard'], 'guard: expected 1 argument(s), got 0'],
      [['guard', 'off'], 'guard: expected install, status or remove, got "off"'],
      [['guard', 'status', '--node', 'node-7'], 'guard: no node node-7 in this deployment (TABLEFATE_STORAGE_URLS names node-0 to node-1)'],
      [['guard', 'install', '--url', superuser(0)], "guard: --url names one database: say which node's with --node (node-0 to node-1)"],
      [['guard', 'install', '--node', 'node-0', '--url', `mysql://root:${PASSWORD}@db/x`], 'guard: --url is not a postgres:// url'],
      [
        ['guard', 'install', '--node', 'node-0', '--url', superuser(1)],
        `guard: --url names database ${dbName(urls[1]!)}, but node-0's is ${dbName(urls[0]!)}`,
      ],
    ] as const;
    for (const [args, message] of usage) {
      const r = await cli(...args);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 2, stderr: expect.stringContaining(message) as unknown });
    }
    const files = await runCliInProcess(['guard', 'status'], {
      env: { ...env, TABLEFATE_STORAGE_DRIVER: 'files', TABLEFATE_STORAGE_URLS: undefined },
    });
    expect({ code: files.code, stderr: files.stderr }).toEqual({
      code: 2,
      stderr: expect.stringContaining('guard is for the PostgreSQL storage driver') as unknown,
    });
    const unreachable = await runCliInProcess(['guard', 'status'], {
      env: { ...env, TABLEFATE_STORAGE_URLS: `postgres://${WORKER}:${PASSWORD}@127.0.0.1:1/nowhere` },
    });
    expect({ code: unreachable.code, stderr: unreachable.stderr }).toEqual({
      code: 7,
      stderr: expect.stringContaining(
        `tablefate: StorageFault: guard status on node-0 (postgres://${WORKER}@127.0.0.1:1/nowhere): cannot connect`,
      ) as unknown,
    });

    const removed = await cli('guard', 'remove', '--node', 'node-1', '--url', superuser(1));
    expect(removed.code).toBe(0);
    expect(removed.stdout).toContain(`node-1  off    postgres://postgres@`);
    const node1Again = await connect(urls[1]!);
    try {
      expect(await guardObjects(node1Again)).toEqual({ triggers: [], functions: [], schema: false });
    } finally {
      await node1Again.end();
    }
    const notAll = await cli('guard', 'status');
    expect({ code: notAll.code, stdout: notAll.stdout }).toEqual({
      code: 1,
      stdout: expect.stringMatching(/node-0 +on .*\nnode-1 +off /) as unknown,
    });
    expect(await cli('guard', 'install', '--node', 'node-1', '--url', superuser(1)).then((r) => r.code)).toBe(0);

    for (const r of [off, refused, refusedJson, on, removed, notAll, unreachable]) expect(r.stdout + r.stderr).not.toContain(PASSWORD);
  });

  test('a table through the command line with the guard on: create, psql cannot drop it, drop, recall, purge', async () => {
    connection = await Connection.connect({ address: testServerAddress() });
    await ensureNamespace(connection, NAMESPACE);
    worker = await startCliWorker(connection, env);
    const created = jsonOf<TableInfo>(await cli('create', 'shop.orders', '--columns', 'id int primary key, total numeric(12,2)', '--json'));
    const node = Number(created.placement[0]!.node.replace('node-', ''));
    const psql = await connect(urls[node]!);
    try {
      await psql.query('INSERT INTO shop.orders VALUES (1, 10.00), (2, 32.50)');
      expect((await refusal(psql, 'DROP TABLE shop.orders')).message).toContain(
        `shop.orders is a live table tablefate manages (table ${created.id}, shard 0): the guard refuses this DROP TABLE`,
      );
      expect(jsonOf<TableInfo>(await cli('drop', 'shop.orders', '--json')).state).toBe('TRASHED');
      await expect(psql.query('SELECT * FROM shop.orders')).rejects.toThrow('relation "shop.orders" does not exist');
      expect(jsonOf<TableInfo>(await cli('recall', 'shop.orders', '--json')).state).toBe('READY');
      expect(await rowsOf(psql, 'SELECT id, total FROM shop.orders ORDER BY id')).toEqual([
        { id: 1, total: '10.00' },
        { id: 2, total: '32.50' },
      ]);
      expect(jsonOf<TableInfo>(await cli('drop', 'shop.orders', '--json')).state).toBe('TRASHED');
      expect(jsonOf<TableInfo>(await cli('purge', String(created.id), '--json')).state).toBe('PURGED');
      expect(await rowsOf(psql, "SELECT count(*)::int AS n FROM pg_class WHERE relnamespace = 'tablefate_trash'::regnamespace")).toEqual([
        { n: 0 },
      ]);
      expect(await rowsOf(psql, 'SELECT count(*)::int AS n FROM tablefate.shards')).toEqual([{ n: 0 }]);
    } finally {
      await psql.end();
    }
    expect(worker.stdout + worker.stderr).not.toContain(PASSWORD);
  });
});
