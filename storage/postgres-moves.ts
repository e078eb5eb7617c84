import type { Pool, PoolClient } from 'pg';
import { locate, locateAll, type ShardTableLocation } from './postgres-audit';
import {
  admitLeaving,
  dependentsOf,
  dependentsOfAll,
  describeDependent,
  familyNotes,
  hasDependents,
  type Dependents,
} from './postgres-dependents';
import { dropMembers, recordedFamilyNotes, recordedMembers, relocateMembers, restoreFamily, takeFamily } from './postgres-family';
import { LOCK_NOT_AVAILABLE, tryLocksBriefly, withBriefLocks, type MoveOptions } from './postgres-drain';
import { detachKeys, lockParents, restoreKeys, restoreWaitingKeys, validateKeys, type DetachedKey } from './postgres-foreign-keys';
import { park, refuseStranger, relocate, unpark } from './postgres-names';
import { dropParkedSchema, parkedSchemaOf, parkSchema, unparkSchema } from './postgres-namespace';
import { ensureSchema, lockShard, lockShards } from './postgres-node';
import {
  detachPartition,
  recordedPartitionNotes,
  refuseManagedPartitions,
  restorePartition,
  validateBoundChecks,
} from './postgres-partition';
import { AREA_SCHEMAS, missing, parkedName, qualified, SHARDS, type LiveName, type ShardTableId, type TableArea } from './postgres-record';

/**
 * A shard table's moves between the live area, the trash and the garbage, and its drop: each one transaction of renames
 * and `SET SCHEMA` (no row is copied), its record written first, after a drain (postgres-drain.ts).
 */

/** What a move did beyond the move: foreign keys it could not put back as they were (recall only). */
export interface MoveOutcome {
  notes: string[];
}

/** One table of a move: its shard, and under what name it comes back into the live area. */
export interface TableMove {
  id: ShardTableId;
  live?: LiveName;
}

/**
 * Moves the shard table to `to` (to the live area: under `live`), in one transaction. Already there, by tablefate's
 * record, is success: a move taken back after the table was found missing has nothing to take back. Out of the live
 * area its indexes and sequences take names derived from the shard, and the names they had are recorded; back in,
 * they take those again. A table out of the live area is refused while others depend on it (see admittedDependents),
 * and its foreign keys to other tables are detached; back in, they are put back.
 *
 * The move waits until no other transaction holds the table (see withBriefLocks), up to `drainTimeoutMs`.
 */
export async function moveTable(
  pool: Pool,
  id: ShardTableId,
  to: TableArea,
  live: LiveName | undefined,
  options: MoveOptions,
): Promise<MoveOutcome> {
  return (await moveTables(pool, [{ id, live }], to, options))[0]!;
}

/**
 * Moves several shard tables of the node to `to` in one transaction (tables dropped or recalled as one), each as
 * moveTable moves one: none is ever seen moved without the others. Out of the live area a table goes before the tables it
 * references, its keys to them detached first, so that a key between two of them does not refuse the move; back in, a
 * table comes after the tables its detached keys reference, so that they are there to be put back on.
 */
