import type { Pool, PoolClient } from 'pg';
import { locate, locateAll, type ShardTableLocation } from './postgres-audit';
import { dependentsOfAll, type Dependents } from './postgres-dependents';
import { dropMembers, recordedFamilyNotes, recordedMembers } from './postgres-family';
import { lockNamed, tryLocksBriefly, withBriefLocks, type MoveOptions } from './postgres-drain';
import { lockParents, validateKeys, type DetachedKey, type KeyToValidate } from './postgres-foreign-keys';
import { moveIn, moveOut, type LockedTable, type MoveAttempt, type Moved } from './postgres-move-locked';
import { dropParkedSchema, parkedSchemaOf, parkSchema } from './postgres-namespace';
import { lockShard, lockShards } from './postgres-node';
import { recordedPartitionNotes, validateBoundChecks } from './postgres-partition';
import {
  AREA_SCHEMAS,
  missing,
  qualified,
  SHARDS,
  type LiveName,
  type ShardTableId,
  type TableArea,
  type TableMove,
} from './postgres-record';

/**
 * A shard table's moves between the live area, the trash and the garbage, and its drop: each one transaction of renames
 * and `SET SCHEMA` (no row is copied), its record written first, after a drain (postgres-drain.ts). Here, up to the
 * tables' locks and after the commit; under the locks, postgres-move-locked.ts.
 */

/** What a move did beyond the move: foreign keys it could not put back as they were (recall only). */
export interface MoveOutcome {
  notes: string[];
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
    await lockNamed(c, toLock);
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
