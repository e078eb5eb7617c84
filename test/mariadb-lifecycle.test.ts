import { Harness } from './support/harness';
import { mariadbQuery, startMariadb, type TestMariadb } from './support/mariadb';

/*
 * The whole life of tables whose shards are real MariaDB tables (storage/mariadb.ts), through the workflows, on a worker
 * that serves two MariaDB servers as two nodes, judged by what a user's own `mariadb` client sees on each.
 */

let servers: TestMariadb[];
let h: Harness;

beforeAll(async () => {
  servers = [await startMariadb(), await startMariadb()];
  h = await Harness.start({ mariadbNodes: servers.map((s) => s.url) });
});

afterAll(async () => {
  await h?.close();
  for (const server of servers ?? []) await server.stop();
});

const on = (node: string, sql: string) => mariadbQuery(servers[Number(node.replace('node-', ''))]!.url, sql);
const tableCount = (node: string, db: string, table: string) =>
  on(node, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${db}' AND TABLE_NAME = '${table}'`);

test('create, fill, drop, recall under a new name, purge: each step as a MariaDB client sees it', async () => {
  const columns = "id INT AUTO_INCREMENT PRIMARY KEY, note VARCHAR(40) NOT NULL DEFAULT 'it''s ) here; #not -- a comment'";
  const table = await h.client.create({ table: 'shop.orders', columns });
  expect(table).toMatchObject({ namespace: 'shop', name: 'orders', state: 'READY', shards: 1 });
  // The same create again is the same table.
  expect(await h.client.create({ table: 'shop.orders', columns })).toEqual(table);
  const node = table.placement[0]!.node;
  await on(node, "INSERT INTO shop.orders (note) VALUES ('a'); INSERT INTO shop.orders () VALUES ()");
  expect(await on(node, 'SELECT id, note FROM shop.orders ORDER BY id')).toEqual([
    ['1', 'a'],
    ['2', "it's ) here; #not -- a comment"],
  ]);

  const trashed = await h.client.trash({ table: 'shop.orders', retentionSeconds: 3600 });
  expect(trashed).toMatchObject({ id: table.id, state: 'TRASHED' });
  expect(await tableCount(node, 'shop', 'orders')).toEqual([['0']]);
  expect((await h.client.list({ includeTrashed: true })).map((t) => t.id)).toContain(table.id);

  const back = await h.client.undelete({ table: table.id, newName: 'archive.orders_2025' });
  expect(back).toMatchObject({ namespace: 'archive', name: 'orders_2025', state: 'READY' });
  expect(await on(node, 'SELECT COUNT(*) FROM archive.orders_2025')).toEqual([['2']]);

  await h.client.trash({ table: 'archive.orders_2025', retentionSeconds: 3600 });
  await h.client.purge({ tableId: table.id });
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'PURGED' });
  expect(
    await on(node, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA IN ('tablefate_trash', 'tablefate_garbage')"),
  ).toEqual([['0']]);
});

test('a table of two shards is a table on each server; dropped and recalled whole', async () => {
  const table = await h.client.create({ table: 'metrics.samples', shards: 2, columns: 'id BIGINT PRIMARY KEY, v DOUBLE' });
  expect(new Set(table.placement.map((p) => p.node))).toEqual(new Set(['node-0', 'node-1']));
  for (const { shard, node } of table.placement) await on(node, `INSERT INTO metrics.samples_${shard} VALUES (${shard}, 1.5)`);
  await h.client.trash({ table: 'metrics.samples', retentionSeconds: 3600 });
  for (const { shard, node } of table.placement) expect(await tableCount(node, 'metrics', `samples_${shard}`)).toEqual([['0']]);
  await h.client.undelete({ table: table.id });
  for (const { shard, node } of table.placement)
    expect(await on(node, `SELECT id FROM metrics.samples_${shard}`)).toEqual([[String(shard)]]);
});

