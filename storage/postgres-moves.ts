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
  type Detached,
  type FamilyMember,
} from './postgres-dependents';
import { dropMembers, recordedFamilyNotes, recordedMembers, relocateMembers, restoreFamily, takeFamily } from './postgres-family';
import { LOCK_NOT_AVAILABLE, tryLocksBriefly, withBriefLocks, type MoveOptions } from './postgres-drain';
import {
  detachKeys,
  lockParents,
  restoreKeys,
  restoreWaitingKeys,
  validateKeys,
  type DetachedKey,
  type KeyToValidate,
} from './postgres-foreign-keys';
import { companionsOfAll, parkSteps, refuseStrangers, unparkSteps } from './postgres-names';
import { moveTableSteps, StepPlan } from './postgres-steps';
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
 * moveTable moves one: none is ever seen moved without the others. Out of the live area each table detaches its own keys
 * before any of them moves, so that a key between two of them refuses nothing; back in, every one is in its place before
 * any key is put back, so that the tables they reference are there.
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
    const tables = locked.map((move, i): LockedTable => {
      const at = found[i] ?? null;
      if (!at || at.drift || at.oid !== plans.get(move)!.placed!.oid)
        throw missing(move.id, at?.drift ?? 'it changed while this move waited for it');
      return { move, at };
    });
    const done = to === 'live' ? await moveIn(c, tables, attemptOf) : await moveOut(c, tables, to, attemptOf);
    for (const move of ordered) outcomes.set(move, plans.get(move)!.done ?? done.get(move)!);
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
  const validated = await validateKeys(pool, ids[0]!, await keysToValidate(pool, ids));
  const answers: MoveOutcome[] = [];
  for (const [i, id] of ids.entries()) {
    const notes = [...moved[i]!.notes, ...validated[i]!];
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
 * The order in which tables leaving the live area together are locked and moved: a table before those its keys
 * reference, as a writer of both takes them (an INSERT here, then its key's check there), so that the move waits for the
 * writer rather than each for the other. Keys in a circle leave the order as it was. (Back in, the order is the one
 * asked: nothing there is written until the move commits, and every table is in its place before a key is put back.)
 */
async function inMoveOrder(c: PoolClient, placed: ReadonlyMap<TableMove, ShardTableLocation | null>, to: TableArea): Promise<TableMove[]> {
  const moves = [...placed.keys()];
  if (moves.length < 2 || to === 'live') return moves;
  const oids = new Map<number, TableMove>();
  for (const [move, at] of placed) if (at?.area === 'live') oids.set(at.oid, move);
  if (oids.size < 2) return moves;
  const { rows } = await c.query<{ child: string; parent: string }>(
    `SELECT conrelid::int8 AS child, confrelid::int8 AS parent FROM pg_catalog.pg_constraint
      WHERE contype = 'f' AND conrelid = ANY ($1::pg_catalog.oid[]) AND confrelid = ANY ($1::pg_catalog.oid[])`,
    [[...oids.keys()]],
  );
  const before = new Map<TableMove, Set<TableMove>>();
  for (const { child, parent } of rows) {
    const a = oids.get(Number(child));
    const b = oids.get(Number(parent));
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

/** A table of the move, under its lock, where it was found then. */
interface LockedTable {
  move: TableMove;
  at: ShardTableLocation;
}

/**
 * The rest of the move of tables out of the live area (or between tablefate's areas), under their locks, in move order.
 * What depends on them, read for all at once, is admitted (or refused) first; then each table's partition and keys are
 * detached and its family taken; then every rename, in one call (postgres-steps.ts).
 */
async function moveOut(
  c: PoolClient,
  tables: readonly LockedTable[],
  to: Exclude<TableArea, 'live'>,
  { cascade }: MoveAttempt,
): Promise<Map<TableMove, Moved>> {
  const what = to === 'garbage' ? 'purged' : 'trashed';
  const oids = tables.map(({ at }) => at.oid);
  // Checked under the lock, which keeps new dependents off the tables until the move commits. A key of one of them to
  // another is not the other's dependent: the first detaches its own keys before anything moves.
  const found = oids.length > 0 ? await dependentsOfAll(c, oids) : new Map<number, Dependents>();
  const leavingWithKeys = new Set(tables.filter(({ at }) => at.area === 'live' && at.hasKeys).map(({ at }) => at.oid));
  // A view reading several of them (shards of one table) goes with the first to leave, as does what is detached.
  const taken = new Set<string>();
  const key = (d: FamilyMember | Detached) => ('depth' in d ? `${d.oid}` : `${d.kind} ${d.tableOid} ${d.name}`);
  const admitted = new Map<TableMove, Dependents>();
  for (const { move, at } of tables) {
    const theirs = found.get(at.oid)!;
    const own = {
      ...theirs,
      members: theirs.members.filter((m) => !taken.has(key(m))),
      detached: theirs.detached.filter((d) => !taken.has(key(d)) && (d.kind !== 'foreign key' || !leavingWithKeys.has(d.tableOid))),
    };
    const admits = await admittedDependents(c, move.id, at, own, at.area === 'live' && cascade, what);
    for (const d of [...admits.members, ...admits.detached]) taken.add(key(d));
    admitted.set(move, admits);
  }
  const moved = new Map<TableMove, Moved>();
  for (const { move, at } of tables) {
    if (at.area !== 'live') continue;
    // Detached from its partitioned table first: the foreign keys it had as that table's copies are then its own, and
    // go with the rest of its keys. (Its keys as a partition are its own once detached: counted in `hasKeys` all the same.)
    const detached = await detachPartition(c, at, what);
    if (at.hasKeys) await detachKeys(c, at);
    moved.set(move, { restored: [], notes: [...familyNotes(admitted.get(move)!), ...detached] });
  }
  const members = [...admitted.values()].flatMap((d) => d.members.map((m) => m.oid));
  const companions = await companionsOfAll(c, [...oids, ...members]);
  const plan = new StepPlan();
  for (const { move, at } of tables) {
    const parked = parkedName(move.id);
    if (at.area === 'live') {
      plan.add(await takeFamily(c, at.oid, at, parked, admitted.get(move)!, AREA_SCHEMAS[to], companions));
      plan.add(parkSteps(move.id, at, companions.get(at.oid)!).steps);
    } else await relocateMembers(c, at.oid, AREA_SCHEMAS[to]);
    const from = { schema: at.schema, table: at.area === 'live' ? parked : at.table };
    plan.add(moveTableSteps(at.oid, from, { schema: AREA_SCHEMAS[to], table: from.table }, { moved: true }));
  }
  await plan.apply(c);
  for (const { move, at } of tables) {
    if (at.area === 'live') await refuseLateDependents(c, at.oid, admitted.get(move)!);
    if (!moved.has(move)) moved.set(move, { restored: [], notes: [] });
  }
  return moved;
}

/**
 * The rest of the move of tables into the live area, under their locks, in move order: the names they take checked for
 * all at once, the schemas they come into made sure of, then every rename (theirs, their companions', their views'), in
 * one call (postgres-steps.ts); then what each kept of its way out is put back, and the keys of live tables that waited
 * for any of them.
 */
async function moveIn(c: PoolClient, tables: readonly LockedTable[], { ensured, unparked }: MoveAttempt): Promise<Map<TableMove, Moved>> {
  const lives = tables.map(({ move }) => {
    if (!move.live) throw new Error('a move to the live area needs the live name');
    return move.live;
  });
  await refuseStrangers(c, lives);
  const ensure = async (schema: string) => {
    if (!ensured.has(schema)) await ensureSchema(c, schema);
    ensured.add(schema);
  };
  const companions = await companionsOfAll(
    c,
    tables.map(({ at }) => at.oid),
  );
  const plan = new StepPlan();
  const after: Array<{
    move: TableMove;
    at: ShardTableLocation;
    live: LiveName;
    schemaBack: string[];
    family?: () => Promise<{ notes: string[]; keys: DetachedKey[] }>;
  }> = [];
  for (const [i, { move, at }] of tables.entries()) {
    const live = lives[i]!;
    // (A namespace dropped whole: its schema comes back first, with the first of its tables.)
    const parkedSchema = at.area === 'live' ? undefined : at.parkedSchema;
    const schemaBack = parkedSchema === undefined || unparked.has(parkedSchema) ? [] : await unparkSchema(c, at.oid, live.schema);
    if (parkedSchema !== undefined) unparked.add(parkedSchema);
    await ensure(live.schema);
    // (A rename between live names parks it first; one from the trash has the names it had recorded.)
    let names = at.liveNames ?? {};
    let now = companions.get(at.oid)!;
    const from = at.area === 'live' ? { schema: at.schema, table: parkedName(move.id) } : at;
    if (at.area === 'live') {
      const parking = parkSteps(move.id, at, now);
      plan.add(parking.steps);
      ({ names, parked: now } = parking);
    }
    const arrived = { schema: live.schema, table: from.table };
    plan.add(moveTableSteps(at.oid, from, arrived));
    plan.add(moveTableSteps(at.oid, arrived, live, { moved: true }));
    plan.add(unparkSteps(now, live, names));
    const family = at.area !== 'live' && at.keeps!.family ? await restoreFamily(c, at.oid, live, ensure, plan) : undefined;
    after.push({ move, at, live, schemaBack, ...(family ? { family: family.detachedBack } : {}) });
  }
  await plan.apply(c);
  const moved = new Map<TableMove, Moved>();
  for (const { move, at, live, schemaBack, family } of after) {
    if (at.area === 'live') {
      moved.set(move, { restored: [], notes: [] });
      continue;
    }
    // (What its record keeps of its way out, read under the lock with `at`: only that is put back.)
    const keeps = at.keeps!;
    const partition = keeps.partition ? await restorePartition(c, at.oid, live) : [];
    const theirs = family ? await family() : { notes: [], keys: [] };
    const own = keeps.foreignKeys ? await restoreKeys(c, at.oid, live) : { notes: [], keys: [] };
    moved.set(move, { restored: [...own.keys, ...theirs.keys], notes: [...schemaBack, ...partition, ...theirs.notes, ...own.notes] });
  }
  const back = after.filter(({ at }) => at.area !== 'live');
  const waited = await restoreWaitingKeys(
    c,
    back.map(({ at }) => at.oid),
  );
  for (const { move, at } of back) {
    const done = moved.get(move)!;
    const keys = waited.get(at.oid) ?? { keys: [], notes: [] };
    done.restored.push(...keys.keys);
    done.notes.push(...keys.notes);
    if (done.restored.length > 0)
      await c.query(`UPDATE ${SHARDS} SET keys_to_validate = $2 WHERE table_oid = $1`, [at.oid, JSON.stringify(done.restored)]);
  }
  return moved;
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
  found: Dependents,
  cascade: boolean,
  what: string,
): Promise<Dependents> {
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
  // (A view in tablefate's areas left already, with another table it reads: not this one's to take.)
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
async function keysToValidate(pool: Pool, ids: readonly ShardTableId[]): Promise<KeyToValidate[][]> {
  const { rows } = await pool.query<{ table_id: string; shard: number; keys: DetachedKey[] } & LiveName>(
    `UPDATE ${SHARDS} s SET keys_to_validate = NULL FROM (
        SELECT o.table_id, o.shard, o.keys_to_validate FROM ${SHARDS} o
          JOIN ROWS FROM (pg_catalog.unnest($2::int8[]), pg_catalog.unnest($3::int4[])) AS asked(table_id, shard) ON asked.table_id = o.table_id AND asked.shard = o.shard
         WHERE o.catalog_id = $1 AND o.keys_to_validate IS NOT NULL FOR UPDATE OF o) old
      WHERE s.catalog_id = $1 AND s.table_id = old.table_id AND s.shard = old.shard
      RETURNING old.table_id, old.shard, old.keys_to_validate AS keys, s.schema_name AS schema, s.table_name AS table`,
    [ids[0]!.catalogId, ids.map((id) => id.tableId), ids.map((id) => id.shard)],
  );
  const found = new Map(
    rows.map((row) => [
      `${row.table_id}/${row.shard}`,
      row.keys.map((key) => ({ ...key, table: key.on ?? { schema: row.schema, table: row.table } })),
    ]),
  );
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
