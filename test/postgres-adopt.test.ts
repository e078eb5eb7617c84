import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { workflowIdFor } from '../domain/operations';
import { PostgresStorage } from '../storage/postgres';
import { Harness } from './support/harness';
import { startCrashingWorker } from './support/crashing-worker';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { waitFor } from './support/wait';

/*
 * `tablefate adopt`: a table that exists already on a PostgreSQL node becomes a tablefate table of one shard, untouched,
 * so that from then on a drop keeps it. Judged by what a service's own client sees on the node: the same table (its
 * oid), its rows, indexes and grants, and nothing of it changed by a refusal.
 */

let server: TestPostgres;
let h: Harness;
let urls: string[];
const nodes: Client[] = [];
/** A role of this run's (roles are the whole server's), to see grants travel. */
const reader = `adopt_reader_${randomBytes(3).toString('hex')}`;

beforeAll(async () => {
  server = await sharedPostgres();
  urls = [await server.freshDatabase('adopt'), await server.freshDatabase('adopt')];
  for (const url of urls) {
    const client = new Client({ connectionString: url });
    await client.connect();
    nodes.push(client);
  }
  await nodes[0]!.query(`CREATE ROLE ${reader}`);
  // (A lost workflow task is taken again after 3 s instead of the server's 10: the crash tests wait that long.)
  h = await Harness.start({ postgresNodes: urls, workflowTaskTimeoutMs: 3_000 });
});

afterAll(async () => {
  await h?.close();
  await nodes[0]?.query(`DROP ROLE IF EXISTS ${reader}`).catch(() => undefined);
  for (const client of nodes) await client.end();
  await server?.stop();
});

const rows = async (client: Client, sql: string) => (await client.query(sql)).rows as Array<Record<string, unknown>>;
const oidOf = async (client: Client, name: string) => (await rows(client, `SELECT to_regclass('${name}')::oid::int8 AS oid`))[0]!.oid;
/** A worker of the harness's, on the nodes' databases, that kills itself after `activity`'s first call (crash-worker.ts). */
const crashingWorker = async (activity: string, env: NodeJS.ProcessEnv = {}) =>
  startCrashingWorker({
    on: h,
    activity,
    env: { CRASH_POSTGRES_URLS: urls.join(','), ...env },
  });
/** What tablefate records of a table on a node: none for a table it does not manage. */
const recorded = (client: Client, name: string) =>
  rows(client, `SELECT table_id FROM tablefate.shards WHERE table_oid = to_regclass('${name}')`).catch(() => []);

test('adopt makes an existing table a tablefate table without touching it; drop, recall and purge then protect it', async () => {
  const db = nodes[1]!;
  await db.query(`CREATE SCHEMA legacy;
    CREATE TABLE legacy.invoices (id serial PRIMARY KEY, amount numeric(10,2) NOT NULL CHECK (amount >= 0), note text DEFAULT 'none');
    CREATE INDEX invoices_by_amount ON legacy.invoices (amount);
    INSERT INTO legacy.invoices (amount) VALUES (10), (20.5), (30);
    GRANT SELECT ON legacy.invoices TO ${reader}`);
  const oid = await oidOf(db, 'legacy.invoices');

  const adopted = await h.client.adopt({ table: 'legacy.invoices', node: 'node-1' });
  expect(adopted).toMatchObject({
    namespace: 'legacy',
    name: 'invoices',
    state: 'READY',
    shards: 1,
    placement: [{ shard: 0, node: 'node-1' }],
  });
  expect(await oidOf(db, 'legacy.invoices')).toBe(oid);
  expect(await recorded(db, 'legacy.invoices')).toEqual([{ table_id: String(adopted.id) }]);
  // The same adopt again is the same table; a create of its name, or an adopt of it from another node, is not.
  expect(await h.client.adopt({ table: 'legacy.invoices', node: 'node-1' })).toEqual(adopted);
  await expect(h.client.create({ table: 'legacy.invoices', columns: 'id int' })).rejects.toMatchObject({ type: 'TableExists' });
  await expect(h.client.adopt({ table: 'legacy.invoices', node: 'node-0' })).rejects.toMatchObject({ type: 'TableExists' });

  await h.client.trash({ table: 'legacy.invoices', retentionSeconds: 3600 });
  await expect(db.query('SELECT * FROM legacy.invoices')).rejects.toThrow('relation "legacy.invoices" does not exist');
  await db.query('INSERT INTO legacy.invoices (amount) VALUES (1)').catch(() => undefined);
  const back = await h.client.undelete({ table: adopted.id });
  expect(back.state).toBe('READY');
  expect(await oidOf(db, 'legacy.invoices')).toBe(oid);
  expect(await rows(db, 'SELECT id, amount::text, note FROM legacy.invoices ORDER BY id')).toEqual([
    { id: 1, amount: '10.00', note: 'none' },
    { id: 2, amount: '20.50', note: 'none' },
    { id: 3, amount: '30.00', note: 'none' },
  ]);
  expect(await rows(db, "SELECT indexname FROM pg_indexes WHERE schemaname = 'legacy' ORDER BY 1")).toEqual([
    { indexname: 'invoices_by_amount' },
    { indexname: 'invoices_pkey' },
  ]);
  expect(await rows(db, `SELECT has_table_privilege('${reader}', 'legacy.invoices', 'SELECT') AS can`)).toEqual([{ can: true }]);
  // Its sequence came back with it: the next row takes the next id.
  expect(await rows(db, 'INSERT INTO legacy.invoices (amount) VALUES (40) RETURNING id')).toEqual([{ id: 4 }]);

  await h.client.trash({ table: 'legacy.invoices', retentionSeconds: 3600 });
  await h.client.purge({ tableId: adopted.id });
  expect(await rows(db, `SELECT relname FROM pg_class WHERE oid = ${String(oid)}`)).toEqual([]);
  expect(await rows(db, "SELECT relname FROM pg_class WHERE relname LIKE 'invoices%'")).toEqual([]);
});

