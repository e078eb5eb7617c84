import { Client } from 'pg';
import { Harness } from './support/harness';
import { startCrashingWorker } from './support/crashing-worker';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { installGuard, removeGuard } from '../storage/postgres-guard';

/*
 * A single partition managed as a table of its own (issue 42): adopted alone, its drop detaches it from its
 * partitioned table into the trash (trying the partitioned table's lock briefly, as the table's: its readers never
 * queue behind the drop), and its recall attaches it again with the same bounds, or brings it back beside it, said,
 * when the bounds are taken or the partitioned table is gone. Judged by what psql sees: pg_class by oid, pg_inherits,
 * pg_get_expr of the bounds, the partitioned table's rows.
 */

let server: TestPostgres;
let h: Harness;
let db: Client;
let url: string;

beforeAll(async () => {
  server = await sharedPostgres();
  url = await server.freshDatabase('partalone');
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

const rows = async (sql: string, values: unknown[] = []) => (await db.query(sql, values)).rows as Array<Record<string, unknown>>;
const count = async (table: string) => Number((await rows(`SELECT count(*) AS n FROM ${table}`))[0]!.n);
const oidOf = async (name: string) => (await rows('SELECT to_regclass($1)::oid::int8 AS oid', [name]))[0]!.oid as string | null;
const whereIs = async (oid: unknown) =>
  (
    await rows(
      'SELECT format($$%I.%I$$, n.nspname, c.relname) AS at FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1',
      [oid],
    )
  )[0]?.at ?? null;
/** What psql's \d+ says of the partition: its partitioned table and bounds, or nulls when it is none's. */
const attachment = async (oid: unknown) =>
  (
    await rows(
      `SELECT (SELECT inhparent::regclass::text FROM pg_inherits WHERE inhrelid = c.oid) AS parent, pg_get_expr(c.relpartbound, c.oid) AS bound
         FROM pg_class c WHERE c.oid = $1`,
      [oid],
    )
  )[0];
const constraints = async (oid: unknown) =>
  (await rows('SELECT conname, contype, conparentid <> 0 AS inherited FROM pg_constraint WHERE conrelid = $1 ORDER BY conname', [oid])).map(
    (r) => `${String(r.conname)} ${String(r.contype)}${r.inherited ? ' inherited' : ''}`,
  );
const JANUARY = "FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')";

/** <schema>.events by month, a default partition, an index and a key to <schema>.users on the partitioned table. */
async function events(schema: string): Promise<void> {
  await db.query(`CREATE SCHEMA ${schema};
    CREATE TABLE ${schema}.users (id int PRIMARY KEY);
    INSERT INTO ${schema}.users SELECT generate_series(1, 10);
    CREATE TABLE ${schema}.events (id bigint, at date NOT NULL, uid int REFERENCES ${schema}.users, body text, PRIMARY KEY (id, at))
      PARTITION BY RANGE (at);
    CREATE TABLE ${schema}.events_2026_01 PARTITION OF ${schema}.events ${JANUARY};
    CREATE TABLE ${schema}.events_2026_02 PARTITION OF ${schema}.events FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
    CREATE TABLE ${schema}.events_rest PARTITION OF ${schema}.events DEFAULT;
    CREATE INDEX events_body ON ${schema}.events (body);
    INSERT INTO ${schema}.events SELECT g, DATE '2026-01-01' + (g % 45), g % 10 + 1, 'e' || g FROM generate_series(1, 450) g`);
}

test('a partition alone: adopted, dropped without queueing readers of its partitioned table, recalled into its place with its bounds and indexes', async () => {
  await events('shop');
  const oid = await oidOf('shop.events_2026_01');
  const january = await count('shop.events_2026_01');
  const before = { attached: await attachment(oid), constraints: await constraints(oid) };
  expect(before.attached).toEqual({ parent: 'shop.events', bound: JANUARY });
  const adopted = await h.client.adopt({ table: 'shop.events_2026_01' });
  expect(adopted).toMatchObject({ state: 'READY' });
  expect((await h.client.trash({ table: 'shop.events_2026_01', dryRun: true })).notes).toEqual([
    `shop.events_2026_01: would detach from shop.events (${JANUARY}) until its recall`,
  ]);

  // A reader of the partitioned table in an open transaction: the drop waits for it, trying its locks briefly.
  const reader = new Client({ connectionString: url, application_name: 'the reader' });
  const other = new Client({ connectionString: url, application_name: 'another reader', statement_timeout: 5_000 });
  await reader.connect();
  await other.connect();
  try {
    await reader.query('BEGIN');
    expect(Number((await reader.query<{ n: string }>('SELECT count(*) AS n FROM shop.events')).rows[0]!.n)).toBe(450);
    const drop = h.client.trash({ table: 'shop.events_2026_01', retentionSeconds: 3600, drainTimeoutSeconds: 60 });
    let settled = false;
    void drop.finally(() => (settled = true)).catch(() => undefined);
    while ((await h.catalog.getTable(adopted.id))?.state !== 'TRASHING') await new Promise((resolve) => setTimeout(resolve, 50));
    // Readers that come meanwhile are not queued behind it: each is answered within a try's 100 ms, never the drain's 60 s.
    for (let k = 0; k < 6; k++) {
      const started = Date.now();
      expect(Number((await other.query<{ n: string }>('SELECT count(*) AS n FROM shop.events')).rows[0]!.n)).toBe(450);
      expect(Date.now() - started).toBeLessThan(1_000);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    // It waits for the reader, and has changed nothing yet.
    expect(settled).toBe(false);
    expect(await attachment(oid)).toEqual(before.attached);
    await reader.query('COMMIT');
    const trashed = await drop;
    expect(trashed).toMatchObject({ state: 'TRASHED' });
    expect(trashed.notes).toEqual([`shop.events_2026_01: detached from shop.events (${JANUARY}) until its recall`]);
  } finally {
    await reader.end();
    await other.end();
  }
  expect(await whereIs(oid)).toMatch(/^tablefate_trash\./);
  expect(await attachment(oid)).toEqual({ parent: null, bound: null });
  expect(await count('shop.events')).toBe(450 - january);
  // Frozen in the trash: the key it had as the partitioned table's copy is detached; its bounds' check validated there.
  expect(await constraints(oid)).toEqual(expect.arrayContaining(['tablefate_partition_bound c']));
  expect((await constraints(oid)).filter((c) => c.endsWith(' f'))).toEqual([]);
  expect(
    await rows('SELECT convalidated FROM pg_constraint WHERE conrelid = $1 AND conname = $2', [oid, 'tablefate_partition_bound']),
  ).toEqual([{ convalidated: true }]);

  const back = await h.client.undelete({ table: adopted.id });
  expect(back).toMatchObject({ state: 'READY', namespace: 'shop', name: 'events_2026_01' });
  expect(back.notes ?? []).toEqual([]);
  expect(await whereIs(oid)).toBe('shop.events_2026_01');
  expect(await attachment(oid)).toEqual(before.attached);
  expect(await count('shop.events')).toBe(450 - january + january);
  // Its indexes under their names, attached to the partitioned table's again; its key the partitioned table's copy.
  expect(
    await rows(
      `SELECT c.relname AS index, p.relname AS of FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
         LEFT JOIN pg_inherits i ON i.inhrelid = x.indexrelid LEFT JOIN pg_class p ON p.oid = i.inhparent
        WHERE x.indrelid = $1 ORDER BY 1`,
      [oid],
    ),
  ).toEqual([
    { index: 'events_2026_01_body_idx', of: 'events_body' },
    { index: 'events_2026_01_pkey', of: 'events_pkey' },
  ]);
  // Its constraints as before: no check of tablefate's left, and one key, the partitioned table's copy.
  expect(await constraints(oid)).toEqual(before.constraints);
  // Routed as before: a January row lands in it.
  await db.query(`INSERT INTO shop.events VALUES (1001, '2026-01-20', 1, 'new')`);
  expect(await rows('SELECT tableoid::regclass::text AS part FROM shop.events WHERE id = 1001')).toEqual([{ part: 'shop.events_2026_01' }]);

  // A purge of a trashed partition drops it; the partitioned table keeps the rest.
  await h.client.trash({ table: 'shop.events_2026_01', retentionSeconds: 3600 });
  expect(await h.client.purge({ tableId: adopted.id })).toMatchObject({ state: 'PURGED' });
  expect(await whereIs(oid)).toBeNull();
  expect(await count('shop.events')).toBe(450 - january);
});

test('the recall reads none of its rows: the only scan of it is the validation of its check, in the trash after the drop', async () => {
  await db.query(`CREATE SCHEMA scan;
    CREATE TABLE scan.events (id bigint, at date NOT NULL) PARTITION BY RANGE (at);
    CREATE TABLE scan.events_2026_01 PARTITION OF scan.events ${JANUARY};
    INSERT INTO scan.events SELECT g, DATE '2026-01-01' + (g % 31) FROM generate_series(1, 1000) g`);
  const oid = await oidOf('scan.events_2026_01');
  /**
   * The sequential scans PostgreSQL counted on the partition. A session reports its counts as it ends: the worker's are
   * ended first (its pools open new ones), each waited for, so that every scan it made is counted and none comes later.
   */
  const scans = async () => {
    await db.query(
      `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
    );
    await db.query('SELECT pg_stat_clear_snapshot()');
    return Number((await rows('SELECT seq_scan FROM pg_stat_user_tables WHERE relid = $1', [oid]))[0]!.seq_scan);
  };
  const table = await h.client.adopt({ table: 'scan.events_2026_01' });
  await h.client.trash({ table: 'scan.events_2026_01', retentionSeconds: 3600 });
  // The validation of its check, in the trash: counted, as an ATTACH's scan of it would be (PostgreSQL counts both).
  expect(await scans()).toBe(1);
  await h.client.undelete({ table: table.id });
  expect(await attachment(oid)).toEqual({ parent: 'scan.events', bound: JANUARY });
  expect(await scans()).toBe(1);
}, 60_000);

test('its bounds taken while it was in the trash: it comes back beside its partitioned table, plain, and says by which', async () => {
  await events('taken');
  const oid = await oidOf('taken.events_2026_01');
  const january = await count('taken.events_2026_01');
  const table = await h.client.adopt({ table: 'taken.events_2026_01' });
  await h.client.trash({ table: 'taken.events_2026_01', retentionSeconds: 3600 });
  await db.query(`CREATE TABLE taken.events_2026_01b PARTITION OF taken.events ${JANUARY}`);
  const back = await h.client.undelete({ table: table.id });
  expect(back.notes).toEqual([
    `taken.events_2026_01: came back detached, beside taken.events: its partition bounds ${JANUARY} of taken.events are taken by taken.events_2026_01b`,
  ]);
  expect(await whereIs(oid)).toBe('taken.events_2026_01');
  expect(await attachment(oid)).toEqual({ parent: null, bound: null });
  expect(await count('taken.events_2026_01')).toBe(january);
  expect((await constraints(oid)).filter((c) => c.startsWith('tablefate'))).toEqual([]);
  // Its key to users is its own again (NOT VALID first, then validated), as a DBA's DETACH leaves it.
  expect(await rows(`SELECT conname, convalidated FROM pg_constraint WHERE conrelid = $1 AND contype = 'f'`, [oid])).toEqual([
    { conname: 'events_uid_fkey', convalidated: true },
  ]);
  // Dropped again, it is a plain table: nothing to detach.
  expect((await h.client.trash({ table: 'taken.events_2026_01', retentionSeconds: 3600 })).notes ?? []).toEqual([]);
});

test('its partitioned table dropped while it was in the trash: it comes back as a plain table, said', async () => {
  await events('gone');
  const oid = await oidOf('gone.events_2026_02');
  const february = await count('gone.events_2026_02');
  const table = await h.client.adopt({ table: 'gone.events_2026_02' });
  await h.client.trash({ table: 'gone.events_2026_02', retentionSeconds: 3600 });
  await db.query('DROP TABLE gone.events');
  const back = await h.client.undelete({ table: table.id });
  expect(back.notes).toEqual([
    'gone.events_2026_02: came back detached, beside gone.events: its partitioned table gone.events was dropped while it was in the trash',
  ]);
  expect(await whereIs(oid)).toBe('gone.events_2026_02');
  expect(await count('gone.events_2026_02')).toBe(february);
});

test("a default partition alone comes back the default; rows of a partition's bounds written to the default meanwhile keep it beside, said", async () => {
  await events('fallback');
  const rest = await oidOf('fallback.events_rest');
  const restRows = await count('fallback.events_rest');
  const restTable = await h.client.adopt({ table: 'fallback.events_rest' });
  expect((await h.client.trash({ table: 'fallback.events_rest', retentionSeconds: 3600 })).notes).toEqual([
    'fallback.events_rest: detached from fallback.events (DEFAULT) until its recall',
  ]);
  await expect(db.query(`INSERT INTO fallback.events VALUES (2001, '2027-05-01', 1, 'nowhere')`)).rejects.toMatchObject({ code: '23514' });
  expect((await h.client.undelete({ table: restTable.id })).notes ?? []).toEqual([]);
  expect(await attachment(rest)).toEqual({ parent: 'fallback.events', bound: 'DEFAULT' });
  expect(await count('fallback.events_rest')).toBe(restRows);

  const february = await oidOf('fallback.events_2026_02');
  const table = await h.client.adopt({ table: 'fallback.events_2026_02' });
  await h.client.trash({ table: 'fallback.events_2026_02', retentionSeconds: 3600 });
  await db.query(`INSERT INTO fallback.events VALUES (2002, '2026-02-14', 1, 'to the default')`);
  expect((await h.client.undelete({ table: table.id })).notes).toEqual([
    "fallback.events_2026_02: came back detached, beside fallback.events: rows of its partition bounds FOR VALUES FROM ('2026-02-01') TO ('2026-03-01') of fallback.events were written to the default partition fallback.events_rest meanwhile",
  ]);
  expect(await attachment(february)).toEqual({ parent: null, bound: null });
});

test('its partitioned table managed too: neither takes the other along; each is dropped and recalled on its own', async () => {
  await events('fam');
  const part = await oidOf('fam.events_2026_01');
  const parent = await h.client.adopt({ table: 'fam.events' });
  const alone = await h.client.adopt({ table: 'fam.events_2026_01' });
  // The partitioned table does not take a partition that is a table of its own.
  await expect(h.client.trash({ table: 'fam.events', retentionSeconds: 3600 })).rejects.toMatchObject({
    type: 'HasDependents',
    message: expect.stringContaining(`partition fam.events_2026_01 (table ${alone.id}); drop that one first`) as unknown,
  });
  await h.client.trash({ table: 'fam.events_2026_01', retentionSeconds: 3600 });
  // Trashed alone, it is no member of the partitioned table's family any more.
  const trashed = await h.client.trash({ table: 'fam.events', retentionSeconds: 3600 });
  expect(trashed.notes).toEqual(['fam.events: moved into the trash with it: partition fam.events_2026_02, partition fam.events_rest']);
  await h.client.undelete({ table: parent.id });
  expect(await whereIs(part)).toMatch(/^tablefate_trash\./);
  expect(await attachment(part)).toEqual({ parent: null, bound: null });
  expect(await h.client.undelete({ table: alone.id })).toMatchObject({ state: 'READY' });
  expect(await attachment(part)).toEqual({ parent: 'fam.events', bound: JANUARY });

  // Its partitioned table in the trash when it is recalled: beside it, said; the partitioned table comes back without it.
  await h.client.trash({ table: 'fam.events_2026_01', retentionSeconds: 3600 });
  await h.client.trash({ table: 'fam.events', retentionSeconds: 3600 });
  expect((await h.client.undelete({ table: alone.id })).notes).toEqual([
    "fam.events_2026_01: came back detached, beside fam.events: its partitioned table fam.events is in tablefate's trash",
  ]);
  await h.client.undelete({ table: parent.id });
  expect(await tree('fam.events')).toEqual(['fam.events_2026_02', 'fam.events_rest']);
  expect(await whereIs(part)).toBe('fam.events_2026_01');
});

const tree = async (parent: string) =>
  (await rows('SELECT relid::regclass::text AS part FROM pg_partition_tree($1::regclass) WHERE level = 1 ORDER BY 1', [parent])).map(
    (r) => r.part,
  );

test("the guard: a managed partition, or any partition of a managed partitioned table, is not dropped or detached by hand; tablefate's own moves go through", async () => {
  await events('guarded');
  const parent = await h.client.adopt({ table: 'guarded.events' });
  const alone = await h.client.adopt({ table: 'guarded.events_2026_01' });
  await db.query('CREATE TABLE guarded.loose (id int)');
  await installGuard(db, 'node-0');
  try {
    await expect(db.query('DROP TABLE guarded.events_2026_01')).rejects.toMatchObject({
      code: '42501',
      message: expect.stringContaining(`guarded.events_2026_01 is a live table tablefate manages (table ${alone.id}, shard 0)`) as unknown,
    });
    await expect(db.query('DROP TABLE guarded.events_2026_02')).rejects.toMatchObject({
      code: '42501',
      message: expect.stringMatching(
        new RegExp(
          `guarded\\.events is a live table tablefate manages \\(table ${parent.id}, shard 0\\).*drop its partition guarded\\.events_2026_02; adopt the partition`,
        ),
      ) as unknown,
    });
    await expect(db.query('ALTER TABLE guarded.events DETACH PARTITION guarded.events_2026_01')).rejects.toMatchObject({
      code: '42501',
      message: expect.stringContaining(
        'which would detach it from guarded.events; "tablefate drop guarded.events_2026_01" detaches it',
      ) as unknown,
    });
    expect(await tree('guarded.events')).toEqual(['guarded.events_2026_01', 'guarded.events_2026_02', 'guarded.events_rest']);
    // What tablefate does not manage goes through: a table of no managed partitioned table, in a transaction of its own.
    await db.query('DROP TABLE guarded.loose');
    // Nor a table whose key referenced the partitioned table (its drop locks it too, to take the key's triggers off it).
    await db.query('CREATE TABLE guarded.refs (id bigint, at date, FOREIGN KEY (id, at) REFERENCES guarded.events)');
    await db.query('DROP TABLE guarded.refs');
    // tablefate's own DETACH and ATTACH.
    await h.client.trash({ table: 'guarded.events_2026_01', retentionSeconds: 3600 });
    await h.client.undelete({ table: alone.id });
    expect(await tree('guarded.events')).toEqual(['guarded.events_2026_01', 'guarded.events_2026_02', 'guarded.events_rest']);

    // DETACH ... CONCURRENTLY commits its first half before the guard sees it: its second goes through rather than leave
    // the partition pending detach. The partition stays tablefate's, plain; the partitioned table's DDL is not held up.
    await db.query(`CREATE TABLE guarded.logs (at int) PARTITION BY RANGE (at);
      CREATE TABLE guarded.logs_1 PARTITION OF guarded.logs FOR VALUES FROM (0) TO (10)`);
    const logs = await h.client.adopt({ table: 'guarded.logs_1' });
    await db.query('ALTER TABLE guarded.logs DETACH PARTITION guarded.logs_1 CONCURRENTLY');
    await db.query('ALTER TABLE guarded.logs ADD COLUMN note text');
    expect(await tree('guarded.logs')).toEqual([]);
    expect((await h.client.trash({ table: 'guarded.logs_1', retentionSeconds: 3600 })).notes ?? []).toEqual([]);
    await h.client.undelete({ table: logs.id });
  } finally {
    await removeGuard(db, 'node-0');
  }
});

test('a worker killed after the move, of a drop and of a recall: the next one finds it moved and answers the same notes', async () => {
  await events('crash');
  const oid = await oidOf('crash.events_2026_01');
  const table = await h.client.adopt({ table: 'crash.events_2026_01' });
  const killedAfterTheMove = async <T>(operation: () => Promise<T>): Promise<T> => {
    await h.stopWorker();
    const crashing = await startCrashingWorker({
      on: h,
      activity: 'runStepsHere',
      env: { CRASH_POSTGRES_URLS: url, CRASH_ON_CALL: '1' },
    });
    const answer = operation();
    expect(await crashing.exited).toBe('SIGKILL');
    await h.startWorker();
    return answer;
  };
  const trashed = await killedAfterTheMove(() =>
    h.client.trash({ table: 'crash.events_2026_01', retentionSeconds: 3600 }, { timeoutMs: 120_000 }),
  );
  expect(trashed).toMatchObject({
    state: 'TRASHED',
    notes: [`crash.events_2026_01: detached from crash.events (${JANUARY}) until its recall`],
  });
  expect(await whereIs(oid)).toMatch(/^tablefate_trash\./);
  expect(
    await rows('SELECT convalidated FROM pg_constraint WHERE conrelid = $1 AND conname = $2', [oid, 'tablefate_partition_bound']),
  ).toEqual([{ convalidated: true }]);
  expect(await h.catalog.listLocks()).toEqual([]);

  await db.query(`CREATE TABLE crash.events_2026_01b PARTITION OF crash.events ${JANUARY}`);
  const back = await killedAfterTheMove(() => h.client.undelete({ table: table.id }, { timeoutMs: 120_000 }));
  expect(back).toMatchObject({
    state: 'READY',
    notes: [
      `crash.events_2026_01: came back detached, beside crash.events: its partition bounds ${JANUARY} of crash.events are taken by crash.events_2026_01b`,
    ],
  });
  expect(await whereIs(oid)).toBe('crash.events_2026_01');
  expect(await h.catalog.listLocks()).toEqual([]);
});
