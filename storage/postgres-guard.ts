import type { ClientBase } from 'pg';
import { InvalidInputError, TableBusyError } from '../domain/errors';
import { POSTGRES_OWN_SCHEMAS } from '../domain/deployment';
import { ident, literal } from '../catalog/pg-session';
import {
  coverTables,
  FUNCTION_OPTIONS,
  KEEP_DROPPED_TRIGGERS_CALL,
  KEEP_TRIGGERS_CALL,
  TRUNCATE_GUARD_FUNCTIONS,
  TRUNCATE_GUARD_SQL,
  truncateGuardState,
  uncoverTables,
  type TruncateGuardState,
} from './postgres-guard-truncate';

export { RECORD_TRIGGER, TRUNCATE_TRIGGER, type TruncateGuardState } from './postgres-guard-truncate';

/**
 * The guard (issue 29): an event trigger pair on a node's database that refuses the bare DDL that would lose or strand a
 * table tablefate manages, the protection pgtrashcan and pg_recyclebin give by hooking DROP. With it on, psql's
 * `DROP TABLE shop.orders` of a tablefate table fails, names the table and says to `tablefate drop` it; the table stays
 * whole. Tables tablefate does not manage are not its business: their DDL goes through.
 *
 * How tablefate's own statements pass, without any session flag: tablefate keeps `tablefate.shards` true before each of
 * its DDL statements, in the same transaction (storage/postgres-names.ts, postgres-moves.ts): it writes a table's new schema and name before
 * it renames or moves it, and deletes the record before it drops it. So, at the end of a statement:
 *
 * - `ddl_command_end` (refuse_move): a managed table the statement touched (by its oid, or, for `ALTER SCHEMA`, by its
 *   schema's) that is no longer where its record says (schema_name, table_name) was renamed or moved by someone else:
 *   `ALTER TABLE ... RENAME`, `ALTER TABLE ... SET SCHEMA`, `ALTER SCHEMA ... RENAME`. So is tablefate's record itself
 *   when `tablefate.shards` is no longer there and the touched table is it. Any other DDL of a managed table (a column
 *   added, an index made, a grant) changes nothing the record says, and goes through.
 * - `sql_drop` (refuse_drop): a dropped table whose oid still has a record was dropped by someone else: `DROP TABLE`,
 *   `DROP SCHEMA ... CASCADE`, `DROP OWNED BY`, any cascade that reaches one. So is a column of one dropped by a cascade
 *   (a `DROP TYPE ... CASCADE`: the table would stay, without the column), and any of tablefate's own schemas or its
 *   record (looked for first: the record may be gone with them by then).
 *
 * - Partitions: refuse_move refuses an ALTER TABLE of a managed partition's partitioned table (`partition_of`) after
 *   which it is none of its partitions, in a session holding both ACCESS EXCLUSIVE (a plain DETACH PARTITION; the
 *   second half of a CONCURRENTLY one goes through, its first having committed). refuse_drop refuses a DROP in a session
 *   holding a managed partitioned table ACCESS EXCLUSIVE that it did not drop: by sql_drop a dropped partition's
 *   pg_inherits row is gone, and that lock, which PostgreSQL takes to drop a partition, is what is left of it.
 *
 * Only the objects the statement touched are looked up, never the whole record: a table already out of place (see
 * `tablefate doctor`) holds up only DDL of itself, until it is put back.
 *
 * TRUNCATE, which fires no event trigger, is refused by a trigger of each guarded table (postgres-guard-truncate.ts);
 * the event triggers above refuse the DDL that would disable, demote, rename, replace or drop it.
 *
 * The functions are SECURITY DEFINER, owned by the superuser who installed them (the DDL's user may not even see
 * `tablefate.shards`), with search_path pinned to pg_catalog and every name qualified. They live in a schema of their
 * own, `tablefate_guard`, outside tablefate's schemas and owned by no role tablefate runs as: a `DROP SCHEMA tablefate
 * CASCADE` or `DROP OWNED BY <worker>` could otherwise drop the guard along with what it guards.
 */

