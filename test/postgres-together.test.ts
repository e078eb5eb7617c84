import { Client } from 'pg';
import { Harness } from './support/harness';
import { startCrashingWorker } from './support/crashing-worker';
import { sharedPostgres, type TestPostgres } from './support/postgres';

/*
 * `drop a b c` with the PostgreSQL driver: several tables go into the trash as one operation, all or none, in one
 * transaction on their node (a foreign key between two of them does not refuse the drop), and come back together; one of
 * them can come back alone, and its key to another still in the trash waits for that one's recall, as its answer says.
 * Judged by what a user's own client sees on the node: pg_class by oid, pg_constraint, rows.
 */

let server: TestPostgres;
let h: Harness;
let db: Client;
let url: string;

beforeAll(async () => {
  server = await sharedPostgres();
  url = await server.freshDatabase('together');
  db = new Client({ connectionString: url });
  await db.connect();
  // (A lost workflow task is taken again after 3 s instead of the server's 10: the crash test waits that long.)
  h = await Harness.start({ postgresNodes: [url], workflowTaskTimeoutMs: 3_000 });
});

afterAll(async () => {
  await h?.close();
  await db?.end();
  await server?.stop();
});

const rows = async (sql: string) => (await db.query(sql)).rows as Array<Record<string, unknown>>;
const oidOf = async (name: string) => (await rows(`SELECT to_regclass('${name}')::oid::int8 AS oid`))[0]!.oid as string | null;
const whereIs = async (oid: unknown) =>
  (
    await rows(
      `SELECT format('%I.%I', n.nspname, c.relname) AS at FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ${String(oid)}`,
    )
  )[0]?.at ?? null;
/** The foreign keys on <schema>.<table>, as psql's \d lists them. */
const keysOf = (schema: string, table: string) =>
  rows(
    `SELECT conname, convalidated, pg_get_constraintdef(oid) AS def FROM pg_constraint
      WHERE conrelid = to_regclass('${schema}.${table}') AND contype = 'f' ORDER BY conname`,
  );

/** <schema>.branches, .accounts keyed to it, .history keyed to both: pgbench's shape, with rows. */
async function shop(schema: string) {
  const branches = await h.client.create({ table: `${schema}.branches`, columns: 'id int PRIMARY KEY, name text' });
  const accounts = await h.client.create({
    table: `${schema}.accounts`,
    columns: `id int PRIMARY KEY, branch int REFERENCES ${schema}.branches (id), balance int NOT NULL DEFAULT 0`,
  });
  const history = await h.client.create({
    table: `${schema}.history`,
    columns: `account int REFERENCES ${schema}.accounts (id), branch int REFERENCES ${schema}.branches (id), delta int`,
  });
  await db.query(`INSERT INTO ${schema}.branches VALUES (1, 'north'), (2, 'south');
    INSERT INTO ${schema}.accounts VALUES (10, 1, 5), (20, 2, 7);
    INSERT INTO ${schema}.history VALUES (10, 1, 5), (20, 2, 7)`);
  const oids = {
    branches: await oidOf(`${schema}.branches`),
    accounts: await oidOf(`${schema}.accounts`),
    history: await oidOf(`${schema}.history`),
  };
  return { branches, accounts, history, oids };
}