describe('what adopt refuses, changing nothing', () => {
  const db = () => nodes[0]!;
  /** Nothing of `name` recorded, the table (if any) as it was, and no READY table of that name in the catalog. */
  async function untouched(name: string, oid?: unknown) {
    expect(await recorded(db(), name)).toEqual([]);
    if (oid !== undefined) expect(await oidOf(db(), name)).toBe(oid);
    const [namespace, table] = name.split('.') as [string, string];
    expect((await h.catalog.findByName({ namespace, name: table }))?.state).not.toBe('READY');
    expect(await h.catalog.listLocks()).toEqual([]);
  }

  test('a table that does not exist is TableNotFound, naming the node', async () => {
    await expect(h.client.adopt({ table: 'nowhere.missing' })).rejects.toMatchObject({
      type: 'TableNotFound',
      message: expect.stringContaining('no table nowhere.missing to adopt (on node-0)') as unknown,
    });
    await untouched('nowhere.missing');
  });

  test('a view and a partitioned partition are InvalidInput: a move could not carry them whole (a partitioned table is adopted whole)', async () => {
    await db().query(`CREATE SCHEMA odd;
      CREATE TABLE odd.base (id int, at date);
      CREATE VIEW odd.v AS SELECT id FROM odd.base;
      CREATE TABLE odd.events (id int, at date) PARTITION BY RANGE (at);
      CREATE TABLE odd.events_2026 PARTITION OF odd.events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01') PARTITION BY RANGE (at)`);
    // (A leaf partition is adopted alone: test/postgres-partition-alone.test.ts.)
    for (const [name, why] of [
      ['odd.v', 'it is a view'],
      ['odd.events_2026', 'it is a partition that is partitioned itself'],
    ] as const) {
      const oid = await oidOf(db(), name);
      await expect(h.client.adopt({ table: name })).rejects.toMatchObject({
        type: 'InvalidInput',
        message: expect.stringContaining(why) as unknown,
      });
      await untouched(name, oid);
    }
  });

  test("a table of tablefate's own schemas or PostgreSQL's, and an unknown node, are refused before anything starts", async () => {
    for (const table of ['tablefate_trash.anything', 'tablefate.shards', 'pg_catalog.pg_class', 'information_schema.tables']) {
      await expect(h.client.adopt({ table })).rejects.toMatchObject({
        type: 'InvalidInput',
        message: expect.stringContaining('own') as unknown,
      });
    }
    // The same for a create, which would otherwise make a table that passes for trashed.
    await expect(h.client.create({ table: 'tablefate_trash.sneaky', columns: 'id int' })).rejects.toMatchObject({ type: 'InvalidInput' });
    await expect(h.client.adopt({ table: 'odd.base', node: 'node7' })).rejects.toMatchObject({ type: 'InvalidInput' });
    // A node of the right form that the deployment does not have: refused by the worker, which knows the nodes.
    const oid = await oidOf(db(), 'odd.base');
    await expect(h.client.adopt({ table: 'odd.base', node: 'node-5' })).rejects.toMatchObject({
      type: 'InvalidInput',
      message: expect.stringContaining('there is no storage node node-5') as unknown,
    });
    await untouched('odd.base', oid);
  });

  test('a table another tablefate catalog manages is TableExists, and stays that catalog’s', async () => {
    const other = await Harness.start({ postgresNodes: urls });
    try {
      const theirs = await other.client.create({ table: 'shared.ledger', columns: 'id int' });
      const node = nodes[Number(theirs.placement[0]!.node.replace('node-', ''))]!;
      const oid = await oidOf(node, 'shared.ledger');
      await expect(h.client.adopt({ table: 'shared.ledger', node: theirs.placement[0]!.node })).rejects.toMatchObject({
        type: 'TableExists',
        message: expect.stringContaining(`managed by tablefate already (catalog ${other.catalog.id}, table ${theirs.id})`) as unknown,
      });
      expect(await oidOf(node, 'shared.ledger')).toBe(oid);
      expect(await recorded(node, 'shared.ledger')).toEqual([{ table_id: String(theirs.id) }]);
    } finally {
      await other.close();
    }
  });
});

