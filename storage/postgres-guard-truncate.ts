import type { ClientBase } from 'pg';
import { POSTGRES_OWN_SCHEMAS } from '../domain/deployment';
import { ident, literal } from '../catalog/pg-session';

/**
 * The guard's half for TRUNCATE (issue 43). No event trigger fires on TRUNCATE; a table's own `BEFORE TRUNCATE ... FOR
 * EACH STATEMENT` trigger does, also for a partition truncated through its partitioned table and for a table a
 * `TRUNCATE ... CASCADE` reaches (all fire before anything is truncated; checked on PostgreSQL 15). So the guard puts
 * one, `ENABLE ALWAYS` (replica sessions too), on each table it guards: each table tablefate records (live, trash,
 * garbage), each partition of a recorded partitioned table (a partition truncated alone fires none of its partitioned
 * table's), and the record itself. `guard install` covers what is there (coverTables); the record's row trigger, each
 * table recorded from then on; any DDL that holds a guarded table lacking it (a partition just made or attached, the
 * record at its migration), that table (keep_triggers). The event triggers refuse DDL that leaves one of the guard's
 * triggers disabled, demoted from ALWAYS, renamed, replaced or dropped. tablefate's own statements pass: it never
 * TRUNCATEs a table it records (its truncate moves it to the trash, an empty twin in its place), and deletes a record
 * before it drops the table.
 */

/** On each guarded table. A truncate's twin leaves it out (the worker may not run its function) and gets it as recorded. */
export const TRUNCATE_TRIGGER = 'tablefate_guard_truncate';
/** The row trigger on tablefate.shards that puts TRUNCATE_TRIGGER on each table recorded. */
export const RECORD_TRIGGER = 'tablefate_guard_record';

const { own: OWN, trash: TRASH, garbage: GARBAGE, guard: GUARD, door: DOOR } = POSTGRES_OWN_SCHEMAS;
const G = ident(GUARD);
const RECORD = `${OWN}.shards`;
const SHARDS = `${ident(OWN)}."shards"`;
export const FUNCTION_OPTIONS = 'LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp';
/** How long the guard's DDL of a table waits for its lock: CREATE TRIGGER's queues writers behind it, DROP TRIGGER's readers. */
const LOCK_TRY = '100ms';
/** Pauses between the tries of guard install (and remove) for the tables that were busy: six tries over about 2 s. */
const BUSY_PAUSES_MS = [50, 100, 200, 400, 800] as const;
const LOCK_NOT_AVAILABLE = '55P03';
const INSUFFICIENT_PRIVILEGE = '42501';
const UNDEFINED_TABLE = '42P01';

const TRUNCATE_HINT =
  "tablefate's guard (tablefate guard status) refuses TRUNCATE of a table tablefate manages: its rows would be lost for good";
const TRIGGER_HINT = "tablefate's guard (tablefate guard status) refuses DDL that would let TRUNCATE reach a table tablefate manages";

/** Every function of this half, by signature (for REVOKE and DROP). */
export const TRUNCATE_GUARD_FUNCTIONS = [
  'governing(oid)',
  'refuse_truncate()',
  'trigger_refusal(oid, text, text, text, text, text)',
  'holds_for_trigger(oid)',
  'cover(oid, boolean)',
  'cover_recorded()',
  'uncover(oid)',
  'keep_triggers(text)',
  'keep_dropped_triggers(text)',
] as const;

/**
 * The guard's two table triggers: name, function (its oid, and as SQL), pg_trigger.tgtype (BEFORE TRUNCATE FOR EACH
 * STATEMENT: 2 | 32; AFTER INSERT OR UPDATE FOR EACH ROW: 1 | 4 | 16), and how CREATE TRIGGER says when it fires.
 */
const SPECS = `(VALUES
  (${literal(TRUNCATE_TRIGGER)}::pg_catalog.name, pg_catalog.to_regprocedure(${literal(`${G}.refuse_truncate()`)})::pg_catalog.oid, 34::pg_catalog.int2,
   'BEFORE TRUNCATE', 'STATEMENT', ${literal(`${G}.refuse_truncate()`)}),
  (${literal(RECORD_TRIGGER)}::pg_catalog.name, pg_catalog.to_regprocedure(${literal(`${G}.cover_recorded()`)})::pg_catalog.oid, 21::pg_catalog.int2,
   'AFTER INSERT OR UPDATE OF table_oid', 'ROW', ${literal(`${G}.cover_recorded()`)})
) AS wanted(name, fn, type, event, level, call)`;

