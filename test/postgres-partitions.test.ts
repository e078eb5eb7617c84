import { Client } from 'pg';
import { Harness } from './support/harness';
import { sharedPostgres, type TestPostgres } from './support/postgres';

/*
 * A partitioned table with the PostgreSQL driver: adopted as it is, it goes to the trash with all its partitions (and
 * theirs), in one transaction, and comes back attached, each under its name; a purge drops them all. Judged by what
 * psql sees: pg_class by oid, pg_inherits, the parent's rows through its partitions.
 */

let server: TestPostgres;
let h: Harness;
let db: Client;

beforeAll(async () => {
  server = await sharedPostgres();
  const url = await server.freshDatabase('partitions');
  db = new Client({ connectionString: url });
  await db.connect();
  h = await Harness.start({ postgresNodes: [url] });
});

afterAll(async () => {
  await h?.close();
  await db?.end();
  await server?.stop();
});

const rows = async (sql: string, values: unknown[] = []) => (await db.query(sql, values)).rows as Array<Record<string, unknown>>;
const oidOf = async (name: string) => (await rows('SELECT to_regclass($1)::oid::int8 AS oid', [name]))[0]!.oid as string | null;
const whereIs = async (oid: unknown) =>
  (
    await rows(
      'SELECT format($$%I.%I$$, n.nspname, c.relname) AS at FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1',
      [oid],
    )
  )[0]?.at ?? null;
/** The partition tree under `parent`, as `child <- parent` pairs by name, sorted. */
const tree = async (parent: string) =>
  (
    await rows(
      `SELECT format('%s <- %s', relid::regclass, parentrelid::regclass) AS edge FROM pg_partition_tree($1::regclass) WHERE parentrelid IS NOT NULL ORDER BY 1`,
      [parent],
    )
  ).map((r) => r.edge);