test('bad definitions are refused before anything is made, named; a smuggled statement never runs', async () => {
  await expect(h.client.create({ table: 'bad.t1', columns: 'id INT) SELECT * FROM mysql.user WHERE (1' })).rejects.toMatchObject({
    type: 'InvalidInput',
    message: expect.stringContaining('close a parenthesis they did not open') as unknown,
  });
  await expect(h.client.create({ table: 'bad.t2', columns: 'id INT /*!50000 ) ENGINE=MyISAM */' })).rejects.toMatchObject({
    type: 'InvalidInput',
  });
  await expect(h.client.create({ table: 'bad.t3', columns: 'id NOSUCHTYPE' })).rejects.toMatchObject({
    type: 'InvalidInput',
    message: expect.stringContaining('the column definitions') as unknown,
  });
  await expect(h.client.create({ table: 'mysql.t', columns: 'id INT' })).rejects.toMatchObject({
    type: 'InvalidInput',
    message: expect.stringContaining("database mysql is MariaDB's own") as unknown,
  });
  for (const node of ['node-0', 'node-1']) {
    expect(await on(node, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'bad'")).toEqual([['0']]);
  }
});

test('adopt and drop a table made by hand, with its trigger and a key to it; recalled, both are back', async () => {
  await on(
    'node-0',
    `CREATE DATABASE legacy; CREATE TABLE legacy.users (id INT PRIMARY KEY, name TEXT);
     CREATE TABLE legacy.logins (id INT PRIMARY KEY, user_id INT, CONSTRAINT logins_user_fk FOREIGN KEY (user_id) REFERENCES legacy.users (id));
     CREATE TABLE legacy.log (what TEXT);
     CREATE TRIGGER legacy.users_ai AFTER INSERT ON legacy.users FOR EACH ROW INSERT INTO log VALUES (NEW.name);
     INSERT INTO legacy.users VALUES (1, 'ann'); INSERT INTO legacy.logins VALUES (1, 1)`,
  );
  await expect(h.client.trash({ table: 'legacy.users', node: 'node-0', retentionSeconds: 3600 })).rejects.toMatchObject({
    type: 'HasDependents',
    message: expect.stringContaining('foreign key logins_user_fk of legacy.logins') as unknown,
  });
  const dropped = await h.client.trash({ table: 'legacy.users', node: 'node-0', retentionSeconds: 3600, cascade: true });
  expect(dropped.notes).toEqual([
    'legacy.users: triggers kept until its recall: users_ai',
    'legacy.users: detached until its recall: foreign key logins_user_fk of legacy.logins (references legacy.users)',
  ]);
  await h.client.undelete({ table: dropped.id });
  await on('node-0', "INSERT INTO legacy.users VALUES (2, 'bob')");
  expect(await on('node-0', 'SELECT what FROM legacy.log')).toEqual([['ann'], ['bob']]);
  await expect(on('node-0', 'INSERT INTO legacy.logins VALUES (2, 99)')).rejects.toThrow(/foreign key constraint fails/);
});

test("doctor sees what a DBA did behind tablefate's back (a bare DROP, a rename, a table replaced) and touches none of it", async () => {
  const [dropped, renamed, replaced] = [
    await h.client.create({ table: 'behind.dropped', columns: 'id INT' }),
    await h.client.create({ table: 'behind.renamed', columns: 'id INT' }),
    await h.client.create({ table: 'behind.replaced', columns: 'id INT' }),
  ];
  const node = (t: { placement: Array<{ node: string }> }) => t.placement[0]!.node;
  await on(node(dropped), 'DROP TABLE behind.dropped');
  await on(node(renamed), 'RENAME TABLE behind.renamed TO behind.moved_by_hand');
  await on(
    node(replaced),
    'DROP TABLE behind.replaced; CREATE TABLE behind.replaced (id INT, other INT); INSERT INTO behind.replaced VALUES (1, 2)',
  );
  const report = await h.client.health();
  const about = (id: number) => report.findings.flatMap((f) => (f.kind === 'outside-change' && f.table.id === id ? f.differences : []));
  expect(about(dropped.id)).toEqual([expect.stringMatching(/behind\.dropped was dropped, or replaced or rebuilt .*outside tablefate/)]);
  expect(about(renamed.id)).toEqual([expect.stringContaining('behind.renamed was renamed outside tablefate: its InnoDB table id')]);
  expect(about(renamed.id)[0]).toMatch(/is now behind\.moved_by_hand$/);
  expect(about(replaced.id)).toEqual([expect.stringMatching(/behind\.replaced was dropped, or replaced or rebuilt/)]);
  // A drop of one refuses, naming the difference, and leaves the user's table as it is.
  await expect(h.client.trash({ table: 'behind.replaced', retentionSeconds: 3600 })).rejects.toMatchObject({ type: 'ShardMissing' });
  expect(await on(node(replaced), 'SELECT id, other FROM behind.replaced')).toEqual([['1', '2']]);
});

test('a parent and its child dropped as one need no cascade: the key between them leaves and comes back with them', async () => {
  const parent = await h.client.create({ table: 'pair.parents', columns: 'id INT PRIMARY KEY' });
  const node = parent.placement[0]!.node;
  // (Both on the parent's node: the child is adopted there.)
  await on(
    node,
    `CREATE TABLE pair.children (id INT PRIMARY KEY, parent INT, CONSTRAINT children_parent_fk FOREIGN KEY (parent) REFERENCES pair.parents (id) ON DELETE CASCADE);
     INSERT INTO pair.parents VALUES (1); INSERT INTO pair.children VALUES (1, 1)`,
  );
  await h.client.adopt({ table: 'pair.children', node });
  const dropped = await h.client.trash({ table: 'pair.parents', together: ['pair.children'], retentionSeconds: 3600 });
  expect(dropped).toMatchObject({ state: 'TRASHED', droppedWith: [expect.any(Number)] });
  expect(await on(node, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'pair'")).toEqual([['0']]);
  await h.client.undelete({ table: dropped.id });
  expect(
    await on(node, "SELECT CONSTRAINT_NAME, DELETE_RULE FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = 'pair'"),
  ).toEqual([['children_parent_fk', 'CASCADE']]);
  await on(node, 'DELETE FROM pair.parents WHERE id = 1');
  expect(await on(node, 'SELECT COUNT(*) FROM pair.children')).toEqual([['0']]);
});