/**
 * The record that makes `rel` guarded: its own, or that of the nearest partitioned table it is a partition of; named
 * as the record names it (as it is named now, for a record too old to say).
 */
const GOVERNING = `
CREATE OR REPLACE FUNCTION ${G}.governing(rel oid)
RETURNS TABLE (managed oid, managed_schema text, managed_table text, managed_id bigint, managed_shard integer)
${FUNCTION_OPTIONS} STABLE AS $guard$
BEGIN
  RETURN QUERY
  SELECT s.table_oid, coalesce(pg_catalog.to_jsonb(s) ->> 'schema_name', n.nspname::text), coalesce(pg_catalog.to_jsonb(s) ->> 'table_name', c.relname::text),
         s.table_id, s.shard
    FROM (SELECT rel AS relid, 0::bigint AS k
          UNION ALL
          SELECT a.relid::pg_catalog.oid, a.k FROM pg_catalog.pg_partition_ancestors(rel) WITH ORDINALITY AS a(relid, k) WHERE a.relid::pg_catalog.oid <> rel) up
    JOIN ${SHARDS} s ON s.table_oid = up.relid
    JOIN pg_catalog.pg_class c ON c.oid = s.table_oid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
   ORDER BY up.k
   LIMIT 1;
END
$guard$`;

const REFUSE_TRUNCATE = `
CREATE OR REPLACE FUNCTION ${G}.refuse_truncate() RETURNS trigger ${FUNCTION_OPTIONS} AS $guard$
DECLARE
  hit record;
  shown text;
  effect text;
  advice text;
  flag text;
  argument text;
  moved text;
BEGIN
  IF TG_RELID = pg_catalog.to_regclass(${literal(RECORD)}) THEN
    RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', HINT = ${literal(TRUNCATE_HINT)},
      MESSAGE = 'tablefate: ${RECORD} is tablefate''s record of the tables it manages: the guard refuses this TRUNCATE, which would forget every one of them';
  END IF;
  IF pg_catalog.to_regclass(${literal(RECORD)}) IS NULL THEN RETURN NULL; END IF;
  SELECT * INTO hit FROM ${G}.governing(TG_RELID);
  -- No record: a table tablefate released, or a partition detached from one it records, keeps an idle trigger.
  IF NOT FOUND THEN RETURN NULL; END IF;
  shown := pg_catalog.format('%I.%I', hit.managed_schema, hit.managed_table);
  effect := CASE WHEN hit.managed = TG_RELID THEN 'delete its rows for good'
                 ELSE pg_catalog.format('delete the rows of its partition %I.%I for good', TG_TABLE_SCHEMA, TG_TABLE_NAME) END;
  IF hit.managed_schema = ${literal(TRASH)} THEN
    advice := pg_catalog.format('"tablefate purge %s" deletes it for good, and "tablefate recall %s [schema.name]" brings it back live, rows and all',
                                hit.managed_id, hit.managed_id);
  ELSIF hit.managed_schema = ${literal(GARBAGE)} THEN
    advice := pg_catalog.format('"tablefate purge %s" finishes it', hit.managed_id);
  ELSIF hit.managed <> TG_RELID THEN
    advice := pg_catalog.format('adopt the partition ("tablefate adopt %I.%I") and drop it with "tablefate drop": the trash keeps its rows, and its recall attaches it again',
                                TG_TABLE_SCHEMA, TG_TABLE_NAME);
  ELSIF EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = TG_RELID AND (c.relkind = 'p' OR c.relispartition)) THEN
    -- (tablefate's truncate makes no twin of a partitioned table or a partition: a drop keeps the rows as well.)
    advice := pg_catalog.format('drop it with "tablefate drop %s" instead: the trash keeps it, rows and all, and "tablefate recall" brings it back', shown);
  ELSE
    -- The statement truncates the tables whose keys reference it too: PostgreSQL refuses one that leaves any out before
    -- a trigger fires (CASCADE or not, which no trigger is told); tablefate's truncate takes them along with cascade only.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_constraint k WHERE k.contype = 'f' AND k.confrelid = TG_RELID AND k.conrelid <> TG_RELID) THEN
      flag := ' --cascade';
      argument := ', cascade => true';
      moved := 'its rows, and those of the tables whose foreign keys reference it, to the trash instead, leaving each table empty in its place';
    ELSE
      flag := '';
      argument := '';
      moved := 'its rows to the trash instead, leaving the table empty in its place';
    END IF;
    -- A table of several shards is <name>_<shard> live: its tablefate name is not the table's, and describe says it.
    advice := CASE WHEN hit.managed_table LIKE '%\\_' || hit.managed_shard
                   THEN pg_catalog.format('"tablefate truncate%s" of table %s ("tablefate describe %s" names it)', flag, hit.managed_id, hit.managed_id)
                   ELSE pg_catalog.format('"tablefate truncate %s%s" (in SQL: CALL ${DOOR}.truncate(%L%s))', shown, flag, shown, argument) END
      || ' moves ' || moved || ', and "tablefate recall" brings them back';
  END IF;
  RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', HINT = ${literal(TRUNCATE_HINT)},
    MESSAGE = ${G}.refusal(hit.managed_schema, hit.managed_table, hit.managed_id, hit.managed_shard, 'TRUNCATE', effect, advice);
END
$guard$`;

