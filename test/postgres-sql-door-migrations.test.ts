import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Client } from 'pg';
import { PROJECT_ROOT } from './support/cli';
import { DoorNode, rowsOf } from './support/door';
import type { Harness } from './support/harness';
import { waitFor } from './support/wait';

/*
 * The SQL door inside a real migration tool's transactions (issue 41): node-pg-migrate, from its registry, run as a DBA
 * runs it (its command line, DATABASE_URL for an ordinary role, migrations in SQL files), calls
 * `CALL tablefate_sql.drop(...)` in its migrations. A migration that commits has its drop run; one the tool rolls back
 * asks for nothing. Judged as the role sees it (the requests view, its tables) and as tablefate does (its catalog, where
 * the table is).
 */

let door: DoorNode;
let h: Harness;
let admin: Client;
let owner: Client;
let scratch: string;
/** The role that owns the tables and runs the migrations: an ordinary login role, granted the door. */
let OWNER: string;
const MIGRATE = path.join(PROJECT_ROOT, 'node_modules', '.bin', 'node-pg-migrate');

beforeAll(async () => {
  door = await DoorNode.start({ roles: ['owner'], callers: ['owner'] });
  ({ h, admin } = door);
  OWNER = door.roles.owner!;
  owner = await door.sessionOf('owner');
  await owner.query('CREATE SCHEMA shop');
  scratch = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-migrations-'));
});

afterAll(async () => {
  await door?.close();
  if (scratch) await fs.promises.rm(scratch, { recursive: true, force: true });
});

/** A table of the owner's, with rows, that tablefate keeps (adopted): its id and oid. */
const ownersTable = (name: string) => door.ownedTable('owner', name);

/** Where the table of `oid` is: its schema's name (undefined: gone). */
const schemaOf = (oid: number) => door.schemaOf(oid);

/** The requests the door holds for the table of `oid`, whoever made them (as the worker's own records). */
const requestsFor = async (oid: number) => rowsOf(admin, 'SELECT id FROM tablefate.sql_requests WHERE table_oid = $1', [oid]);

/** A directory of SQL migrations, as a DBA writes them: file name (without .sql) to its up migration. */
async function migrationsDir(name: string, migrations: Record<string, string>): Promise<string> {
  const dir = path.join(scratch, name);
  await fs.promises.mkdir(dir);
  for (const [file, sql] of Object.entries(migrations)) {
    await fs.promises.writeFile(path.join(dir, `${file}.sql`), `-- Up Migration\n${sql}\n`);
  }
  return dir;
}

/**
 * `node-pg-migrate up` as a DBA runs it: its command line, in a directory of its own, with DATABASE_URL for `OWNER`
 * (and `applicationName` in it, if given) and its record of what ran (`table`) in a schema the role makes (PUBLIC may
 * not create in `public`). Its output is stdout and stderr together.
 */
function migrateUp(
  dir: string,
  table: string,
  extra: string[] = [],
  applicationName?: string,
): Promise<{ code: number | null; output: string }> {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: door.urlOf('owner', applicationName) };
  const args = ['up', '--migrations-dir', dir, '--migrations-schema', 'migrations', '--create-migrations-schema'];
  const child = spawn(MIGRATE, [...args, '--migrations-table', table, ...extra], { cwd: scratch, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`node-pg-migrate did not finish in 30 s: ${output}`));
    }, 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** The migrations the tool recorded as run in `table`. */
const ranIn = async (table: string) => (await rowsOf(owner, `SELECT name FROM migrations."${table}" ORDER BY id`)).map((row) => row.name);