export async function moveTables(pool: Pool, moves: readonly TableMove[], to: TableArea, options: MoveOptions): Promise<MoveOutcome[]> {
  const cascade = options.cascade === true;
  // A partition's recall attaches it without reading its rows only if the check of its bounds is valid: a drop that
  // crashed before validating it has it validated now, outside the move.
  const ids = moves.map((move) => move.id);
  if (to === 'live') await validateBoundChecks(pool, ids);
  const moved = await withBriefLocks(pool, moves[0]!.id, options, async (c, attempt) => {
    // Every shard's lock first, in id order: two moves of tables in common never wait for each other in a circle. Then
    // where each is, which none of the moves changes for another.
    await lockShards(c, ids);
    // Set after the shard locks: two moves of one shard wait for each other as before; only the tables' locks (and
    // their families', parents') are tried briefly.
    await tryLocksBriefly(c);
    const placed = new Map((await locateAll(c, ids)).map((at, i) => [moves[i]!, at]));
    const outcomes = new Map<TableMove, Moved>();
    const attemptOf = { attempt, cascade, ensured: new Set<string>(), unparked: new Set<string>() };
    const ordered = await inMoveOrder(c, placed, to);
    // Each table's parents first (see lockPlan), then, in one LOCK, the views that go along and the tables, in move order.
    // (With cascade, out of the live area: what depends on each, read for all in one statement, to lock it first.)
    const leavingOids = to === 'live' || !cascade ? [] : [...placed.values()].flatMap((at) => (at?.area === 'live' ? [at.oid] : []));
    const dependents = leavingOids.length > 0 ? await dependentsOfAll(c, leavingOids) : new Map<number, Dependents>();
    const plans = new Map<TableMove, LockPlan>();
    for (const move of ordered) plans.set(move, await lockPlan(c, move, placed.get(move) ?? null, to, attemptOf, dependents));
    const toLock = [...new Set(ordered.flatMap((move) => plans.get(move)!.locks ?? []))];
    if (toLock.length > 0) await c.query(`LOCK TABLE ${toLock.join(', ')} IN ACCESS EXCLUSIVE MODE`);
    // Found again under the lock: a user may have renamed a table while we waited for it.
    const locked = ordered.filter((move) => !plans.get(move)!.done);
    const found = await locateAll(
      c,
      locked.map((move) => move.id),
    );
    for (const move of ordered) {
      const plan = plans.get(move)!;
      outcomes.set(move, plan.done ?? (await moveLocked(c, move, found[locked.indexOf(move)] ?? null, plan, to, attemptOf)));
    }
    // A namespace dropped whole: once its tables have left it, the schema with what else it holds (said by the first).
    if (to === 'trash' && options.namespace !== undefined) {
      const oids = [...placed.values()].flatMap((at) => (at ? [at.oid] : []));
      outcomes.get(moves[0]!)!.notes.push(...(await parkSchema(c, options.namespace, oids)));
    }
    return moves.map((move) => outcomes.get(move)!);
  });
  if (to === 'trash') await validateBoundChecks(pool, ids);
  // The keys a recall put back are validated from its record, not from its answer: a recall made again after a crash
  // that came between its commit and their validation finds the move made, and validates them all the same.
  const toValidate = await keysToValidate(pool, ids);
  const answers: MoveOutcome[] = [];
  for (const [i, id] of ids.entries()) {
    const notes = [...moved[i]!.notes, ...(await validateKeys(pool, id, toValidate[i]!))];
    // Kept where the doctor reads them, until the table's next move.
    if (notes.length > 0)
      await pool.query(`UPDATE ${SHARDS} SET notes = $4 WHERE catalog_id = $1 AND table_id = $2 AND shard = $3`, [
        id.catalogId,
        id.tableId,
        id.shard,
        JSON.stringify(notes),
      ]);
    answers.push({ notes });
  }
  return answers;
}

/**
 * The order in which tables moved together go, by the foreign keys between them: out of the live area, a table before
 * those its keys reference (live keys, read from PostgreSQL); back in, after them (detached keys, read from the record).
 * Keys in a circle leave the order as it was: the first to move then meets the other's key (HasDependents, or a key not
 * put back, said).
 */
async function inMoveOrder(c: PoolClient, placed: ReadonlyMap<TableMove, ShardTableLocation | null>, to: TableArea): Promise<TableMove[]> {
  const moves = [...placed.keys()];
  if (moves.length < 2) return moves;
  const oids = new Map<number, TableMove>();
  for (const [move, at] of placed) if (at) oids.set(at.oid, move);
  const { rows } = await c.query<{ child: string; parent: string }>(
    to === 'live'
      ? `SELECT s.table_oid::int8 AS child, (k->>'references')::int8 AS parent
           FROM ${SHARDS} s, pg_catalog.jsonb_array_elements(coalesce(s.foreign_keys, '[]')) k
          WHERE s.table_oid = ANY ($1::pg_catalog.oid[]) AND k ? 'references'`
      : `SELECT conrelid::int8 AS child, confrelid::int8 AS parent FROM pg_catalog.pg_constraint
          WHERE contype = 'f' AND conrelid = ANY ($1::pg_catalog.oid[]) AND confrelid = ANY ($1::pg_catalog.oid[])`,
    [[...oids.keys()]],
  );
  // (to live: each table after the tables it references; out of it: before them.)
  const before = new Map<TableMove, Set<TableMove>>();
  for (const { child, parent } of rows) {
    const [first, then] = to === 'live' ? [parent, child] : [child, parent];
    const a = oids.get(Number(first));
    const b = oids.get(Number(then));
    if (!a || !b || a === b) continue;
    before.set(b, (before.get(b) ?? new Set()).add(a));
  }
  const ordered: TableMove[] = [];
  const visiting = new Set<TableMove>();
  const visit = (move: TableMove) => {
    if (ordered.includes(move) || visiting.has(move)) return;
    visiting.add(move);
    for (const earlier of before.get(move) ?? []) visit(earlier);
    ordered.push(move);
  };
  moves.forEach(visit);
  return ordered;
}

