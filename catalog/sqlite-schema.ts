import Database from 'better-sqlite3';
import { assertCurrent, latestVersion, mustApply, type Migration } from './migrations';

/**
 * The SQLite catalog's schema, as versioned migrations (see migrations.ts), and how they are applied to a file.
 * The version is the file's `PRAGMA user_version`. A file made before versions existed (user_version 0, with
 * tablefate's tables) is at the baseline, migration 1, once checked to be what migration 1 makes.
 *
 * The state list below is written out, not built from domain/states.ts: migration 1 must stay what it was when it
 * ran. test/catalog-sqlite.test.ts checks it matches NAME_HOLDING_STATES; a change there needs a migration that
 * rebuilds the index.
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'tables, the id counter, locks, the journal of step outcomes, meta (the schema before versions)',
    // Written as the unversioned schema was, statement for statement, so that a file it made compares equal.
    sql: `
CREATE TABLE tables (
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
CREATE UNIQUE INDEX tables_name_holder ON tables (namespace, name)
  WHERE state IN ('CREATING', 'READY', 'TRASHING', 'RESTORING', 'CREATE_FAILED');
CREATE INDEX tables_trash ON tables (namespace, name, dropped_at) WHERE state = 'TRASHED';
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE locks (
  resource          TEXT PRIMARY KEY,
  owner_workflow_id TEXT    NOT NULL,
  owner_run_id      TEXT    NOT NULL,
  since             INTEGER NOT NULL
);
CREATE INDEX locks_owner ON locks (owner_run_id);
-- What each call of a workflow run answered, so that the call made again after a lost workflow task answers
-- the same without touching anything (see StepKey).
CREATE TABLE journal (
  run_id  TEXT    NOT NULL,
  step    TEXT    NOT NULL,
  outcome TEXT    NOT NULL,
  at      INTEGER NOT NULL,
  PRIMARY KEY (run_id, step)
);
CREATE INDEX journal_age ON journal (at);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
`,
  },
  {
    version: 2,
    description: 'trash policies: DRAINING holds its name, legal holds on tables, runtime settings, leases',
    sql: `
ALTER TABLE tables ADD COLUMN hold_reason TEXT;
ALTER TABLE tables ADD COLUMN held_at INTEGER;
DROP INDEX tables_name_holder;
CREATE UNIQUE INDEX tables_name_holder ON tables (namespace, name)
  WHERE state IN ('CREATING', 'READY', 'DRAINING', 'TRASHING', 'RESTORING', 'CREATE_FAILED');
-- Runtime settings: namespace '' is the global value.
CREATE TABLE settings (
  key        TEXT    NOT NULL,
  namespace  TEXT    NOT NULL,
  value      TEXT    NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (key, namespace)
);
-- A service's lease on a READY table: a drop waits for it to be released or to expire.
CREATE TABLE leases (
  id          TEXT    PRIMARY KEY,
  table_id    INTEGER NOT NULL,
  holder      TEXT    NOT NULL,
  ttl_seconds INTEGER NOT NULL,
  acquired_at INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL
);
CREATE INDEX leases_table ON leases (table_id, expires_at);
`,
  },
  {
    version: 3,
    description: 'who dropped a table: dropped_by, written with dropped_at by the drop that commits the trash',
    sql: `
ALTER TABLE tables ADD COLUMN dropped_by TEXT;
`,
  },
  {
    version: 4,
    description: "a table's family in the trash: family, what its drop took along (PostgreSQL, with cascade), as the drop said it",
    sql: `
ALTER TABLE tables ADD COLUMN family TEXT;
`,
  },
  {
    version: 5,
    description: 'the tables dropped together as one: dropped_with, the other tables of the drop, by id, written by its commit',
    sql: `
ALTER TABLE tables ADD COLUMN dropped_with TEXT;
`,
  },
  {
    version: 6,
    description:
      'truncates into the trash: TRUNCATING holds its name; truncate_into, the trash entry a truncating table moves its rows to; ' +
      'truncated_from, the table whose rows a trash entry holds',
    sql: `
DROP INDEX tables_name_holder;
CREATE UNIQUE INDEX tables_name_holder ON tables (namespace, name)
  WHERE state IN ('CREATING', 'READY', 'DRAINING', 'TRASHING', 'RESTORING', 'CREATE_FAILED', 'TRUNCATING');
ALTER TABLE tables ADD COLUMN truncate_into INTEGER;
ALTER TABLE tables ADD COLUMN truncated_from INTEGER;
`,
  },
];

export const SCHEMA_VERSION = latestVersion(MIGRATIONS);

/**
 * Brings the file to the last of `migrations`: adopts an unversioned file as the baseline, then applies each
 * migration it has not had, each in a transaction of its own (BEGIN IMMEDIATE: of two processes opening the file
 * together, the second waits for the first's migration and then finds it applied). A migration that fails
 * leaves the file at the version before it. Nothing is written when the file is at the last version already.
 */
