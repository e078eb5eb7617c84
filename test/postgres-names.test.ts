import { Client } from 'pg';
import { Harness } from './support/harness';
import { sharedPostgres, type TestPostgres } from './support/postgres';

/*
 * Any PostgreSQL name with the PostgreSQL driver: tables, schemas and columns whose names need quotes (capitals, spaces,
 * dots, non-ASCII letters, a quote) are created, adopted, dropped, recalled, renamed and listed under their exact names,
 * written as psql writes them (`shop."Orders"`). Judged by what psql's own catalog says: to_regclass of the quoted name.
 */

let server: TestPostgres;
let h: Harness;
let db: Client;

beforeAll(async () => {
  server = await sharedPostgres();
  const url = await server.freshDatabase('names');
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
/** The relation psql finds under `name` (written as psql writes it), by oid; null when none. */
const oidOf = async (name: string) => (await rows('SELECT to_regclass($1)::oid::int8 AS oid', [name]))[0]!.oid as string | null;
const schemaAndName = async (oid: unknown) =>
  (
    await rows(
      'SELECT n.nspname AS schema, c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1',
      [oid],
    )
  )[0];

test('a table and columns that need quotes: created, written, dropped, recalled and renamed under their exact names', async () => {
  const table = await h.client.create({ table: '"App"."UserProfile"', columns: '"UserId" int PRIMARY KEY, "Display Name" text' });
  expect(table).toMatchObject({ namespace: 'App', name: 'UserProfile', state: 'READY' });
  const oid = await oidOf('"App"."UserProfile"');
  expect(oid).not.toBeNull();
  await db.query(`INSERT INTO "App"."UserProfile" ("UserId", "Display Name") VALUES (1, 'Ada'), (2, 'Grace')`);
  // Bare, PostgreSQL folds the name: another table (none here), never this one.
  expect(await oidOf('app.userprofile')).toBeNull();

  expect(await h.client.describe({ table: '"App"."UserProfile"' })).toMatchObject({ id: table.id });
  await expect(h.client.describe({ table: 'App.UserProfile' })).rejects.toMatchObject({
    type: 'InvalidInput',
    message: expect.stringContaining('"App" has capitals: write "App" in double quotes') as unknown,
  });

  expect(await h.client.trash({ table: '"App"."UserProfile"', retentionSeconds: 3600 })).toMatchObject({ state: 'TRASHED' });
  expect(await oidOf('"App"."UserProfile"')).toBeNull();
  const back = await h.client.undelete({ table: '"App"."UserProfile"', newName: 'shop."Profil ü"' });
  expect(back).toMatchObject({ namespace: 'shop', name: 'Profil ü', state: 'READY' });
  expect(await schemaAndName(oid)).toEqual({ schema: 'shop', name: 'Profil ü' });
  expect(await rows('SELECT "Display Name" AS name FROM shop."Profil ü" ORDER BY "UserId"')).toEqual([{ name: 'Ada' }, { name: 'Grace' }]);

  const renamed = await h.client.rename({ table: table.id, newName: '"my.app"."say ""hi"""' });
  expect(renamed).toMatchObject({ namespace: 'my.app', name: 'say "hi"' });
  expect(await schemaAndName(oid)).toEqual({ schema: 'my.app', name: 'say "hi"' });
  expect(await oidOf('"my.app"."say ""hi"""')).toBe(oid);
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('a table of several shards under a quoted name: each shard table is <name>_<k>, quoted alike; 63 bytes with the suffix', async () => {
  const table = await h.client.create({ table: 'shop."Events"', shards: 2, columns: 'id int' });
  expect(await Promise.all(['shop."Events_0"', 'shop."Events_1"'].map(oidOf))).not.toContain(null);
  await h.client.trash({ table: 'shop."Events"', retentionSeconds: 3600 });
  await h.client.undelete({ table: table.id });
  expect(await oidOf('shop."Events_1"')).not.toBeNull();

  // 62 bytes fit one shard; with "_1" they would not: refused before anything starts.
  const long = `É${'x'.repeat(60)}`;
  await expect(h.client.create({ table: `shop."${long}"`, shards: 2, columns: 'id int' })).rejects.toMatchObject({
    type: 'InvalidInput',
    message: expect.stringContaining('over 63 bytes') as unknown,
  });
  expect(await h.client.create({ table: `shop."${long}"`, columns: 'id int' })).toMatchObject({ name: long });
});
