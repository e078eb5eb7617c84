import { randomBytes } from 'node:crypto';
import { Client, Pool } from 'pg';
import { asRole, connect, startGuardedNode, type GuardedNode } from './support/guarded-node';
import { parkedName, type ShardTableId } from '../storage/postgres-record';
import { PostgresTables } from '../storage/postgres-tables';
import {
  GUARD_SCHEMA,
  guardState,
  installGuard,
  removeGuard,
  RECORD_TRIGGER,
  TRUNCATE_TRIGGER,
  type GuardState,
} from '../storage/postgres-guard';
import { formatGuard } from '../storage/postgres-guard-command';

/*
 * The guard and TRUNCATE (issue 43, storage/postgres-guard-truncate.ts): a BEFORE TRUNCATE trigger on each table it
 * guards refuses psql's TRUNCATE of a table tablefate manages, however the statement reaches it (several tables, a
 * partitioned table, a cascade), and the guard's event triggers refuse the DDL that would take that trigger away.
 * Judged as psql sees it: the statement fails naming the table and the tablefate call to make, and the rows are there.
 */

const SUFFIX = randomBytes(4).toString('hex');
const WORKER = `gtrunc_worker_${SUFFIX}`;
/** A service whose tables tablefate adopts; the worker is a member of it. */
const OWNER = `gtrunc_owner_${SUFFIX}`;

let node: GuardedNode;
let url: string;
let dba: Client;
let tables: PostgresTables;

const as = (u: string, role: string) => asRole(u, role);
const database = (prefix: string) => node.database(prefix);

beforeAll(async () => {
  node = await startGuardedNode({ worker: WORKER, owner: OWNER, prefix: 'pgguardtrunc' });
  ({ url, dba, tables } = node);
  await dba.query(`CREATE SCHEMA shop AUTHORIZATION ${WORKER}; GRANT USAGE, CREATE ON SCHEMA shop TO ${OWNER}`);
});

afterAll(async () => {
  await node?.stop();
});

const shard = (tableId: number, n = 0): ShardTableId => ({ catalogId: 'cat1', tableId, shard: n });
const rowsOf = async (client: Client, sql: string, values: unknown[] = []) =>
  (await client.query(sql, values)).rows as Array<Record<string, unknown>>;
const count = async (table: string) => Number((await rowsOf(dba, `SELECT count(*) AS n FROM ${table}`))[0]!.n);
const refusal = async (client: Client, sql: string): Promise<{ code?: string; message: string; hint?: string }> => {
  const err = (await client.query(sql).then(
    () => new Error(`${sql} was not refused`),
    (e: unknown) => e,
  )) as { code?: string; message: string; hint?: string };
  return { code: err.code, message: err.message, hint: err.hint };
};
/** The guard's triggers on a table, as pg_trigger has them: name, state (A: always), and whether the guard's function runs. */
const triggersOf = async (qualified: string) =>
  rowsOf(
    dba,
    `SELECT g.tgname AS name, g.tgenabled AS state, p.pronamespace = $2::regnamespace AS guards
       FROM pg_trigger g JOIN pg_proc p ON p.oid = g.tgfoid
      WHERE g.tgrelid = $1::regclass AND g.tgname IN ($3, $4) ORDER BY 1`,
    [qualified, GUARD_SCHEMA, TRUNCATE_TRIGGER, RECORD_TRIGGER],
  );
const covered = [{ name: TRUNCATE_TRIGGER, state: 'A', guards: true }];
/** What guard status prints of a node in `state`. */
const statusLine = (state: GuardState) => formatGuard([{ node: 'node-0', url: 'postgres://db/app', ...state }]).split('\n')[1];
const LIVE_ORDERS =
  'tablefate: shop.orders is a live table tablefate manages (table 1, shard 0): the guard refuses this TRUNCATE, which would delete its rows ' +
  'for good; "tablefate truncate shop.orders" (in SQL: CALL tablefate_sql.truncate(\'shop.orders\')) moves its rows to the trash instead, ' +
  'leaving the table empty in its place, and "tablefate recall" brings them back';

