import { createHash } from 'node:crypto';
import { promises as fs, statSync } from 'node:fs';
import path from 'node:path';
import {
  type SetListing,
  type ShardArea,
  type ShardRef,
  type ShardReport,
  type StorageArea,
  type StorageDriver,
  type StoredSet,
  type Watch,
} from './driver';
import {
  FatalStorageError,
  InvalidShardRefError,
  messageOf,
  PermanentStorageError,
  QuarantinedNodeError,
  StorageInvariantError,
  StorageIoError,
  type QuarantineMarker,
} from './errors';
import { FaultInjector, type StorageOp } from './faults';
import { changedAtOf, hashFile, listDir, removeAll } from './files';
import { filesChangedSinceFresh, writeFreshSet } from './fresh-set';
import { byNodeNumber, NODE_NAME } from './nodes';
import { clearQuarantine, listQuarantined, readQuarantine, writeQuarantine } from './quarantine';
import { renameSet, type RenameOps, type RenamePair } from './rename-set';
import { AREAS, count, presenceOf, renameToGarbage, transferSet, type Presence, type SetPlace, type SetStore } from './set-transfer';
import { areaDir, GARBAGE_SUFFIX, parseShardFileName, shardFileNames, shardLabel, shardPaths } from './shard-files';
import { inTurn } from './shard-turns';

export interface LocalFileStorageOptions {
  root: string;
  /** Number of storage nodes, named node-0 .. node-{n-1}. Default 3. */
  nodeCount?: number;
  /** The nodes this driver serves, instead of node-0 .. node-{n-1}: a storage-node worker serves its own only. */
  nodes?: readonly string[];
  faults?: FaultInjector;
  renameOps?: RenameOps;
}

/** How many files `sizesOf` stats before it lets the event loop turn. */
const STATS_PER_BATCH = 256;

/** Every operation guarded names, in its errors and its quarantine reasons. */
type GuardedOp = StorageOp | 'unmarkGarbage' | 'inspect' | 'discardSet';

/**
 * The operations the fault injector can fail (faults.ts's StorageOp). unmarkGarbage and inspect never could;
 * discardSet is not one of its ops.
 */
function injectable(op: GuardedOp): op is StorageOp {
  return op !== 'unmarkGarbage' && op !== 'inspect' && op !== 'discardSet';
}

/**
 * Storage nodes as directories on one local disk: <root>/<node>/live and <root>/<node>/trash.
 * Every state change of a set is a renameSet, so after a crash a set is either where it was, where it was
 * going, or split between the two; each method recognises all three and finishes the job.
 *
 * Every method first refuses a quarantined node (see quarantine.ts), and every error it throws is one of
 * errors.ts's, naming the shard and node, so that the activity boundary can tell permanent from transient.
 * A fatal error quarantines the node it happened on before it is thrown.
 */
export class LocalFileStorage implements StorageDriver {
  readonly nodes: readonly string[];
  readonly faults: FaultInjector;
  readonly root: string;
  private readonly store: SetStore;

  constructor(opts: LocalFileStorageOptions) {
    const nodeCount = opts.nodeCount ?? 3;
    if (!Number.isInteger(nodeCount) || nodeCount < 1) throw new RangeError(`nodeCount must be a positive integer, got ${nodeCount}`);
    this.root = path.resolve(opts.root);
    for (const node of opts.nodes ?? []) {
      if (!NODE_NAME.test(node)) throw new RangeError(`a storage node is named node-<k>, got ${JSON.stringify(node)}`);
    }
    this.nodes = Object.freeze(opts.nodes ? [...opts.nodes] : Array.from({ length: nodeCount }, (_, i) => `node-${i}`));
    this.faults = opts.faults ?? new FaultInjector();
    this.store = { root: this.root, renameOps: opts.renameOps };
  }

  createShard(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guarded('createShard', ref, watch, () => this.placeFreshLive(ref, watch));
  }

  dropShard(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guarded('dropShard', ref, watch, async () => {
      for (const area of AREAS) await removeAll(shardPaths(this.root, ref, area), watch);
    });
  }

  moveShard(ref: ShardRef, from: ShardArea, to: ShardArea, watch?: Watch): Promise<void> {
    return this.guarded('moveShard', ref, watch, async () => {
      // A set is named by its table's id, not its name: a renamed table's set stays where it is.
      if (from === to) return;
      await transferSet(this.store, { ref, area: from }, { ref, area: to }, watch);
    });
  }