export const GUARD_SCHEMA = POSTGRES_OWN_SCHEMAS.guard;
/** The event triggers (database-wide names) and the functions they run. */
export const GUARD_TRIGGERS = [
  { name: 'tablefate_guard_move', event: 'ddl_command_end', fn: 'refuse_move' },
  { name: 'tablefate_guard_drop', event: 'sql_drop', fn: 'refuse_drop' },
] as const;
/** Every function the guard installs: the two event triggers', the two they share, and those of TRUNCATE. */
const GUARD_FUNCTIONS = [
  'refuse_move()',
  'refuse_drop()',
  'refusal(text, text, bigint, integer, text, text, text)',
  'record_names_places()',
  ...TRUNCATE_GUARD_FUNCTIONS,
] as const;

/** Where the guard stands on one database. */
export interface GuardState {
  /**
   * Every part is there: both event triggers, each running the guard's function, the functions of TRUNCATE, and the
   * record's trigger that covers each table recorded (once there is a record).
   */
  installed: boolean;
  /**
   * Installed, neither event trigger disabled (`ALTER EVENT TRIGGER ... DISABLE`), and every table it guards refusing
   * TRUNCATE (as far as this session may read tablefate's record).
   */
  enabled: boolean;
  /** Each of the guard's event triggers found, with whether it fires. */
  triggers: Array<{ name: string; event: string; enabled: boolean }>;
  truncate: TruncateGuardState;
}

/** A guard command on one node: where (its url without the password) and how the guard stands there afterwards. */
export interface GuardNodeResult extends GuardState {
  node: string;
  url: string;
}

export type GuardAction = 'install' | 'status' | 'remove';

const { own: OWN, trash: TRASH, garbage: GARBAGE } = POSTGRES_OWN_SCHEMAS;
const RECORD = `${OWN}.shards`;
const INSUFFICIENT_PRIVILEGE = '42501';

const G = ident(GUARD_SCHEMA);
const OWN_SCHEMAS = `ARRAY[${[OWN, TRASH, GARBAGE].map(literal).join(', ')}]`;
const HINT =
  "tablefate's guard (tablefate guard status) refuses DDL that would drop, rename or move a table tablefate manages; " +
  "tablefate's own statements pass";

/**
 * The message of a refusal of the statement `tag` (`DROP TABLE`...), which would do `effect` (`drop it`) to a managed
 * table, named by its record: where tablefate put it, whether that is live, the trash or the garbage, its table id and
 * shard, and what to run instead (`advice`, or what fits the area and whether the statement drops or moves).
 */
const DOOR = POSTGRES_OWN_SCHEMAS.door;
const REFUSAL = `
CREATE OR REPLACE FUNCTION ${G}.refusal(schema_name text, table_name text, table_id bigint, shard integer, tag text, effect text, advice text)
RETURNS text ${FUNCTION_OPTIONS} IMMUTABLE AS $guard$
DECLARE
  shown text := pg_catalog.format('%I.%I', schema_name, table_name);
  moving boolean := tag LIKE 'ALTER %';
  -- A table of several shards is <name>_<shard> live: its tablefate name is not the table's, and describe says it.
  drop_it text := CASE WHEN table_name LIKE '%\\_' || shard THEN pg_catalog.format('"tablefate drop" of table %s ("tablefate describe %s" names it)', table_id, table_id)
                       ELSE pg_catalog.format('"tablefate drop %s" (in SQL: CALL ${DOOR}.drop(%L))', shown, shown) END;
  what text;
BEGIN
  IF schema_name = ${literal(TRASH)} THEN
    what := pg_catalog.format('%s is table %s (shard %s) in tablefate''s trash', shown, table_id, shard);
    advice := coalesce(advice, CASE WHEN moving THEN pg_catalog.format('"tablefate recall %s [schema.name]" brings it back live', table_id)
                                    ELSE pg_catalog.format('"tablefate purge %s" deletes it for good', table_id) END);
  ELSIF schema_name = ${literal(GARBAGE)} THEN
    what := pg_catalog.format('%s is table %s (shard %s) in tablefate''s garbage, its purge under way', shown, table_id, shard);
    advice := coalesce(advice, pg_catalog.format('"tablefate purge %s" finishes it', table_id));
  ELSE
    what := pg_catalog.format('%s is a live table tablefate manages (table %s, shard %s)', shown, table_id, shard);
    advice := coalesce(advice, CASE WHEN moving THEN pg_catalog.format('"tablefate rename %s <schema.new_name>" renames or moves it', table_id)
                                    ELSE pg_catalog.format('drop it with %s: the trash keeps it, and "tablefate recall" brings it back', drop_it) END);
  END IF;
  RETURN pg_catalog.format('tablefate: %s: the guard refuses this %s, which would %s; %s', what, tag, effect, advice);
END
$guard$`;