test('an adopt whose worker died after its prepare, the run terminated, is finished by the reconciler as an adopt: the table untouched', async () => {
  const db = nodes[0]!;
  await db.query(
    `CREATE SCHEMA crm; CREATE TABLE crm.contacts (id int PRIMARY KEY, email text); INSERT INTO crm.contacts VALUES (1, 'a@x'), (2, 'b@x')`,
  );
  const oid = await oidOf(db, 'crm.contacts');
  const name = { namespace: 'crm', name: 'contacts' };
  const adoptId = workflowIdFor.adopt(name, h.catalog.id);

  await h.stopWorker();
  const crashing = await crashingWorker('catalog.prepareCreate');
  const answer = h.client.adopt({ table: 'crm.contacts' }).catch((err: unknown) => err);
  expect(await crashing.exited).toBe('SIGKILL');
  await h.temporal.workflow.getHandle(adoptId).terminate('test: its worker is gone and an operator terminated it');
  expect(await answer).toBeInstanceOf(Error);
  await h.startWorker();

  const prepared = await h.catalog.findByName(name);
  expect(prepared).toMatchObject({ state: 'CREATING', params: { shards: 1, adopt: { node: 'node-0' } } });
  const report = await h.reconcile('report');
  expect(report.findings).toContainEqual({
    kind: 'stuck',
    table: { id: prepared!.id, ...name, shards: 1, params: { shards: 1, adopt: { node: 'node-0' } } },
    state: 'CREATING',
    resume: 'create',
  });
  const repaired = await h.reconcile();
  expect(repaired.actions.map((a) => a.outcome)).toEqual(['released', 'released', `started create of table ${prepared!.id}`]);
  const ready = await waitFor(
    () => h.catalog.getTable(prepared!.id),
    (t) => t?.state === 'READY',
    { what: 'the resumed adopt' },
  );
  expect(ready!.params).toEqual({ shards: 1, adopt: { node: 'node-0' } });
  expect(await oidOf(db, 'crm.contacts')).toBe(oid);
  expect(await rows(db, 'SELECT id, email FROM crm.contacts ORDER BY id')).toEqual([
    { id: 1, email: 'a@x' },
    { id: 2, email: 'b@x' },
  ]);
  expect(await recorded(db, 'crm.contacts')).toEqual([{ table_id: String(prepared!.id) }]);
  expect(await h.catalog.listLocks()).toEqual([]);
});