describe('TRUNCATE with the guard on', () => {
  beforeAll(async () => {
    await tables.create(shard(1), { schema: 'shop', table: 'orders' }, { columns: 'id int primary key, total numeric(12,2)' });
    await dba.query('INSERT INTO shop.orders VALUES (1, 9.50), (2, 20)');
    await dba.query('CREATE TABLE shop.scratch (id int); INSERT INTO shop.scratch VALUES (1)');
    await dba.query(
      `CREATE TABLE shop.customers (id int primary key); INSERT INTO shop.customers VALUES (7); ALTER TABLE shop.customers OWNER TO ${OWNER}`,
    );
    await tables.create(shard(2), { schema: 'shop', table: 'invoices' }, { columns: 'id int, customer_id int references shop.customers' });
    await dba.query('INSERT INTO shop.invoices VALUES (1, 7)');
  });

  const stillThere = async () => {
    expect(await count('shop.orders')).toBe(2);
    expect(await count('shop.invoices')).toBe(1);
    expect(await triggersOf('shop.orders')).toEqual(covered);
  };

  test('a table tablefate makes has the trigger, enabled always; the record has its own', async () => {
    expect(await triggersOf('shop.orders')).toEqual(covered);
    expect(await triggersOf('tablefate.shards')).toEqual([
      { name: RECORD_TRIGGER, state: 'A', guards: true },
      { name: TRUNCATE_TRIGGER, state: 'A', guards: true },
    ]);
    expect((await guardState(dba)).truncate).toEqual({ functions: true, recordTrigger: true, covered: 3, uncovered: [] });
  });

  test.each([
    ['TRUNCATE shop.orders', LIVE_ORDERS],
    ['TRUNCATE TABLE ONLY shop.orders RESTART IDENTITY', LIVE_ORDERS],
    ['TRUNCATE shop.scratch, shop.orders', LIVE_ORDERS],
    ['TRUNCATE shop.customers CASCADE', 'tablefate: shop.invoices is a live table tablefate manages (table 2, shard 0)'],
    ['TRUNCATE shop.customers, shop.invoices', 'tablefate: shop.invoices is a live table tablefate manages (table 2, shard 0)'],
  ])('%s is refused, naming the table and the call to make instead; every row stays', async (sql, message) => {
    const refused = await refusal(dba, sql);
    expect(refused).toEqual({
      code: '42501',
      message: expect.stringContaining(message) as unknown,
      hint: expect.stringContaining("tablefate's guard (tablefate guard status) refuses TRUNCATE of a table tablefate manages") as unknown,
    });
    await stillThere();
    expect(await count('shop.scratch')).toBe(1);
    expect(await count('shop.customers')).toBe(1);
  });

  test("a table other tables' keys reference is refused naming the truncate with cascade, by CASCADE or by naming them; its own key to itself asks none", async () => {
    await tables.create(shard(7), { schema: 'shop', table: 'accounts' }, { columns: 'id int primary key' });
    await dba.query('CREATE TABLE shop.entries (id int, account_id int references shop.accounts); INSERT INTO shop.accounts VALUES (1)');
    await dba.query('INSERT INTO shop.entries VALUES (1, 1)');
    const cascade =
      'tablefate: shop.accounts is a live table tablefate manages (table 7, shard 0): the guard refuses this TRUNCATE, which would delete ' +
      'its rows for good; "tablefate truncate shop.accounts --cascade" (in SQL: CALL tablefate_sql.truncate(\'shop.accounts\', cascade => true)) ' +
      'moves its rows, and those of the tables whose foreign keys reference it, to the trash instead, leaving each table empty in its place, ' +
      'and "tablefate recall" brings them back';
    for (const sql of ['TRUNCATE shop.accounts CASCADE', 'TRUNCATE shop.entries, shop.accounts']) {
      expect([sql, (await refusal(dba, sql)).message]).toEqual([sql, cascade]);
    }
    expect([await count('shop.accounts'), await count('shop.entries')]).toEqual([1, 1]);

    await tables.create(shard(8), { schema: 'shop', table: 'tree' }, { columns: 'id int primary key, parent int references shop.tree' });
    expect((await refusal(dba, 'TRUNCATE shop.tree CASCADE')).message).toContain(
      '"tablefate truncate shop.tree" (in SQL: CALL tablefate_sql.truncate(\'shop.tree\')) moves its rows to the trash instead',
    );
  });

  test('a session in replica mode is refused as well, and so is the owner of the table', async () => {
    const replica = await connect(url);
    try {
      await replica.query('SET session_replication_role = replica');
      expect((await refusal(replica, 'TRUNCATE shop.orders')).message).toBe(LIVE_ORDERS);
    } finally {
      await replica.end();
    }
    const worker = await connect(as(url, WORKER));
    try {
      expect((await refusal(worker, 'TRUNCATE shop.orders')).message).toBe(LIVE_ORDERS);
    } finally {
      await worker.end();
    }
    await stillThere();
  });

  test('tables tablefate does not manage truncate as before, one it released too (its trigger stays, idle)', async () => {
    await dba.query('CREATE TABLE shop.notes (id int); INSERT INTO shop.notes VALUES (1)');
    await dba.query('TRUNCATE shop.scratch, shop.notes');
    await dba.query(`CREATE TABLE shop.legacy (id int); INSERT INTO shop.legacy VALUES (1); ALTER TABLE shop.legacy OWNER TO ${OWNER}`);
    await tables.adopt(shard(3), { schema: 'shop', table: 'legacy' });
    expect((await refusal(dba, 'TRUNCATE shop.legacy')).message).toContain(
      'shop.legacy is a live table tablefate manages (table 3, shard 0)',
    );
    await tables.release(shard(3));
    expect(await triggersOf('shop.legacy')).toEqual(covered);
    await dba.query('TRUNCATE shop.legacy');
    // Adopted again with the trigger there already (as a twin may come to be recorded): nothing fails, one trigger.
    await dba.query('INSERT INTO shop.legacy VALUES (2)');
    await tables.adopt(shard(3), { schema: 'shop', table: 'legacy' });
    expect(await triggersOf('shop.legacy')).toEqual(covered);
    expect((await refusal(dba, 'TRUNCATE shop.legacy')).code).toBe('42501');
    expect(await count('shop.scratch')).toBe(0);
    await stillThere();
  });

  test("a table in the trash or the garbage, and tablefate's record, are refused too", async () => {
    await tables.create(shard(4), { schema: 'shop', table: 'lines' }, { columns: 'id int' });
    await dba.query('INSERT INTO shop.lines VALUES (1)');
    await tables.move(shard(4), 'trash');
    const parked = `tablefate_trash.${parkedName(shard(4))}`;
    expect((await refusal(dba, `TRUNCATE ${parked}`)).message).toBe(
      `tablefate: ${parked} is table 4 (shard 0) in tablefate's trash: the guard refuses this TRUNCATE, which would delete its rows for good; ` +
        '"tablefate purge 4" deletes it for good, and "tablefate recall 4 [schema.name]" brings it back live, rows and all',
    );
    await tables.move(shard(4), 'garbage');
    expect((await refusal(dba, `TRUNCATE tablefate_garbage.${parkedName(shard(4))}`)).message).toContain(
      'is table 4 (shard 0) in tablefate\'s garbage, its purge under way: the guard refuses this TRUNCATE, which would delete its rows for good; "tablefate purge 4" finishes it',
    );
    expect(await count(`tablefate_garbage.${parkedName(shard(4))}`)).toBe(1);
    await tables.drop(shard(4));
    expect((await refusal(dba, 'TRUNCATE tablefate.shards')).message).toBe(
      "tablefate: tablefate.shards is tablefate's record of the tables it manages: the guard refuses this TRUNCATE, which would forget every one of them",
    );
    expect(Number((await rowsOf(dba, 'SELECT count(*) AS n FROM tablefate.shards'))[0]!.n)).toBeGreaterThan(0);
  });

  test('the trigger follows its table through drop and recall, and the purge drops it with the table', async () => {
    await tables.create(shard(5), { schema: 'shop', table: 'returns' }, { columns: 'id int' });
    const oid = (await rowsOf(dba, "SELECT 'shop.returns'::regclass::oid::int8 AS oid"))[0]!.oid;
    await tables.move(shard(5), 'trash');
    await tables.move(shard(5), 'live', { schema: 'archive', table: 'returns_2025' });
    expect(await rowsOf(dba, "SELECT 'archive.returns_2025'::regclass::oid::int8 AS oid")).toEqual([{ oid }]);
    expect(await triggersOf('archive.returns_2025')).toEqual(covered);
    expect((await refusal(dba, 'TRUNCATE archive.returns_2025')).message).toContain(
      '"tablefate truncate archive.returns_2025" (in SQL: CALL tablefate_sql.truncate(\'archive.returns_2025\')) moves its rows to the trash instead',
    );
    await tables.move(shard(5), 'trash');
    await tables.move(shard(5), 'garbage');
    await tables.drop(shard(5));
    expect(await tables.locate(shard(5))).toBeNull();
    expect(await rowsOf(dba, 'SELECT count(*)::int AS n FROM pg_trigger WHERE tgrelid = $1', [oid])).toEqual([{ n: 0 }]);
  });
});

