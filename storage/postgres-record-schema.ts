import type { Pool, PoolClient } from 'pg';
import type { Migration } from '../catalog/migrations';
import { migrate, type PgMigrations } from '../catalog/pg-migrations';
import { DOOR_SCHEMA } from './postgres-door-sql';
import { ensureSchema, inNodeTransaction, lockPrepare } from './postgres-node';
import { GARBAGE_SCHEMA, OWN_SCHEMA, SHARDS, TRASH_SCHEMA } from './postgres-record';

/**
 * The record's schema on a storage node, as versioned migrations applied the way the catalog's are
 * (catalog/migrations.ts, catalog/pg-migrations.ts): each once per node, in order, in a transaction of its own, recorded
 * in `tablefate.shards_migrations`. A migration, once released, is never edited: a change is a new one at the end.
 */
export const RECORD_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: "the record of the tables tablefate placed on the node, each by its oid, with its companions' names while parked",
    sql: `
CREATE TABLE shards (
  table_oid oid PRIMARY KEY,
  catalog_id text NOT NULL,
  table_id bigint NOT NULL,
  shard integer NOT NULL,
  live_names jsonb,
  changed_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
  UNIQUE (catalog_id, table_id, shard)
);
`,
  },
  {
    version: 2,
    description:
      'identity by name (the schema, name and owner tablefate gave each table), foreign keys detached in the trash, notes for the doctor',
    // A record that has rows already takes each table's name, as it is now, as the one tablefate gave it.
    sql: `
ALTER TABLE shards ADD COLUMN schema_name text, ADD COLUMN table_name text, ADD COLUMN owner_name text,
  ADD COLUMN foreign_keys jsonb, ADD COLUMN notes jsonb;
UPDATE shards s SET schema_name = n.nspname, table_name = c.relname, owner_name = pg_catalog.pg_get_userbyid(c.relowner)
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid = s.table_oid AND s.schema_name IS NULL;
`,
  },
  {
    version: 3,
    description: 'the SQL door: the requests its procedures make, and the marks that prove which role made each (postgres-door-sql.ts)',
    sql: `
CREATE TABLE sql_requests (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  op text NOT NULL,
  args jsonb NOT NULL,
  table_oid oid,
  requester oid NOT NULL,
  requester_name name NOT NULL,
  session_user_name name NOT NULL,
  application_name text,
  client_addr inet,
  requested_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  request_uuid uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid(),
  state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'planned', 'answered')),
  plan jsonb,
  catalog_id text,
  claimed_by text,
  picked_at timestamptz,
  workflow_id text,
  answer jsonb,
  error_type text,
  sqlstate text,
  message text,
  answered_at timestamptz
);
CREATE INDEX sql_requests_open ON sql_requests (id) WHERE state <> 'answered';
CREATE TABLE tablefate_sql.caller_marks (
  nonce uuid PRIMARY KEY,
  role_name name NOT NULL DEFAULT CURRENT_USER,
  pid integer NOT NULL DEFAULT pg_catalog.pg_backend_pid(),
  xact_start timestamptz NOT NULL DEFAULT pg_catalog.transaction_timestamp()
);
REVOKE ALL ON tablefate_sql.caller_marks FROM PUBLIC;
`,
  },
  {
    version: 4,
    description:
      "the SQL door's trash view: what the catalog says of each table in this node's trash (who dropped it, its expiry, its hold)",
    sql: `
CREATE TABLE sql_trash (
  catalog_id text NOT NULL,
  table_id bigint NOT NULL,
  namespace text NOT NULL,
  name text NOT NULL,
  state text NOT NULL,
  dropped_at timestamptz,
  expires_at timestamptz,
  held_since timestamptz,
  hold_reason text,
  dropped_by text,
  synced_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
  PRIMARY KEY (catalog_id, table_id)
);
`,
  },
  {
    version: 5,
    description:
      "a table's family out of the live area: the views moved with it, what live tables had on it, detached (postgres-family.ts), also in the SQL door's trash view; the keys a recall put back NOT VALID, until validated",
    sql: `ALTER TABLE shards ADD COLUMN family jsonb, ADD COLUMN keys_to_validate jsonb;
ALTER TABLE sql_trash ADD COLUMN family jsonb;`,
  },
  {
    version: 6,
    description:
      'a single partition (postgres-partition.ts): the partitioned table a live one belongs to, and, out of the live area, its parent by oid and name, its bounds, and what its last recall said of it',
    sql: `ALTER TABLE shards ADD COLUMN partition_of oid, ADD COLUMN partition jsonb;`,
  },
  {
    version: 7,
    description:
      'a namespace dropped whole (postgres-namespace.ts): the schema its tables were dropped with, set aside under a name of its own',
    sql: `ALTER TABLE shards ADD COLUMN parked_schema jsonb;`,
  },
  {
    version: 8,
    description:
      "a move's renames run on the node in one call (postgres-steps.ts): each record write and ALTER of the tables moved as one, in order",
    // SECURITY INVOKER (the default): it can do nothing its caller could not. Each ALTER's kind is one of a fixed few,
    // each name quoted (%I): a step names relations, never says SQL.
    sql: `
CREATE FUNCTION apply_steps(steps jsonb) RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $steps$
DECLARE
  step jsonb;
  kind text;
  candidates text[];
  took text;
  n integer;
  answers jsonb := '[]';
BEGIN
  FOR step IN SELECT value FROM pg_catalog.jsonb_array_elements(steps) LOOP
    took := NULL;
    IF step ? 'record' THEN
      UPDATE tablefate.shards
         SET schema_name = step->'record'->>'schema', table_name = step->'record'->>'table',
             live_names = CASE WHEN step->'record' ? 'liveNames' THEN step->'record'->'liveNames' ELSE live_names END,
             changed_at = CASE WHEN step->'record' ? 'moved' THEN pg_catalog.now() ELSE changed_at END,
             notes = CASE WHEN step->'record' ? 'moved' THEN NULL ELSE notes END
       WHERE table_oid = (step->'record'->>'oid')::pg_catalog.oid;
    ELSE
      kind := step->>'alter';
      IF kind IS NULL OR kind NOT IN ('TABLE', 'INDEX', 'SEQUENCE', 'VIEW', 'MATERIALIZED VIEW') THEN
        RAISE EXCEPTION 'tablefate.apply_steps: a step must write the record or ALTER a TABLE, INDEX, SEQUENCE, VIEW or MATERIALIZED VIEW: %', step;
      END IF;
      IF step ? 'setSchema' THEN
        EXECUTE pg_catalog.format('ALTER %s %I.%I SET SCHEMA %I', kind, step->>'schema', step->>'name', step->>'setSchema');
      ELSIF step ? 'rename' THEN
        EXECUTE pg_catalog.format('ALTER %s %I.%I RENAME TO %I', kind, step->>'schema', step->>'name', step->>'rename');
        took := step->>'rename';
      ELSIF step ? 'renameFree' THEN
        -- The first candidate no relation of the schema has, else the last one numbered (_2, _3...) until one is free.
        IF NOT (step ? 'ifExists') OR EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace s ON s.oid = c.relnamespace
                                                WHERE s.nspname = step->>'schema' AND c.relname = step->>'name') THEN
          candidates := ARRAY(SELECT pg_catalog.jsonb_array_elements_text(step->'renameFree'));
          n := 1;
          LOOP
            took := CASE WHEN n <= pg_catalog.array_length(candidates, 1) THEN candidates[n]
                         ELSE pg_catalog.left(candidates[pg_catalog.array_length(candidates, 1)], 60) || '_' || (n - pg_catalog.array_length(candidates, 1) + 1) END;
            EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace s ON s.oid = c.relnamespace
                                   WHERE s.nspname = step->>'schema' AND c.relname = took);
            n := n + 1;
          END LOOP;
          EXECUTE pg_catalog.format('ALTER %s %I.%I RENAME TO %I', kind, step->>'schema', step->>'name', took);
        END IF;
      ELSE
        RAISE EXCEPTION 'tablefate.apply_steps: an ALTER step must rename (rename, renameFree) or setSchema: %', step;
      END IF;
    END IF;
    answers := answers || pg_catalog.jsonb_build_array(took);
  END LOOP;
  RETURN answers;
END
$steps$;
REVOKE ALL ON FUNCTION apply_steps(jsonb) FROM PUBLIC;
`,
  },
];

