import { randomBytes } from 'node:crypto';
import net from 'node:net';
import type { ShardRef } from '../storage/driver';
import { PermanentStorageError, StorageIoError } from '../storage/errors';
import { MariadbStorage } from '../storage/mariadb';
import { classifiedMariadb, errnoOf } from '../storage/mariadb-session';
import { mariadbQuery, startMariadb, type TestMariadb } from './support/mariadb';

/*
 * The MariaDB storage driver on a real MariaDB server the test starts, judged by what a user's own client sees (the
 * `mariadb` command-line client: SHOW CREATE TABLE, SHOW TRIGGERS, information_schema, rows), not by the driver's reports.
 */

let server: TestMariadb;
let storage: MariadbStorage;
const catalogId = `cat${randomBytes(4).toString('hex')}`;

beforeAll(async () => {
  // (A server of its own: the tests name their databases plainly, as a DBA would.)
  server = await startMariadb();
  storage = new MariadbStorage([{ node: 'node-0', url: server.url }], catalogId);
});

afterAll(async () => {
  await storage?.close();
  await server?.stop();
});

let nextId = 1;
/** A shard of a new table `db.name` of one shard (ids of this file's own). */
function shardOf(namespace: string, name: string, params: { columns?: string; like?: string; adopt?: { node: string } } = {}): ShardRef {
  return { tableId: nextId++, shard: 0, node: 'node-0', table: { namespace, name, shards: 1, params: { shards: 1, ...params } } };
}
const sql = (text: string) => mariadbQuery(server.url, text);
const tableThere = async (db: string, table: string) =>
  (await sql(`SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${db}' AND TABLE_NAME = '${table}'`))[0]![0] === '1';
const identityOf = async (db: string, table: string) =>
  (await sql(`SELECT TABLE_ID FROM information_schema.INNODB_SYS_TABLES WHERE NAME = '${db}/${table}'`))[0]?.[0] ?? null;
/** Where the foreign key `name` of a table of `db` points: its referenced database and table. */
const referencedBy = (db: string, name: string) =>
  sql(
    `SELECT REFERENCED_TABLE_SCHEMA, REFERENCED_TABLE_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = '${db}' AND CONSTRAINT_NAME = '${name}'`,
  );
/** How many foreign keys point into the trash (none may: a trashed table takes no part in live tables' keys). */
const keysIntoTrash = () =>
  sql("SELECT COUNT(*) FROM information_schema.KEY_COLUMN_USAGE WHERE REFERENCED_TABLE_SCHEMA = 'tablefate_trash'");