test('a transaction per migration: the drop of the migration that commits runs, the drop of the one rolled back is never asked for', async () => {
  const a = await ownersTable('a');
  const b = await ownersTable('b');
  const dir = await migrationsDir('each', {
    '1_trash_a': `CALL tablefate_sql.drop('shop.a', retention_seconds => 600);`,
    '2_trash_b': `CALL tablefate_sql.drop('shop.b', retention_seconds => 600);\nSELECT 1/0;`,
  });
  const run = await migrateUp(dir, 'each', ['--no-single-transaction']);
  // The tool reports the failure of the second migration, and records the first as run, not the second.
  expect(run.code).toBe(1);
  expect(run.output).toContain('division by zero');
  expect(run.output).toContain('### MIGRATION 2_trash_b (UP) ###');
  expect(await ranIn('each')).toEqual(['1_trash_a']);

  // The first migration's drop, asked for in its transaction, ran once it committed: the same table, in the trash.
  const answered = await waitFor(
    () => rowsOf(owner, 'SELECT * FROM tablefate_sql.requests'),
    (rows) => rows.length > 0 && rows.every((row) => row.state === 'answered'),
    { what: "the committed migration's request to be answered" },
  );
  expect(answered).toHaveLength(1);
  // Who asked is the migration's role; the tool names no application of its own.
  expect(answered[0]).toMatchObject({
    op: 'drop',
    args: { retentionSeconds: 600 },
    requester: OWNER,
    session_user_name: OWNER,
    application_name: '',
    sqlstate: null,
    message: null,
    answer: expect.objectContaining({ id: a.id, namespace: 'shop', name: 'a', state: 'TRASHED' }) as unknown,
  });
  expect(await h.catalog.getTable(a.id)).toMatchObject({ state: 'TRASHED' });
  expect(await schemaOf(a.oid)).toBe('tablefate_trash');
  expect(await requestsFor(a.oid)).toHaveLength(1);

  // The second's was rolled back with it (the tool sends no ROLLBACK here: its aborted transaction ends with its
  // session): nothing asked, the table live and untouched.
  expect(await requestsFor(b.oid)).toEqual([]);
  expect(await h.catalog.getTable(b.id)).toMatchObject({ state: 'READY' });
  expect(await schemaOf(b.oid)).toBe('shop');
  expect(await rowsOf(owner, 'SELECT id, note FROM shop.b ORDER BY id')).toEqual([
    { id: 1, note: 'a' },
    { id: 2, note: 'b' },
  ]);

  // Mended, the second migration (never recorded as run) runs on the next `up`, and its drop with it; an
  // application_name in DATABASE_URL names the migration in the requests view.
  await fs.promises.writeFile(
    path.join(dir, '2_trash_b.sql'),
    `-- Up Migration\nCALL tablefate_sql.drop('shop.b', retention_seconds => 600);\n`,
  );
  const again = await migrateUp(dir, 'each', ['--no-single-transaction'], 'migrate-shop');
  expect(again).toMatchObject({ code: 0, output: expect.stringContaining('### MIGRATION 2_trash_b (UP) ###') as unknown });
  expect(await ranIn('each')).toEqual(['1_trash_a', '2_trash_b']);
  const both = await waitFor(
    () => rowsOf(owner, 'SELECT * FROM tablefate_sql.requests ORDER BY id'),
    (rows) => rows.length === 2 && rows.every((row) => row.state === 'answered'),
    { what: "the mended migration's request to be answered" },
  );
  expect(both[1]).toMatchObject({
    requester: OWNER,
    application_name: 'migrate-shop',
    sqlstate: null,
    answer: expect.objectContaining({ id: b.id, state: 'TRASHED' }) as unknown,
  });
  expect(await schemaOf(b.oid)).toBe('tablefate_trash');
  expect(await requestsFor(b.oid)).toHaveLength(1);
});

test("the tool's default, one transaction for all: rolled back, it asks for nothing at all", async () => {
  const c = await ownersTable('c');
  const d = await ownersTable('d');
  const before = (await rowsOf(owner, 'SELECT id FROM tablefate_sql.requests')).length;
  const dir = await migrationsDir('single', {
    '1_trash_c': `CALL tablefate_sql.drop('shop.c', retention_seconds => 600);`,
    '2_trash_d': `CALL tablefate_sql.drop('shop.d', retention_seconds => 600);\nSELECT 1/0;`,
  });
  const run = await migrateUp(dir, 'single');
  expect(run.code).toBe(1);
  expect(run.output).toContain('division by zero');
  expect(run.output).toContain('Rolling back attempted migration');
  expect(await ranIn('single')).toEqual([]);
  expect((await rowsOf(owner, 'SELECT id FROM tablefate_sql.requests')).length).toBe(before);
  for (const { id, oid } of [c, d]) {
    expect(await requestsFor(oid)).toEqual([]);
    expect(await h.catalog.getTable(id)).toMatchObject({ state: 'READY' });
    expect(await schemaOf(oid)).toBe('shop');
  }
});
