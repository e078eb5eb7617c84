import { randomBytes } from 'node:crypto';
import type { ShardRef } from '../storage/driver';
import { MariadbStorage } from '../storage/mariadb';
import { MARIADB_WORKER_GRANTS } from '../storage/mariadb-privileges';
import { mariadbQuery, startMariadb, type TestMariadb } from './support/mariadb';

/*
 * The MariaDB driver as a DBA deploys it: a worker account with exactly the privileges docs/mariadb.md lists (the same
 * statements, from storage/mariadb-privileges.ts), and no more. Every operation works with them; a table whose triggers
 * the worker could not make again (another definer, no SET USER) is refused before it moves.
 */

let server: TestMariadb;
let storage: MariadbStorage;
const password = randomBytes(9).toString('hex');

beforeAll(async () => {
  server = await startMariadb();
  const grants = MARIADB_WORKER_GRANTS({ user: 'tablefate', host: '%', namespaces: ['shop'] });
  await mariadbQuery(server.url, [`CREATE USER 'tablefate'@'%' IDENTIFIED BY '${password}'`, ...grants].join(';\n'));
  const url = new URL(server.url);
  url.username = 'tablefate';
  url.password = password;
  storage = new MariadbStorage([{ node: 'node-0', url: url.toString() }], 'least');
});

afterAll(async () => {
  await storage?.close();
  await server?.stop();
});

let nextId = 1;
const shardOf = (name: string, columns: string): ShardRef => ({
  tableId: nextId++,
  shard: 0,
  node: 'node-0',
  table: { namespace: 'shop', name, shards: 1, params: { shards: 1, columns } },
});
const sql = (text: string) => mariadbQuery(server.url, text);

test('with the listed privileges only: create, drop with a trigger and a key, recall under another name with its grants, purge', async () => {
  expect((await sql("SHOW GRANTS FOR 'tablefate'@'%'")).map((r) => r[0]).join('\n')).not.toMatch(/ALL PRIVILEGES ON \*\.\*|SUPER/);
  const parent = shardOf('customers', 'id INT PRIMARY KEY');
  await storage.createShard(parent);
  await sql(`CREATE TABLE shop.orders (id INT PRIMARY KEY, customer INT, CONSTRAINT orders_customer_fk FOREIGN KEY (customer) REFERENCES shop.customers (id));
    CREATE TABLE shop.log (what TEXT);
    INSERT INTO shop.customers VALUES (1); INSERT INTO shop.orders VALUES (1, 1);
    CREATE USER reader; GRANT SELECT ON shop.customers TO reader`);
  // A trigger the worker's own account defines: it makes it again itself.
  await mariadbQuery(
    (() => {
      const url = new URL(server.url);
      url.username = 'tablefate';
      url.password = password;
      return url.toString();
    })(),
    "CREATE TRIGGER shop.customers_ai AFTER INSERT ON shop.customers FOR EACH ROW INSERT INTO shop.log VALUES ('new')",
  );
  const out = await storage.moveShard(parent, 'live', 'trash', undefined, { cascade: true });
  expect(out).toEqual([
    'shop.customers: triggers kept until its recall: customers_ai',
    'shop.customers: detached until its recall: foreign key orders_customer_fk of shop.orders (references shop.customers)',
  ]);
  const elsewhere = { ...parent, table: { ...parent.table!, name: 'clients' } };
  await storage.moveShard(elsewhere, 'trash', 'live');
  await sql('INSERT INTO shop.clients VALUES (2)');
  expect(await sql('SELECT what FROM shop.log')).toEqual([['new']]);
  expect((await sql('SHOW GRANTS FOR reader')).map((r) => r[0])).toContain('GRANT SELECT ON `shop`.`clients` TO `reader`@`%`');
  expect(
    await sql("SELECT REFERENCED_TABLE_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = 'shop'"),
  ).toEqual([['clients']]);

  await storage.moveShard(elsewhere, 'live', 'trash', undefined, { cascade: true });
  await storage.markGarbage(elsewhere);
  await storage.deleteGarbage(elsewhere);
  expect(await sql("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA LIKE 'tablefate%'")).toEqual([['1']]);
});

test('a trigger another user defined, which the worker could not make again, refuses the drop before anything moves', async () => {
  const ref = shardOf('audited', 'id INT');
  await storage.createShard(ref);
  await sql(
    'CREATE TABLE shop.audit (n INT); CREATE TRIGGER shop.audited_ai AFTER INSERT ON shop.audited FOR EACH ROW INSERT INTO shop.audit VALUES (NEW.id)',
  );
  await expect(storage.moveShard(ref, 'live', 'trash')).rejects.toMatchObject({
    type: 'HasDependents',
    message: expect.stringContaining('audited_ai, by root@') as unknown,
  });
  expect(await sql("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_NAME = 'audited_ai'")).toEqual([['1']]);
  await sql('INSERT INTO shop.audited VALUES (4)');
  expect(await sql('SELECT n FROM shop.audit')).toEqual([['4']]);
});