/**
 * Whether the record says where each table is (schema_name, table_name): not while the record is at its first migration
 * (storage/postgres-record-schema.ts: a new node's next one adds them), nor on a node whose record no worker has
 * migrated since. Then there is nothing to judge by, and nothing is refused.
 */
const RECORD_NAMES_PLACES = `
CREATE OR REPLACE FUNCTION ${G}.record_names_places() RETURNS boolean ${FUNCTION_OPTIONS} STABLE AS $guard$
BEGIN
  RETURN (SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute
           WHERE attrelid = pg_catalog.to_regclass(${literal(RECORD)}) AND attname IN ('schema_name', 'table_name') AND NOT attisdropped) = 2;
END
$guard$`;

/** Whether this session holds the relation `oid` (an SQL expression) ACCESS EXCLUSIVE. */
const holdsExclusive = (oid: string) => `EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
     WHERE l.pid = pg_catalog.pg_backend_pid() AND l.locktype = 'relation' AND l.relation = ${oid} AND l.mode = 'AccessExclusiveLock'
       AND l.granted AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()))`;

/** The relations a statement touched (its `cmd`, at ddl_command_end): each it named, and each in a schema it altered. */
const TOUCHED = `touched AS (
    SELECT cmd.objid AS oid FROM cmd WHERE cmd.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
    UNION
    SELECT c.oid FROM cmd JOIN pg_catalog.pg_class c ON c.relnamespace = cmd.objid
     WHERE cmd.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND cmd.command_tag = 'ALTER SCHEMA')`;

