import fs from 'node:fs';
import { tcpAccepts } from '../servers/local-host';
import { mariadbQuery, sharedMariadb, startMariadb, type TestMariadb } from './support/mariadb';

// The throwaway MariaDB server the MariaDB driver's tests run on (servers/local-mariadb.ts, test/support/mariadb.ts):
// a real server, asked through the real `mariadb` client.

let mariadb: TestMariadb;
beforeAll(async () => {
  mariadb = await sharedMariadb();
});
afterAll(async () => {
  await mariadb?.stop();
});

test('a fresh database takes a table and rows, and gives them back', async () => {
  const url = await mariadb.freshDatabase('server_test');
  expect(url).toMatch(/^mariadb:\/\/root@127\.0\.0\.1:\d+\/server_test_[0-9a-f]{12}$/);
  await mariadbQuery(url, "CREATE TABLE t (id INT PRIMARY KEY, name TEXT) ENGINE=InnoDB; INSERT INTO t VALUES (1, 'one'), (2, 'two')");
  expect(await mariadbQuery(url, 'SELECT id, name FROM t ORDER BY id')).toEqual([
    ['1', 'one'],
    ['2', 'two'],
  ]);
  expect(
    await mariadbQuery(url, "SELECT engine FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 't'"),
  ).toEqual([['InnoDB']]);
});

test('two fresh databases are distinct: a table in one is not in the other', async () => {
  const [first, second] = [await mariadb.freshDatabase(), await mariadb.freshDatabase()];
  expect(first).not.toEqual(second);
  await mariadbQuery(first, 'CREATE TABLE only_here (id INT)');
  expect(await mariadbQuery(first, 'SHOW TABLES')).toEqual([['only_here']]);
  expect(await mariadbQuery(second, 'SHOW TABLES')).toEqual([]);
});

test('the server is MariaDB 10.11 or later, with metadata_lock_info loaded', async () => {
  const [[version]] = (await mariadbQuery(mariadb.url, 'SELECT VERSION()')) as [[string]];
  expect(version).toMatch(/MariaDB/);
  const [major, minor] = version.split('.').map(Number) as [number, number];
  expect(major * 1000 + minor).toBeGreaterThanOrEqual(10_011);
  // Who holds a metadata lock: the drop's drain names them from here.
  expect(await mariadbQuery(mariadb.url, 'SELECT COUNT(*) >= 0 FROM information_schema.METADATA_LOCK_INFO')).toEqual([['1']]);
});

test('stop ends a server of its own and removes its directory', async () => {
  const own = await startMariadb();
  const port = Number(new URL(own.url).port);
  expect(fs.existsSync(own.dir!)).toBe(true);
  expect(await mariadbQuery(own.url, 'SELECT 1')).toEqual([['1']]);
  await own.stop();
  expect(fs.existsSync(own.dir!)).toBe(false);
  expect(await tcpAccepts(port)).toBe(false);
  await own.stop(); // (again: nothing to do)
});