/**
 * The record's columns at each version a node can hold it without its versions recorded: made before they were, at
 * migration 1's columns or at migration 2's. A record made since has its versions, whatever migrations come later.
 */
export const UNVERSIONED_RECORD_COLUMNS: Readonly<Record<number, readonly string[]>> = {
  1: ['table_oid', 'catalog_id', 'table_id', 'shard', 'live_names', 'changed_at'],
  2: [
    'table_oid',
    'catalog_id',
    'table_id',
    'shard',
    'live_names',
    'changed_at',
    'schema_name',
    'table_name',
    'owner_name',
    'foreign_keys',
    'notes',
  ],
};

export const RECORD_VERSIONS = `"${OWN_SCHEMA}"."shards_migrations"`;

const RECORD_SCHEMA: PgMigrations = {
  schema: OWN_SCHEMA,
  versions: RECORD_VERSIONS,
  migrations: RECORD_MIGRATIONS,
  what: `${OWN_SCHEMA}.shards, tablefate's record of the tables it placed on this node,`,
  lock: lockPrepare,
  unversioned: unversionedRecord,
};

/**
 * Makes tablefate's own schemas on the node (idempotent) and brings its record to this code's version. (The SQL door's
 * routines are the door's to make, as it starts: postgres-door-sql.ts, prepareDoor.)
 */
export async function prepareRecord(pool: Pool): Promise<void> {
  await inNodeTransaction(pool, async (c) => {
    await lockPrepare(c);
    for (const schema of [OWN_SCHEMA, TRASH_SCHEMA, GARBAGE_SCHEMA, DOOR_SCHEMA]) await ensureSchema(c, schema);
  });
  await migrate(pool, RECORD_SCHEMA);
}

/**
 * The version of a record whose versions were never recorded, by its columns (0: no record); one whose columns are no
 * version's is refused, with nothing changed, rather than passed over.
 */
async function unversionedRecord(c: PoolClient): Promise<number> {
  const { rows } = await c.query<{ name: string }>(
    `SELECT attname AS name FROM pg_catalog.pg_attribute
      WHERE attrelid = pg_catalog.to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
    [SHARDS],
  );
  if (rows.length === 0) return 0;
  const found = rows.map((r) => r.name);
  const sameColumns = (wanted: readonly string[]) => wanted.length === found.length && wanted.every((name) => found.includes(name));
  const version = Object.entries(UNVERSIONED_RECORD_COLUMNS).find(([, columns]) => sameColumns(columns))?.[0];
  if (version === undefined) {
    throw new Error(
      `${OWN_SCHEMA}.shards has the columns ${found.join(', ')}, not those of any version of tablefate's record; nothing was changed`,
    );
  }
  return Number(version);
}
