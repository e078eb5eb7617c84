import { latestVersion, type Migration } from './migrations';

/**
 * The PostgreSQL catalog's schema, as versioned migrations (see migrations.ts). A migration, once released, is
 * never edited: a change is a new one at the end. Each is applied once per database, in order, in a transaction
 * of its own, and recorded in `schema_migrations` (see migrate() in postgres.ts).
 *
 * The state lists below are written out, not built from domain/states.ts, for that reason: migration 1 must
 * stay what it was when it ran. test/catalog-postgres.test.ts checks they match the domain's constants; a change of
 * NAME_HOLDING_STATES or TABLE_STATES needs a migration that rebuilds the index or the check.
 */

/** The states migration 1 lets a table be in, and those in which it holds its name (TABLE_STATES, NAME_HOLDING_STATES then). */
export const MIGRATION_1_STATES = ['CREATING', 'READY', 'TRASHING', 'TRASHED', 'RESTORING', 'PURGING', 'PURGED', 'CREATE_FAILED'];
export const MIGRATION_1_NAME_HOLDING_STATES = ['CREATING', 'READY', 'TRASHING', 'RESTORING', 'CREATE_FAILED'];

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'tables, the id counter, locks, the journal of step outcomes, meta',
    sql: `
CREATE TABLE tables (
  id          BIGINT  PRIMARY KEY,
  namespace   TEXT    NOT NULL,
  name        TEXT    NOT NULL,
  state       TEXT    NOT NULL CHECK (state IN ('CREATING', 'READY', 'TRASHING', 'TRASHED', 'RESTORING', 'PURGING', 'PURGED', 'CREATE_FAILED')),
  params      JSON    NOT NULL,
  placement   JSON    NOT NULL,
  created_at  BIGINT  NOT NULL,
  dropped_at  BIGINT,
  expire_at   BIGINT,
  purged_at   BIGINT,
  updated_at  BIGINT  NOT NULL
);
-- A name belongs to at most one table that holds it; the database, not the code, keeps that true.
CREATE UNIQUE INDEX tables_name_holder ON tables (namespace, name)
  WHERE state IN ('CREATING', 'READY', 'TRASHING', 'RESTORING', 'CREATE_FAILED');
CREATE INDEX tables_trash ON tables (namespace, name, dropped_at) WHERE state = 'TRASHED';

-- The id counter: only ever incremented, so an id is never given twice (a purged table keeps its row).
CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL);

CREATE TABLE locks (
  resource          TEXT   PRIMARY KEY,
  owner_workflow_id TEXT   NOT NULL,
  owner_run_id      TEXT   NOT NULL,
  since             BIGINT NOT NULL
);
CREATE INDEX locks_owner ON locks (owner_run_id);

-- What each call of a workflow run answered, so that the call made again after a lost workflow task answers
-- the same without touching anything (see StepKey). The outcome is the JSON text, kept as written; it is
-- NULL only inside the transaction that claimed the step and is making the call.
CREATE TABLE journal (
  run_id  TEXT   NOT NULL,
  step    TEXT   NOT NULL,
  outcome TEXT,
  at      BIGINT NOT NULL,
  PRIMARY KEY (run_id, step)
);
CREATE INDEX journal_age ON journal (at);

CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
`,
  },
  {
    version: 2,
    description: 'trash policies: DRAINING (a state, holding its name), legal holds on tables, runtime settings, leases',
    sql: `
ALTER TABLE tables DROP CONSTRAINT tables_state_check;
ALTER TABLE tables ADD CONSTRAINT tables_state_check
  CHECK (state IN ('CREATING', 'READY', 'DRAINING', 'TRASHING', 'TRASHED', 'RESTORING', 'PURGING', 'PURGED', 'CREATE_FAILED'));
ALTER TABLE tables ADD COLUMN hold_reason TEXT;
ALTER TABLE tables ADD COLUMN held_at BIGINT;
DROP INDEX tables_name_holder;
CREATE UNIQUE INDEX tables_name_holder ON tables (namespace, name)
  WHERE state IN ('CREATING', 'READY', 'DRAINING', 'TRASHING', 'RESTORING', 'CREATE_FAILED');

-- Runtime settings: namespace '' is the global value. The value is its JSON text.
CREATE TABLE settings (
  key        TEXT   NOT NULL,
  namespace  TEXT   NOT NULL,
  value      TEXT   NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (key, namespace)
);

-- A service's lease on a READY table: a drop waits for it to be released or to expire.
CREATE TABLE leases (
  id          TEXT   PRIMARY KEY,
  table_id    BIGINT NOT NULL,
  holder      TEXT   NOT NULL,
  ttl_seconds INT    NOT NULL,
  acquired_at BIGINT NOT NULL,
  expires_at  BIGINT NOT NULL
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
ALTER TABLE tables DROP CONSTRAINT tables_state_check;
ALTER TABLE tables ADD CONSTRAINT tables_state_check
  CHECK (state IN ('CREATING', 'READY', 'DRAINING', 'TRASHING', 'TRASHED', 'RESTORING', 'PURGING', 'PURGED', 'CREATE_FAILED', 'TRUNCATING'));
DROP INDEX tables_name_holder;
CREATE UNIQUE INDEX tables_name_holder ON tables (namespace, name)
  WHERE state IN ('CREATING', 'READY', 'DRAINING', 'TRASHING', 'RESTORING', 'CREATE_FAILED', 'TRUNCATING');
ALTER TABLE tables ADD COLUMN truncate_into BIGINT;
ALTER TABLE tables ADD COLUMN truncated_from BIGINT;
`,
  },
];

/** The states migration 2 lets a table be in, and those in which it holds its name (released: never edited). */
export const MIGRATION_2_STATES = [
  'CREATING',
  'READY',
  'DRAINING',
  'TRASHING',
  'TRASHED',
  'RESTORING',
  'PURGING',
  'PURGED',
  'CREATE_FAILED',
];
export const MIGRATION_2_NAME_HOLDING_STATES = ['CREATING', 'READY', 'DRAINING', 'TRASHING', 'RESTORING', 'CREATE_FAILED'];

/** The states migration 6 lets a table be in, and those in which it holds its name: TABLE_STATES and NAME_HOLDING_STATES now. */
export const MIGRATION_6_STATES = [...MIGRATION_2_STATES, 'TRUNCATING'];
export const MIGRATION_6_NAME_HOLDING_STATES = [...MIGRATION_2_NAME_HOLDING_STATES, 'TRUNCATING'];

/** The schema version this code needs: the last migration's. */
export const SCHEMA_VERSION = latestVersion(MIGRATIONS);