describe("tablefate's own truncate", () => {
  test('passes: the table goes to the trash with its rows and its trigger, and the twin in its place gets the trigger as it is recorded', async () => {
    await tables.create(shard(6), { schema: 'shop', table: 'carts' }, { columns: 'id int primary key' });
    await dba.query('INSERT INTO shop.carts VALUES (1), (2)');
    await tables.truncate([{ id: shard(6), into: 60 }]);
    const entry = `tablefate_trash.${parkedName(shard(60))}`;
    expect([await count('shop.carts'), await count(entry)]).toEqual([0, 2]);
    expect(await triggersOf('shop.carts')).toEqual(covered);
    expect(await triggersOf(entry)).toEqual(covered);
    expect((await refusal(dba, 'TRUNCATE shop.carts')).message).toContain('"tablefate truncate shop.carts"');
    expect((await refusal(dba, `TRUNCATE ${entry}`)).message).toContain('"tablefate purge 60" deletes it for good');
    // Taken back while the twin is empty: the twin dropped (its record first), the rows live again, guarded.
    await tables.untruncate(shard(6), 60);
    expect(await count('shop.carts')).toBe(2);
    expect(await triggersOf('shop.carts')).toEqual(covered);
  });
});

describe('partitions', () => {
  beforeAll(async () => {
    const owner = await connect(as(url, OWNER));
    try {
      await owner.query(`
        CREATE TABLE shop.events (at date, n int) PARTITION BY RANGE (at);
        CREATE TABLE shop.events_1 PARTITION OF shop.events FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
        CREATE TABLE shop.events_2 PARTITION OF shop.events FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
        INSERT INTO shop.events VALUES ('2026-01-05', 1), ('2026-02-05', 2);
        CREATE TABLE shop.metrics (at date, n int) PARTITION BY RANGE (at);
        CREATE TABLE shop.metrics_1 PARTITION OF shop.metrics FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')
          PARTITION BY RANGE (at);
        CREATE TABLE shop.metrics_1a PARTITION OF shop.metrics_1 FOR VALUES FROM ('2026-01-01') TO ('2026-01-15');
        INSERT INTO shop.metrics VALUES ('2026-01-05', 1);`);
    } finally {
      await owner.end();
    }
  });

  test('a partition adopted alone is refused through its partitioned table; its unmanaged sibling truncates alone', async () => {
    await tables.adopt(shard(10), { schema: 'shop', table: 'events_1' });
    expect(await triggersOf('shop.events_1')).toEqual(covered);
    expect((await refusal(dba, 'TRUNCATE shop.events')).message).toBe(
      'tablefate: shop.events_1 is a live table tablefate manages (table 10, shard 0): the guard refuses this TRUNCATE, which would delete its ' +
        'rows for good; drop it with "tablefate drop shop.events_1" instead: the trash keeps it, rows and all, and "tablefate recall" brings it back',
    );
    expect(await count('shop.events')).toBe(2);
    await dba.query('TRUNCATE shop.events_2');
    expect(await count('shop.events')).toBe(1);
  });

  test('a partitioned table adopted whole: every partition covered, at any depth, and each made or attached later', async () => {
    await tables.adopt(shard(11), { schema: 'shop', table: 'metrics' });
    for (const t of ['shop.metrics', 'shop.metrics_1', 'shop.metrics_1a']) expect(await triggersOf(t)).toEqual(covered);
    expect((await refusal(dba, 'TRUNCATE shop.metrics')).message).toContain(
      'shop.metrics is a live table tablefate manages (table 11, shard 0): the guard refuses this TRUNCATE, which would delete its rows for good',
    );
    expect((await refusal(dba, 'TRUNCATE shop.metrics_1a')).message).toBe(
      'tablefate: shop.metrics is a live table tablefate manages (table 11, shard 0): the guard refuses this TRUNCATE, which would delete the ' +
        'rows of its partition shop.metrics_1a for good; adopt the partition ("tablefate adopt shop.metrics_1a") and drop it with "tablefate ' +
        'drop": the trash keeps its rows, and its recall attaches it again',
    );
    await dba.query("CREATE TABLE shop.metrics_2 PARTITION OF shop.metrics FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')");
    await dba.query("CREATE TABLE shop.metrics_3 (at date, n int); INSERT INTO shop.metrics_3 VALUES ('2026-03-02', 3)");
    expect(await triggersOf('shop.metrics_3')).toEqual([]);
    await dba.query("ALTER TABLE shop.metrics ATTACH PARTITION shop.metrics_3 FOR VALUES FROM ('2026-03-01') TO ('2026-04-01')");
    for (const t of ['shop.metrics_2', 'shop.metrics_3']) {
      expect(await triggersOf(t)).toEqual(covered);
      expect((await refusal(dba, `TRUNCATE ${t}`)).message).toContain('which would delete the rows of its partition');
    }
    expect(await count('shop.metrics')).toBe(2);
    // Detached, it is none of tablefate's: its trigger stays, idle.
    await dba.query('ALTER TABLE shop.metrics DETACH PARTITION shop.metrics_3');
    await dba.query('TRUNCATE shop.metrics_3');
    expect((await guardState(dba)).truncate.uncovered).toEqual([]);
  });
});

