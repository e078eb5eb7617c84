import { Client, Pool } from 'pg';
import { PostgresTables } from '../storage/postgres-tables';
import { Harness, workflowBundleFile } from './support/harness';
import { startCrashingWorker } from './support/crashing-worker';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import type { TableInfo } from '../domain/table';

/*
 * The whole life of a table whose shards are real PostgreSQL tables (storage/postgres.ts), through the workflows, on a
 * worker that serves two PostgreSQL nodes, judged by what a service's own PostgreSQL client sees on each node.
 */

let server: TestPostgres;
let h: Harness;
let nodeUrls: string[];
const nodes: Client[] = [];

beforeAll(async () => {
  server = await sharedPostgres();
  nodeUrls = [await server.freshDatabase('pgnode'), await server.freshDatabase('pgnode')];
  for (const url of nodeUrls) {
    const client = new Client({ connectionString: url });
    await client.connect();
    nodes.push(client);
  }
  h = await Harness.start({ postgresNodes: nodeUrls });
});

afterAll(async () => {
  await h?.close();
  for (const client of [...nodes, ...others.values()]) await client.end();
  await server?.stop();
});

/** A service's client on the node that holds `shard` of `table` (of the nodes at `urls`, the first describe's by default). */
const others = new Map<string, Client>();
function nodeOf(table: TableInfo, shard = 0, urls?: string[]): Client {
  const k = Number(table.placement[shard]!.node.replace('node-', ''));
  if (!urls) return nodes[k]!;
  let client = others.get(urls[k]!);
  if (!client) {
    client = new Client({ connectionString: urls[k] });
    others.set(urls[k]!, client);
    void client.connect();
  }
  return client;
}
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

describe('crashes and repeats', () => {
  let urls: string[];
  let crashes: Harness;
  let bundleFile: string;
  beforeAll(async () => {
    urls = [await server.freshDatabase('pgcrash'), await server.freshDatabase('pgcrash')];
    crashes = await Harness.start({ postgresNodes: urls, startWorker: false, workflowTaskTimeoutMs: 3000 });
    bundleFile = await workflowBundleFile();
  });
  afterAll(async () => {
    await crashes?.close();
  });

  test('a worker killed right after it moved the table to the trash in a lost workflow task: TRASHED, every row kept', async () => {
    await crashes.startWorker();
    const table = await crashes.client.create({ table: 'crash.ledger', shards: 2, columns: 'id int primary key, amount int' });
    for (const shard of [0, 1]) await nodeOf(table, shard, urls).query(`INSERT INTO crash.ledger_${shard} VALUES (${shard}, 100)`);
    const before = await crashes.shardReports(table);
    await crashes.stopWorker();

    const worker = await startCrashingWorker({
      on: crashes,
      bundleFile,
      // (The trash's first call of its steps drains the table and moves it.)
      activity: 'runStepsHere',
      env: { CRASH_POSTGRES_URLS: urls.join(',') },
    });
    const trashing = crashes.client.trash({ table: 'crash.ledger', retentionSeconds: 3600 });
    expect(await worker.exited).toBe('SIGKILL');
    await crashes.startWorker();
    expect((await trashing).state).toBe('TRASHED');
    expect((await crashes.shardReports(table)).map((r) => r.area)).toEqual(['trash', 'trash']);

    const back = await crashes.client.undelete({ table: table.id });
    expect(back.state).toBe('READY');
    expect((await crashes.shardReports(table)).map((r) => r.checksum)).toEqual(before.map((r) => r.checksum));
    expect(await crashes.catalog.listLocks()).toEqual([]);
    await crashes.stopWorker();
  });

  test('with every storage and catalog call made twice (a retry after a lost answer), a table lives its whole life once', async () => {
    const twice = await Harness.start({ postgresNodes: urls, everyCallTwice: true });
    try {
      const table = await twice.client.create({ table: 'twice.notes', columns: 'id serial primary key, body text' });
      const db = nodeOf(table, 0, urls);
      await db.query("INSERT INTO twice.notes (body) VALUES ('kept')");
      await twice.client.trash({ table: 'twice.notes', retentionSeconds: 3600 });
      await expect(db.query('SELECT * FROM twice.notes')).rejects.toThrow('does not exist');
      await twice.client.undelete({ table: table.id, newName: 'twice.notes_back' });
      expect((await db.query('SELECT id, body FROM twice.notes_back')).rows).toEqual([{ id: 1, body: 'kept' }]);
      await twice.client.trash({ table: 'twice.notes_back', retentionSeconds: 3600 });
      expect((await twice.client.purge({ tableId: table.id })).state).toBe('PURGED');
      expect((await twice.shardReports(table)).map((r) => r.area)).toEqual([null]);
      expect(await twice.catalog.listLocks()).toEqual([]);
    } finally {
      await twice.close();
    }
  });
});

