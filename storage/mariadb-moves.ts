import type { Pool, PoolConnection } from 'mariadb';
import { PermanentStorageError } from './errors';
import { ensureDatabase, refuseTaken } from './mariadb-create';
import { briefly, drainOf, NOWAIT, type Drain, type MoveOptions } from './mariadb-drain';
import {
  addedMeanwhile,
  putBack,
  readKept,
  readKeys,
  readOnTable,
  readTriggers,
  refuseComingBack,
  refuseReferences,
  refuseTriggersNotRemade,
  remembersAnything,
  takeOff,
  takesAnythingOff,
  withAdded,
  type KeptObjects,
} from './mariadb-kept';
import { putGrants, readGrants } from './mariadb-grants';
import {
  AREA_DATABASES,
  forget,
  hiddenName,
  locate,
  writeRecord,
  missing,
  parkedName,
  withShardTurn,
  type Destination,
  type Located,
  type Place,
  type ShardTableId,
  type TableArea,
} from './mariadb-record';
import { renameTo } from './mariadb-rename';
import { errnoOf, qualified } from './mariadb-session';

/**
 * The moves of the MariaDB driver, on one node: a shard is a real InnoDB table that services query while it is live
 * (`<namespace>.<name>`, or `<name>_<shard>`) and that waits in tablefate's own databases while it is in the trash or
 * garbage, under a name of its identity only. A move is a `RENAME TABLE`, which InnoDB makes without touching a row
 * (the same few milliseconds for a gigabyte as for a kilobyte), preceded, for a table with triggers or foreign keys, by
 * what mariadb-kept.ts takes off (on the way out) or puts back (on the way in) while the table waits under its hidden
 * name in its live database. Each step is recorded first and finds itself done when run again (mariadb-record.ts).
 */

/** Moves the shard's table to `to` (to the live area: to `live`), after draining it; answers what it said. */
export function moveTable(
  pool: Pool,
  id: ShardTableId,
  to: TableArea,
  live: Place | undefined,
  options: MoveOptions = {},
): Promise<string[]> {
  return withShardTurn(pool, id, async (c) => {
    const at = await located(c, pool, id);
    const drain = drainOf(options);
    if (to === 'live') {
      if (!live) throw new PermanentStorageError(`a move of ${id.tableId} into the live area needs its live name`);
      return intoLive(c, id, at, live, drain);
    }
    const leaving = { cascade: options.cascade === true, with: options.with ?? [] };
    if (at.area === 'live') return outOfLive(c, id, at, to, leaving, drain);
    // (Moved already, straight perhaps, by an attempt cut short before it looked there.)
    if (at.area === to) return settleKeys(c, id, at, at.kept ?? nothingOn(at), leaving, drain);
    await renameTo(c, id, at, { area: to, database: AREA_DATABASES[to], table: parkedName(id) }, drain);
    return [];
  });
}

/** Drops the shard's table and forgets it (a create taken back, a purge's last step); gone already, only forgotten. */
export function dropTable(pool: Pool, id: ShardTableId, options: MoveOptions = {}): Promise<void> {
  return withShardTurn(pool, id, async (c) => {
    const at = await locate(c, pool, id);
    if (!at) return;
    // (Gone or moved by someone else, its record is forgotten and nothing else is touched.)
    if (at.drift === undefined) await briefly(c, `DROP TABLE ${qualified(at.database, at.table)} ${NOWAIT}`, at, drainOf(options));
    await forget(c, id);
  });
}

/** The shard's table where its record says, or ShardMissing (no record; changed outside tablefate). */
export async function located(c: PoolConnection, pool: Pool, id: ShardTableId): Promise<Located> {
  const at = await locate(c, pool, id);
  if (!at) throw missing(id, 'tablefate placed no table for it on this node');
  if (at.drift !== undefined) throw missing(id, at.drift);
  return at;
}

/** How a table leaves the live area: other tables' keys to it detached (cascade) or refusing; the tables that leave with it. */
interface Leaving {
  cascade: boolean;
  with: readonly Place[];
}