/**
 * The message of a refusal of the statement `tag`, which would `change` (a format with one %s: 'disable %s') the guard's
 * trigger `trigger_name` on the guarded table `rel` (`rel_schema`.`rel_name`).
 */
const TRIGGER_REFUSAL = `
CREATE OR REPLACE FUNCTION ${G}.trigger_refusal(rel oid, rel_schema text, rel_name text, trigger_name text, tag text, change text)
RETURNS text ${FUNCTION_OPTIONS} STABLE AS $guard$
DECLARE
  hit record;
  advice text := 'the trigger is the guard''s: "tablefate guard install" puts it back as it must be, and "tablefate guard remove" takes the guard off (each run by a superuser)';
BEGIN
  IF rel = pg_catalog.to_regclass(${literal(RECORD)}) THEN
    RETURN pg_catalog.format('tablefate: ${RECORD} is tablefate''s record of the tables it manages: the guard refuses this %s, which would %s; %s', tag,
      pg_catalog.format(change, pg_catalog.format('its trigger %I (%s)', trigger_name,
        CASE trigger_name WHEN ${literal(TRUNCATE_TRIGGER)} THEN 'the guard''s refusal of TRUNCATE of it'
                          ELSE 'which puts the guard''s refusal of TRUNCATE on each table tablefate records' END)), advice);
  END IF;
  SELECT * INTO hit FROM ${G}.governing(rel);
  RETURN ${G}.refusal(hit.managed_schema, hit.managed_table, hit.managed_id, hit.managed_shard, tag,
    pg_catalog.format(change, CASE WHEN hit.managed = rel THEN pg_catalog.format('its trigger %I (the guard''s refusal of TRUNCATE of it)', trigger_name)
                                   ELSE pg_catalog.format('the trigger %I of its partition %I.%I (the guard''s refusal of TRUNCATE of that)',
                                                          trigger_name, rel_schema, rel_name) END), advice);
END
$guard$`;

/** Whether this session holds `rel` as CREATE TRIGGER needs it (SHARE ROW EXCLUSIVE or stronger): covering it then waits for no one. */
const HOLDS_FOR_TRIGGER = `
CREATE OR REPLACE FUNCTION ${G}.holds_for_trigger(rel oid) RETURNS boolean ${FUNCTION_OPTIONS} STABLE AS $guard$
BEGIN
  RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
                  WHERE l.pid = pg_catalog.pg_backend_pid() AND l.locktype = 'relation' AND l.relation = rel AND l.granted
                    AND l.mode IN ('ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
                    AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()));
END
$guard$`;

/**
 * Puts the guard's triggers (on the record, its row trigger too) on `rel` and, `deep`, its partitions, enabled always,
 * where they lack. Idempotent: one there is kept (enabled always); one of its names running another function is not the
 * guard's, and is left alone. The locks wait LOCK_TRY at most (55P03), unless this session holds them already.
 */
