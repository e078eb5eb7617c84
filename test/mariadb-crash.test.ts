import { Harness, workflowBundleFile } from './support/harness';
import { startCrashingWorker } from './support/crashing-worker';
import { mariadbQuery, startMariadb, type TestMariadb } from './support/mariadb';

/*
 * The MariaDB driver under a worker SIGKILLed in the middle of a move: after each statement a drop, a recall, a create
 * or a purge makes (a rename, a key taken off or put back, a table dropped), and after the call of steps that made them,
 * in a workflow task that is then lost. The next worker finishes the operation, and what a user's client sees is whole:
 * the table in the trash or live, never both nor neither, with its rows, its triggers and its keys.
 * In `npm run test:cluster` with the other crash-point tests (jest.config.js's ELSEWHERE), for their time.
 */

let server: TestMariadb;
let h: Harness;
let bundleFile: string;

beforeAll(async () => {
  server = await startMariadb();
  h = await Harness.start({ mariadbNodes: [server.url], startWorker: false, workflowTaskTimeoutMs: 3000 });
  bundleFile = await workflowBundleFile();
});

afterAll(async () => {
  await h?.close();
  await server?.stop();
});

const sql = (text: string) => mariadbQuery(server.url, text);
let made = 0;

/** A table with rows, a trigger, and another table's key to it: everything a move takes off and puts back. */
async function family(): Promise<{ db: string; id: number }> {
  const db = `crash${++made}`;
  await h.startWorker();
  const table = await h.client.create({ table: `${db}.accounts`, columns: 'id INT PRIMARY KEY, balance INT' });
  await sql(`CREATE TABLE ${db}.audit (n INT AUTO_INCREMENT PRIMARY KEY, what TEXT);
    CREATE TABLE ${db}.payments (id INT PRIMARY KEY, account INT, CONSTRAINT payments_account_fk FOREIGN KEY (account) REFERENCES ${db}.accounts (id) ON DELETE CASCADE);
    CREATE TRIGGER ${db}.accounts_ai AFTER INSERT ON ${db}.accounts FOR EACH ROW INSERT INTO ${db}.audit (what) VALUES (NEW.id);
    INSERT INTO ${db}.accounts VALUES (1, 10), (2, 20); INSERT INTO ${db}.payments VALUES (1, 1)`);
  await h.stopWorker();
  return { db, id: table.id };
}

/** Runs `operation` on a worker that dies right after the n-th statement matching `pattern`; the next worker finishes it. */
async function crashDuring<T>(pattern: string, n: number, operation: () => Promise<T>): Promise<T> {
  const worker = await startCrashingWorker({
    on: h,
    bundleFile,
    env: { CRASH_MARIADB_URLS: server.url, CRASH_AFTER_STATEMENT: pattern, CRASH_ON_CALL: String(n) },
  });
  const running = operation();
  expect(await worker.exited).toBe('SIGKILL');
  await h.startWorker();
  try {
    return await running;
  } finally {
    await h.stopWorker();
  }
}

/** What a user sees of the family: is the table live, its rows, its triggers, its key; and what waits in the trash. */
async function seen(db: string) {
  const count = async (q: string) => Number((await sql(q))[0]![0]);
  return {
    live: await count(`SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${db}' AND TABLE_NAME = 'accounts'`),
    hidden: await count(`SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${db}' AND TABLE_NAME LIKE 'tablefate%'`),
    triggers: await count(`SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = '${db}'`),
    keys: await count(`SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = '${db}'`),
    trashed: await count("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'tablefate_trash'"),
  };
}