const REFUSE_MOVE = `
CREATE OR REPLACE FUNCTION ${G}.refuse_move() RETURNS event_trigger ${FUNCTION_OPTIONS} AS $guard$
DECLARE
  hit record;
BEGIN
  IF pg_catalog.to_regclass(${literal(RECORD)}) IS NULL THEN
    -- No record (tablefate never ran here), or this statement took it away: a table with the record's columns, touched,
    -- in tablefate's schema or named as the record, is it.
    WITH cmd AS MATERIALIZED (SELECT classid, objid, command_tag FROM pg_catalog.pg_event_trigger_ddl_commands()),
    ${TOUCHED}
    SELECT n.nspname, c.relname INTO hit
      FROM touched t
      JOIN pg_catalog.pg_class c ON c.oid = t.oid AND c.relkind = 'r'
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE (n.nspname = ${literal(OWN)} OR c.relname = 'shards')
       AND (SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute a
             WHERE a.attrelid = c.oid AND NOT a.attisdropped AND a.attname IN ('table_oid', 'catalog_id', 'table_id', 'shard', 'live_names')) = 5
     LIMIT 1;
    IF FOUND THEN
      RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', HINT = ${literal(HINT)},
        MESSAGE = pg_catalog.format('tablefate: ${RECORD} is tablefate''s record of the tables it manages: the guard refuses this %s, which would move it to %I.%I',
                                    TG_TAG, hit.nspname, hit.relname);
    END IF;
    RETURN;
  END IF;
  IF NOT ${G}.record_names_places() THEN
    RETURN;
  END IF;
  -- A managed table this statement touched (or one in a schema it altered) that is not where its record says any more.
  WITH cmd AS MATERIALIZED (SELECT classid, objid, command_tag FROM pg_catalog.pg_event_trigger_ddl_commands()),
  ${TOUCHED}
  SELECT s.schema_name, s.table_name, s.table_id, s.shard, n.nspname, c.relname, pg_catalog.count(*) OVER () AS n INTO hit
    FROM touched t
    JOIN ${ident(OWN)}."shards" s ON s.table_oid = t.oid
    JOIN pg_catalog.pg_class c ON c.oid = s.table_oid AND c.relkind IN ('r', 'p')
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname <> s.schema_name OR c.relname <> s.table_name
   ORDER BY s.schema_name, s.table_name
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', HINT = ${literal(HINT)},
      MESSAGE = ${G}.refusal(hit.schema_name, hit.table_name, hit.table_id, hit.shard, TG_TAG,
        pg_catalog.format('leave it at %I.%I', hit.nspname, hit.relname)
          || CASE WHEN hit.n > 1 THEN pg_catalog.format(' (and %s more tables tablefate manages)', hit.n - 1) ELSE '' END, NULL);
  END IF;
  -- A managed partition that is no longer one of the partitioned table the statement altered (ALTER TABLE ... DETACH
  -- PARTITION): tablefate clears partition_of before its own DETACH. (Not asked of a record older than the column.)
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid = pg_catalog.to_regclass(${literal(RECORD)})
                AND attname = 'partition_of' AND NOT attisdropped) THEN
    WITH cmd AS MATERIALIZED (SELECT classid, objid, command_tag FROM pg_catalog.pg_event_trigger_ddl_commands()),
    ${TOUCHED}
    SELECT s.schema_name, s.table_name, s.table_id, s.shard, n.nspname, p.relname INTO hit
      FROM touched t
      JOIN ${ident(OWN)}."shards" s ON s.partition_of = t.oid
      JOIN pg_catalog.pg_class p ON p.oid = t.oid JOIN pg_catalog.pg_namespace n ON n.oid = p.relnamespace
     WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i WHERE i.inhrelid = s.table_oid AND i.inhparent = s.partition_of)
       -- DETACH locks both ACCESS EXCLUSIVE: a record out of date (a DETACH made with the guard off) holds up no other DDL
       -- of the partitioned table. (The second half of a DETACH ... CONCURRENTLY locks the partitioned table less, and
       -- goes through: its first half has committed, and refused it would leave the partition pending detach.)
       AND ${holdsExclusive('s.table_oid')} AND ${holdsExclusive('t.oid')}
     ORDER BY s.schema_name, s.table_name
     LIMIT 1;
    IF FOUND THEN
      RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', HINT = ${literal(HINT)},
        MESSAGE = ${G}.refusal(hit.schema_name, hit.table_name, hit.table_id, hit.shard, TG_TAG,
          pg_catalog.format('detach it from %I.%I', hit.nspname, hit.relname),
          pg_catalog.format('"tablefate drop %I.%I" detaches it into the trash, and "tablefate recall" attaches it again',
                            hit.schema_name, hit.table_name));
    END IF;
  END IF;
  ${KEEP_TRIGGERS_CALL}
END
$guard$`;