/** How the transaction that moves the tables goes: its try, whether it takes families along, what it has made sure of. */
interface MoveAttempt {
  attempt: number;
  cascade: boolean;
  /** The live schemas this transaction has made sure of: a namespace's tables come back into one. */
  ensured: Set<string>;
  /** The schemas set aside by a namespace's drop that this transaction has put back (the first of their tables did). */
  unparked: Set<string>;
}

/** What a table's move did (or, made already, said it had). */
type Moved = { restored: DetachedKey[]; notes: string[] };

/** A table's move before its lock: done already (nothing to lock), or the relations to lock, named as they are now. */
interface LockPlan {
  done?: Moved;
  locks?: string[];
  placed?: ShardTableLocation;
}

/**
 * One table's move up to its lock, in moveTables's transaction, under its shard's lock (`placed`: where it was found
 * then): done already, or its parents locked, and what else to lock.
 */
async function lockPlan(
  c: PoolClient,
  { id, live }: TableMove,
  placed: ShardTableLocation | null,
  to: TableArea,
  { attempt }: MoveAttempt,
  dependents: ReadonlyMap<number, Dependents>,
): Promise<LockPlan> {
  const nothing = { done: { restored: [], notes: [] } };
  // No record, on the way to the garbage: a purge already deleted it (and its record); one made again goes on from there.
  if (!placed && to === 'garbage') return nothing;
  if (!placed) throw missing(id, 'tablefate placed no table for it on this node');
  // Made already (the same move again, after a crash before its caller heard it): it says again what it took along.
  if (isThere(placed, to, live)) {
    const family = to === 'trash' ? await recordedFamilyNotes(c, placed.oid) : [];
    return { done: { restored: [], notes: to === 'garbage' ? [] : [...family, ...(await recordedPartitionNotes(c, placed.oid, to))] } };
  }
  // A purge of a table dropped by hand has nothing left to move: its delete forgets the record.
  if (placed.gone && to === 'garbage') return nothing;
  if (placed.drift) throw missing(id, placed.drift);
  const leaving = placed.area === 'live' && to !== 'live';
  // Out of the live area its keys are detached, which locks their parents: those first. A writer of both (an UPDATE of
  // the parent, then an INSERT here) would otherwise hold the parent while it waits for the table behind this move, and
  // this move wait for the parent: each try would run out, however short the writers' transactions. So too the live
  // tables a cascade detaches keys, policies or defaults from; then the views it takes along, the deepest first, as a
  // reader of a view locks them (a view's lock takes the relations it reads with it), and the table.
  const before = leaving ? dependents.get(placed.oid) : undefined;
  // A partition's partitioned table too: its DETACH takes it ACCESS EXCLUSIVE, tried briefly as the rest.
  const others = [...(before?.detached.map((d) => d.tableOid) ?? []), ...(leaving && placed.parent ? [placed.parent.oid] : [])];
  if (leaving && (placed.hasKeys || others.length > 0)) await lockParents(c, placed.oid, attempt, others);
  // (A materialized view cannot be locked so: its own ALTER takes its lock, tried briefly all the same.)
  const views = (before?.members ?? [])
    .filter((m) => m.kind === 'view')
    .sort((a, b) => b.depth - a.depth)
    .map((m) => qualified(m.schema, m.name));
  return { locks: [...views, qualified(placed.schema, placed.table)], placed };
}