test('a definition PostgreSQL refuses is InvalidInput, and the same name then takes a corrected one', async () => {
  await expect(h.client.create({ table: 'fix.me', columns: 'id integr' })).rejects.toMatchObject({
    type: 'InvalidInput',
    message: expect.stringContaining('type "integr" does not exist') as unknown,
  });
  const failed = await h.catalog.findByName({ namespace: 'fix', name: 'me' });
  expect(failed?.state).toBe('CREATE_FAILED');
  const fixed = await h.client.create({ table: 'fix.me', columns: 'id integer' });
  expect(fixed).toMatchObject({ id: failed!.id, state: 'READY' });
  expect((await nodeOf(fixed).query('INSERT INTO fix.me VALUES (1) RETURNING id')).rows).toEqual([{ id: 1 }]);
});

test('a drop waits for a session using the table up to --drain-timeout, then is TableBusy naming it and taken back', async () => {
  const table = await h.client.create({ table: 'ops.queue', columns: 'id int primary key' });
  const db = nodeOf(table);
  await db.query('INSERT INTO ops.queue VALUES (1)');
  const url = nodeUrls[Number(table.placement[0]!.node.replace('node-', ''))]!;
  const holder = new Client({ connectionString: url, application_name: 'long-report' });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT * FROM ops.queue');
    const started = Date.now();
    await expect(h.client.trash({ table: 'ops.queue', retentionSeconds: 3600, drainTimeoutSeconds: 1 })).rejects.toMatchObject({
      type: 'TableBusy',
      message: expect.stringContaining('application "long-report"') as unknown,
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY' });
    expect((await db.query('SELECT id FROM ops.queue')).rows).toEqual([{ id: 1 }]);
    await holder.query('COMMIT');
    expect((await h.client.trash({ table: 'ops.queue', retentionSeconds: 3600, drainTimeoutSeconds: 1 })).state).toBe('TRASHED');
  } finally {
    await holder.end();
  }
});

test('a drop of a table a view depends on is HasDependents, naming the view, and changes nothing', async () => {
  const table = await h.client.create({ table: 'bi.sales', columns: 'id int, amount int' });
  const db = nodeOf(table);
  await db.query('CREATE VIEW bi.big_sales AS SELECT * FROM bi.sales WHERE amount > 100');
  await expect(h.client.trash({ table: 'bi.sales', retentionSeconds: 3600 })).rejects.toMatchObject({
    type: 'HasDependents',
    message: expect.stringContaining('view bi.big_sales') as unknown,
  });
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY' });
  expect((await db.query('SELECT count(*)::int AS n FROM bi.big_sales')).rows).toEqual([{ n: 0 }]);
  await db.query('DROP VIEW bi.big_sales');
  expect((await h.client.trash({ table: 'bi.sales', retentionSeconds: 3600 })).state).toBe('TRASHED');
});

test('a table dropped in psql behind tablefate: its drop is ShardMissing and the table READY again, held by no run', async () => {
  const table = await h.client.create({ table: 'gone.orders', columns: 'id int' });
  await nodeOf(table).query('DROP TABLE gone.orders');
  await expect(h.client.trash({ table: 'gone.orders', retentionSeconds: 3600 })).rejects.toMatchObject({
    type: 'ShardMissing',
    message: expect.stringMatching(/gone\.orders was dropped outside tablefate.*tablefate doctor/) as unknown,
  });
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY' });
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('a purge that meets a dependent made while the table was in the trash ends TRASHED, naming it', async () => {
  const table = await h.client.create({ table: 'keep.tickets', columns: 'id serial primary key' });
  const db = nodeOf(table);
  await h.client.trash({ table: 'keep.tickets', retentionSeconds: 3600 });
  const [sequence] = await rows(db, "SELECT relname FROM pg_class WHERE relnamespace = 'tablefate_trash'::regnamespace AND relkind = 'S'");
  await db.query(`CREATE TABLE keep.counter (id int DEFAULT nextval('tablefate_trash.${String(sequence!.relname)}'))`);
  await expect(h.client.purge({ tableId: table.id })).rejects.toMatchObject({
    type: 'HasDependents',
    message: expect.stringContaining('cannot be purged while others depend on it: default of keep.counter.id') as unknown,
  });
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'TRASHED' });
  expect(await h.shardAreas(table)).toEqual(['trash']);
  expect(await h.catalog.listLocks()).toEqual([]);
  await db.query('DROP TABLE keep.counter');
  expect((await h.client.purge({ tableId: table.id })).state).toBe('PURGED');
});

test("a recall whose key's parent rows went while it was in the trash keeps every row and says what it did", async () => {
  // A user's table on every node (a key reaches only a table of its own database), the child wherever it is placed.
  for (const node of nodes)
    await node.query(
      'CREATE SCHEMA IF NOT EXISTS crm; CREATE TABLE crm.accounts (id int primary key); INSERT INTO crm.accounts VALUES (1), (2)',
    );
  const child = await h.client.create({ table: 'crm.notes', columns: 'id int, aid int references crm.accounts on delete cascade' });
  const db = nodeOf(child);
  await db.query('INSERT INTO crm.notes VALUES (1, 1), (2, 1), (3, 2)');
  await h.client.trash({ table: 'crm.notes', retentionSeconds: 3600 });
  // The parent's delete does not reach into the trash: it would have cascaded to two rows.
  await db.query('DELETE FROM crm.accounts WHERE id = 1');
  const back = await h.client.undelete({ table: child.id });
  expect(back.state).toBe('READY');
  expect(back.notes).toEqual([
    expect.stringMatching(/^crm\.notes: foreign key notes_aid_fkey is back NOT VALID, its old rows kept as they were/),
  ]);
  expect(await rows(db, 'SELECT id, aid FROM crm.notes ORDER BY id')).toEqual([
    { id: 1, aid: 1 },
    { id: 2, aid: 1 },
    { id: 3, aid: 2 },
  ]);
});

test('the reconciler surveys PostgreSQL nodes: a shard table no catalog row accounts for is reported, then collected through garbage', async () => {
  const sweeper = await Harness.start({ postgresNodes: nodeUrls, orphanGraceSeconds: 0 });
  const pool = new Pool({ connectionString: nodeUrls[1] });
  try {
    // A shard table of this catalog whose table the catalog never recorded (a create lost before its prepare, say).
    const lost = { catalogId: sweeper.catalog.id, tableId: 987_654, shard: 0 };
    const tables = new PostgresTables(pool);
    await tables.prepare();
    await tables.create(lost, { schema: 'lost', table: 'found' }, { columns: 'id int' });

    const report = await sweeper.reconcile('report');
    expect(report.skippedNodes).toEqual([]);
    expect(report.findings).toContainEqual(
      expect.objectContaining({
        kind: 'orphan',
        set: expect.objectContaining({ tableId: 987_654, node: 'node-1', area: 'live' }) as unknown,
      }),
    );
    expect(await tables.locate(lost)).not.toBeNull();

    const repaired = await sweeper.reconcile();
    expect(repaired.actions).toContainEqual(expect.objectContaining({ outcome: 'collected' }));
    expect(await tables.locate(lost)).toBeNull();
    expect((await pool.query("SELECT to_regclass('lost.found') AS t")).rows).toEqual([{ t: null }]);
    // The tables this catalog does account for were not touched.
    expect((await sweeper.reconcile('report')).findings.filter((f) => f.kind === 'orphan')).toEqual([]);
  } finally {
    await pool.end();
    await sweeper.close();
  }
});

test("a table's size is what PostgreSQL measures of its shard tables (heap, indexes, TOAST), grows with its rows, and is 0 once purged", async () => {
  const table = await h.client.create({ table: 'sized.events', shards: 2, columns: 'id int primary key, body text' });
  const total = async () => {
    let sum = 0;
    for (const shard of [0, 1]) {
      const [row] = await rows(nodeOf(table, shard), `SELECT pg_total_relation_size('sized.events_${shard}') AS bytes`);
      sum += Number(row!.bytes);
    }
    return sum;
  };
  const empty = (await h.client.describe({ table: 'sized.events', withSizes: true })).bytes;
  expect(empty).toBe(await total());
  // Rows, an index entry each, and long values that go to TOAST.
  for (const shard of [0, 1])
    await nodeOf(table, shard).query(
      `INSERT INTO sized.events_${shard} SELECT g, repeat(md5(g::text), 200) FROM generate_series(1, 2000) g`,
    );
  const full = (await h.client.describe({ table: 'sized.events', withSizes: true })).bytes;
  expect(full).toBe(await total());
  expect(full).toBeGreaterThan(empty! + 2 * 2000 * 100);

  // In the trash the same table, the same bytes: ls -a (withSizes) says so too.
  await h.client.trash({ table: 'sized.events', retentionSeconds: 3600 });
  expect((await h.client.list({ includeTrashed: true, withSizes: true })).find((t) => t.id === table.id)?.bytes).toBe(full);
  await h.client.purge({ tableId: table.id });
  expect((await h.client.describe({ table: table.id, withSizes: true })).bytes).toBe(0);
});

test('a drop of a table another inherits from is HasDependents, naming it; one attached as a partition by hand goes detached, and comes back attached', async () => {
  const base = await h.client.create({ table: 'inh.base', columns: 'id int' });
  const db = nodeOf(base);
  await db.query('CREATE TABLE inh.child (extra text) INHERITS (inh.base)');
  await expect(h.client.trash({ table: 'inh.base', retentionSeconds: 3600 })).rejects.toMatchObject({
    type: 'HasDependents',
    message: expect.stringContaining('table inh.child') as unknown,
  });
  expect((await h.catalog.getTable(base.id))?.state).toBe('READY');

  const part = await h.client.create({ table: 'inh.part', columns: 'id int' });
  const partDb = nodeOf(part);
  await partDb.query('CREATE TABLE inh.parent (id int) PARTITION BY RANGE (id)');
  await partDb.query('ALTER TABLE inh.parent ATTACH PARTITION inh.part FOR VALUES FROM (0) TO (100)');
  // (A partition dropped alone: docs/postgres.md, A single partition.)
  const dropped = await h.client.trash({ table: 'inh.part', retentionSeconds: 3600 });
  expect(dropped.notes).toEqual([expect.stringContaining('detached from inh.parent') as unknown]);
  expect((await rows(partDb, "SELECT to_regclass('inh.part') IS NOT NULL AS there")).map((r) => r.there)).toEqual([false]);
  await h.client.undelete({ table: part.id });
  expect(await rows(partDb, "SELECT inhparent::regclass::text AS parent FROM pg_inherits WHERE inhrelid = 'inh.part'::regclass")).toEqual([
    { parent: 'inh.parent' },
  ]);
});