describe('taking the trigger away', () => {
  beforeAll(async () => {
    await tables.create(shard(20), { schema: 'shop', table: 'stock' }, { columns: 'id int' });
    await dba.query('INSERT INTO shop.stock VALUES (1)');
    await dba.query('CREATE FUNCTION public.noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$');
  });

  const STOCK = 'tablefate: shop.stock is a live table tablefate manages (table 20, shard 0): the guard refuses this ';
  const ADVICE =
    '; the trigger is the guard\'s: "tablefate guard install" puts it back as it must be, and "tablefate guard remove" takes the guard ' +
    'off (each run by a superuser)';
  const ITS = `its trigger ${TRUNCATE_TRIGGER} (the guard's refusal of TRUNCATE of it)`;

  test.each([
    [`ALTER TABLE shop.stock DISABLE TRIGGER ${TRUNCATE_TRIGGER}`, `ALTER TABLE, which would disable ${ITS}`],
    ['ALTER TABLE shop.stock DISABLE TRIGGER ALL', `ALTER TABLE, which would disable ${ITS}`],
    ['ALTER TABLE shop.stock DISABLE TRIGGER USER', `ALTER TABLE, which would disable ${ITS}`],
    [
      `ALTER TABLE shop.stock ENABLE TRIGGER ${TRUNCATE_TRIGGER}`,
      `ALTER TABLE, which would make ${ITS} skip replica sessions (it is ENABLE ALWAYS)`,
    ],
    ['ALTER TABLE shop.stock ENABLE TRIGGER ALL', `ALTER TABLE, which would make ${ITS} skip replica sessions (it is ENABLE ALWAYS)`],
    [
      `ALTER TABLE shop.stock ENABLE REPLICA TRIGGER ${TRUNCATE_TRIGGER}`,
      `ALTER TABLE, which would make ${ITS} fire in replica sessions only`,
    ],
    [`DROP TRIGGER ${TRUNCATE_TRIGGER} ON shop.stock`, `DROP TRIGGER, which would drop ${ITS}`],
    [`ALTER TRIGGER ${TRUNCATE_TRIGGER} ON shop.stock RENAME TO mine`, `ALTER TRIGGER, which would rename ${ITS} to mine`],
    [
      `CREATE OR REPLACE TRIGGER ${TRUNCATE_TRIGGER} BEFORE TRUNCATE ON shop.stock FOR EACH STATEMENT EXECUTE FUNCTION public.noop()`,
      `CREATE TRIGGER, which would replace ${ITS}`,
    ],
  ])('%s is refused; the trigger stays as it was', async (sql, effect) => {
    expect(await refusal(dba, sql)).toEqual({
      code: '42501',
      message: `${STOCK}${effect}${ADVICE}`,
      hint: expect.stringContaining("tablefate's guard (tablefate guard status) refuses DDL that would let TRUNCATE reach") as unknown,
    });
    expect(await triggersOf('shop.stock')).toEqual(covered);
    expect((await refusal(dba, 'TRUNCATE shop.stock')).code).toBe('42501');
  });

  test("by the table's owner, by dropping the guard's function, and the record's own trigger: refused as well", async () => {
    const worker = await connect(as(url, WORKER));
    try {
      expect((await refusal(worker, 'ALTER TABLE shop.stock DISABLE TRIGGER USER')).message).toBe(
        `${STOCK}ALTER TABLE, which would disable ${ITS}${ADVICE}`,
      );
      expect((await refusal(worker, 'ALTER TABLE tablefate.shards DISABLE TRIGGER ALL')).message).toMatch(
        /^tablefate: tablefate\.shards is tablefate's record of the tables it manages: the guard refuses this ALTER TABLE, which would disable its trigger tablefate_guard_(record|truncate)/,
      );
    } finally {
      await worker.end();
    }
    expect((await refusal(dba, `DROP TRIGGER ${RECORD_TRIGGER} ON tablefate.shards`)).message).toBe(
      "tablefate: tablefate.shards is tablefate's record of the tables it manages: the guard refuses this DROP TRIGGER, which would drop its " +
        `trigger ${RECORD_TRIGGER} (which puts the guard's refusal of TRUNCATE on each table tablefate records)${ADVICE}`,
    );
    expect((await refusal(dba, `DROP FUNCTION ${GUARD_SCHEMA}.refuse_truncate() CASCADE`)).message).toMatch(
      /the guard refuses this DROP FUNCTION, which would drop (its trigger|the trigger) tablefate_guard_truncate/,
    );
    // DDL of the table that keeps the trigger as it is goes through, as before.
    await dba.query(`ALTER TABLE shop.stock ADD COLUMN note text; ALTER TABLE shop.stock ENABLE ALWAYS TRIGGER ${TRUNCATE_TRIGGER}`);
    expect(await triggersOf('shop.stock')).toEqual(covered);
    expect(await count('shop.stock')).toBe(1);
  });
});