  truncateShard(ref: ShardRef, into: number, watch?: Watch): Promise<void> {
    return this.guarded('truncateShard', ref, watch, () =>
      this.withTrashedRows(ref, into, async (rows, own, trashed) => {
        // Refused before the rows move, as the empty set's create would refuse after.
        refuseIfParked(`truncate ${shardLabel(ref)}`, own, ['trash', 'garbage']);
        // Whole in the trash, or already being purged: the truncate is made, and whatever is live is the empty set it
        // left, maybe written to since. Moving that too would truncate twice.
        const made = count(trashed.trash) === trashed.trash.length || count(trashed.garbage) > 0;
        if (!made) {
          // Permanent, unlike a move's "in neither": both shards' turns are held, so no change of this process can
          // have a file in flight, and a table whose rows are nowhere will not find them on a retry.
          if (count(own.live) === 0 && count(trashed.trash) === 0)
            throw new PermanentStorageError(
              `cannot truncate ${shardLabel(ref)} into table ${into}: it is neither live nor in the trash as t${into}`,
            );
          // (A set split between the two by a crash mid-rename is finished forwards.)
          await transferSet(this.store, { ref, area: 'live' }, rows, watch);
        }
        // Missing after a crash between the halves, or torn by a crash in its create: none of it was ever given out.
        await this.placeFreshLive(ref, watch);
      }),
    );
  }

  untruncateShard(ref: ShardRef, into: number, watch?: Watch): Promise<void> {
    return this.guarded('untruncateShard', ref, watch, () =>
      this.withTrashedRows(ref, into, async (rows, own, trashed) => {
        const undoing = `untruncate ${shardLabel(ref)} from table ${into}`;
        // Reported success here would leave the catalog believing the rows live while they are being deleted.
        if (count(trashed.garbage) > 0)
          throw new PermanentStorageError(`cannot ${undoing}: a purge of its rows (t${into}) has begun; nothing was changed`);
        if (count(trashed.trash) === 0) return;
        // Live beside a trashed set of the same shard, the rows would stand in the way of that set's restore.
        refuseIfParked(undoing, own, ['trash']);
        // Only a whole trashed set has an empty one beside it: a part of one is the rows themselves, split by a crash
        // mid-rename (this undo's or the truncate's), and their other part is what is live.
        if (count(trashed.trash) === trashed.trash.length) {
          const changed = await filesChangedSinceFresh(ref, shardPaths(this.root, ref, 'live'));
          if (changed.length > 0)
            throw new PermanentStorageError(
              `cannot ${undoing}: its live shard was written to since the truncate (${changed.join(', ')}); its rows are kept, and nothing was changed`,
            );
          // Garbage first, as a discard does: a crash while deleting leaves files no one mistakes for the shard.
          await this.discard(ref, 'live', watch);
        }
        await transferSet(this.store, rows, { ref, area: 'live' }, watch);
      }),
    );
  }

  markGarbage(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guarded('markGarbage', ref, watch, async () => {
      const presence = await presenceOf(this.root, ref);
      // Purge marks what the trash holds; a file of the set in live means the table is (partly) back in use,
      // and no purge may touch it.
      const live = shardFileNames(ref).filter((_, i) => presence.live[i]);
      if (live.length > 0) {
        throw new PermanentStorageError(
          `cannot mark ${shardLabel(ref)} as garbage: ${live.join(', ')} ${live.length === 1 ? 'is' : 'are'} live; a live shard is never purged`,
        );
      }
      // Nothing left in the trash: marked already, or a resumed purge already deleted some or all of it.
      if (count(presence.trash) === 0) return;
      await transferSet(this.store, { ref, area: 'trash' }, { ref, area: 'garbage' }, watch);
    });
  }

  unmarkGarbage(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guarded('unmarkGarbage', ref, watch, () =>
      transferSet(this.store, { ref, area: 'garbage' }, { ref, area: 'trash' }, watch),
    );
  }

  deleteGarbage(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guarded('deleteGarbage', ref, watch, async () => {
      const presence = await presenceOf(this.root, ref);
      // Files still in trash mean markGarbage has not finished: deleting only the marked part would leave a
      // torn set behind while the caller believes the shard purged.
      if (count(presence.trash) > 0) {
        throw new StorageInvariantError(
          `cannot delete garbage of ${shardLabel(ref)}: ${count(presence.trash)} file(s) are still in trash, not marked as garbage`,
        );
      }
      await removeAll(shardPaths(this.root, ref, 'garbage'), watch);
    });
  }