// A drop's statements, in order: the rename to its hidden name, the key taken off, the rename into the trash.
test.each([
  ['the rename to its hidden name', '^RENAME TABLE', 1],
  ['the key taken off', '^ALTER TABLE', 1],
  ['the rename into the trash', '^RENAME TABLE', 2],
])('a drop killed right after %s is finished by the next worker, and the recall puts everything back', async (_what, pattern, n) => {
  const { db, id } = await family();
  const trashedBefore = (await seen(db)).trashed;
  const trashed = await crashDuring(pattern, n, () => h.client.trash({ table: `${db}.accounts`, retentionSeconds: 3600, cascade: true }));
  expect(trashed).toMatchObject({ id, state: 'TRASHED' });
  expect(await seen(db)).toEqual({ live: 0, hidden: 0, triggers: 0, keys: 0, trashed: trashedBefore + 1 });

  // The recall, killed too: after its rename to the hidden name, then after the key is put back.
  await crashDuring('^RENAME TABLE', 1, () => h.client.undelete({ table: id }));
  expect(await seen(db)).toEqual({ live: 1, hidden: 0, triggers: 1, keys: 1, trashed: trashedBefore });
  await sql(`INSERT INTO ${db}.accounts VALUES (3, 30); DELETE FROM ${db}.accounts WHERE id = 1`);
  expect(await sql(`SELECT what FROM ${db}.audit ORDER BY n`)).toEqual([['1'], ['2'], ['3']]);
  expect(await sql(`SELECT COUNT(*) FROM ${db}.payments`)).toEqual([['0']]);
  expect(await sql(`SELECT id, balance FROM ${db}.accounts ORDER BY id`)).toEqual([
    ['2', '20'],
    ['3', '30'],
  ]);
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('a drop of a table with nothing to take off, killed right after its one rename (straight into the trash), is finished', async () => {
  const db = `crash${++made}`;
  await h.startWorker();
  const { id } = await h.client.create({ table: `${db}.plain`, columns: 'id INT PRIMARY KEY' });
  await h.stopWorker();
  await sql(`INSERT INTO ${db}.plain VALUES (1), (2)`);
  const trashedBefore = (await seen(db)).trashed;
  const trashed = await crashDuring('^RENAME TABLE', 1, () => h.client.trash({ table: `${db}.plain`, retentionSeconds: 3600 }));
  expect(trashed).toMatchObject({ id, state: 'TRASHED' });
  expect(await seen(db)).toMatchObject({ hidden: 0, trashed: trashedBefore + 1 });
  expect(await sql(`SELECT area, database_name, moving_to FROM tablefate.shards WHERE table_id = ${id}`)).toEqual([
    ['trash', 'tablefate_trash', 'NULL'],
  ]);
  await crashDuring('^RENAME TABLE', 1, () => h.client.undelete({ table: id }));
  expect(await sql(`SELECT id FROM ${db}.plain ORDER BY id`)).toEqual([['1'], ['2']]);
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('a recall killed right after its key is put back, and a purge after its rename into the garbage, are finished', async () => {
  const { db, id } = await family();
  await h.startWorker();
  await h.client.trash({ table: `${db}.accounts`, retentionSeconds: 3600, cascade: true });
  await h.stopWorker();
  await crashDuring('^ALTER TABLE', 1, () => h.client.undelete({ table: id }));
  expect(await seen(db)).toMatchObject({ live: 1, hidden: 0, triggers: 1, keys: 1 });

  await h.startWorker();
  await h.client.trash({ table: `${db}.accounts`, retentionSeconds: 3600, cascade: true });
  await h.stopWorker();
  expect((await crashDuring('^RENAME TABLE', 1, () => h.client.purge({ tableId: id }))).state).toBe('PURGED');
  expect(await sql("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'tablefate_garbage'")).toEqual([['0']]);
  expect(await seen(db)).toMatchObject({ live: 0, hidden: 0 });
});

test('a create killed right after the table took its name is READY, once, with the table where its record says', async () => {
  const created = await crashDuring('^RENAME TABLE', 1, () => h.client.create({ table: 'made.once', columns: 'id INT' }));
  expect(created.state).toBe('READY');
  expect(await sql("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'made'")).toEqual([['once']]);
  expect(await sql(`SELECT area, database_name, table_name FROM tablefate.shards WHERE table_id = ${created.id}`)).toEqual([
    ['live', 'made', 'once'],
  ]);
});