test('a partitioned table goes to the trash with all its partitions and comes back attached; a purge drops them all', async () => {
  await db.query(`CREATE SCHEMA metrics;
    CREATE TABLE metrics.events (id bigint, at date NOT NULL, body text, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
    CREATE TABLE metrics.events_2026_01 PARTITION OF metrics.events FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
    CREATE TABLE metrics.events_2026_02 PARTITION OF metrics.events FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')
      PARTITION BY HASH (id);
    CREATE TABLE metrics.events_2026_02_h0 PARTITION OF metrics.events_2026_02 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
    CREATE TABLE metrics.events_2026_02_h1 PARTITION OF metrics.events_2026_02 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
    CREATE TABLE metrics.events_rest PARTITION OF metrics.events DEFAULT;
    CREATE INDEX events_body ON metrics.events (body);
    INSERT INTO metrics.events SELECT g, DATE '2026-01-01' + (g % 70), 'e' || g FROM generate_series(1, 300) g`);
  const names = [
    'metrics.events',
    'metrics.events_2026_01',
    'metrics.events_2026_02',
    'metrics.events_2026_02_h0',
    'metrics.events_2026_02_h1',
    'metrics.events_rest',
  ];
  const oids = Object.fromEntries(await Promise.all(names.map(async (name) => [name, await oidOf(name)] as const)));
  const edges = await tree('metrics.events');
  expect(edges).toHaveLength(5);

  const adopted = await h.client.adopt({ table: 'metrics.events' });
  expect(adopted).toMatchObject({ state: 'READY' });
  // Its size is its partitions': the partitioned table holds nothing itself.
  const described = await h.client.describe({ table: adopted.id, withSizes: true });
  expect(described.bytes).toBeGreaterThan(8192);

  // No --cascade needed: the partitions are the table's own rows, as DROP TABLE takes them.
  const dry = await h.client.trash({ table: 'metrics.events', dryRun: true });
  expect(dry.notes).toEqual([
    expect.stringMatching(/^metrics\.events: would move into the trash with it: partition metrics\.events_2026_01, /),
  ]);
  const trashed = await h.client.trash({ table: 'metrics.events', retentionSeconds: 3600 });
  expect(trashed.notes).toEqual([dry.notes![0]!.replace('would move', 'moved')]);
  // The SQL door's trash view counts its partitions' bytes too.
  expect(Number((await rows('SELECT bytes FROM tablefate_sql.trash WHERE table_id = $1', [adopted.id]))[0]?.bytes)).toBe(described.bytes);
  for (const oid of Object.values(oids)) expect(await whereIs(oid)).toMatch(/^tablefate_trash\./);
  expect(await oidOf('metrics.events_2026_01')).toBeNull();

  const back = await h.client.undelete({ table: adopted.id });
  expect(back).toMatchObject({ state: 'READY' });
  for (const [name, oid] of Object.entries(oids)) expect(await whereIs(oid)).toBe(name);
  expect(await tree('metrics.events')).toEqual(edges);
  expect(await rows('SELECT count(*)::int AS n FROM metrics.events')).toEqual([{ n: 300 }]);
  // Routed as before: a row of February lands in its hash partition.
  await db.query(`INSERT INTO metrics.events VALUES (1001, '2026-02-10', 'new')`);
  expect(await rows(`SELECT tableoid::regclass::text AS part FROM metrics.events WHERE id = 1001`)).toEqual([
    { part: expect.stringMatching(/^metrics\.events_2026_02_h[01]$/) as unknown },
  ]);
  // Its indexes (and its partitions') have their names again.
  expect(await rows(`SELECT indexname FROM pg_indexes WHERE schemaname = 'metrics' AND tablename = 'events' ORDER BY 1`)).toEqual([
    { indexname: 'events_body' },
    { indexname: 'events_pkey' },
  ]);
  expect(await rows(`SELECT count(*)::int AS n FROM pg_indexes WHERE schemaname = 'metrics' AND indexname LIKE 'c%\\_t%'`)).toEqual([
    { n: 0 },
  ]);

  await h.client.trash({ table: 'metrics.events', retentionSeconds: 3600 });
  expect(await h.client.purge({ tableId: adopted.id })).toMatchObject({ state: 'PURGED' });
  for (const oid of Object.values(oids)) expect(await whereIs(oid)).toBeNull();
  expect(
    await rows(
      "SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname IN ('tablefate_trash', 'tablefate_garbage')",
    ),
  ).toEqual([{ n: 0 }]);
});

test('a view on a partition needs --cascade, as on the table; a partition that is partitioned itself is not adopted alone', async () => {
  await db.query(`CREATE SCHEMA logs;
    CREATE TABLE logs.lines (at date NOT NULL, line text) PARTITION BY RANGE (at);
    CREATE TABLE logs.lines_2026 PARTITION OF logs.lines FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
    CREATE VIEW logs.lines_2026_v AS SELECT * FROM logs.lines_2026`);
  const parent = await h.client.adopt({ table: 'logs.lines' });
  await expect(h.client.trash({ table: 'logs.lines' })).rejects.toMatchObject({
    type: 'HasDependents',
    message: expect.stringContaining('view logs.lines_2026_v; drop them first, or drop with --cascade') as unknown,
  });
  const trashed = await h.client.trash({ table: 'logs.lines', cascade: true, retentionSeconds: 3600 });
  expect(trashed.notes).toEqual(['logs.lines: moved into the trash with it: partition logs.lines_2026, view logs.lines_2026_v']);
  await h.client.undelete({ table: parent.id });
  expect(await rows('SELECT count(*)::int AS n FROM logs.lines_2026_v')).toEqual([{ n: 0 }]);
  // (A leaf partition is: test/postgres-partition-alone.test.ts.)
  await db.query(
    `CREATE TABLE logs.lines_2027 PARTITION OF logs.lines FOR VALUES FROM ('2027-01-01') TO ('2028-01-01') PARTITION BY RANGE (at)`,
  );
  await expect(h.client.adopt({ table: 'logs.lines_2027' })).rejects.toMatchObject({
    type: 'InvalidInput',
    message: expect.stringContaining('it is a partition that is partitioned itself: adopt its partitioned table whole') as unknown,
  });
});
