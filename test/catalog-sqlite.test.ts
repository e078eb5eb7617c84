import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { SqliteCatalog } from '../catalog/sqlite';
import {
  MIGRATIONS as SQLITE_MIGRATIONS,
  SCHEMA_VERSION as SQLITE_SCHEMA_VERSION,
  checkSchema as checkSqliteSchema,
  migrate as migrateSqlite,
} from '../catalog/sqlite-schema';
import type { Migration } from '../catalog/migrations';
import { sqlList } from '../catalog/rows';
import { MIGRATION_1_NAME_HOLDING_STATES } from '../catalog/postgres-schema';
import type { Catalog } from '../catalog/catalog';
import { NAME_HOLDING_STATES } from '../domain/states';
import {
  lastMigrationWith,
  never,
  OLD_ROWS,
  OLD_TABLE,
  owner,
  sqlite,
  catalogCalls,
  TRASHED_BEFORE_V3_ROWS,
  OLD_TRASHED_TABLE,
} from './support/catalogs';

// The SQLite catalog alone: its file's schema versions, and calls made at once in one process.

let catalog: Catalog;
const { locked, prepare, readyTable, servesVersion2, servesVersion3 } = catalogCalls(() => catalog);

// The SQLite file's schema versions: what a worker of this code does to a file it finds, made by this code or before.
describe('SQLite catalog schema', () => {
  /** The schema as catalog/sqlite.ts made it before versions (up to commit 3c7b5f3), run on every open. */
  const UNVERSIONED_SCHEMA = `
CREATE TABLE IF NOT EXISTS tables (
  id          INTEGER PRIMARY KEY,
  namespace   TEXT    NOT NULL,
  name        TEXT    NOT NULL,
  state       TEXT    NOT NULL,
  params      TEXT    NOT NULL,
  placement   TEXT    NOT NULL,
  created_at  INTEGER NOT NULL,
  dropped_at  INTEGER,
  expire_at   INTEGER,
  purged_at   INTEGER,
  updated_at  INTEGER NOT NULL
);
-- A name belongs to at most one table that holds it; the database, not the code, keeps that true.
CREATE UNIQUE INDEX IF NOT EXISTS tables_name_holder ON tables (namespace, name)
  WHERE state IN ('CREATING', 'READY', 'TRASHING', 'RESTORING', 'CREATE_FAILED');
CREATE INDEX IF NOT EXISTS tables_trash ON tables (namespace, name, dropped_at) WHERE state = 'TRASHED';
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS locks (
  resource          TEXT PRIMARY KEY,
  owner_workflow_id TEXT    NOT NULL,
  owner_run_id      TEXT    NOT NULL,
  since             INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS locks_owner ON locks (owner_run_id);
-- What each call of a workflow run answered, so that the call made again after a lost workflow task answers
-- the same without touching anything (see StepKey).
CREATE TABLE IF NOT EXISTS journal (
  run_id  TEXT    NOT NULL,
  step    TEXT    NOT NULL,
  outcome TEXT    NOT NULL,
  at      INTEGER NOT NULL,
  PRIMARY KEY (run_id, step)
);
CREATE INDEX IF NOT EXISTS journal_age ON journal (at);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
`;

  afterAll(() => sqlite.cleanUp());

  /** A file as a worker of the code before versions left it: its schema, a catalog id, a READY table, a lock, a journaled step. */
  async function unversionedFile(schema = UNVERSIONED_SCHEMA): Promise<string> {
    const file = await sqlite.newStore();
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const db = new Database(file);
    try {
      db.pragma('journal_mode = WAL');
      db.exec(schema);
      db.exec(`INSERT INTO meta (key, value) VALUES ('catalog_id', 'c0ffee00');`);
      db.exec(OLD_ROWS);
    } finally {
      db.close();
    }
    return file;
  }

  /** Reads the file with the driver alone: its version, and the SQL of an object of its schema. */
  function inspectFile<T>(file: string, read: (db: Database.Database) => T): T {
    const db = new Database(file, { readonly: true });
    try {
      return read(db);
    } finally {
      db.close();
    }
  }
  const userVersion = (file: string) => inspectFile(file, (db) => db.pragma('user_version', { simple: true }) as number);

  test('a file made before versions opens as the baseline, keeps its rows, and is at the latest version', async () => {
    const file = await unversionedFile();
    // A reader takes it as the baseline as it is, and writes nothing; the baseline is behind this code, so a reader of
    // this code refuses it until a worker has migrated it.
    expect(inspectFile(file, (db) => checkSqliteSchema(db, SQLITE_MIGRATIONS.slice(0, 1)))).toBe(true);
    expect(() => new SqliteCatalog(file, { mustExist: true })).toThrow(/lacks migrations 2/);
    expect(userVersion(file)).toBe(0);

    const worker = new SqliteCatalog(file);
    const was = catalog;
    catalog = worker;
    try {
      expect(userVersion(file)).toBe(SQLITE_SCHEMA_VERSION);
      expect(worker.id).toBe('c0ffee00');
      expect(await worker.getTable(7)).toMatchObject({ id: 7, namespace: 'ns', name: 'old', state: 'READY', createdAt: 100, hold: null });
      const reader = new SqliteCatalog(file, { mustExist: true });
      expect(reader.id).toBe('c0ffee00');
      expect(await reader.getTable(7)).toEqual(await worker.getTable(7));
      await reader.close();
      expect(await worker.listLocks()).toEqual([{ resource: 'table:7', workflowId: 'trash:7', runId: 'run-7', since: 102 }]);
      expect(await worker.stepOutcome({ runId: 'run-7', step: '1:acquireLock' })).toEqual({ value: { acquired: true } });
      // The counter goes on from where it was, and the name index still holds.
      expect((await readyTable('new')).id).toBe(8);
      const creator = await locked('name:ns.old', owner('create:ns.old'));
      await expect(
        catalog.prepareCreate(
          { namespace: 'ns', name: 'old', params: { shards: 3 }, owner: creator, nameLock: 'name:ns.old', place: () => [], now: 5 },
          never,
        ),
      ).rejects.toMatchObject({ type: 'TableExists' });
    } finally {
      catalog = was;
      await worker.close();
    }
  });

  test('a file made before versions that lacks tables made since gets them; one whose index differs is refused, unchanged', async () => {
    // The first versions had no journal, no meta and no locks_owner index: they were made when the file was next opened.
    const early = await unversionedFile(UNVERSIONED_SCHEMA.replace(/CREATE INDEX IF NOT EXISTS locks_owner[^;]*;/, ''));
    const opened = new SqliteCatalog(early);
    await opened.close();
    expect(userVersion(early)).toBe(SQLITE_SCHEMA_VERSION);
    expect(inspectFile(early, (db) => db.prepare(`SELECT name FROM sqlite_master WHERE name = 'locks_owner'`).get())).toBeDefined();

    const otherIndex = UNVERSIONED_SCHEMA.replace(`'CREATING', 'READY', 'TRASHING', 'RESTORING', 'CREATE_FAILED'`, `'READY'`);
    const odd = await unversionedFile(otherIndex);
    const indexSql = (file: string) =>
      inspectFile(
        file,
        (db) => (db.prepare(`SELECT sql FROM sqlite_master WHERE name = 'tables_name_holder'`).get() as { sql: string }).sql,
      );
    const before = indexSql(odd);
    expect(() => new SqliteCatalog(odd)).toThrow(/index tables_name_holder is not the one/);
    expect(() => new SqliteCatalog(odd, { mustExist: true })).toThrow(/index tables_name_holder is not the one/);
    expect(userVersion(odd)).toBe(0);
    expect(indexSql(odd)).toBe(before);
  });

  test('opening a catalog again applies nothing again', async () => {
    const file = await sqlite.newStore();
    const first = new SqliteCatalog(file);
    await first.close();
    const second = new SqliteCatalog(file);
    await second.close();
    expect(second.id).toBe(first.id);
    expect(userVersion(file)).toBe(SQLITE_SCHEMA_VERSION);

    // A migration that is not idempotent (an insert): applied once however often the file is migrated.
    const counted: Migration = {
      version: SQLITE_SCHEMA_VERSION + 1,
      description: 'test',
      sql: `CREATE TABLE extra (x INTEGER); INSERT INTO extra VALUES (1);`,
    };
    const db = new Database(file);
    try {
      migrateSqlite(db, [...SQLITE_MIGRATIONS, counted]);
      migrateSqlite(db, [...SQLITE_MIGRATIONS, counted]);
      expect(db.prepare(`SELECT count(*) AS n FROM extra`).get()).toEqual({ n: 1 });
      expect(db.pragma('user_version', { simple: true })).toBe(SQLITE_SCHEMA_VERSION + 1);
    } finally {
      db.close();
    }
  });

  test('a migration that fails leaves the file at its old version, with nothing of it applied', async () => {
    const file = await sqlite.newStore();
    const made = new SqliteCatalog(file);
    await made.close();
    const failing: Migration = {
      version: SQLITE_SCHEMA_VERSION + 1,
      description: 'test',
      sql: `CREATE TABLE extra (x INTEGER); INSERT INTO no_such_table VALUES (1);`,
    };
    const db = new Database(file);
    try {
      expect(() => migrateSqlite(db, [...SQLITE_MIGRATIONS, failing])).toThrow(/no such table: no_such_table/);
      expect(db.pragma('user_version', { simple: true })).toBe(SQLITE_SCHEMA_VERSION);
      expect(db.prepare(`SELECT name FROM sqlite_master WHERE name = 'extra'`).get()).toBeUndefined();
    } finally {
      db.close();
    }
    const reopened = new SqliteCatalog(file);
    expect(reopened.id).toBe(made.id);
    await reopened.close();
  });

  test('a file newer than this code is refused, by a worker and by a reader', async () => {
    const file = await sqlite.newStore();
    await new SqliteCatalog(file).close();
    const db = new Database(file);
    db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION + 1}`);
    db.close();
    expect(() => new SqliteCatalog(file)).toThrow(/newer than this tablefate knows/);
    expect(() => new SqliteCatalog(file, { mustExist: true })).toThrow(/newer than this tablefate knows/);
  });

  test("the last migration that builds the name index spells the domain's name-holding states as they are", () => {
    // (The last that builds it is version 6's: a later one that rebuilds it must spell the states as they are then.)
    const index = lastMigrationWith(SQLITE_MIGRATIONS, 'CREATE UNIQUE INDEX tables_name_holder');
    expect(index.version).toBe(6);
    expect(index.sql).toContain(`WHERE state IN (${sqlList(NAME_HOLDING_STATES)})`);
    // Migration 2 is released too: it keeps the states of then (before TRUNCATING).
    expect(SQLITE_MIGRATIONS[1]!.sql).toContain(`WHERE state IN (${sqlList(NAME_HOLDING_STATES.filter((s) => s !== 'TRUNCATING'))})`);
    // Migration 1 is released: its index keeps the states of then (before DRAINING), as the files it made have it.
    expect(SQLITE_MIGRATIONS[0]!.sql).toContain(`WHERE state IN (${sqlList(MIGRATION_1_NAME_HOLDING_STATES)})`);
    expect(UNVERSIONED_SCHEMA).toContain(`WHERE state IN (${sqlList(MIGRATION_1_NAME_HOLDING_STATES)})`);
  });

  test('a file at schema version 1 with a table is migrated to the latest: the table reads back unheld, DRAINING holds its name', async () => {
    const file = await sqlite.newStore();
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const db = new Database(file);
    try {
      db.pragma('journal_mode = WAL');
      migrateSqlite(db, SQLITE_MIGRATIONS.slice(0, 1));
      db.exec(`INSERT INTO meta (key, value) VALUES ('catalog_id', 'c0ffee01');`);
      db.exec(OLD_ROWS);
    } finally {
      db.close();
    }
    expect(userVersion(file)).toBe(1);
    // A reader never migrates: it refuses the file until a worker has, and leaves it as it is.
    expect(() => new SqliteCatalog(file, { mustExist: true })).toThrow(/lacks migrations 2/);
    expect(userVersion(file)).toBe(1);

    const worker = new SqliteCatalog(file);
    const was = catalog;
    catalog = worker;
    try {
      expect(userVersion(file)).toBe(SQLITE_SCHEMA_VERSION);
      expect(worker.id).toBe('c0ffee01');
      expect(await worker.getTable(7)).toEqual(OLD_TABLE);
      expect(await worker.stepOutcome({ runId: 'run-7', step: '1:acquireLock' })).toEqual({ value: { acquired: true } });
      const indexSql = inspectFile(
        file,
        (d) => (d.prepare(`SELECT sql FROM sqlite_master WHERE name = 'tables_name_holder'`).get() as { sql: string }).sql,
      );
      expect(indexSql).toContain(`WHERE state IN (${sqlList(NAME_HOLDING_STATES)})`);

      const { other, hold } = await servesVersion2(worker);
      expect(await worker.changeSetting({ key: 'trash.enabled', namespace: null, value: false, now: 4_000 })).toEqual([
        { key: 'trash.enabled', namespace: null, value: false, updatedAt: 4_000 },
      ]);
      const reader = new SqliteCatalog(file, { mustExist: true });
      try {
        expect(await reader.getTable(7)).toMatchObject({ state: 'DRAINING', hold: null });
        expect((await reader.getTable(other.id))?.hold).toEqual(hold);
      } finally {
        await reader.close();
      }
    } finally {
      catalog = was;
      await worker.close();
    }
  });

  test('a file at schema version 2 with a trashed table is migrated to the latest: its dropper is unknown, a new drop records one', async () => {
    const file = await sqlite.newStore();
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const db = new Database(file);
    try {
      db.pragma('journal_mode = WAL');
      migrateSqlite(db, SQLITE_MIGRATIONS.slice(0, 2));
      db.exec(`INSERT INTO meta (key, value) VALUES ('catalog_id', 'c0ffee02');`);
      db.exec(OLD_ROWS);
      db.exec(TRASHED_BEFORE_V3_ROWS);
    } finally {
      db.close();
    }
    expect(userVersion(file)).toBe(2);
    // A reader never migrates: it refuses the file until a worker has, and leaves it as it is.
    expect(() => new SqliteCatalog(file, { mustExist: true })).toThrow(/lacks migrations 3/);
    expect(userVersion(file)).toBe(2);

    const worker = new SqliteCatalog(file);
    const was = catalog;
    catalog = worker;
    try {
      expect(userVersion(file)).toBe(SQLITE_SCHEMA_VERSION);
      expect(await worker.getTable(7)).toEqual(OLD_TABLE);
      const trashed = await servesVersion3(worker);
      const reader = new SqliteCatalog(file, { mustExist: true });
      try {
        expect(await reader.getTable(7)).toEqual(trashed);
        expect(await reader.getTable(6)).toEqual(OLD_TRASHED_TABLE);
      } finally {
        await reader.close();
      }
    } finally {
      catalog = was;
      await worker.close();
    }
  });
});

// The rules are asynchronous; SQLite's transactions are BEGIN IMMEDIATE ... COMMIT around them, one call at a time
// per file in the process. Without that, a call would join another's open transaction, or wait for its write lock
// with the event loop blocked (and fail after busy_timeout).
describe('SQLite catalog called concurrently in one process', () => {
  afterAll(() => sqlite.cleanUp());

  test('many calls at once, on one catalog and on two of the same file, each apply once and see each other', async () => {
    const file = await sqlite.newStore();
    const a = new SqliteCatalog(file);
    const b = new SqliteCatalog(file);
    try {
      const names = Array.from({ length: 30 }, (_, i) => `n${i}`);
      await Promise.all(names.map((name, i) => locked(`name:ns.${name}`, owner(`create:ns.${name}`), i % 2 ? a : b)));
      const results = await Promise.all(names.map((name, i) => prepare(name, owner(`create:ns.${name}`), undefined, i % 3 ? a : b)));
      const ids = results.map((r) => (r.outcome === 'prepared' ? r.table.id : -1)).sort((x, y) => x - y);
      expect(ids).toEqual(names.map((_, i) => i + 1));
      // A failing call rolls back only its own transaction, while the others go on.
      const moves = await Promise.allSettled(
        results.map((r, i) =>
          (i % 2 ? a : b).transition({
            tableId: r.outcome === 'prepared' ? r.table.id : -1,
            from: ['CREATING'],
            to: 'READY',
            owner: owner(i % 5 ? `create:ns.${names[i]}` : 'not-the-owner'),
            now: 2,
          }),
        ),
      );
      expect(moves.filter((m) => m.status === 'rejected')).toHaveLength(6);
      expect((await b.listTables({ includeTrashed: false })).filter((t) => t.state === 'READY')).toHaveLength(24);
      expect(await a.listLocks()).toHaveLength(60);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