/**
 * Out of the live area (a drop, a purge's compensation never): at its live name, what must not follow it is read and
 * written down, the drop refused if a live table's key needs it (without cascade). With no keys, it is renamed straight
 * into the area (see `straightInto`). With keys or triggers, it waits under its hidden name while what is on it is read
 * again and taken off; then it is renamed into the area.
 */
async function outOfLive(
  c: PoolConnection,
  id: ShardTableId,
  at: Located,
  to: 'trash' | 'garbage',
  leaving: Leaving,
  drain: Drain,
): Promise<string[]> {
  const { cascade, with: others } = leaving;
  const destination: Destination = { area: to, database: AREA_DATABASES[to], table: parkedName(id) };
  const hidden = hiddenName(id);
  let now: Place = at;
  // What was on it at its live name, and what the record says of it.
  let before = at.kept;
  let written = at.kept;
  if (at.table !== hidden) {
    // (Nothing is taken off before the table is hidden: read afresh, a drop cut short before that sees it as it is now.)
    const keys = await readKeys(c, at);
    const seen: KeptObjects = { from: { database: at.database, table: at.table }, triggers: [], ...keys, grants: await readGrants(c, at) };
    refuseReferences(seen, at, cascade, others);
    if (!takesAnythingOff(seen) && (await straightInto(c, id, at, destination, drain, remembersAnything(seen) ? seen : null))) {
      return settleKeys(c, id, destination, seen, leaving, drain);
    }
    // Keys to take off, or triggers (the rename straight into the area refused them): the hidden way, with its triggers.
    before = { ...seen, triggers: await readTriggers(c, at) };
    await refuseTriggersNotRemade(c, before, at);
    written = remembersAnything(before) ? before : null;
    // Hidden first: a trigger or a key a user adds by its name while the drop drains it (read above, renamed below)
    // comes along, and is found under the hidden name, where no one adds more.
    now = await renameTo(c, id, at, { area: 'live', database: at.database, table: hidden }, drain, { kept: written });
  }
  // Added meanwhile: refused as it would have been before the drop (a live table's key, without cascade), or taken off
  // too. (Grants stay with the live name: only what came along is read here. Hidden with nothing written down, all of
  // it came along.)
  const known = before ?? nothingOn(at);
  const added = addedMeanwhile(known, await readOnTable(c, now), others);
  refuseReferences(added, at, cascade, others);
  await refuseTriggersNotRemade(c, added, at);
  const kept = withAdded(known, added);
  const keeps = remembersAnything(kept) ? kept : null;
  if (JSON.stringify(keeps) !== JSON.stringify(written)) await writeRecord(c, id, { kept: keeps });
  const notes = takesAnythingOff(kept) ? await takeOff(c, kept, now, drain) : [];
  await renameTo(c, id, now, destination, drain);
  return notes;
}

/**
 * A table with no keys, renamed from its live name straight into the area: one rename, not two. MariaDB refuses it
 * (1435) if the table has triggers, there before or added meanwhile: then false, the table still at its name, and the
 * drop takes the hidden way, where it reads them. A key a user added meanwhile can come along: `settleKeys` finds it.
 */
async function straightInto(
  c: PoolConnection,
  id: ShardTableId,
  at: Place,
  destination: Destination,
  drain: Drain,
  written: KeptObjects | null,
): Promise<boolean> {
  try {
    await renameTo(c, id, at, destination, drain, { kept: written });
    return true;
  } catch (err) {
    if (errnoOf(err) === TRIGGER_IN_WRONG_SCHEMA) return false;
    throw err;
  }
}

const TRIGGER_IN_WRONG_SCHEMA = 1435;

/**
 * A table just come into the trash or garbage, by a straight rename or a move run again: a key a user added by its live
 * name while the drop drained it followed it there. Refused as it would have been before the drop (a live table's key,
 * without cascade: the drop's undo brings the table back, with it), or written down and taken off there, where no one
 * adds more. `known`: what the record says was on it when it left (of a table that left with nothing written down, all
 * the record has is where it is now, which a refusal then names).
 */
