import type { PoolClient } from 'pg';
import type { ShardTableLocation } from './postgres-audit';
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
import { LOCK_NOT_AVAILABLE } from './postgres-drain';
import { recordedMembers, relocateMembers, restoreFamily, takeFamily } from './postgres-family';
import { detachKeys, restoreKeys, restoreWaitingKeys, type DetachedKey } from './postgres-foreign-keys';
import { companionsOfAll, parkSteps, refuseStrangers, restoreStatistics, unparkSteps } from './postgres-names';
import { unparkSchema } from './postgres-namespace';
import { ensureSchema } from './postgres-node';
import { detachPartition, refuseManagedPartitions, restorePartition } from './postgres-partition';
import { AREA_SCHEMAS, parkedName, SHARDS, type LiveName, type ShardTableId, type TableArea, type TableMove } from './postgres-record';
import { moveTableSteps, StepPlan } from './postgres-steps';

/**
 * A move of tables once they are locked and found again under the lock (postgres-moves.ts takes them that far): out of
 * the live area (moveOut) or into it (moveIn), each over all the tables at once wherever it can, their renames in one
 * call (postgres-steps.ts).
 */

/** How the transaction that moves the tables goes: its try, whether it takes families along, what it has made sure of. */
export interface MoveAttempt {
  attempt: number;
  cascade: boolean;
  /** The live schemas this transaction has made sure of: a namespace's tables come back into one. */
  ensured: Set<string>;
  /** The schemas set aside by a namespace's drop that this transaction has put back (the first of their tables did). */
  unparked: Set<string>;
}

/** What a table's move did (or, made already, said it had). */
export type Moved = { restored: DetachedKey[]; notes: string[] };

/** A table of the move, under its lock, where it was found then. */
export interface LockedTable {
  move: TableMove;
  at: ShardTableLocation;
  /**
   * Out of the live area: what depends on it (as postgres-dependents.ts reads it) and stays where it is, neither taken
   * nor refused, because the caller points it at another table before the commit (a truncate's twin: postgres-repoint.ts).
   */
  staying?: Pick<Dependents, 'members' | 'detached'>;
}

/**
 * The rest of the move of tables out of the live area (or between tablefate's areas), under their locks, in move order.
 * What depends on them, read for all at once, is admitted (or refused) first; then each table's partition and keys are
 * detached and its family taken; then every rename, in one call (postgres-steps.ts).
 */
export async function moveOut(
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
  for (const { move, at, staying } of tables) {
    const theirs = found.get(at.oid)!;
    const stays = new Set([...(staying?.members ?? []), ...(staying?.detached ?? [])].map(key));
    const own = {
      ...theirs,
      members: theirs.members.filter((m) => !taken.has(key(m)) && !stays.has(key(m))),
      detached: theirs.detached.filter(
        (d) => !taken.has(key(d)) && !stays.has(key(d)) && (d.kind !== 'foreign key' || !leavingWithKeys.has(d.tableOid)),
      ),
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
export async function moveIn(
  c: PoolClient,
  tables: readonly LockedTable[],
  { ensured, unparked }: MoveAttempt,
): Promise<Map<TableMove, Moved>> {
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
    await restoreStatistics(c, at.oid, live, at.liveNames ?? {});
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