test('create, fill, drop, recall: the rows, the definition and the auto-increment position come back; the name fails meanwhile', async () => {
  const ref = shardOf('shop', 'orders', {
    columns: 'id INT AUTO_INCREMENT PRIMARY KEY, total DECIMAL(10,2) NOT NULL DEFAULT 0, note TEXT',
  });
  await storage.createShard(ref);
  await storage.createShard(ref); // a create run again finds it made
  await sql("INSERT INTO shop.orders (total, note) VALUES (10, 'a'), (20, 'b'), (30, 'c'); DELETE FROM shop.orders WHERE id = 3");
  const before = await sql('SHOW CREATE TABLE shop.orders');
  const identity = await identityOf('shop', 'orders');
  expect(before[0]![1]).toContain('AUTO_INCREMENT=4');

  expect(await storage.moveShard(ref, 'live', 'trash')).toEqual([]);
  expect(await tableThere('shop', 'orders')).toBe(false);
  await expect(sql('SELECT * FROM shop.orders')).rejects.toThrow(/doesn't exist/);
  await storage.moveShard(ref, 'live', 'trash'); // moved already: nothing to do

  await storage.moveShard(ref, 'trash', 'live');
  expect(await sql('SELECT id, total, note FROM shop.orders ORDER BY id')).toEqual([
    ['1', '10.00', 'a'],
    ['2', '20.00', 'b'],
  ]);
  expect(await sql('SHOW CREATE TABLE shop.orders')).toEqual(before);
  expect(await identityOf('shop', 'orders')).toBe(identity);
  await sql('INSERT INTO shop.orders (total) VALUES (40)');
  expect(await sql('SELECT MAX(id) FROM shop.orders')).toEqual([['4']]);
});

test('triggers leave with the table and come back on it, in their order, firing again; never a write without them', async () => {
  const ref = shardOf('trig', 'items', { columns: 'id INT PRIMARY KEY, qty INT' });
  await storage.createShard(ref);
  await sql(`CREATE TABLE trig.audit (n INT AUTO_INCREMENT PRIMARY KEY, what TEXT);
    CREATE TRIGGER trig.items_ai AFTER INSERT ON trig.items FOR EACH ROW INSERT INTO audit (what) VALUES (CONCAT('second ', NEW.id));
    CREATE TRIGGER trig.items_ai0 AFTER INSERT ON trig.items FOR EACH ROW PRECEDES items_ai INSERT INTO audit (what) VALUES (CONCAT('first ', NEW.id));
    CREATE TRIGGER trig.items_bu BEFORE UPDATE ON trig.items FOR EACH ROW SET NEW.qty = GREATEST(NEW.qty, 0)`);
  const triggers = () =>
    sql(
      "SELECT TRIGGER_NAME, ACTION_ORDER, ACTION_STATEMENT FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = 'trig' ORDER BY TRIGGER_NAME",
    );
  const before = await triggers();
  expect(before).toHaveLength(3);

  const notes = await storage.moveShard(ref, 'live', 'trash');
  expect(notes).toEqual(['trig.items: triggers kept until its recall: items_ai0, items_ai, items_bu']);
  expect(await triggers()).toEqual([]);
  await storage.moveShard(ref, 'trash', 'live');
  expect(await triggers()).toEqual(before);
  await sql('INSERT INTO trig.items VALUES (7, 1); UPDATE trig.items SET qty = -5 WHERE id = 7');
  expect(await sql('SELECT what FROM trig.audit ORDER BY n')).toEqual([['first 7'], ['second 7']]);
  expect(await sql('SELECT qty FROM trig.items')).toEqual([['0']]);
});

test('foreign keys: refused without cascade, detached with it, and put back on recall; a trashed parent cascades nothing', async () => {
  const parent = shardOf('fk', 'customers', { columns: 'id INT PRIMARY KEY' });
  await storage.createShard(parent);
  await sql(`CREATE TABLE fk.orders (id INT PRIMARY KEY, customer INT, CONSTRAINT orders_customer_fk FOREIGN KEY (customer) REFERENCES fk.customers (id) ON DELETE CASCADE);
    CREATE TABLE fk.notes (id INT PRIMARY KEY, customer INT, CONSTRAINT notes_customer_fk FOREIGN KEY (customer) REFERENCES fk.customers (id) ON DELETE SET NULL);
    INSERT INTO fk.customers VALUES (1), (2); INSERT INTO fk.orders VALUES (10, 1), (20, 2); INSERT INTO fk.notes VALUES (100, 1)`);

  await expect(storage.moveShard(parent, 'live', 'trash')).rejects.toMatchObject({
    type: 'HasDependents',
    message: expect.stringContaining('foreign key orders_customer_fk of fk.orders (references fk.customers)') as unknown,
  });
  expect(await tableThere('fk', 'customers')).toBe(true);

  const notes = await storage.moveShard(parent, 'live', 'trash', undefined, { cascade: true });
  expect(notes).toEqual([
    'fk.customers: detached until its recall: foreign key notes_customer_fk of fk.notes (references fk.customers), foreign key orders_customer_fk of fk.orders (references fk.customers)',
  ]);
  expect(await sql("SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = 'fk'")).toEqual([['0']]);
  // The trashed parent takes no part: a delete in the trash cascades into no live table.
  const [[trashed]] = (await sql(
    `SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'tablefate_trash' AND TABLE_NAME LIKE 'c${catalogId}_t${parent.tableId}_s0'`,
  )) as [[string]];
  await sql(`DELETE FROM tablefate_trash.${trashed} WHERE id = 2`);
  expect(await sql('SELECT id FROM fk.orders ORDER BY id')).toEqual([['10'], ['20']]);
  await sql(`INSERT INTO tablefate_trash.${trashed} VALUES (2)`);

  const back = await storage.moveShard(parent, 'trash', 'live');
  expect(back).toEqual([]);
  expect(
    await sql(
      "SELECT CONSTRAINT_NAME, DELETE_RULE FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = 'fk' ORDER BY 1",
    ),
  ).toEqual([
    ['notes_customer_fk', 'SET NULL'],
    ['orders_customer_fk', 'CASCADE'],
  ]);
  await sql('DELETE FROM fk.customers WHERE id = 1');
  expect(await sql('SELECT id FROM fk.orders')).toEqual([['20']]);
  expect(await sql('SELECT customer FROM fk.notes')).toEqual([['NULL']]);
  await expect(sql('INSERT INTO fk.orders VALUES (30, 99)')).rejects.toThrow(/foreign key constraint fails/);
});

test("a table's own key comes back; rows that no longer match it are named", async () => {
  await sql('CREATE DATABASE IF NOT EXISTS own; CREATE TABLE own.kinds (id INT PRIMARY KEY); INSERT INTO own.kinds VALUES (1), (2)');
  const child = shardOf('own', 'things', {
    columns: 'id INT PRIMARY KEY, kind INT, CONSTRAINT things_kind_fk FOREIGN KEY (kind) REFERENCES own.kinds (id) ON DELETE RESTRICT',
  });
  await storage.createShard(child);
  await sql('INSERT INTO own.things VALUES (1, 1), (2, 2)');
  expect(await storage.moveShard(child, 'live', 'trash')).toEqual([
    'own.things: detached until its recall: foreign key things_kind_fk of own.things (references own.kinds)',
  ]);
  // Restrict no longer holds while it is away: the parent's row goes.
  await sql('DELETE FROM own.kinds WHERE id = 2');
  expect(await storage.moveShard(child, 'trash', 'live')).toEqual([
    'own.things: foreign key things_kind_fk of own.things (references own.kinds): put back, but 1 of its rows reference no row (MariaDB keys do not check rows already there)',
  ]);
  await expect(sql('DELETE FROM own.kinds WHERE id = 1')).rejects.toThrow(/foreign key constraint fails/);
});

test('recall under another name, into another database; a name taken refuses it and leaves it in the trash', async () => {
  const ref = shardOf('app', 'events', { columns: 'id INT PRIMARY KEY' });
  await storage.createShard(ref);
  await sql('INSERT INTO app.events VALUES (1)');
  await storage.moveShard(ref, 'live', 'trash');
  await sql('CREATE TABLE app.events (other INT)');
  await expect(storage.moveShard(ref, 'trash', 'live')).rejects.toMatchObject({ type: 'NameTaken' });
  const elsewhere = { ...ref, table: { ...ref.table!, namespace: 'archive', name: 'events_old' } };
  await storage.moveShard(elsewhere, 'trash', 'live');
  expect(await sql('SELECT id FROM archive.events_old')).toEqual([['1']]);
  expect(await sql('SELECT COUNT(*) FROM app.events')).toEqual([['0']]);
});

test('names MariaDB keeps in its file-name encoding: found by identity, moved and recalled', async () => {
  const ref = shardOf('my.app', 'Ördér "x" ü', { columns: 'id INT' });
  await storage.createShard(ref);
  await sql('INSERT INTO `my.app`.`Ördér "x" ü` VALUES (5)');
  await storage.moveShard(ref, 'live', 'trash');
  expect(await tableThere('my.app', 'Ördér "x" ü')).toBe(false);
  await storage.moveShard(ref, 'trash', 'live');
  expect(await sql('SELECT id FROM `my.app`.`Ördér "x" ü`')).toEqual([['5']]);
  expect(await storage.sizesOf([ref])).toEqual([expect.any(Number)]);
});

test('purge: garbage, then gone, and forgotten; a table replaced by a user is never dropped', async () => {
  const ref = shardOf('pur', 'logs', { columns: 'id INT' });
  await storage.createShard(ref);
  await storage.moveShard(ref, 'live', 'trash');
  await storage.markGarbage(ref);
  await storage.unmarkGarbage(ref);
  await storage.markGarbage(ref);
  await storage.deleteGarbage(ref);
  await storage.deleteGarbage(ref);
  expect((await storage.inspect(ref)).area).toBeNull();
  const listed = await storage.listSets();
  expect(listed.shardTables!.some((t) => t.tableId === ref.tableId)).toBe(false);

  const replaced = shardOf('pur', 'kept', { columns: 'id INT' });
  await storage.createShard(replaced);
  await sql('DROP TABLE pur.kept; CREATE TABLE pur.kept (mine INT); INSERT INTO pur.kept VALUES (1)');
  await expect(storage.moveShard(replaced, 'live', 'trash')).rejects.toMatchObject({ type: 'ShardMissing' });
  expect(await sql('SELECT mine FROM pur.kept')).toEqual([['1']]);
  const doctor = (await storage.listSets()).shardTables!.find((t) => t.tableId === replaced.tableId);
  expect(doctor).toMatchObject({ area: null, differences: [expect.stringContaining('dropped, or replaced or rebuilt')] });
});

test('adopt: a table made by hand is kept and moved; taken back, it is only forgotten', async () => {
  await sql(
    'CREATE DATABASE IF NOT EXISTS legacy; CREATE TABLE legacy.users (id INT PRIMARY KEY) ENGINE=InnoDB; INSERT INTO legacy.users VALUES (1)',
  );
  const ref = shardOf('legacy', 'users', { adopt: { node: 'node-0' } });
  await storage.createShard(ref);
  await storage.moveShard(ref, 'live', 'trash');
  await storage.moveShard(ref, 'trash', 'live');
  await storage.dropShard(ref);
  expect(await sql('SELECT id FROM legacy.users')).toEqual([['1']]);
  // Kept by another catalog on the same server: not adopted twice. Not there: TableNotFound.
  const other = new MariadbStorage([{ node: 'node-0', url: server.url }], 'othercatalog');
  try {
    await expect(other.createShard(shardOf('legacy', 'users', { adopt: { node: 'node-0' } }))).resolves.toBeUndefined();
    await expect(storage.createShard(shardOf('legacy', 'users', { adopt: { node: 'node-0' } }))).rejects.toMatchObject({
      type: 'TableExists',
    });
  } finally {
    await other.close();
  }
  await expect(storage.createShard(shardOf('legacy', 'nosuch', { adopt: { node: 'node-0' } }))).rejects.toMatchObject({
    type: 'TableNotFound',
  });
  await sql('CREATE TABLE legacy.flat (id INT) ENGINE=MyISAM');
  await expect(storage.createShard(shardOf('legacy', 'flat', { adopt: { node: 'node-0' } }))).rejects.toMatchObject({
    type: 'InvalidInput',
    message: expect.stringContaining('tablefate keeps InnoDB tables only') as unknown,
  });
});

test('a move cut short after any rename is finished by its next attempt', async () => {
  const ref = shardOf('cut', 'items', { columns: 'id INT PRIMARY KEY' });
  await storage.createShard(ref);
  await sql(
    `CREATE TRIGGER cut.items_bi BEFORE INSERT ON cut.items FOR EACH ROW SET NEW.id = NEW.id + 1000; INSERT INTO cut.items VALUES (1)`,
  );
  // As a drop that died right after hiding the table: the record says where it was going, and it is there.
  const hidden = `tablefate_moving_c${catalogId}_t${ref.tableId}_s0`;
  await sql(
    `UPDATE tablefate.shards SET moving_to = JSON_OBJECT('area', 'live', 'database', 'cut', 'table', '${hidden}'),
       kept = NULL WHERE catalog_id = '${catalogId}' AND table_id = ${ref.tableId}; RENAME TABLE cut.items TO cut.${hidden}`,
  );
  await expect(storage.moveShard(ref, 'live', 'trash')).resolves.toEqual(expect.any(Array));
  expect(await sql("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'cut'")).toEqual([['0']]);
  await storage.moveShard(ref, 'trash', 'live');
  expect(await sql('SELECT id FROM cut.items')).toEqual([['1001']]);
});

test('a drop cut short after its one rename straight into the trash: a key that came along is refused or detached by its next attempt', async () => {
  const ref = shardOf('cut2', 'parent', { columns: 'id INT PRIMARY KEY' });
  await storage.createShard(ref);
  const parked = `c${catalogId}_t${ref.tableId}_s0`;
  const referencing = () =>
    sql(
      "SELECT TABLE_NAME, REFERENCED_TABLE_SCHEMA, REFERENCED_TABLE_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE CONSTRAINT_NAME = 'child_fk'",
    );
  // As a drop that read nothing on the table, and died right after its rename, a key added by the table's name meanwhile.
  const cutShort = () =>
    sql(
      `UPDATE tablefate.shards SET moving_to = JSON_OBJECT('area', 'trash', 'database', 'tablefate_trash', 'table', '${parked}')
         WHERE catalog_id = '${catalogId}' AND table_id = ${ref.tableId}; RENAME TABLE cut2.parent TO tablefate_trash.${parked}`,
    );
  await sql(
    'CREATE TABLE cut2.child (id INT PRIMARY KEY, parent INT, CONSTRAINT child_fk FOREIGN KEY (parent) REFERENCES cut2.parent (id))',
  );
  await cutShort();
  expect(await referencing()).toEqual([['child', 'tablefate_trash', parked]]);

  // Without cascade, refused; the drop's undo brings the table back with the key.
  await expect(storage.moveShard(ref, 'live', 'trash')).rejects.toMatchObject({
    type: 'HasDependents',
    message: expect.stringContaining('foreign key child_fk of cut2.child') as unknown,
  });
  await storage.moveShard(ref, 'trash', 'live');
  expect(await referencing()).toEqual([['child', 'cut2', 'parent']]);

  // With cascade, detached there and written down; the recall puts it back.
  await cutShort();
  expect(await storage.moveShard(ref, 'live', 'trash', undefined, { cascade: true })).toEqual([
    expect.stringContaining('detached until its recall: foreign key child_fk of cut2.child'),
  ]);
  expect(await referencing()).toEqual([]);
  await storage.moveShard(ref, 'trash', 'live');
  expect(await referencing()).toEqual([['child', 'cut2', 'parent']]);
});

test('a drop waits for an open transaction without queueing readers, and names it when its drain runs out', async () => {
  const ref = shardOf('busy', 't', { columns: 'id INT' });
  await storage.createShard(ref);
  const { spawn } = await import('node:child_process');
  const { hostname, port } = new URL(server.url);
  // A session that read the table in a transaction it keeps open for 3 s.
  const holder = spawn('mariadb', [
    '--no-defaults',
    '--protocol=TCP',
    `-h${hostname}`,
    `-P${port}`,
    '-uroot',
    '-e',
    'BEGIN; SELECT COUNT(*) FROM busy.t; SELECT SLEEP(3); COMMIT',
  ]);
  await new Promise((resolve) => setTimeout(resolve, 500));
  const refused = storage.moveShard(ref, 'live', 'trash', undefined, { drainTimeoutMs: 1000 });
  const readerStarted = Date.now();
  await sql('SELECT COUNT(*) FROM busy.t');
  expect(Date.now() - readerStarted).toBeLessThan(900);
  await expect(refused).rejects.toMatchObject({
    type: 'TableBusy',
    message: expect.stringMatching(/busy\.t is still in use after 1000 ms of waiting: held by session \d+ \(user root@/) as unknown,
  });
  expect(await tableThere('busy', 't')).toBe(true);
  await new Promise((resolve) => holder.on('exit', resolve));
  await storage.moveShard(ref, 'live', 'trash', undefined, { drainTimeoutMs: 5000 });
  expect(await tableThere('busy', 't')).toBe(false);
});

/**
 * Starts a drop of `ref` (its table held meanwhile by a session's open transaction for 2 s), and once the drop has read
 * what is on the table and tries its rename (its record says where it is going), runs the user's `ddl` by the table's
 * name, which waits for that session and goes in before the drop's next try. Answers the drop's outcome.
 */
async function dropWhileUserAdds(ref: ShardRef, db: string, table: string, ddl: string, cascade: boolean, rowId: number) {
  const { spawn } = await import('node:child_process');
  const { hostname, port } = new URL(server.url);
  const holder = spawn('mariadb', [
    '--no-defaults',
    '--protocol=TCP',
    `-h${hostname}`,
    `-P${port}`,
    '-uroot',
    '-e',
    `BEGIN; INSERT INTO ${db}.${table} (id) VALUES (${rowId}); SELECT SLEEP(2); COMMIT`,
  ]);
  const held = new Promise((resolve) => holder.on('exit', resolve));
  await new Promise((resolve) => setTimeout(resolve, 300));
  const drop = storage.moveShard(ref, 'live', 'trash', undefined, { drainTimeoutMs: 15_000, cascade }).then(
    (notes) => ({ notes }),
    (err: unknown) => ({ err: err as Error & { type?: string } }),
  );
  const trying = `SELECT COUNT(*) FROM tablefate.shards WHERE table_id = ${ref.tableId} AND catalog_id = '${catalogId}' AND moving_to IS NOT NULL`;
  for (const until = Date.now() + 5000; (await sql(trying))[0]![0] !== '1';) {
    if (Date.now() > until) throw new Error(`the drop of ${db}.${table} never tried its rename: ${JSON.stringify(await drop)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await sql(ddl);
  await held;
  return drop;
}

test("a trigger and a key added by the table's name while a drop drains it leave with it, and come back on the recall", async () => {
  const ref = shardOf('race', 'parent', { columns: 'id INT PRIMARY KEY, v TEXT' });
  await storage.createShard(ref);
  await sql('CREATE TABLE race.child (id INT PRIMARY KEY, parent INT)');
  // Nothing on the table when the drop reads it: a trigger comes while it drains (once, MariaDB refused the rename into
  // the trash for it, 1435, and the drop failed), then a key (once, the key followed the table into the trash).
  const withTrigger = await dropWhileUserAdds(
    ref,
    'race',
    'parent',
    "CREATE TRIGGER race.parent_bi BEFORE INSERT ON race.parent FOR EACH ROW SET NEW.v = 'by trigger'",
    true,
    1,
  );
  expect(withTrigger).toEqual({ notes: ['race.parent: triggers kept until its recall: parent_bi'] });
  await storage.moveShard(ref, 'trash', 'live');
  const withKey = await dropWhileUserAdds(
    ref,
    'race',
    'parent',
    'ALTER TABLE race.child ADD CONSTRAINT child_parent_fk FOREIGN KEY (parent) REFERENCES race.parent (id)',
    true,
    2,
  );
  expect(withKey).toEqual({
    notes: [
      'race.parent: triggers kept until its recall: parent_bi',
      'race.parent: detached until its recall: foreign key child_parent_fk of race.child (references race.parent)',
    ],
  });
  expect(await keysIntoTrash()).toEqual([['0']]);
  await storage.moveShard(ref, 'trash', 'live');
  // (Row 1 went in before the trigger was made; row 2 with it, and row 3 after the recall.)
  await sql('INSERT INTO race.parent (id) VALUES (3)');
  expect(await sql('SELECT id, v FROM race.parent ORDER BY id')).toEqual([
    ['1', 'NULL'],
    ['2', 'by trigger'],
    ['3', 'by trigger'],
  ]);
  expect(await referencedBy('race', 'child_parent_fk')).toEqual([['race', 'parent']]);
});

test("a key added by the table's name while a drop with cascade drains a table with nothing on it follows it into the trash, and is detached there", async () => {
  const ref = shardOf('race3', 'parent', { columns: 'id INT PRIMARY KEY' });
  await storage.createShard(ref);
  await sql('CREATE TABLE race3.child (id INT PRIMARY KEY, parent INT)');
  const dropped = await dropWhileUserAdds(
    ref,
    'race3',
    'parent',
    'ALTER TABLE race3.child ADD CONSTRAINT child_parent_fk FOREIGN KEY (parent) REFERENCES race3.parent (id)',
    true,
    1,
  );
  expect(dropped).toEqual({
    notes: ['race3.parent: detached until its recall: foreign key child_parent_fk of race3.child (references race3.parent)'],
  });
  expect(await keysIntoTrash()).toEqual([['0']]);
  await storage.moveShard(ref, 'trash', 'live');
  expect(await referencedBy('race3', 'child_parent_fk')).toEqual([['race3', 'parent']]);
});

test("a key added by the table's name while a drop without cascade drains it refuses the drop, as one there before would", async () => {
  const ref = shardOf('race2', 'parent', { columns: 'id INT PRIMARY KEY' });
  await storage.createShard(ref);
  await sql('CREATE TABLE race2.child (id INT PRIMARY KEY, parent INT)');
  const refused = await dropWhileUserAdds(
    ref,
    'race2',
    'parent',
    'ALTER TABLE race2.child ADD CONSTRAINT child_parent_fk FOREIGN KEY (parent) REFERENCES race2.parent (id)',
    false,
    1,
  );
  expect(refused).toMatchObject({
    err: { type: 'HasDependents', message: expect.stringContaining('foreign key child_parent_fk of race2.child') as unknown },
  });
  // The drop taken back, as the workflow does: the table live under its name again, its key on it.
  await storage.moveShard(ref, 'trash', 'live');
  expect(await tableThere('race2', 'parent')).toBe(true);
  expect(await referencedBy('race2', 'child_parent_fk')).toEqual([['race2', 'parent']]);
  expect(await sql("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_NAME LIKE 'tablefate_moving%'")).toEqual([['0']]);
});

test("grants: back by themselves under the table's own name; given again under another name, and on a rename", async () => {
  const ref = shardOf('gr', 'accounts', { columns: 'id INT PRIMARY KEY, balance INT' });
  await storage.createShard(ref);
  await sql(`CREATE ROLE IF NOT EXISTS gr_reader; CREATE USER IF NOT EXISTS 'gr_app'@'%';
    GRANT SELECT, INSERT ON gr.accounts TO 'gr_app'@'%' WITH GRANT OPTION; GRANT UPDATE (balance) ON gr.accounts TO 'gr_app'@'%';
    GRANT SELECT ON gr.accounts TO gr_reader`);
  const grantsOn = async (table: string) =>
    (await sql("SHOW GRANTS FOR 'gr_app'@'%'")).map((r) => r[0]!).filter((g) => g.includes(`\`${table}\``));
  const before = await grantsOn('accounts');
  expect(before).toEqual(['GRANT SELECT, INSERT, UPDATE (`balance`) ON `gr`.`accounts` TO `gr_app`@`%` WITH GRANT OPTION']);

  await storage.moveShard(ref, 'live', 'trash');
  await storage.moveShard(ref, 'trash', 'live');
  expect(await grantsOn('accounts')).toEqual(before);

  await storage.moveShard(ref, 'live', 'trash');
  const moved = { ...ref, table: { ...ref.table!, name: 'accounts_old' } };
  expect(await storage.moveShard(moved, 'trash', 'live')).toEqual([]);
  expect(await grantsOn('accounts_old')).toEqual([before[0]!.replace('`accounts`', '`accounts_old`')]);
  expect((await sql('SHOW GRANTS FOR gr_reader')).map((r) => r[0])).toContain('GRANT SELECT ON `gr`.`accounts_old` TO `gr_reader`');

  const renamed = { ...ref, table: { ...ref.table!, name: 'ledger' } };
  await storage.moveShard(renamed, 'live', 'live');
  expect(await grantsOn('ledger')).toEqual([before[0]!.replace('`accounts`', '`ledger`')]);
});

test('a partitioned table, adopted: its partitions leave and come back whole, its identity its first partition', async () => {
  await sql(`CREATE DATABASE IF NOT EXISTS part; CREATE TABLE part.events (id INT, at DATE, PRIMARY KEY (id, at))
      PARTITION BY RANGE (YEAR(at)) (PARTITION p2024 VALUES LESS THAN (2025), PARTITION p2025 VALUES LESS THAN (2026), PARTITION pmax VALUES LESS THAN MAXVALUE);
    INSERT INTO part.events VALUES (1, '2024-05-01'), (2, '2025-05-01'), (3, '2030-01-01')`);
  const ref = shardOf('part', 'events', { adopt: { node: 'node-0' } });
  await storage.createShard(ref);
  const before = await sql('SHOW CREATE TABLE part.events');
  await storage.moveShard(ref, 'live', 'trash');
  expect(await tableThere('part', 'events')).toBe(false);
  await storage.moveShard(ref, 'trash', 'live');
  expect(await sql('SHOW CREATE TABLE part.events')).toEqual(before);
  expect(
    await sql(
      'SELECT (SELECT id FROM part.events PARTITION (p2024)), (SELECT id FROM part.events PARTITION (p2025)), (SELECT id FROM part.events PARTITION (pmax))',
    ),
  ).toEqual([['1', '2', '3']]);
});

test('a view on a trashed table answers as after a real DROP TABLE, and again after the recall; nothing of it changes', async () => {
  const ref = shardOf('vw', 'sales', { columns: 'id INT PRIMARY KEY, amount INT' });
  await storage.createShard(ref);
  await sql(`INSERT INTO vw.sales VALUES (1, 10), (2, 20); CREATE VIEW vw.big_sales AS SELECT id FROM vw.sales WHERE amount > 15;
    CREATE TABLE vw.other (id INT); CREATE VIEW vw.gone_for_real AS SELECT id FROM vw.other; DROP TABLE vw.other`);
  const definition = await sql("SELECT VIEW_DEFINITION FROM information_schema.VIEWS WHERE TABLE_NAME = 'big_sales'");
  await storage.moveShard(ref, 'live', 'trash');
  // (The client's ERROR line, the view's name in it made alike.)
  const asAfterDrop = async (view: string) =>
    sql(`SELECT * FROM vw.${view}`).then(
      () => 'answered',
      (err: Error) => (/ERROR \d+ \(\w+\)[^\n]*/.exec(err.message)?.[0] ?? err.message).replaceAll(view, '<view>'),
    );
  expect(await asAfterDrop('big_sales')).toEqual(await asAfterDrop('gone_for_real'));
  expect(await asAfterDrop('big_sales')).toMatch(/ERROR 1356/);
  await storage.moveShard(ref, 'trash', 'live');
  expect(await sql('SELECT id FROM vw.big_sales')).toEqual([['2']]);
  expect(await sql("SELECT VIEW_DEFINITION FROM information_schema.VIEWS WHERE TABLE_NAME = 'big_sales'")).toEqual(definition);
});

test('a connection lost under a statement, as Node reports it (write EPIPE), is tried again, not taken for a refusal', async () => {
  // A real lost connection: the server closes a session whose handshake it refuses, and the writes after meet the
  // closed socket. The client passes such an error on as Node raised it, with the system's errno (negative), which
  // once passed for a server's error number no retry could fix (chaos --driver mariadb: a drop's undo failed for good).
  const socket = net.connect({ host: '127.0.0.1', port: Number(new URL(server.url).port), allowHalfOpen: true });
  const lost = await new Promise<NodeJS.ErrnoException>((resolve) => {
    socket.on('error', resolve);
    socket.once('data', () => {
      const write = () => {
        if (!socket.destroyed) socket.write(Buffer.from([1, 0, 0, 1, 0xff]), () => setTimeout(write, 10));
      };
      write();
    });
  });
  expect(lost).toMatchObject({ code: 'EPIPE', message: 'write EPIPE' });
  expect(errnoOf(lost)).toBeUndefined();
  const classified = classifiedMariadb(lost, 'moveShard', shardOf('lost', 'connection'));
  expect(classified).toBeInstanceOf(StorageIoError);
  expect(classified).not.toBeInstanceOf(PermanentStorageError);
});