const COVER = `
CREATE OR REPLACE FUNCTION ${G}.cover(rel oid, deep boolean) RETURNS void ${FUNCTION_OPTIONS} SET lock_timeout = ${literal(LOCK_TRY)} AS $guard$
DECLARE
  record_oid oid := pg_catalog.to_regclass(${literal(RECORD)});
  lacking oid[];
  names text;
  target record;
  spec record;
  state "char";
  ours boolean;
BEGIN
  -- (The relations as an array: joined as a function scan, PostgreSQL would look at every table of the database.)
  SELECT pg_catalog.array_agg(c.oid), pg_catalog.string_agg('ONLY ' || pg_catalog.format('%I.%I', n.nspname, c.relname), ', ') INTO lacking, names
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
   WHERE c.oid = ANY (ARRAY[rel] || ARRAY(SELECT p.relid::pg_catalog.oid FROM pg_catalog.pg_partition_tree(rel) p WHERE deep)) AND c.relkind IN ('r', 'p')
     AND EXISTS (SELECT 1 FROM ${SPECS}
                  WHERE (wanted.name = ${literal(TRUNCATE_TRIGGER)} OR (c.oid = record_oid AND ${G}.record_names_places()))
                    AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger g
                                     WHERE g.tgrelid = c.oid AND g.tgname = wanted.name AND (g.tgfoid <> wanted.fn OR g.tgenabled = 'A')));
  IF lacking IS NULL THEN
    RETURN;
  END IF;
  EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', names);
  FOR target IN SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.oid = ANY (lacking) LOOP
    FOR spec IN SELECT * FROM ${SPECS}
                 WHERE wanted.name = ${literal(TRUNCATE_TRIGGER)} OR (target.oid = record_oid AND ${G}.record_names_places()) LOOP
      SELECT g.tgenabled, g.tgfoid = spec.fn INTO state, ours FROM pg_catalog.pg_trigger g WHERE g.tgrelid = target.oid AND g.tgname = spec.name;
      IF NOT FOUND THEN
        EXECUTE pg_catalog.format('CREATE TRIGGER %I %s ON %I.%I FOR EACH %s EXECUTE FUNCTION %s',
                                  spec.name, spec.event, target.nspname, target.relname, spec.level, spec.call);
        -- (The guard's ddl_command_end has enabled it always already, unless its event triggers are off.)
        SELECT g.tgenabled, true INTO state, ours FROM pg_catalog.pg_trigger g WHERE g.tgrelid = target.oid AND g.tgname = spec.name;
      END IF;
      IF ours AND state <> 'A' THEN
        EXECUTE pg_catalog.format('ALTER TABLE ONLY %I.%I ENABLE ALWAYS TRIGGER %I', target.nspname, target.relname, spec.name);
      END IF;
    END LOOP;
  END LOOP;
END
$guard$`;

/**
 * The record's row trigger: a table recorded gets the TRUNCATE trigger, if at the place its record gives it (the guard's
 * ALTER of one mid-move would be refused as a move) and its owner's rights are the record owner's (a row of the record
 * reaches no other table). One this transaction made is held already; an adopted one is asked for briefly and, busy,
 * left uncovered rather than failed: guard status names it, guard install or its next DDL that holds it covers it.
 */
const COVER_RECORDED = `
CREATE OR REPLACE FUNCTION ${G}.cover_recorded() RETURNS trigger ${FUNCTION_OPTIONS} AS $guard$
BEGIN
  IF NEW.table_oid IS NULL OR EXISTS (SELECT 1 FROM pg_catalog.pg_trigger g WHERE g.tgrelid = NEW.table_oid AND g.tgname = ${literal(TRUNCATE_TRIGGER)}) THEN
    RETURN NULL;
  END IF;
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE c.oid = NEW.table_oid AND n.nspname = NEW.schema_name AND c.relname = NEW.table_name
                AND pg_catalog.pg_has_role((SELECT r.relowner FROM pg_catalog.pg_class r WHERE r.oid = TG_RELID), c.relowner, 'USAGE')) THEN
    BEGIN
      PERFORM ${G}.cover(NEW.table_oid, true);
    EXCEPTION WHEN lock_not_available OR undefined_table THEN
      NULL;
    END;
  END IF;
  RETURN NULL;
END
$guard$`;