/** The rest of one table's move, under its lock: `at` is where it was found once locked. */
async function moveLocked(
  c: PoolClient,
  { id, live }: TableMove,
  at: ShardTableLocation | null,
  { placed }: LockPlan,
  to: TableArea,
  { cascade, ensured, unparked }: MoveAttempt,
): Promise<Moved> {
  if (!at || at.drift || at.oid !== placed!.oid) throw missing(id, at?.drift ?? 'it changed while this move waited for it');
  const leaving = at.area === 'live' && to !== 'live';
  // Checked under the lock, which keeps new dependents off the table until the move commits.
  const dependents =
    to === 'live' ? undefined : await admittedDependents(c, id, at, leaving && cascade, to === 'garbage' ? 'purged' : 'trashed');
  // Detached from its partitioned table first: the foreign keys it had as that table's copies are then its own, and go
  // with the rest of its keys.
  let detached: string[] = [];
  if (leaving) {
    detached = await detachPartition(c, at, to === 'garbage' ? 'purged' : 'trashed');
    // (Its keys as a partition are its own once detached: counted in `hasKeys` all the same.)
    if (at.hasKeys) await detachKeys(c, at);
  }
  const parked = parkedName(id);
  let restored: DetachedKey[] = [];
  let notes: string[] = [];
  if (to === 'live') {
    if (!live) throw new Error('a move to the live area needs the live name');
    await refuseStranger(c, live);
    // (What its record keeps of its way out, read under the lock with `at`: only that is put back.)
    const keeps = at.keeps!;
    const parkedSchema = at.area === 'live' ? undefined : at.parkedSchema;
    const schemaBack = parkedSchema === undefined || unparked.has(parkedSchema) ? [] : await unparkSchema(c, at.oid, live.schema);
    if (parkedSchema !== undefined) unparked.add(parkedSchema);
    const ensure = async (schema: string) => {
      if (!ensured.has(schema)) await ensureSchema(c, schema);
      ensured.add(schema);
    };
    await ensure(live.schema);
    // (A rename between live names parks it first; one from the trash has the names it had recorded.)
    const names = at.area === 'live' ? await park(c, id, at) : (at.liveNames ?? {});
    const from = at.area === 'live' ? { schema: at.schema, table: parked } : at;
    if (from.schema !== live.schema) await relocate(c, at.oid, from, { schema: live.schema, table: from.table });
    await relocate(c, at.oid, { schema: live.schema, table: from.table }, live, { moved: true });
    await unpark(c, at.oid, live, names);
    if (at.area !== 'live') {
      const partition = keeps.partition ? await restorePartition(c, at.oid, live) : [];
      const family = keeps.family ? await restoreFamily(c, at.oid, live, ensure) : { notes: [], keys: [] };
      const own = keeps.foreignKeys ? await restoreKeys(c, at.oid, live) : { notes: [], keys: [] };
      const waited = await restoreWaitingKeys(c, at.oid);
      restored = [...own.keys, ...family.keys, ...waited.keys];
      notes = [...schemaBack, ...partition, ...family.notes, ...own.notes, ...waited.notes];
      if (restored.length > 0)
        await c.query(`UPDATE ${SHARDS} SET keys_to_validate = $2 WHERE table_oid = $1`, [at.oid, JSON.stringify(restored)]);
    }
  } else {
    if (leaving) {
      await takeFamily(c, at.oid, at, parked, dependents!, AREA_SCHEMAS[to]);
      await refuseLateDependents(c, at.oid, dependents!);
      notes = [...familyNotes(dependents!), ...detached];
    } else await relocateMembers(c, at.oid, AREA_SCHEMAS[to]);
    if (at.area === 'live') await park(c, id, at);
    const from = { schema: at.schema, table: at.area === 'live' ? parked : at.table };
    await relocate(c, at.oid, from, { schema: AREA_SCHEMAS[to], table: from.table }, { moved: true });
  }
  return { restored, notes };
}

/**
 * What depends on the table as it leaves the live area (or goes between tablefate's areas), refused unless the move may
 * take it: out of the live area, nothing without `cascade`, and with it the family and what can be detached; between
 * tablefate's areas, only the family recorded as the table's (with any of its shards) when it left.
 */
async function admittedDependents(
  c: PoolClient,
  id: ShardTableId,
  at: ShardTableLocation,
  cascade: boolean,
  what: string,
): Promise<Dependents> {
  const found = await dependentsOf(c, at.oid);
  const table = `${at.schema}.${at.table}`;
  if (at.area !== 'live') {
    const recorded = new Set((await recordedMembers(c, id)).map((m) => m.oid));
    const strangers = [
      ...found.members.filter((m) => !recorded.has(m.oid)).map(describeDependent),
      ...found.detached.map(describeDependent),
    ];
    if (strangers.length + found.others.length > 0) throw hasDependents(table, [...strangers, ...found.others], what, false);
    return found;
  }
  // (A view reading several of the table's shards went with the first of them to leave, in this same transaction.)
  const areas = Object.values(AREA_SCHEMAS);
  const untaken = { ...found, members: found.members.filter((m) => !areas.includes(m.schema)) };
  admitLeaving(untaken, table, cascade, what);
  await refuseManagedPartitions(c, untaken.members, table, what);
  return untaken;
}