async function settleKeys(
  c: PoolConnection,
  id: ShardTableId,
  now: Destination,
  known: KeptObjects,
  { cascade, with: others }: Leaving,
  drain: Drain,
): Promise<string[]> {
  const added = addedMeanwhile(known, { from: now, triggers: [], ...(await readKeys(c, now)) }, others);
  if (!takesAnythingOff(added)) return [];
  refuseReferences(added, known.from, cascade, others);
  await writeRecord(c, id, { kept: withAdded(known, added) });
  return takeOff(c, added, now, drain);
}

/** What is known of a table of which nothing was written down: nothing on it, at `at`. */
const nothingOn = (at: Place): KeptObjects => ({
  from: { database: at.database, table: at.table },
  triggers: [],
  keys: [],
  referencing: [],
  grants: [],
});

/**
 * Into the live area at `live`: a recall (from the trash), a drop taken back, or a rename. What was taken off goes back
 * on under the hidden name, before the table takes its name; what cannot come back refuses the move before it starts.
 */
async function intoLive(c: PoolConnection, id: ShardTableId, at: Located, live: Place, drain: Drain): Promise<string[]> {
  const target: Destination = { area: 'live', ...live };
  const hidden = hiddenName(id);
  if (at.area === 'live' && at.database === live.database && at.table === live.table) return comeBack(c, id, at, live, []);
  if (at.area === 'live' && at.table !== hidden) return renameLive(c, id, at, target, drain);
  const kept = takesAnythingOff(at.kept) ? at.kept : null;
  const stage: Place = kept ? { database: live.database, table: hidden } : live;
  await refuseTaken(c, live);
  if (kept) await refuseComingBack(c, kept, live, stage);
  await ensureDatabase(c, live.database);
  let now: Place = at;
  if (at.area !== 'live' || at.database !== stage.database) now = await renameTo(c, id, at, { area: 'live', ...stage }, drain);
  const notes = kept ? await putBack(c, kept, now, live, drain) : [];
  if (now.table !== live.table || now.database !== live.database) await renameTo(c, id, now, target, drain);
  return comeBack(c, id, at, live, notes);
}

/**
 * The last step into the live area, at `live`: its grants given there if it left another name (run again after a crash,
 * GRANT gives nothing twice), and the record's memory of it while away forgotten.
 */
async function comeBack(c: PoolConnection, id: ShardTableId, at: Located, live: Place, notes: string[]): Promise<string[]> {
  if (!at.kept) return notes;
  const { from, grants } = at.kept;
  const granted = from.database === live.database && from.table === live.table ? [] : await putGrants(c, grants, live, from);
  await writeRecord(c, id, { kept: null });
  return [...notes, ...granted];
}

/** A live table renamed (tablefate rename): its triggers and keys follow a rename within its database; not out of it with triggers. */
async function renameLive(c: PoolConnection, id: ShardTableId, at: Located, target: Destination, drain: Drain): Promise<string[]> {
  await refuseTaken(c, target);
  const kept = await readKept(c, at);
  if (at.database !== target.database) {
    if (kept.triggers.length > 0) {
      throw new PermanentStorageError(
        `${at.database}.${at.table} has triggers (${kept.triggers.map((t) => t.name).join(', ')}), which MariaDB does not let change database: rename it within ${at.database}`,
      );
    }
    await ensureDatabase(c, target.database);
  }
  // (Its grants, remembered first: a rename cut short after it gives them at its next attempt.)
  const grantsOnly: KeptObjects = { ...kept, triggers: [], keys: [], referencing: [] };
  const remembered = remembersAnything(grantsOnly) ? grantsOnly : null;
  await renameTo(c, id, at, target, drain, { kept: remembered });
  return comeBack(c, id, { ...at, kept: remembered }, target, []);
}