/** Drops the guard's triggers from `rel` (guard remove, its event triggers gone first), the lock asked for briefly. */
const UNCOVER = `
CREATE OR REPLACE FUNCTION ${G}.uncover(rel oid) RETURNS void ${FUNCTION_OPTIONS} SET lock_timeout = ${literal(LOCK_TRY)} AS $guard$
DECLARE
  t record;
BEGIN
  FOR t IN SELECT g.tgname, n.nspname, c.relname FROM pg_catalog.pg_trigger g
             JOIN pg_catalog.pg_class c ON c.oid = g.tgrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE g.tgrelid = rel AND g.tgfoid IN (SELECT wanted.fn FROM ${SPECS}) LOOP
    EXECUTE pg_catalog.format('DROP TRIGGER %I ON %I.%I', t.tgname, t.nspname, t.relname);
  END LOOP;
END
$guard$`;

/**
 * At ddl_command_end: each guarded table the statement named, or named a trigger of, keeps the guard's triggers as they
 * must be, or the statement is refused; one that lacks them gets them if the statement holds it (so do the partitions
 * of a partitioned one, that it holds).
 */
const KEEP_TRIGGERS = `
CREATE OR REPLACE FUNCTION ${G}.keep_triggers(tag text) RETURNS void ${FUNCTION_OPTIONS} AS $guard$
DECLARE
  record_oid oid := pg_catalog.to_regclass(${literal(RECORD)});
  rel record;
  spec record;
  renamed name;
  t_oid oid;
  t_enabled "char";
  t_ours boolean;
  change text;
  to_cover oid[] := '{}';
  covering oid;
BEGIN
  FOR rel IN
    WITH cmd AS MATERIALIZED (SELECT classid, objid, command_tag FROM pg_catalog.pg_event_trigger_ddl_commands()),
    related AS (
      SELECT cmd.objid AS oid FROM cmd WHERE cmd.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
      UNION
      SELECT g.tgrelid FROM cmd JOIN pg_catalog.pg_trigger g ON g.oid = cmd.objid WHERE cmd.classid = 'pg_catalog.pg_trigger'::pg_catalog.regclass)
    SELECT c.oid, c.relkind, n.nspname, c.relname,
           ARRAY(SELECT cmd.objid FROM cmd WHERE cmd.classid = 'pg_catalog.pg_trigger'::pg_catalog.regclass) AS touched_triggers,
           ARRAY(SELECT cmd.objid FROM cmd WHERE cmd.classid = 'pg_catalog.pg_trigger'::pg_catalog.regclass AND cmd.command_tag = 'CREATE TRIGGER') AS created
      FROM related r
      JOIN pg_catalog.pg_class c ON c.oid = r.oid AND c.relkind IN ('r', 'p')
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     -- (Not through governing, which names the record too: this runs at the end of every DDL statement.)
     WHERE c.oid = record_oid OR EXISTS (SELECT 1 FROM ${SHARDS} s WHERE s.table_oid = c.oid)
        OR (c.relispartition AND EXISTS (SELECT 1 FROM pg_catalog.pg_partition_ancestors(c.oid) a JOIN ${SHARDS} s ON s.table_oid = a.relid))
  LOOP
    FOR spec IN SELECT * FROM ${SPECS} WHERE wanted.name = ${literal(TRUNCATE_TRIGGER)} OR rel.oid = record_oid LOOP
      change := NULL;
      SELECT g.tgname INTO renamed FROM pg_catalog.pg_trigger g
       WHERE g.tgrelid = rel.oid AND g.tgfoid = spec.fn AND g.tgname <> spec.name AND g.oid = ANY (rel.touched_triggers) LIMIT 1;
      IF FOUND THEN
        change := 'rename %s to ' || pg_catalog.quote_ident(renamed);
      END IF;
      t_oid := NULL;
      SELECT g.oid, g.tgenabled, g.tgfoid = spec.fn AND g.tgtype = spec.type AND g.tgqual IS NULL INTO t_oid, t_enabled, t_ours
        FROM pg_catalog.pg_trigger g WHERE g.tgrelid = rel.oid AND g.tgname = spec.name;
      IF change IS NULL AND t_oid IS NOT NULL THEN
        change := CASE
          -- (One of the guard's names, but not the guard's: refused only if this statement made it so.)
          WHEN NOT t_ours THEN CASE WHEN t_oid = ANY (rel.touched_triggers) THEN 'replace %s' END
          WHEN t_enabled = 'A' THEN NULL
          -- Made just now (by the guard, or CREATE OR REPLACE of it): covered, enabled always, below.
          WHEN t_enabled = 'O' AND t_oid = ANY (rel.created) THEN NULL
          WHEN t_enabled = 'D' THEN 'disable %s'
          WHEN t_enabled = 'R' THEN 'make %s fire in replica sessions only'
          ELSE 'make %s skip replica sessions (it is ENABLE ALWAYS)' END;
      END IF;
      IF change IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', HINT = ${literal(TRIGGER_HINT)},
          MESSAGE = ${G}.trigger_refusal(rel.oid, rel.nspname, rel.relname, spec.name, tag, change);
      END IF;
      IF (t_oid IS NOT NULL AND t_ours AND t_enabled = 'O') OR (t_oid IS NULL AND ${G}.holds_for_trigger(rel.oid)) THEN
        to_cover := to_cover || rel.oid;
      END IF;
    END LOOP;
    IF rel.relkind = 'p' THEN
      to_cover := to_cover || ARRAY(SELECT p.relid::pg_catalog.oid FROM pg_catalog.pg_partition_tree(rel.oid) p
                                     WHERE p.relid::pg_catalog.oid <> rel.oid AND ${G}.holds_for_trigger(p.relid)
                                       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger g WHERE g.tgrelid = p.relid AND g.tgname = ${literal(TRUNCATE_TRIGGER)}));
    END IF;
  END LOOP;
  -- Once the loop's query is closed: it reads the record, which PostgreSQL lets no ALTER TABLE touch while it is open.
  FOREACH covering IN ARRAY to_cover LOOP
    PERFORM ${G}.cover(covering, false);
  END LOOP;
END
$guard$`;