/**
 * The keys each shard's last recall put back NOT VALID and left to validate, forgotten as they are read (in the order
 * of `ids`, of one catalog).
 */
async function keysToValidate(pool: Pool, ids: readonly ShardTableId[]): Promise<DetachedKey[][]> {
  const { rows } = await pool.query<{ table_id: string; shard: number; keys: DetachedKey[] }>(
    `UPDATE ${SHARDS} s SET keys_to_validate = NULL FROM (
        SELECT o.table_id, o.shard, o.keys_to_validate FROM ${SHARDS} o
          JOIN ROWS FROM (pg_catalog.unnest($2::int8[]), pg_catalog.unnest($3::int4[])) AS asked(table_id, shard) ON asked.table_id = o.table_id AND asked.shard = o.shard
         WHERE o.catalog_id = $1 AND o.keys_to_validate IS NOT NULL FOR UPDATE OF o) old
      WHERE s.catalog_id = $1 AND s.table_id = old.table_id AND s.shard = old.shard
      RETURNING old.table_id, old.shard, old.keys_to_validate AS keys`,
    [ids[0]!.catalogId, ids.map((id) => id.tableId), ids.map((id) => id.shard)],
  );
  const found = new Map(rows.map((row) => [`${row.table_id}/${row.shard}`, row.keys]));
  return ids.map((id) => found.get(`${id.tableId}/${id.shard}`) ?? []);
}

/**
 * A materialized view cannot be locked before its own ALTER: a view made on one of the family's between the family's
 * read and that ALTER would be left behind, reading it in the trash. Read again once every member is moved (and so
 * locked): if the family grew, the move is tried again from the start, as a lock not had is.
 */
async function refuseLateDependents(c: PoolClient, oid: number, taken: Dependents): Promise<void> {
  if (!taken.members.some((m) => m.kind === 'materialized view')) return;
  const known = new Set(taken.members.map((m) => m.oid));
  const now = await dependentsOf(c, oid);
  if (now.members.some((m) => !known.has(m.oid)) || now.others.length > 0) {
    throw Object.assign(new Error("a dependent was made on the table's family while it moved: the move is tried again"), {
      code: LOCK_NOT_AVAILABLE,
    });
  }
}

/** Whether tablefate's record puts the table in `to` already (under `live`, for the live area). */
function isThere(at: ShardTableLocation, to: TableArea, live: LiveName | undefined): boolean {
  if (to === 'live') return at.area === 'live' && at.schema === live?.schema && at.table === live.table;
  return at.schema === AREA_SCHEMAS[to];
}

/**
 * Drops the shard table, and its record (first: the guard's trigger then lets the drop through). None is success; so
 * is a table dropped by someone else. One renamed or moved by someone else is not tablefate's to drop: its record is
 * forgotten and the table left where it is. The drop asks for its locks briefly and tries again, as a move does, so
 * that readers of the table (and of a parent its purge must touch) never queue behind it.
 */
export async function dropTable(pool: Pool, id: ShardTableId, options: MoveOptions): Promise<void> {
  await withBriefLocks(pool, id, options, async (c) => {
    await lockShard(c, id);
    const at = await locate(c, id);
    // The views of its family (any of its shards' on this node: they may read several) go first, where they wait.
    const members = at?.area === 'live' ? [] : await recordedMembers(c, id);
    const parked = at ? await parkedSchemaOf(c, at.oid) : null;
    await c.query(`DELETE FROM ${SHARDS} WHERE catalog_id = $1 AND table_id = $2 AND shard = $3`, [id.catalogId, id.tableId, id.shard]);
    if (!at || at.drift) return;
    await tryLocksBriefly(c);
    await dropMembers(c, members, Object.values(AREA_SCHEMAS));
    await c.query(`DROP TABLE ${qualified(at.schema, at.table)}`);
    // The schema its namespace's drop set aside goes with the last of its tables.
    await dropParkedSchema(c, parked);
  });
}