  inspect(ref: ShardRef): Promise<ShardReport> {
    return this.guarded('inspect', ref, undefined, async () => {
      const names = shardFileNames(ref);
      const byArea = Object.fromEntries(AREAS.map((a) => [a, shardPaths(this.root, ref, a)])) as Record<StorageArea, string[]>;
      const presence = await presenceOf(this.root, ref);
      // A set split by a crash is reported where its first file was found, live before trash before garbage.
      const area = AREAS.find((a) => presence[a].some(Boolean)) ?? null;

      const found: Array<{ name: string; file: string }> = [];
      names.forEach((name, i) => {
        const where = AREAS.find((a) => presence[a][i]);
        if (where) found.push({ name, file: byArea[where][i]! });
      });
      // Names without the .gar suffix, so the same set has the same checksum in every area.
      found.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

      const hash = createHash('sha256');
      let bytes = 0;
      for (const { name, file } of found) {
        hash.update(name);
        hash.update('\0');
        bytes += await hashFile(file, hash);
      }
      return { tableId: ref.tableId, shard: ref.shard, node: ref.node, area, bytes, checksum: hash.digest('hex') };
    });
  }

  /**
   * The bytes of each shard's files in every area (a set half moved counts once: each file is in one area). A node's
   * areas are listed once and only the files there are looked at, rather than every name tried in every area: `ls`
   * measures every shard of every live table.
   */
  async sizesOf(refs: readonly ShardRef[]): Promise<number[]> {
    for (const ref of refs) this.assertValid(ref);
    const sizes = refs.map(() => 0);
    const byNode = new Map<string, number[]>();
    refs.forEach((ref, i) => {
      const indices = byNode.get(ref.node);
      if (indices) indices.push(i);
      else byNode.set(ref.node, [i]);
    });
    await Promise.all(
      [...byNode].map(([node, indices]) =>
        this.guardedListing('inspect', node, async () => {
          const marker = await readQuarantine(this.root, node);
          if (marker) throw new QuarantinedNodeError(marker);
          const listed = new Map<string, Promise<Set<string>>>();
          const namesIn = (dir: string) => {
            let names = listed.get(dir);
            if (!names) listed.set(dir, (names = listDir(dir).then((entries) => new Set(entries))));
            return names;
          };
          // Each area's directory listed once, and only the files it holds stat'ed, a batch at a time: synchronous
          // stats of files just listed cost some 2 µs each where a promise's costs 10 to 15 (`ls` of 150 tables
          // measures 1,800 files), and a pause between batches keeps a slow disk from holding the worker's event loop.
          const files: Array<[index: number, file: string]> = [];
          for (const area of AREAS) {
            const dir = areaDir(this.root, node, area);
            const names = await namesIn(dir);
            const suffix = area === 'garbage' ? GARBAGE_SUFFIX : '';
            for (const i of indices) {
              for (const name of shardFileNames(refs[i]!)) if (names.has(name + suffix)) files.push([i, path.join(dir, name + suffix)]);
            }
          }
          // (A file gone since the listing, moved to another area where the look may have seen it, counts 0.)
          for (let from = 0; from < files.length; from += STATS_PER_BATCH) {
            if (from > 0) await new Promise((resolve) => setImmediate(resolve));
            for (const [i, file] of files.slice(from, from + STATS_PER_BATCH))
              sizes[i]! += statSync(file, { throwIfNoEntry: false })?.size ?? 0;
          }
        }),
      ),
    );
    return sizes;
  }

  async listSets(nodes: readonly string[] = this.nodes): Promise<SetListing> {
    const sets: StoredSet[] = [];
    const skippedNodes: string[] = [];
    for (const node of nodes) {
      if (!this.nodes.includes(node)) throw new InvalidShardRefError(`${node} is not a node of this storage (${this.nodes.join(', ')})`);
      const found = await this.guardedListing('listSets', node, async () => {
        // Off limits even for reading: an operator may be repairing it by hand, and a set seen half repaired
        // would look like one to collect.
        if (await readQuarantine(this.root, node)) return null;
        return this.setsOn(node);
      });
      if (found) sets.push(...found);
      else skippedNodes.push(node);
    }
    return { sets: sets.sort(bySetOrder), skippedNodes };
  }

  discardSet(ref: ShardRef, area: StorageArea, watch?: Watch): Promise<void> {
    return this.guarded('discardSet', ref, watch, async () => {
      // The area decides which files are deleted, and shardPaths reads anything but live and garbage as
      // trash: a misspelt area from an activity's JSON input must not discard some other copy.
      if (!AREAS.includes(area)) throw new PermanentStorageError(`cannot discard ${shardLabel(ref)}: unknown area ${JSON.stringify(area)}`);
      await this.discard(ref, area, watch);
    });
  }