/**
 * At sql_drop (from refuse_drop): a DROP TRIGGER of one of the guard's triggers (or a DROP FUNCTION ... CASCADE that takes
 * it) from a guarded table that stays. A table dropped whole is gone by now, its trigger with it: that is refuse_drop's
 * to judge (tablefate's own drop has deleted the record first).
 */
const KEEP_DROPPED_TRIGGERS = `
CREATE OR REPLACE FUNCTION ${G}.keep_dropped_triggers(tag text) RETURNS void ${FUNCTION_OPTIONS} AS $guard$
DECLARE
  record_oid oid := pg_catalog.to_regclass(${literal(RECORD)});
  hit record;
BEGIN
  SELECT r.oid AS rel, d.address_names[1] AS rel_schema, d.address_names[2] AS rel_name, d.address_names[3] AS trigger_name INTO hit
    FROM pg_catalog.pg_event_trigger_dropped_objects() d
    CROSS JOIN LATERAL (SELECT pg_catalog.to_regclass(pg_catalog.format('%I.%I', d.address_names[1], d.address_names[2]))::pg_catalog.oid AS oid) r
   WHERE d.object_type = 'trigger' AND r.oid IS NOT NULL
     AND ((d.address_names[3] = ${literal(TRUNCATE_TRIGGER)} AND (r.oid = record_oid OR EXISTS (SELECT 1 FROM ${G}.governing(r.oid))))
          OR (d.address_names[3] = ${literal(RECORD_TRIGGER)} AND r.oid = record_oid))
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', HINT = ${literal(TRIGGER_HINT)},
      MESSAGE = ${G}.trigger_refusal(hit.rel, hit.rel_schema, hit.rel_name, hit.trigger_name, tag, 'drop %s');
  END IF;
END
$guard$`;

/** The statements that make (or replace) this half's functions, in an order each can be made in. */
export const TRUNCATE_GUARD_SQL = [
  GOVERNING,
  REFUSE_TRUNCATE,
  TRIGGER_REFUSAL,
  HOLDS_FOR_TRIGGER,
  COVER,
  COVER_RECORDED,
  UNCOVER,
  KEEP_TRIGGERS,
  KEEP_DROPPED_TRIGGERS,
] as const;