export function migrate(db: Database.Database, migrations: readonly Migration[] = MIGRATIONS): void {
  if (userVersion(db) === 0) db.transaction(() => adoptUnversioned(db, migrations[0]!)).immediate();
  for (const migration of migrations) {
    if (!mustApply(migration, userVersion(db), migrations)) continue;
    db.transaction(() => {
      if (!mustApply(migration, userVersion(db), migrations)) return;
      db.exec(migration.sql);
      db.pragma(`user_version = ${migration.version}`);
    }).immediate();
  }
}

/**
 * For readers, who never write: whether the file holds a catalog (false: none at all), which must then be at the
 * last version of `migrations`.
 */
export function checkSchema(db: Database.Database, migrations: readonly Migration[] = MIGRATIONS): boolean {
  let version = userVersion(db);
  if (version === 0) {
    const gaps = baselineGaps(db, migrations[0]!);
    if (gaps.isNew) return false;
    if (gaps.missing.length === 0) version = migrations[0]!.version;
  }
  assertCurrent(version, migrations);
  return true;
}

const userVersion = (db: Database.Database) => db.pragma('user_version', { simple: true }) as number;

interface SchemaObject {
  type: string;
  name: string;
  sql: string;
}

/** The tables and indexes in `db`, in the order they were made. */
const schemaObjects = (db: Database.Database) =>
  db
    .prepare(`SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid`)
    .all() as SchemaObject[];

/** An object's SQL as SQLite keeps it, up to spacing (it keeps the text as written, without IF NOT EXISTS). */
const sameSql = (a: string, b: string) => a.replace(/\s+/g, ' ').trim() === b.replace(/\s+/g, ' ').trim();

/**
 * How an unversioned file stands against the baseline: new (none of the baseline's objects: migration 1 will make
 * them), or the baseline's objects it lacks (a file made by an early version, which made the rest when opened).
 * Throws if one it has is not what the baseline makes: adopting it would pass over that difference silently.
 */
function baselineGaps(db: Database.Database, baseline: Migration): { isNew: boolean; missing: SchemaObject[] } {
  const reference = new Database(':memory:');
  let wanted: SchemaObject[];
  try {
    reference.exec(baseline.sql);
    wanted = schemaObjects(reference);
  } finally {
    reference.close();
  }
  const present = new Map(schemaObjects(db).map((o) => [o.name, o]));
  const missing = wanted.filter((o) => !present.has(o.name));
  for (const object of wanted) {
    const found = present.get(object.name);
    if (found && (found.type !== object.type || !sameSql(found.sql, object.sql))) {
      throw new Error(
        `the catalog's ${found.type} ${found.name} is not the one tablefate's schema version ${baseline.version} makes ` +
          `(it is: ${found.sql}); nothing was changed`,
      );
    }
  }
  return { isNew: missing.length === wanted.length, missing };
}

/** Stamps an unversioned file made by tablefate as the baseline, making the baseline's objects it lacks. */
function adoptUnversioned(db: Database.Database, baseline: Migration): void {
  if (userVersion(db) !== 0) return;
  const gaps = baselineGaps(db, baseline);
  if (gaps.isNew) return;
  for (const object of gaps.missing) db.exec(object.sql);
  db.pragma(`user_version = ${baseline.version}`);
}
