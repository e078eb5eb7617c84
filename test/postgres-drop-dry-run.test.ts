import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { Harness } from './support/harness';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { failureOf, waitFor } from './support/wait';
import { contractWorkflowType } from '../domain/contract';
import { workflowIdFor } from '../domain/operations';
import type { TableInfo } from '../domain/table';

/*
 * `drop --dry-run` (SDK `trash({ dryRun: true })`): what a drop with the same request would do, said and not done. With
 * the PostgreSQL driver and `cascade`, the views that would move into the trash with the table and what live tables
 * have on it that would be detached, in the words the real drop then says them in; a drop that would be refused is
 * refused the same (HasDependents, TableNotFound, TableInTrash). Nothing changes: no drop's run starts, no lock is
 * taken, and psql sees every object where it was. The files driver says the shards would move, and nothing else.
 */

let server: TestPostgres;
let h: Harness;
let db: Client;

beforeAll(async () => {
  server = await sharedPostgres();
  const url = await server.freshDatabase('dryrun');
  db = new Client({ connectionString: url });
  await db.connect();
  h = await Harness.start({ postgresNodes: [url] });
  // The worker opens the node's SQL door beside it, in a transaction of its own: its views are of the node as psql sees
  // it, so what a test sees before a dry run waits for them.
  await waitFor(
    () => oidOf('tablefate_sql.trash'),
    (oid) => oid !== null,
    { what: "the node's SQL door" },
  );
});

afterAll(async () => {
  await h?.close();
  await db?.end();
  await server?.stop();
});

const rows = async (sql: string) => (await db.query(sql)).rows as Array<Record<string, unknown>>;
const oidOf = async (name: string) => (await rows(`SELECT to_regclass('${name}')::oid::int8 AS oid`))[0]!.oid as string | null;

/**
 * What psql sees of the node: every relation outside PostgreSQL's own schemas (schema, name, oid), every constraint,
 * policy and column default of them, and tablefate's record of its shard tables.
 */
async function nodeAsPsqlSeesIt(): Promise<Record<string, unknown>> {
  const outside = `n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')`;
  return {
    relations: await rows(
      `SELECT n.nspname, c.relname, c.relkind, c.oid::int8 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE ${outside} ORDER BY c.oid`,
    ),
    constraints: await rows(
      `SELECT conname, conrelid::regclass::text AS on, contype, convalidated, pg_get_constraintdef(c.oid) AS def
         FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE ${outside} ORDER BY c.oid`,
    ),
    policies: await rows('SELECT schemaname, tablename, policyname, qual FROM pg_policies ORDER BY 1, 2, 3'),
    defaults: await rows(
      `SELECT table_schema, table_name, column_name, column_default FROM information_schema.columns
        WHERE column_default IS NOT NULL AND table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2, 3`,
    ),
    record: await rows(
      'SELECT table_oid::int8, schema_name, table_name, family, notes, changed_at FROM tablefate.shards ORDER BY table_oid',
    ),
  };
}

/** How many runs the table's drop has had (its workflow id), as the server's visibility counts them. */
const dropRuns = async (table: TableInfo) =>
  (await h.temporal.workflow.count(`WorkflowId = '${workflowIdFor.trash(table.id, h.catalog.id)}'`)).count;

