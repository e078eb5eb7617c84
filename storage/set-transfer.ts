import { promises as fs } from 'node:fs';
import type { ShardArea, ShardRef, StorageArea, Watch } from './driver';
import { StorageInvariantError } from './errors';
import { exists, removeAll } from './files';
import { renameSet, type RenameOps, type RenamePair } from './rename-set';
import { areaDir, shardFileNames, shardLabel, shardPaths } from './shard-files';

/**
 * The local-files driver's moves of a set between places: where a set's files are, and the renames that carry it from
 * one place to another, whole or finished forward after a crash.
 */

export const AREAS: readonly StorageArea[] = ['live', 'trash', 'garbage'];

/** Which of the set's files (by position in shardFileNames) exist in each area. */
export type Presence = Record<StorageArea, boolean[]>;

export const count = (flags: readonly boolean[]): number => flags.filter(Boolean).length;

/**
 * Where a set is: one shard's files in one area. A move names two, which may be of different tables (a truncate moves
 * the live set of one table into the trash as another's), but of one node: a rename never crosses nodes' directories.
 */
export interface SetPlace {
  ref: ShardRef;
  area: StorageArea;
}

/** What a move needs of the driver: the storage root, and the rename a test may make fail. */
export interface SetStore {
  readonly root: string;
  readonly renameOps: RenameOps | undefined;
}

export async function presenceOf(root: string, ref: ShardRef): Promise<Presence> {
  const entries = await Promise.all(AREAS.map(async (area) => [area, await Promise.all(shardPaths(root, ref, area).map(exists))] as const));
  return Object.fromEntries(entries) as Presence;
}

const sameShard = (a: ShardRef, b: ShardRef): boolean => a.tableId === b.tableId && a.shard === b.shard && a.node === b.node;

/**
 * Moves whatever part of the set is still at `from` to `to`. All at `to` is success; a set split by a crash
 * is completed forwards. A set with no file at either place, or a file at both, is an error: the data is
 * not where the caller thinks, and that must not pass silently. Transient (StorageInvariantError), because a
 * concurrent attempt on the same shard can make the check see a file in flight.
 */
export async function transferSet(store: SetStore, from: SetPlace, to: SetPlace, watch?: Watch): Promise<void> {
  const oneShard = sameShard(from.ref, to.ref);
  const fromPresence = await presenceOf(store.root, from.ref);
  const atFrom = fromPresence[from.area];
  const atTo = (oneShard ? fromPresence : await presenceOf(store.root, to.ref))[to.area];
  const names = shardFileNames(from.ref);
  const move = `${shardLabel(from.ref)} from ${from.area} to ${to.area}${oneShard ? '' : ` as t${to.ref.tableId}-s${to.ref.shard}`}`;

  const both = names.filter((_, i) => atFrom[i] && atTo[i]);
  if (both.length > 0) throw new StorageInvariantError(`cannot move ${move}: ${both.join(', ')} exist in both`);
  const missing = names.filter((_, i) => !atFrom[i] && !atTo[i]);
  if (missing.length === names.length) {
    const elsewhere = AREAS.filter((a) => a !== from.area && !(oneShard && a === to.area) && fromPresence[a].some(Boolean));
    const hint = elsewhere.length > 0 ? ` (found in ${elsewhere.join(', ')})` : '';
    throw new StorageInvariantError(`cannot move ${move}: it is in neither${hint}`);
  }
  if (missing.length > 0) throw new StorageInvariantError(`cannot move ${move}: the set is incomplete, missing ${missing.join(', ')}`);

  const toPaths = shardPaths(store.root, to.ref, to.area);
  const pending = shardPaths(store.root, from.ref, from.area).flatMap((file, i): RenamePair[] => (atFrom[i] ? [[file, toPaths[i]!]] : []));
  if (pending.length === 0) return;
  await fs.mkdir(areaDir(store.root, to.ref.node, to.area), { recursive: true });
  await renameSet(pending, store.renameOps, watch);
}

/**
 * discardSet's first half, purge's mark for either area: renames the part of the set that is in `area` to
 * its garbage names, so that a crash while deleting leaves files everyone knows to be garbage, never a torn
 * set that looks like a damaged shard. Not transferSet: a set that is partial (a crashed create's leftovers),
 * or already gone, is no error here, only less to do.
 */
export async function renameToGarbage(store: SetStore, ref: ShardRef, area: ShardArea, watch?: Watch): Promise<void> {
  const presence = await presenceOf(store.root, ref);
  const garbage = shardPaths(store.root, ref, 'garbage');
  const pending = shardPaths(store.root, ref, area).flatMap((file, i): RenamePair[] => (presence[area][i] ? [[file, garbage[i]!]] : []));
  // Nothing (left) in the area: what garbage there is, discardSet deletes next.
  if (pending.length === 0) return;
  // Garbage now is left over (no purge runs while the caller holds the table's lock): from a purge or a
  // discard that crashed, maybe this very discard, half renamed. It is deleted first, so that no rename
  // below finds its target taken; the set in the other area shares no name with it and is not touched.
  if (count(presence.garbage) > 0) await removeAll(garbage, watch);
  // Garbage lives in the trash directory, which a live set's node may not have yet; live -> garbage is a
  // rename between two directories of one node, so of one file system.
  await fs.mkdir(areaDir(store.root, ref.node, 'garbage'), { recursive: true });
  await renameSet(pending, store.renameOps, watch);
}