const REFUSE_DROP = `
CREATE OR REPLACE FUNCTION ${G}.refuse_drop() RETURNS event_trigger ${FUNCTION_OPTIONS} AS $guard$
DECLARE
  hit record;
BEGIN
  -- tablefate's own schemas and record, first: the record may be gone with this statement already.
  SELECT d.object_type, d.object_identity INTO hit
    FROM pg_catalog.pg_event_trigger_dropped_objects() d
   WHERE (d.object_type = 'schema' AND d.object_identity = ANY (${OWN_SCHEMAS}))
      OR (d.object_type = 'table' AND d.object_identity = ${literal(RECORD)})
   ORDER BY d.object_type, d.object_identity
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', HINT = ${literal(HINT)},
      MESSAGE = pg_catalog.format('tablefate: %s %s is tablefate''s own (%s): the guard refuses this %s, which would drop it', hit.object_type,
        hit.object_identity, CASE hit.object_identity WHEN ${literal(TRASH)} THEN 'its trash' WHEN ${literal(GARBAGE)} THEN 'its garbage'
                                  ELSE 'its record of the tables it manages' END, TG_TAG);
  END IF;
  -- A schema a namespace's drop set aside with its tables (postgres-namespace.ts), while any of them waits in the trash.
  -- (Read through to_jsonb: a record older than its column has none, and this must not fail every DROP.)
  IF pg_catalog.to_regclass(${literal(RECORD)}) IS NOT NULL THEN
    SELECT d.object_identity, s.table_id INTO hit
      FROM pg_catalog.pg_event_trigger_dropped_objects() d
      JOIN ${ident(OWN)}."shards" s ON pg_catalog.to_jsonb(s) -> 'parked_schema' ->> 'parked' = d.object_identity
     WHERE d.object_type = 'schema'
     LIMIT 1;
    IF FOUND THEN
      RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', HINT = ${literal(HINT)},
        MESSAGE = pg_catalog.format('tablefate: schema %s holds what a namespace''s drop set aside with table %s, in the trash: the guard '
          'refuses this %s, which would drop it; "tablefate recall %s" brings it back, "tablefate purge %s" of its tables drops it',
          hit.object_identity, hit.table_id, TG_TAG, hit.table_id, hit.table_id);
    END IF;
  END IF;
  IF pg_catalog.to_regclass(${literal(RECORD)}) IS NULL OR NOT ${G}.record_names_places() THEN
    RETURN;
  END IF;
  -- A managed table dropped (its record is there: tablefate deletes it before its own DROP TABLE), or a column of one
  -- dropped by a cascade from something else (a DROP TYPE ... CASCADE); its own ALTER TABLE ... DROP COLUMN goes through.
  WITH d AS MATERIALIZED (
    SELECT objid, objsubid, address_names FROM pg_catalog.pg_event_trigger_dropped_objects()
     WHERE classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND (objsubid = 0 OR NOT original))
  -- (A record written by hand may lack the names: the table is then named as it is.)
  SELECT coalesce(s.schema_name, d.address_names[1]) AS schema_name, coalesce(s.table_name, d.address_names[2]) AS table_name,
         s.table_id, s.shard, d.objsubid, d.address_names[3] AS column_name,
         pg_catalog.count(*) OVER () AS n INTO hit
    FROM ${ident(OWN)}."shards" s JOIN d ON d.objid = s.table_oid
   ORDER BY d.objsubid, s.schema_name, s.table_name
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', HINT = ${literal(HINT)},
      MESSAGE = ${G}.refusal(hit.schema_name, hit.table_name, hit.table_id, hit.shard, TG_TAG,
        CASE WHEN hit.objsubid <> 0 THEN pg_catalog.format('drop its column %s', hit.column_name) ELSE 'drop it' END
          || CASE WHEN hit.n > 1 THEN pg_catalog.format(' (and %s more tables tablefate manages)', hit.n - 1) ELSE '' END,
        CASE WHEN hit.objsubid <> 0 THEN pg_catalog.format('drop the column by itself first (ALTER TABLE %I.%I DROP COLUMN %I)',
                                                           hit.schema_name, hit.table_name, hit.column_name)
             WHEN TG_TAG = 'DROP SCHEMA' THEN pg_catalog.format('"tablefate drop --namespace %s" trashes the schema whole instead, '
               'its tables, views and everything else it holds, and "tablefate recall" brings it all back', pg_catalog.quote_ident(hit.schema_name)) END);
  END IF;
  -- A partition of a managed partitioned table. Its pg_inherits row is gone by now, but PostgreSQL locks the partitioned
  -- table ACCESS EXCLUSIVE to drop one, and this session holds that lock: a managed partitioned table so locked, that
  -- the statement neither dropped nor dropped a constraint or trigger of (a key that referenced it, say).
  WITH d AS MATERIALIZED (SELECT objid, object_type, is_temporary, address_names FROM pg_catalog.pg_event_trigger_dropped_objects())
  SELECT s.schema_name, s.table_name, s.table_id, s.shard, part.address_names[1] AS part_schema, part.address_names[2] AS part_name INTO hit
    FROM d part
    CROSS JOIN ${ident(OWN)}."shards" s
    JOIN pg_catalog.pg_class p ON p.oid = s.table_oid AND p.relkind = 'p'
    JOIN pg_catalog.pg_namespace n ON n.oid = p.relnamespace
   WHERE part.object_type = 'table' AND NOT part.is_temporary
     AND ${holdsExclusive('s.table_oid')}
     AND NOT EXISTS (SELECT 1 FROM d x WHERE x.objid = s.table_oid
                        OR (x.object_type IN ('table constraint', 'trigger') AND x.address_names[1] = n.nspname AND x.address_names[2] = p.relname))
   ORDER BY s.schema_name, s.table_name, 5, 6
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', HINT = ${literal(HINT)},
      MESSAGE = ${G}.refusal(hit.schema_name, hit.table_name, hit.table_id, hit.shard, TG_TAG,
        pg_catalog.format('drop its partition %I.%I', hit.part_schema, hit.part_name),
        CASE WHEN hit.schema_name NOT IN (${literal(TRASH)}, ${literal(GARBAGE)}) THEN
          pg_catalog.format('adopt the partition ("tablefate adopt %I.%I") and drop it with "tablefate drop": the trash keeps it, and its recall attaches it again',
                            hit.part_schema, hit.part_name) END);
  END IF;
  ${KEEP_DROPPED_TRIGGERS_CALL}
END
$guard$`;