/** Whether the table's drop has a run at all, as the server itself answers (visibility may lag; this does not). */
async function hasDropRun(table: TableInfo): Promise<boolean> {
  try {
    await h.temporal.workflow.getHandle(workflowIdFor.trash(table.id, h.catalog.id)).describe();
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/** What a dry run's note says once the drop has done it: the same words, in the past tense. */
const done = (note: string) =>
  note.replace(': would move into the trash', ': moved into the trash').replace(': would detach until', ': detached until');

/** <schema>.items with a view, a view on the view, a materialized view with an index, and <schema>.orders keyed to it. */
async function family(schema: string): Promise<TableInfo> {
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
  return table;
}

test('a dry run with --cascade lists exactly what the drop then takes and detaches, and changes nothing', async () => {
  const table = await family('shop');
  const before = await nodeAsPsqlSeesIt();

  const dry = await h.client.trash({ table: 'shop.items', retentionSeconds: 3600, cascade: true, dryRun: true });
  expect(dry).toMatchObject({ id: table.id, namespace: 'shop', name: 'items', state: 'READY', droppedAt: null, expireAt: null });
  expect(dry.notes).toEqual([
    'shop.items: would move into the trash with it: materialized view shop.items_mv, view shop.items_v, view shop.items_vv',
    'shop.items: would detach until its recall: default of shop.orders.ticket, foreign key orders_item_id_fkey of shop.orders, policy orders_known of shop.orders',
  ]);
  // Nothing changed: every object where it was, the table READY and unlocked, and no drop ever ran.
  expect(await nodeAsPsqlSeesIt()).toEqual(before);
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY', droppedAt: null });
  expect(await hasDropRun(table)).toBe(false);
  expect(await dropRuns(table)).toBe(0);
  expect(await rows('SELECT title FROM shop.items_v ORDER BY id')).toEqual([{ title: 'PEN' }, { title: 'INK' }, { title: 'NIB' }]);

  // Asked again, the same answer (a read: no run of its own is joined or refused).
  expect((await h.client.trash({ table: 'shop.items', cascade: true, dryRun: true })).notes).toEqual(dry.notes);

  // The real drop says the same things done, in the same words.
  const trashed = await h.client.trash({ table: 'shop.items', retentionSeconds: 3600, cascade: true });
  expect(trashed).toMatchObject({ id: table.id, state: 'TRASHED' });
  expect(trashed.notes).toEqual(dry.notes!.map(done));
  expect(await oidOf('shop.items_v')).toBeNull();
  expect(await hasDropRun(table)).toBe(true);
  // (Visibility catches up with the run: one, the real drop's.)
  await waitFor(
    () => dropRuns(table),
    (n) => n === 1,
    { timeoutMs: 10_000, intervalMs: 200, what: 'the drop run to be counted' },
  );

  // A dry run of a name no live table bears is the drop's own refusal: in the trash, or none at all.
  await expect(h.client.trash({ table: 'shop.items', dryRun: true })).rejects.toMatchObject({ type: 'TableInTrash' });
  await expect(h.client.trash({ table: 'shop.nothing', dryRun: true })).rejects.toMatchObject({ type: 'TableNotFound' });
});

test('without --cascade a dry run is refused as the drop is, naming each dependent and the flag; nothing changes', async () => {
  const table = await family('dept');
  const before = await nodeAsPsqlSeesIt();
  const dry = await failureOf(h.client.trash({ table: 'dept.items', dryRun: true }));
  expect(dry).toMatchObject({
    type: 'HasDependents',
    message: expect.stringMatching(
      /dept\.items cannot be trashed .*view dept\.items_v, .*view dept\.items_vv.*foreign key orders_item_id_fkey of dept\.orders.*policy orders_known of dept\.orders.*--cascade/,
    ) as unknown,
  });
  expect(await nodeAsPsqlSeesIt()).toEqual(before);
  expect(await hasDropRun(table)).toBe(false);
  // The real drop's refusal, word for word.
  const real = await failureOf(h.client.trash({ table: 'dept.items', retentionSeconds: 3600 }));
  expect(real).toMatchObject({ type: 'HasDependents', message: (dry as Error).message });
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY' });

  // The same through the contract, as a service in another language asks (workflow `tablefate.v1.trash`, JSON).
  const byContract = (request: unknown) =>
    h.temporal.workflow.execute(contractWorkflowType('trash'), {
      taskQueue: h.taskQueue,
      workflowId: `svc-dry-${randomUUID()}`,
      args: [request],
    });
  expect(await byContract({ table: 'dept.items', cascade: true, dryRun: true })).toMatchObject({
    id: table.id,
    state: 'READY',
    notes: [
      expect.stringMatching(/^dept\.items: would move into the trash with it: /),
      expect.stringMatching(/^dept\.items: would detach until its recall: /),
    ],
  });
  const refused = await failureOf(byContract({ table: 'dept.items', dryRun: true }));
  expect(refused).toBeInstanceOf(WorkflowFailedError);
  expect((refused as WorkflowFailedError).cause).toBeInstanceOf(ApplicationFailure);
  expect((refused as WorkflowFailedError).cause).toMatchObject({ type: 'HasDependents', message: (dry as Error).message });
  expect(await nodeAsPsqlSeesIt()).toEqual(before);
  expect(await hasDropRun(table)).toBe(true); // (the real drop's, refused above)
});

test('what no drop can keep refuses the dry run even with --cascade, as it refuses the drop', async () => {
  const table = await h.client.create({ table: 'fn.items', columns: 'id int' });
  await db.query(`CREATE VIEW fn.items_v AS SELECT id FROM fn.items;
    CREATE FUNCTION fn.item_count() RETURNS bigint LANGUAGE sql BEGIN ATOMIC SELECT count(*) FROM fn.items; END`);
  const before = await nodeAsPsqlSeesIt();
  const dry = await failureOf(h.client.trash({ table: 'fn.items', cascade: true, dryRun: true }));
  expect(dry).toMatchObject({
    type: 'HasDependents',
    message: expect.stringMatching(/function fn\.item_count\(\).*a drop cannot keep them/) as unknown,
  });
  expect((dry as Error).message).not.toContain('view fn.items_v');
  expect(await nodeAsPsqlSeesIt()).toEqual(before);
  const real = await failureOf(h.client.trash({ table: 'fn.items', retentionSeconds: 3600, cascade: true }));
  expect(real).toMatchObject({ type: 'HasDependents', message: (dry as Error).message });
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY' });
});

test("a table of several shards: each shard table's findings, named after it, as the drop names them; none: its shards alone", async () => {
  const table = await h.client.create({ table: 'multi.items', shards: 3, columns: 'id int PRIMARY KEY' });
  await db.query(`CREATE VIEW multi.items_1_v AS SELECT id FROM multi.items_1;
    CREATE TABLE multi.refs (id int REFERENCES multi.items_2 (id))`);
  const dry = await h.client.trash({ table: 'multi.items', cascade: true, dryRun: true });
  expect(dry).toMatchObject({ state: 'READY', shards: 3 });
  expect(dry.notes).toEqual([
    'multi.items_1: would move into the trash with it: view multi.items_1_v',
    'multi.items_2: would detach until its recall: foreign key refs_id_fkey of multi.refs',
  ]);
  const trashed = await h.client.trash({ table: 'multi.items', retentionSeconds: 3600, cascade: true });
  expect(trashed.notes).toEqual(dry.notes!.map(done));
  await h.client.undelete({ table: table.id });

  // Without --cascade the first shard table that has dependents is named.
  await expect(h.client.trash({ table: 'multi.items', dryRun: true })).rejects.toMatchObject({
    type: 'HasDependents',
    message: expect.stringMatching(/^multi\.items_1 cannot be trashed .*view multi\.items_1_v.*--cascade/) as unknown,
  });

  // Nothing depends on it: the drop would move its shard tables, and nothing else.
  await h.client.create({ table: 'multi.alone', shards: 2, columns: 'id int' });
  for (const cascade of [false, true]) {
    expect((await h.client.trash({ table: 'multi.alone', cascade, dryRun: true })).notes).toEqual([
      'would move its 2 shards into the trash, and nothing else',
    ]);
  }
});

test('a dry run answers while a drop holds the table (it takes no lock), as the table is then', async () => {
  const table = await h.client.create({ table: 'held.items', columns: 'id int' });
  await db.query('CREATE VIEW held.items_v AS SELECT id FROM held.items');
  const lease = await h.client.acquireLease(table.id, { ttlSeconds: 300 });
  // The drop takes the table's lock and waits for the lease (DRAINING).
  const dropping = h.client.trash({ table: 'held.items', retentionSeconds: 3600, cascade: true, drainTimeoutSeconds: 120 });
  await waitFor(
    async () => (await h.catalog.getTable(table.id))?.state,
    (state) => state === 'DRAINING',
    { timeoutMs: 15_000, intervalMs: 100, what: 'the drop to wait for the lease' },
  );
  const dry = await h.client.trash({ table: 'held.items', cascade: true, dryRun: true });
  expect(dry).toMatchObject({ state: 'DRAINING' });
  expect(dry.notes).toEqual(['held.items: would move into the trash with it: view held.items_v']);
  await h.client.releaseLease(lease.id);
  expect((await dropping).notes).toEqual(dry.notes!.map(done));
});

test('with the files driver a dry run says the drop would move its shards and nothing else; --cascade is refused as ever', async () => {
  const files = await Harness.start({ address: h.address });
  try {
    const table = await files.client.create({ table: 'plain.items', shards: 3 });
    const dry = await files.client.trash({ table: 'plain.items', dryRun: true });
    expect(dry).toMatchObject({ id: table.id, state: 'READY', shards: 3 });
    expect(dry.notes).toEqual(['would move its 3 shards into the trash, and nothing else']);
    expect(await files.shardAreas(table)).toEqual(['live', 'live', 'live']);
    expect(await files.catalog.getTable(table.id)).toMatchObject({ state: 'READY' });
    await expect(files.client.trash({ table: 'plain.items', cascade: true, dryRun: true })).rejects.toMatchObject({ type: 'InvalidInput' });
    await expect(files.client.trash({ table: 'plain.none', dryRun: true })).rejects.toMatchObject({ type: 'TableNotFound' });
    expect(await files.client.trash({ table: 'plain.items', retentionSeconds: 3600 })).toMatchObject({ state: 'TRASHED' });
  } finally {
    await files.close();
  }
});

test('each node is asked by its own worker (--storage remote); a node whose worker is down fails the dry run, named', async () => {
  const remote = await Harness.start({ address: h.address, storage: 'remote' });
  try {
    const table = await remote.client.create({ table: 'far.items', shards: 3 });
    expect(new Set(table.placement.map((p) => p.node)).size).toBe(3);
    expect((await remote.client.trash({ table: 'far.items', dryRun: true })).notes).toEqual([
      'would move its 3 shards into the trash, and nothing else',
    ]);
    await remote.stopNode('node-1');
    await expect(remote.client.trash({ table: 'far.items', dryRun: true })).rejects.toMatchObject({
      type: 'StorageFault',
      message: expect.stringContaining('storage node node-1 did not answer') as unknown,
    });
    expect(await remote.catalog.getTable(table.id)).toMatchObject({ state: 'READY' });
  } finally {
    await remote.close();
  }
});