test('tables keyed to each other go into the trash as one and come back together, keys and rows as they were', async () => {
  const { branches, accounts, history, oids } = await shop('bank');
  const keys = { accounts: await keysOf('bank', 'accounts'), history: await keysOf('bank', 'history') };
  // Alone, the parent is refused: the others' keys depend on it.
  await expect(h.client.trash({ table: 'bank.branches', retentionSeconds: 3600 })).rejects.toMatchObject({ type: 'HasDependents' });

  // Named in any order: one drop, all three.
  const trashed = await h.client.trash({ table: 'bank.branches', together: ['bank.history', 'bank.accounts'], retentionSeconds: 3600 });
  expect(trashed).toMatchObject({ id: branches.id, state: 'TRASHED', droppedWith: [accounts.id, history.id] });
  for (const oid of Object.values(oids)) expect(await whereIs(oid)).toMatch(/^tablefate_trash\./);
  const inTrash = await Promise.all([branches, accounts, history].map((t) => h.catalog.getTable(t.id)));
  expect(inTrash.map((t) => t?.state)).toEqual(['TRASHED', 'TRASHED', 'TRASHED']);
  // One drop: one time, each naming the others.
  expect(new Set(inTrash.map((t) => t?.droppedAt)).size).toBe(1);
  expect(inTrash.map((t) => t?.droppedWith)).toEqual([
    [accounts.id, history.id],
    [branches.id, history.id],
    [branches.id, accounts.id],
  ]);
  const listed = await h.client.list({ includeTrashed: true });
  expect(listed.find((t) => t.id === accounts.id)?.droppedWith).toEqual([branches.id, history.id]);

  // Recalled by any of them: all three, parents first, their keys back and validated.
  const back = await h.client.undelete({ table: 'bank.history' });
  expect(back).toMatchObject({ id: history.id, state: 'READY', namespace: 'bank', name: 'history' });
  expect(back.droppedWith).toBeUndefined();
  for (const [name, oid] of Object.entries(oids)) expect(await whereIs(oid)).toBe(`bank.${name}`);
  expect({ accounts: await keysOf('bank', 'accounts'), history: await keysOf('bank', 'history') }).toEqual(keys);
  expect(await rows('SELECT sum(delta)::int AS d FROM bank.history JOIN bank.accounts ON accounts.id = account')).toEqual([{ d: 12 }]);
  expect((await h.catalog.getTable(branches.id))?.droppedWith).toBeUndefined();
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('one of them recalled alone: its key to a table still in the trash waits, said, and comes back with that table', async () => {
  const { branches, accounts, history, oids } = await shop('solo');
  const keys = await keysOf('solo', 'history');
  await h.client.trash({ table: 'solo.accounts', together: ['solo.branches', 'solo.history'], retentionSeconds: 3600 });

  const alone = await h.client.undelete({ table: history.id, alone: true });
  expect(alone).toMatchObject({ state: 'READY', name: 'history' });
  expect(alone.notes).toEqual([
    expect.stringMatching(/^solo\.history: foreign key history_account_fkey stays detached while the table it references is in the trash/),
    expect.stringMatching(/^solo\.history: foreign key history_branch_fkey stays detached while the table it references is in the trash/),
  ]);
  expect(await keysOf('solo', 'history')).toEqual([]);
  expect(await whereIs(oids.history)).toBe('solo.history');
  expect(await whereIs(oids.accounts)).toMatch(/^tablefate_trash\./);
  // The others are still one entry of the trash, and come back together, with the keys that waited for them.
  const rest = await h.client.undelete({ table: branches.id });
  expect(rest).toMatchObject({ state: 'READY', name: 'branches' });
  expect((await h.catalog.getTable(accounts.id))?.state).toBe('READY');
  expect(await keysOf('solo', 'history')).toEqual(keys);
  expect(await rows('SELECT count(*)::int AS n FROM tablefate.shards WHERE foreign_keys IS NOT NULL')).toEqual([{ n: 0 }]);
});

test('tables keyed to each other in a circle go into the trash as one and come back with both keys', async () => {
  const left = await h.client.create({ table: 'ring.left_side', columns: 'id int PRIMARY KEY, right_id int' });
  const right = await h.client.create({
    table: 'ring.right_side',
    columns: 'id int PRIMARY KEY, left_id int REFERENCES ring.left_side (id)',
  });
  await db.query(`ALTER TABLE ring.left_side ADD CONSTRAINT left_right_fkey FOREIGN KEY (right_id) REFERENCES ring.right_side (id) DEFERRABLE;
    BEGIN; SET CONSTRAINTS ALL DEFERRED;
    INSERT INTO ring.left_side VALUES (1, 2); INSERT INTO ring.right_side VALUES (2, 1); COMMIT`);
  const keys = { left: await keysOf('ring', 'left_side'), right: await keysOf('ring', 'right_side') };
  expect([keys.left.length, keys.right.length]).toEqual([1, 1]);

  // Each detaches its own key before either moves: the other's key refuses neither, whichever is named first.
  await h.client.trash({ table: 'ring.right_side', together: ['ring.left_side'], retentionSeconds: 3600 });
  for (const t of [left, right]) expect((await h.catalog.getTable(t.id))?.state).toBe('TRASHED');
  expect(await rows("SELECT count(*)::int AS n FROM pg_class WHERE relnamespace = 'ring'::regnamespace")).toEqual([{ n: 0 }]);

  const back = await h.client.undelete({ table: left.id });
  expect(back.notes ?? []).toEqual([]);
  expect({ left: await keysOf('ring', 'left_side'), right: await keysOf('ring', 'right_side') }).toEqual(keys);
  expect(
    await rows('SELECT l.id, r.id AS r FROM ring.left_side l JOIN ring.right_side r ON r.id = l.right_id AND r.left_id = l.id'),
  ).toEqual([{ id: 1, r: 2 }]);
});

test('all or none: a table refused at the move takes the others back, and nothing of them changed', async () => {
  const { branches, accounts, oids } = await shop('partial');
  // history stays out of the drop, so its keys refuse it.
  await expect(h.client.trash({ table: 'partial.branches', together: ['partial.accounts'], retentionSeconds: 3600 })).rejects.toMatchObject(
    {
      type: 'HasDependents',
      message: expect.stringContaining('partial.history') as unknown,
    },
  );
  for (const t of [branches, accounts]) expect((await h.catalog.getTable(t.id))?.state).toBe('READY');
  for (const [name, oid] of Object.entries(oids)) expect(await whereIs(oid)).toBe(`partial.${name}`);
  expect(await keysOf('partial', 'accounts')).toHaveLength(1);
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('a recall refused on one name takes every one of them back into the trash, together', async () => {
  const { branches, accounts, oids } = await shop('taken');
  await h.client.trash({ table: 'taken.branches', together: ['taken.accounts', 'taken.history'], retentionSeconds: 3600 });
  await db.query('CREATE TABLE taken.accounts (x int)');
  await expect(h.client.undelete({ table: branches.id })).rejects.toMatchObject({ type: 'NameTaken' });
  for (const oid of Object.values(oids)) expect(await whereIs(oid)).toMatch(/^tablefate_trash\./);
  expect((await h.catalog.getTable(accounts.id))?.state).toBe('TRASHED');
  await db.query('DROP TABLE taken.accounts');
  await h.client.undelete({ table: accounts.id });
  for (const [name, oid] of Object.entries(oids)) expect(await whereIs(oid)).toBe(`taken.${name}`);
});

test('bad requests are refused before anything starts', async () => {
  const { branches } = await shop('bad');
  await expect(h.client.trash({ table: 'bad.branches', together: ['bad.branches'] })).rejects.toMatchObject({ type: 'InvalidInput' });
  await expect(h.client.trash({ table: 'bad.branches', together: ['bad.nothing'] })).rejects.toMatchObject({ type: 'TableNotFound' });
  await expect(h.client.trash({ table: 'bad.branches', together: ['bad.accounts'], dryRun: true })).rejects.toMatchObject({
    type: 'InvalidInput',
  });
  await h.client.trash({ table: 'bad.branches', together: ['bad.accounts', 'bad.history'], retentionSeconds: 3600 });
  await expect(h.client.undelete({ table: branches.id, newName: 'bad.b2' })).rejects.toMatchObject({
    type: 'InvalidInput',
    message: expect.stringContaining('recall it alone') as unknown,
  });
  expect((await h.catalog.getTable(branches.id))?.state).toBe('TRASHED');
});

test('a worker killed after the move: the next one ends it, every table in the trash, none left behind', async () => {
  const { branches, accounts, history, oids } = await shop('crash');
  await h.stopWorker();
  const crashing = await startCrashingWorker({
    on: h,
    activity: 'runStepsHere',
    env: { CRASH_POSTGRES_URLS: url, CRASH_ON_CALL: '1' },
  });
  const answer = h.client.trash(
    { table: 'crash.branches', together: ['crash.accounts', 'crash.history'], retentionSeconds: 3600 },
    { timeoutMs: 120_000 },
  );
  expect(await crashing.exited).toBe('SIGKILL');
  await h.startWorker();
  expect(await answer).toMatchObject({ state: 'TRASHED' });
  for (const t of [branches, accounts, history]) expect((await h.catalog.getTable(t.id))?.state).toBe('TRASHED');
  for (const oid of Object.values(oids)) expect(await whereIs(oid)).toMatch(/^tablefate_trash\./);
  expect(await h.catalog.listLocks()).toEqual([]);
  await h.client.undelete({ table: accounts.id });
  for (const [name, oid] of Object.entries(oids)) expect(await whereIs(oid)).toBe(`crash.${name}`);
});