/** Installing or removing the guard needs a role that may create (and drop) event triggers: on PostgreSQL, a superuser. */
export class GuardPrivilegeError extends InvalidInputError {
  constructor(action: GuardAction, node: string, role: string, detail?: string) {
    super(
      `guard ${action} on ${node}: role ${role} may not ${action === 'install' ? 'create' : 'drop'} event triggers` +
        (detail ? ` (${detail})` : '') +
        `: PostgreSQL lets only a superuser run ${action === 'install' ? 'CREATE' : 'DROP'} EVENT TRIGGER. ` +
        `Run it as one: tablefate guard ${action} --node ${node} --url postgres://<superuser>@<host>/<the node's database>`,
    );
  }
}

/** How the guard stands on the database `c` is connected to. Needs no privilege: pg_event_trigger is readable by all. */
export async function guardState(c: ClientBase): Promise<GuardState> {
  const { rows } = await c.query<{ name: string; event: string; enabled: boolean; ours: boolean }>(
    `SELECT t.evtname AS name, t.evtevent AS event, t.evtenabled <> 'D' AS enabled,
            (p.pronamespace = pg_catalog.to_regnamespace($2) AND p.proname = ANY ($3)) AS ours
       FROM pg_catalog.pg_event_trigger t JOIN pg_catalog.pg_proc p ON p.oid = t.evtfoid
      WHERE t.evtname = ANY ($1) ORDER BY t.evtname`,
    [GUARD_TRIGGERS.map((t) => t.name), ident(GUARD_SCHEMA), GUARD_TRIGGERS.map((t) => t.fn)],
  );
  const truncate = await truncateGuardState(c);
  const installed =
    GUARD_TRIGGERS.every((t) => rows.some((r) => r.name === t.name && r.event === t.event && r.ours)) &&
    truncate.functions &&
    truncate.recordTrigger !== false;
  return {
    installed,
    enabled: installed && rows.every((r) => r.enabled) && (truncate.uncovered ?? []).length === 0,
    triggers: rows.map((r) => ({ name: r.name, event: r.event, enabled: r.enabled })),
    truncate,
  };
}

/**
 * Puts the guard on the database `c` is connected to, in one transaction: its schema, functions (replaced if there) and
 * one trigger of each event (made again, enabled always). Idempotent. Refused, with nothing changed, unless the session's role
 * is a superuser (GuardPrivilegeError). Then the TRUNCATE trigger on each table it guards that lacks it, a table at a
 * time, each lock tried briefly: a table still busy is left uncovered, and named in the state answered.
 */