test("an adopt taken back (create's compensation, dropShard) forgets the table and leaves it, rows and all, where it was", async () => {
  const db = nodes[0]!;
  await db.query(`CREATE SCHEMA kept; CREATE TABLE kept.notes (id int); INSERT INTO kept.notes VALUES (1), (2)`);
  const oid = await oidOf(db, 'kept.notes');
  const storage = new PostgresStorage([{ node: 'node-0', url: urls[0]! }], h.catalog.id);
  try {
    const ref = {
      tableId: 424_242,
      shard: 0,
      node: 'node-0',
      table: { namespace: 'kept', name: 'notes', shards: 1, params: { shards: 1, adopt: { node: 'node-0' } } },
    };
    await storage.createShard(ref);
    await storage.createShard(ref); // a retry finds it recorded
    expect(await recorded(db, 'kept.notes')).toEqual([{ table_id: '424242' }]);
    await storage.dropShard(ref);
    await storage.dropShard(ref);
    expect(await recorded(db, 'kept.notes')).toEqual([]);
    expect(await oidOf(db, 'kept.notes')).toBe(oid);
    expect(await rows(db, 'SELECT id FROM kept.notes ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);
  } finally {
    await storage.close();
  }
});

describe('adopt and drop in one operation (a drop with its node named)', () => {
  test('a table tablefate does not keep yet goes to the trash in one run, and comes back as it was', async () => {
    const db = nodes[1]!;
    await db.query(`CREATE SCHEMA loose; CREATE TABLE loose.orders (id int PRIMARY KEY); INSERT INTO loose.orders VALUES (1), (2)`);
    const oid = await oidOf(db, 'loose.orders');
    const trashed = await h.client.trash({ table: 'loose.orders', node: 'node-1', retentionSeconds: 600 });
    expect(trashed).toMatchObject({ namespace: 'loose', name: 'orders', state: 'TRASHED', placement: [{ shard: 0, node: 'node-1' }] });
    expect(Date.parse(trashed.expireAt!) - Date.parse(trashed.droppedAt!)).toBe(600_000);
    expect(
      await rows(db, `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ${String(oid)}`),
    ).toEqual([{ nspname: 'tablefate_trash' }]);
    expect((await h.client.history({ table: trashed.id })).operations.map((op) => op.operation)).toEqual(['adoptTrash']);
    // A kept table is dropped as ever, its node named or not.
    const back = await h.client.undelete({ table: trashed.id });
    expect(await oidOf(db, 'loose.orders')).toBe(oid);
    expect(await rows(db, 'SELECT id FROM loose.orders ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);
    expect(await h.client.trash({ table: 'loose.orders', node: 'node-0' })).toMatchObject({ id: back.id, state: 'TRASHED' });
  });

  test('refused as an adopt or a drop would be, the table stays where it was, not kept', async () => {
    const db = nodes[0]!;
    await db.query(`CREATE SCHEMA fam; CREATE TABLE fam.parent (id int); CREATE VIEW fam.parent_v AS SELECT id FROM fam.parent;
      CREATE TABLE fam.events (at date) PARTITION BY RANGE (at)`);
    const oid = await oidOf(db, 'fam.parent');
    await expect(h.client.trash({ table: 'fam.parent', node: 'node-0' })).rejects.toMatchObject({
      type: 'HasDependents',
      message: expect.stringContaining('view fam.parent_v') as unknown,
    });
    // A partition that is partitioned itself cannot be kept alone: refused as its adopt is.
    await db.query(
      `CREATE TABLE fam.events_2026 PARTITION OF fam.events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01') PARTITION BY RANGE (at)`,
    );
    await expect(h.client.trash({ table: 'fam.events_2026', node: 'node-0' })).rejects.toMatchObject({ type: 'InvalidInput' });
    await expect(h.client.trash({ table: 'fam.nosuch', node: 'node-0' })).rejects.toMatchObject({ type: 'TableNotFound' });
    expect(await oidOf(db, 'fam.parent')).toBe(oid);
    expect(await recorded(db, 'fam.parent')).toEqual([]);
    expect(await h.catalog.findByName({ namespace: 'fam', name: 'parent' })).toMatchObject({ state: 'CREATE_FAILED' });
    expect(await h.catalog.listLocks()).toEqual([]);
    // The view gone, the same drop goes on from the failed record: the same table id.
    const failed = await h.catalog.findByName({ namespace: 'fam', name: 'parent' });
    await db.query('DROP VIEW fam.parent_v');
    expect(await h.client.trash({ table: 'fam.parent', node: 'node-0' })).toMatchObject({ id: failed!.id, state: 'TRASHED' });
  });

  test.each([
    ['after its first call (the record and the move, in one lost task)', '1'],
    ['after its commit (in one lost task)', '2'],
  ])('a worker killed %s: the next one ends it TRASHED, the table moved once', async (_when, call) => {
    const db = nodes[0]!;
    const name = `crashed_${call}`;
    await db.query(`CREATE SCHEMA IF NOT EXISTS crash; CREATE TABLE crash.${name} (id int); INSERT INTO crash.${name} VALUES (1)`);
    const oid = await oidOf(db, `crash.${name}`);
    await h.stopWorker();
    const crashing = await crashingWorker('runStepsHere', { CRASH_ON_CALL: call });
    const answer = h.client.trash({ table: `crash.${name}`, node: 'node-0' }, { timeoutMs: 120_000 });
    expect(await crashing.exited).toBe('SIGKILL');
    await h.startWorker();
    const trashed = await answer;
    expect(trashed).toMatchObject({ state: 'TRASHED' });
    expect(
      await rows(db, `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ${String(oid)}`),
    ).toEqual([{ nspname: 'tablefate_trash' }]);
    expect(await rows(db, `SELECT table_id FROM tablefate.shards WHERE table_oid = ${String(oid)}`)).toEqual([
      { table_id: String(trashed.id) },
    ]);
    expect(await h.catalog.listLocks()).toEqual([]);
  });
});