  /** The node's quarantine marker, or null when it is not quarantined. */
  quarantineOf(node: string): Promise<QuarantineMarker | null> {
    return readQuarantine(this.root, node);
  }

  /** Every quarantined node under this driver's root. */
  listQuarantined(): Promise<QuarantineMarker[]> {
    return listQuarantined(this.root);
  }

  /** What an operator does once they have looked: lets workers use the node again. */
  clearQuarantine(node: string): Promise<QuarantineMarker | null> {
    return clearQuarantine(this.root, node);
  }

  /**
   * The frame around every method: the ref must name a shard of ours, the node must not be quarantined, and
   * whatever goes wrong leaves as one of errors.ts's classes, naming the shard. A fatal error quarantines the
   * node first, so that no worker (this one restarted, or another on the same storage) touches it again.
   */
  private async guarded<T>(op: GuardedOp, ref: ShardRef, watch: Watch | undefined, body: () => Promise<T>): Promise<T> {
    this.assertValid(ref);
    // A look changes nothing; a change waits for the shard's turn (see inTurn).
    return op === 'inspect' ? this.unguardedTurn(op, ref, watch, body) : this.inTurnOf(ref, () => this.unguardedTurn(op, ref, watch, body));
  }

  private inTurnOf<T>(ref: ShardRef, change: () => Promise<T>): Promise<T> {
    return inTurn(`${this.root}:${ref.node}:${ref.tableId}:${ref.shard}`, change);
  }

  private async unguardedTurn<T>(op: GuardedOp, ref: ShardRef, watch: Watch | undefined, body: () => Promise<T>): Promise<T> {
    try {
      const marker = await readQuarantine(this.root, ref.node);
      if (marker) throw new QuarantinedNodeError(marker);
      if (injectable(op)) this.faults.check(op, ref);
      return await body();
    } catch (error) {
      if (error instanceof FatalStorageError) throw await this.quarantine(op, ref, error);
      // Stopped by its caller (the activity was cancelled): that reason, unchanged, is the answer.
      if (watch?.signal?.aborted) throw error;
      if (error instanceof PermanentStorageError || error instanceof StorageInvariantError || error instanceof StorageIoError) {
        throw error;
      }
      throw new StorageIoError(op, shardLabel(ref), ref.node, error);
    }
  }

  /**
   * guarded's counterpart for listSets, which reads a whole node rather than one shard: whatever goes wrong
   * leaves as one of errors.ts's classes, naming the node. It renames nothing, so nothing in it is fatal.
   */
  private async guardedListing<T>(op: 'listSets' | 'inspect', node: string, body: () => Promise<T>): Promise<T> {
    try {
      return await body();
    } catch (error) {
      if (error instanceof PermanentStorageError || error instanceof StorageInvariantError || error instanceof StorageIoError) {
        throw error;
      }
      throw new StorageIoError(op, `the shard sets on ${node}`, node, error);
    }
  }

  private async quarantine(op: string, ref: ShardRef, fatal: FatalStorageError): Promise<FatalStorageError> {
    const reason = `${fatal.name} in ${op} of ${shardLabel(ref)}: ${fatal.message}`;
    try {
      const marker = await writeQuarantine(this.root, ref.node, reason);
      return new FatalStorageError(
        `${fatal.message}; ${ref.node} is quarantined since ${marker.since}: inspect it, then run \`tablefate quarantine clear ${ref.node}\``,
        { cause: fatal.cause },
      );
    } catch (error) {
      return new FatalStorageError(`${fatal.message}; and ${ref.node} could not be quarantined: ${messageOf(error)}`, {
        cause: fatal.cause,
      });
    }
  }

  /** The sets in a node's live and trash directories (garbage is in the latter), in no particular order. */
  private async setsOn(node: string): Promise<StoredSet[]> {
    const sets = new Map<string, StoredSet>();
    for (const dirArea of ['live', 'trash'] as const) {
      const dir = areaDir(this.root, node, dirArea);
      for (const name of await listDir(dir)) {
        const parsed = parseShardFileName(name);
        // The driver writes garbage names in the trash directory only: a .gar in live is no area's.
        if (!parsed || (parsed.garbage && dirArea === 'live')) continue;
        const changedAt = await changedAtOf(path.join(dir, name));
        // Gone since the directory was read: a change running meanwhile moved or deleted it.
        if (changedAt === undefined) continue;
        const area: StorageArea = parsed.garbage ? 'garbage' : dirArea;
        const key = `${area}/${parsed.tableId}/${parsed.shard}`;
        const set = sets.get(key);
        if (set) {
          set.files += 1;
          set.changedAt = Math.max(set.changedAt, changedAt);
        } else {
          sets.set(key, { tableId: parsed.tableId, shard: parsed.shard, node, area, files: 1, changedAt });
        }
      }
    }
    return [...sets.values()];
  }