export async function installGuard(c: ClientBase, node: string): Promise<GuardState> {
  await inTransaction(c, 'install', node, async () => {
    await refuseUnlessSuperuser(c, 'install', node);
    await c.query('SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1))', ['tablefate.guard']);
    await c.query(`CREATE SCHEMA IF NOT EXISTS ${G}`);
    await c.query(`REVOKE ALL ON SCHEMA ${G} FROM PUBLIC`);
    // (refuse_move and refuse_drop last: once replaced they call functions of TRUNCATE's, which must be there by then.)
    for (const statement of [REFUSAL, RECORD_NAMES_PLACES, ...TRUNCATE_GUARD_SQL, REFUSE_MOVE, REFUSE_DROP]) await c.query(statement);
    for (const fn of GUARD_FUNCTIONS) await c.query(`REVOKE ALL ON FUNCTION ${G}.${fn} FROM PUBLIC`);
    for (const t of GUARD_TRIGGERS) {
      await c.query(`DROP EVENT TRIGGER IF EXISTS ${ident(t.name)}`);
      await c.query(`CREATE EVENT TRIGGER ${ident(t.name)} ON ${t.event} EXECUTE FUNCTION ${G}.${t.fn}()`);
      // In every session, `session_replication_role = replica` ones too (a plain trigger would not fire there).
      await c.query(`ALTER EVENT TRIGGER ${ident(t.name)} ENABLE ALWAYS`);
    }
  });
  await coverTables(c);
  return guardState(c);
}

/**
 * Takes the guard off the database `c` is connected to: its event triggers first (they would refuse the rest), then its
 * triggers off each table, a table at a time as install puts them on, then its functions and schema, nothing left.
 * Idempotent. A table still busy after the last try stops it there, named (TableBusy): the guard refuses no DDL any more,
 * and the tables it could not reach still refuse TRUNCATE until remove is run again.
 */
export async function removeGuard(c: ClientBase, node: string): Promise<GuardState> {
  await inTransaction(c, 'remove', node, async () => {
    await refuseUnlessSuperuser(c, 'remove', node);
    await c.query('SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1))', ['tablefate.guard']);
    for (const t of GUARD_TRIGGERS) await c.query(`DROP EVENT TRIGGER IF EXISTS ${ident(t.name)}`);
  });
  const busy = await uncoverTables(c);
  if (busy.length > 0)
    throw new TableBusyError(
      `guard remove on ${node}: the guard refuses no DDL any more, but ${busy.length} table(s) were busy and keep its TRUNCATE trigger ` +
        `(${busy.join(', ')}): run tablefate guard remove again`,
    );
  await inTransaction(c, 'remove', node, async () => {
    await c.query('SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1))', ['tablefate.guard']);
    for (const fn of GUARD_FUNCTIONS) await c.query(`DROP FUNCTION IF EXISTS ${G}.${fn}`);
    // Not CASCADE: anything someone else put in the guard's schema is theirs, and stops the removal (said, nothing changed).
    await c.query(`DROP SCHEMA IF EXISTS ${G}`);
  });
  return guardState(c);
}

async function refuseUnlessSuperuser(c: ClientBase, action: GuardAction, node: string): Promise<void> {
  const { rows } = await c.query<{ role: string; superuser: boolean }>(
    'SELECT pg_catalog.quote_ident(current_user) AS role, rolsuper AS superuser FROM pg_catalog.pg_roles WHERE rolname = current_user',
  );
  const me = rows[0];
  if (!me?.superuser) throw new GuardPrivilegeError(action, node, me?.role ?? 'of this session', 'it is no superuser');
}

async function inTransaction(c: ClientBase, action: GuardAction, node: string, fn: () => Promise<void>): Promise<void> {
  await c.query('BEGIN');
  try {
    await fn();
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK').catch(() => undefined);
    // (A superuser that lost the right meanwhile, or a PostgreSQL that asks for more: the same clear error.)
    if ((err as { code?: unknown }).code === INSUFFICIENT_PRIVILEGE) {
      const { rows } = await c.query<{ role: string }>('SELECT pg_catalog.quote_ident(current_user) AS role').catch(() => ({ rows: [] }));
      throw new GuardPrivilegeError(action, node, rows[0]?.role ?? 'of this session', (err as Error).message);
    }
    throw err;
  }
}