describe('busy tables, install and remove', () => {
  test('a busy table adopted is left uncovered, not waited for; status names it; its next DDL or guard install covers it', async () => {
    await dba.query(
      `CREATE TABLE shop.busy (id int); CREATE TABLE shop.busy2 (id int); ALTER TABLE shop.busy OWNER TO ${OWNER}; ALTER TABLE shop.busy2 OWNER TO ${OWNER}`,
    );
    const writer = await connect(url);
    try {
      await writer.query('BEGIN; INSERT INTO shop.busy VALUES (1); INSERT INTO shop.busy2 VALUES (1)');
      const started = Date.now();
      await tables.adopt(shard(30), { schema: 'shop', table: 'busy' });
      await tables.adopt(shard(31), { schema: 'shop', table: 'busy2' });
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(await triggersOf('shop.busy')).toEqual([]);
      const busy = await guardState(dba);
      expect({ installed: busy.installed, enabled: busy.enabled, uncovered: busy.truncate.uncovered }).toEqual({
        installed: true,
        enabled: false,
        uncovered: ['shop.busy', 'shop.busy2'],
      });
      expect(statusLine(busy)).toBe(
        'node-0  on, but TRUNCATE is not refused on 2 table(s): shop.busy, shop.busy2 (tablefate guard install covers them)  postgres://db/app',
      );
      // guard install while the writer still holds them: it tries, then says which it could not cover.
      const again = await installGuard(dba, 'node-0');
      expect(again.truncate.uncovered).toEqual(['shop.busy', 'shop.busy2']);
      await writer.query('COMMIT');
    } finally {
      await writer.end();
    }
    await dba.query('ALTER TABLE shop.busy ADD COLUMN note text');
    expect(await triggersOf('shop.busy')).toEqual(covered);
    const installed = await installGuard(dba, 'node-0');
    expect({ enabled: installed.enabled, uncovered: installed.truncate.uncovered }).toEqual({ enabled: true, uncovered: [] });
    expect(await triggersOf('shop.busy2')).toEqual(covered);
  });

  test('install again is idempotent: one trigger per table, functions replaced, the same state', async () => {
    const before = await guardState(dba);
    const after = await installGuard(dba, 'node-0');
    expect(after).toEqual(before);
    expect(after).toMatchObject({ installed: true, enabled: true });
    expect(
      await rowsOf(
        dba,
        'SELECT tgrelid::regclass::text AS t, count(*)::int AS n FROM pg_trigger WHERE tgname = $1 GROUP BY 1 HAVING count(*) > 1',
        [TRUNCATE_TRIGGER],
      ),
    ).toEqual([]);
  });

  test('remove takes every trigger off (a busy table stops it, named, until run again); install puts them back', async () => {
    const reader = await connect(url);
    try {
      await reader.query('BEGIN; SELECT count(*) FROM shop.orders');
      const err = (await removeGuard(dba, 'node-0').catch((e: unknown) => e)) as Error;
      expect(err).toMatchObject({ type: 'TableBusy' });
      expect(err.message).toBe(
        'guard remove on node-0: the guard refuses no DDL any more, but 1 table(s) were busy and keep its TRUNCATE trigger (shop.orders): ' +
          'run tablefate guard remove again',
      );
      expect(await triggersOf('shop.orders')).toEqual(covered);
      expect(await triggersOf('shop.stock')).toEqual([]);
      expect(statusLine(await guardState(dba))).toBe(
        'node-0  partly there (its TRUNCATE triggers): tablefate guard install  postgres://db/app',
      );
      await reader.query('COMMIT');
    } finally {
      await reader.end();
    }
    const removed = await removeGuard(dba, 'node-0');
    expect(removed).toEqual({
      installed: false,
      enabled: false,
      triggers: [],
      truncate: { functions: false, recordTrigger: false, covered: 0, uncovered: [] },
    });
    expect(
      await rowsOf(dba, 'SELECT count(*)::int AS n FROM pg_trigger WHERE tgname IN ($1, $2)', [TRUNCATE_TRIGGER, RECORD_TRIGGER]),
    ).toEqual([{ n: 0 }]);
    expect(await rowsOf(dba, 'SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1', [GUARD_SCHEMA])).toEqual([{ n: 0 }]);
    await dba.query('TRUNCATE shop.stock');
    const back = await installGuard(dba, 'node-0');
    expect(back).toMatchObject({ installed: true, enabled: true, truncate: { uncovered: [] } });
    expect(await triggersOf('shop.orders')).toEqual(covered);
  });

  test("on a node tablefate has not prepared yet: its record gets the guard's triggers as tablefate makes it, and its tables theirs", async () => {
    const fresh = await database('pgguardtruncfresh');
    const superuser = await connect(fresh);
    const workerPool = new Pool({ connectionString: as(fresh, WORKER), max: 1, options: '-c search_path=pg_catalog,pg_temp' });
    try {
      await installGuard(superuser, 'node-1');
      expect((await guardState(superuser)).truncate).toEqual({ functions: true, recordTrigger: null, covered: 0, uncovered: [] });
      const freshTables = new PostgresTables(workerPool);
      await freshTables.prepare();
      await freshTables.create(shard(1), { schema: 'app', table: 'events' }, { columns: 'id int' });
      expect(await guardState(superuser)).toMatchObject({
        installed: true,
        enabled: true,
        truncate: { recordTrigger: true, covered: 2, uncovered: [] },
      });
      expect((await refusal(superuser, 'TRUNCATE app.events')).message).toContain('app.events is a live table tablefate manages (table 1');
    } finally {
      await workerPool.end();
      await superuser.end();
    }
  });
});