  /**
   * createShard's work, and a truncate's second half: a whole live set is left as it is; none, or a part of one, is
   * replaced by a fresh one.
   */
  private async placeFreshLive(ref: ShardRef, watch?: Watch): Promise<void> {
    const presence = await presenceOf(this.root, ref);
    // A trashed or garbage shard must never be shadowed by a fresh empty one: that would be silent data loss.
    refuseIfParked(`create ${shardLabel(ref)}`, presence, ['trash', 'garbage']);
    if (count(presence.live) === presence.live.length) return;
    // No set, or a partial one from a crashed create that never returned: it holds no data, so replacing it is
    // safe. The live directory first: if the node cannot hold it, no temporary file is left behind.
    await fs.mkdir(areaDir(this.root, ref.node, 'live'), { recursive: true });
    const temps = await writeFreshSet(this.root, ref);
    const live = shardPaths(this.root, ref, 'live');
    try {
      await renameSet(
        temps.map((temp, i): RenamePair => [temp, live[i]!]),
        this.store.renameOps,
        watch,
      );
    } catch (error) {
      // After a roll-back the temps are back under their names; they are ours alone, so clear them.
      // Not after a fatal one: nothing may touch the files until someone has looked.
      if (!(error instanceof FatalStorageError)) await removeAll(temps).catch(() => undefined);
      throw error;
    }
  }

  /** Removes the shard's set in `area` through garbage (discardSet's work, and an untruncate's of the empty set). */
  private async discard(ref: ShardRef, area: StorageArea, watch?: Watch): Promise<void> {
    if (area !== 'garbage') await renameToGarbage(this.store, ref, area, watch);
    await removeAll(shardPaths(this.root, ref, 'garbage'), watch);
  }

  /**
   * Runs a truncate's change, or its undo's, with the place of the shard's rows in the trash (the same shard of table
   * `into`, on the same node) and where both shards' files are. The rows' shard takes turns too, as a purge of the entry
   * renames the same files; always after the table's, so that no two changes wait for each other.
   */
  private withTrashedRows(
    ref: ShardRef,
    into: number,
    change: (rows: SetPlace, own: Presence, trashed: Presence) => Promise<void>,
  ): Promise<void> {
    const rows: SetPlace = { ref: { tableId: into, shard: ref.shard, node: ref.node }, area: 'trash' };
    this.assertValid(rows.ref);
    // (Its own turn, taken again inside, would wait for itself.)
    if (into === ref.tableId) throw new InvalidShardRefError(`${shardLabel(ref)} cannot be truncated into its own table ${into}`);
    return this.inTurnOf(rows.ref, async () => {
      const [own, trashed] = await Promise.all([presenceOf(this.root, ref), presenceOf(this.root, rows.ref)]);
      return change(rows, own, trashed);
    });
  }

  private assertValid(ref: ShardRef): void {
    // The ids become file names and the node a directory: reject anything that could point elsewhere.
    if (!Number.isSafeInteger(ref.tableId) || ref.tableId < 0) throw new InvalidShardRefError(`invalid tableId ${ref.tableId}`);
    if (!Number.isSafeInteger(ref.shard) || ref.shard < 0) throw new InvalidShardRefError(`invalid shard ${ref.shard}`);
    if (!this.nodes.includes(ref.node)) {
      throw new InvalidShardRefError(
        `unknown storage node ${JSON.stringify(ref.node)} for shard t${ref.tableId}-s${ref.shard}; nodes are ${this.nodes.join(', ')}`,
      );
    }
  }
}

/** Refuses `action` while the shard has a set (or a part of one) in any of `areas`. */
function refuseIfParked(action: string, presence: Presence, areas: ReadonlyArray<'trash' | 'garbage'>): void {
  const parked = areas.filter((area) => count(presence[area]) > 0);
  if (parked.length > 0) throw new PermanentStorageError(`cannot ${action}: it already exists in ${parked.join(' and ')}`);
}

/** listSets' order: node number, then area in AREAS order, then tableId and shard. */
function bySetOrder(a: StoredSet, b: StoredSet): number {
  return byNodeNumber(a.node, b.node) || AREAS.indexOf(a.area) - AREAS.indexOf(b.area) || a.tableId - b.tableId || a.shard - b.shard;
}