/** What refuse_move and refuse_drop run last (once the record is there with its names). */
export const KEEP_TRIGGERS_CALL = `PERFORM ${G}.keep_triggers(TG_TAG);`;
export const KEEP_DROPPED_TRIGGERS_CALL = `PERFORM ${G}.keep_dropped_triggers(TG_TAG);`;

/** Where the guard's TRUNCATE half stands on one database (`null`: this session may not read tablefate's record). */
export interface TruncateGuardState {
  functions: boolean;
  /** The record's row trigger is there, the guard's; null while there is no record with its names to put it on. */
  recordTrigger: boolean | null;
  /** How many tables it guards have the TRUNCATE trigger, enabled always (0 without its functions). */
  covered: number | null;
  /** Those that do not (busy at install, out of place, changed with the guard off); the record, if its own is not always on. */
  uncovered: string[] | null;
}

const GUARD_FUNCTION_NAMES = [...new Set(TRUNCATE_GUARD_FUNCTIONS.map((f) => f.slice(0, f.indexOf('('))))];

/** Needs no privilege but reading the record (tablefate's worker, a superuser) for the tables: pg_trigger is readable by all. */
export async function truncateGuardState(c: ClientBase): Promise<TruncateGuardState> {
  const at = await recordFacts(c);
  const state: TruncateGuardState = {
    functions: at.functions === GUARD_FUNCTION_NAMES.length,
    recordTrigger: at.record === null || !at.names ? null : at.trigger !== null,
    covered: null,
    uncovered: null,
  };
  // (Without its functions there is no guard to judge coverage by: off, or not yet installed.)
  if (at.record === null || !state.functions) return { ...state, covered: 0, uncovered: [] };
  if (!at.readable) return state;
  const tables = await coverage(c);
  const uncovered = tables.filter((t) => !t.covered).map((t) => t.name);
  if (at.trigger !== null && at.trigger !== 'A' && !uncovered.includes(RECORD)) uncovered.push(RECORD);
  return { ...state, covered: tables.filter((t) => t.covered).length, uncovered };
}

/** The record's oid, whether it has its names and this session may read it, its row trigger's state; the guard's functions there. */
async function recordFacts(c: ClientBase) {
  const { rows } = await c.query<{ functions: number; record: string | null; names: boolean; readable: boolean; trigger: string | null }>(
    `WITH rec AS (SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                   WHERE n.nspname = $1 AND c.relname = 'shards' AND c.relkind = 'r')
     SELECT (SELECT pg_catalog.count(DISTINCT p.proname)::int FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = $2 AND p.proname = ANY ($3)) AS functions,
            rec.oid::int8 AS record,
            (SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute a
              WHERE a.attrelid = rec.oid AND a.attname IN ('schema_name', 'table_name') AND NOT a.attisdropped) = 2 AS names,
            pg_catalog.has_schema_privilege(pg_catalog.to_regnamespace($1), 'USAGE') AND pg_catalog.has_table_privilege(rec.oid, 'SELECT') AS readable,
            (SELECT g.tgenabled::text FROM pg_catalog.pg_trigger g JOIN pg_catalog.pg_proc p ON p.oid = g.tgfoid
                JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
              WHERE g.tgrelid = rec.oid AND g.tgname = $4 AND n.nspname = $2 AND p.proname = 'cover_recorded') AS trigger
       FROM (SELECT 1) one LEFT JOIN rec ON true`,
    [OWN, GUARD, GUARD_FUNCTION_NAMES, RECORD_TRIGGER],
  );
  return rows[0]!;
}

/** Each table the guard guards (see the top of this file), with whether its TRUNCATE trigger is there, the guard's, enabled always. */
async function coverage(c: ClientBase): Promise<Array<{ oid: number; name: string; covered: boolean }>> {
  const { rows } = await c.query<{ oid: string; name: string; covered: boolean }>(
    `WITH guarded AS (
       SELECT s.table_oid AS oid FROM ${SHARDS} s
       UNION
       SELECT t.relid::pg_catalog.oid FROM ${SHARDS} s JOIN pg_catalog.pg_class c ON c.oid = s.table_oid AND c.relkind = 'p'
        CROSS JOIN LATERAL pg_catalog.pg_partition_tree(s.table_oid) t
       UNION
       SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = 'shards')
     SELECT c.oid::int8 AS oid, pg_catalog.format('%I.%I', n.nspname, c.relname) AS name,
            EXISTS (SELECT 1 FROM pg_catalog.pg_trigger g JOIN pg_catalog.pg_proc p ON p.oid = g.tgfoid JOIN pg_catalog.pg_namespace f ON f.oid = p.pronamespace
                     WHERE g.tgrelid = c.oid AND g.tgname = $2 AND g.tgenabled = 'A' AND f.nspname = $3 AND p.proname = 'refuse_truncate') AS covered
       FROM guarded JOIN pg_catalog.pg_class c ON c.oid = guarded.oid AND c.relkind IN ('r', 'p')
       JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      ORDER BY 2`,
    [OWN, TRUNCATE_TRIGGER, GUARD],
  );
  return rows.map((r) => ({ oid: Number(r.oid), name: r.name, covered: r.covered }));
}

/**
 * guard install's second half, once its functions and event triggers have committed: the TRUNCATE trigger on each
 * guarded table that lacks it (and the record's own trigger), each table in a transaction of its own that asks for its
 * lock LOCK_TRY at most, so that no writer waits long behind it and nothing is held while the next one is asked for.
 * Tables still busy are tried again after BUSY_PAUSES_MS, then left uncovered (guardState names them), never waited
 * for. So is a table out of the place tablefate gave it (the guard refuses the ALTER that enables the trigger).
 */
export async function coverTables(c: ClientBase): Promise<void> {
  const { record } = await recordFacts(c);
  if (record === null) return;
  // The record always: cover finds out by itself whether its row trigger is there (it looks before it locks anything).
  const pending = new Set([Number(record), ...(await coverage(c)).filter((t) => !t.covered).map((t) => t.oid)]);
  await eachBriefly(c, [...pending], (oid) => c.query(`SELECT ${G}.cover($1, false)`, [oid]));
}

/**
 * guard remove's middle, its event triggers gone: the guard's triggers off every table that has one (released tables'
 * idle ones too), each table as coverTables takes it. Answers the tables still busy after the last try.
 */
export async function uncoverTables(c: ClientBase): Promise<string[]> {
  const { rows } = await c.query<{ oid: string; name: string }>(
    `SELECT DISTINCT c.oid::int8 AS oid, pg_catalog.format('%I.%I', n.nspname, c.relname) AS name
       FROM pg_catalog.pg_trigger g JOIN pg_catalog.pg_proc p ON p.oid = g.tgfoid JOIN pg_catalog.pg_namespace f ON f.oid = p.pronamespace
       JOIN pg_catalog.pg_class c ON c.oid = g.tgrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE f.nspname = $1 AND p.proname IN ('refuse_truncate', 'cover_recorded')
      ORDER BY 2`,
    [GUARD],
  );
  const names = new Map(rows.map((r) => [Number(r.oid), r.name]));
  const left = await eachBriefly(c, [...names.keys()], (oid) => c.query(`SELECT ${G}.uncover($1)`, [oid]));
  return left.map((oid) => names.get(oid)!);
}

/**
 * Runs `fn` for each table (autocommit: a transaction each), those whose lock was not had tried again after each of
 * BUSY_PAUSES_MS; answers the ones still busy. A table dropped meanwhile, or whose change the guard refuses, is passed.
 */
async function eachBriefly(c: ClientBase, oids: readonly number[], fn: (oid: number) => Promise<unknown>): Promise<number[]> {
  let pending = [...oids];
  for (let attempt = 0; ; attempt++) {
    const busy: number[] = [];
    for (const oid of pending) {
      try {
        await fn(oid);
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (code === LOCK_NOT_AVAILABLE) busy.push(oid);
        else if (code !== UNDEFINED_TABLE && code !== INSUFFICIENT_PRIVILEGE) throw err;
      }
    }
    const pause = BUSY_PAUSES_MS[attempt];
    if (busy.length === 0 || pause === undefined) return busy;
    await new Promise((resolve) => setTimeout(resolve, pause));
    pending = busy;
  }
}
