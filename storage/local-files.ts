import { createHash, randomBytes } from 'node:crypto';
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
import { changedAtOf, exists, hashFile, listDir, removeAll, writeDurably } from './files';
import { byNodeNumber, NODE_NAME } from './nodes';
import { clearQuarantine, listQuarantined, readQuarantine, writeQuarantine } from './quarantine';
import { renameSet, type RenameOps, type RenamePair } from './rename-set';
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

const AREAS: readonly StorageArea[] = ['live', 'trash', 'garbage'];

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

/** Which of the set's files (by position in shardFileNames) exist in each area. */
type Presence = Record<StorageArea, boolean[]>;

const count = (flags: readonly boolean[]): number => flags.filter(Boolean).length;

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
  private readonly renameOps: RenameOps | undefined;

  constructor(opts: LocalFileStorageOptions) {
    const nodeCount = opts.nodeCount ?? 3;
    if (!Number.isInteger(nodeCount) || nodeCount < 1) throw new RangeError(`nodeCount must be a positive integer, got ${nodeCount}`);
    this.root = path.resolve(opts.root);
    for (const node of opts.nodes ?? []) {
      if (!NODE_NAME.test(node)) throw new RangeError(`a storage node is named node-<k>, got ${JSON.stringify(node)}`);
    }
    this.nodes = Object.freeze(opts.nodes ? [...opts.nodes] : Array.from({ length: nodeCount }, (_, i) => `node-${i}`));
    this.faults = opts.faults ?? new FaultInjector();
    this.renameOps = opts.renameOps;
  }

  createShard(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guarded('createShard', ref, watch, async () => {
      const presence = await this.presence(ref);
      // A trashed or garbage shard must never be shadowed by a fresh empty one: that would be silent data loss.
      const parked = (['trash', 'garbage'] as const).filter((area) => count(presence[area]) > 0);
      if (parked.length > 0) {
        throw new PermanentStorageError(`cannot create ${shardLabel(ref)}: it already exists in ${parked.join(' and ')}`);
      }
      if (count(presence.live) === presence.live.length) return;
      // No set, or a partial one from a crashed create that never returned: it holds no data, so replacing it is
      // safe. The live directory first: if the node cannot hold it, no temporary file is left behind.
      await fs.mkdir(areaDir(this.root, ref.node, 'live'), { recursive: true });
      const temps = await this.writeFreshSet(ref);
      const live = shardPaths(this.root, ref, 'live');
      try {
        await renameSet(
          temps.map((temp, i): RenamePair => [temp, live[i]!]),
          this.renameOps,
          watch,
        );
      } catch (error) {
        // After a roll-back the temps are back under their names; they are ours alone, so clear them.
        // Not after a fatal one: nothing may touch the files until someone has looked.
        if (!(error instanceof FatalStorageError)) await removeAll(temps).catch(() => undefined);
        throw error;
      }
    });
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
      await this.transfer(ref, from, to, watch);
    });
  }

  markGarbage(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guarded('markGarbage', ref, watch, async () => {
      const presence = await this.presence(ref);
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
      await this.transfer(ref, 'trash', 'garbage', watch);
    });
  }

  unmarkGarbage(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guarded('unmarkGarbage', ref, watch, () => this.transfer(ref, 'garbage', 'trash', watch));
  }

  deleteGarbage(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guarded('deleteGarbage', ref, watch, async () => {
      const presence = await this.presence(ref);
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
      const presence = await this.presence(ref);
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
      if (area !== 'garbage') await this.renameToGarbage(ref, area, watch);
      await removeAll(shardPaths(this.root, ref, 'garbage'), watch);
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
    return op === 'inspect'
      ? this.unguardedTurn(op, ref, watch, body)
      : inTurn(`${this.root}:${ref.node}:${ref.tableId}:${ref.shard}`, () => this.unguardedTurn(op, ref, watch, body));
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

  /**
   * Moves whatever part of the set is still at `from` to `to`. All at `to` is success; a set split by a crash
   * is completed forwards. A set with no file at either place, or a file at both, is an error: the data is
   * not where the caller thinks, and that must not pass silently. Transient (StorageInvariantError), because a
   * concurrent attempt on the same shard can make the check see a file in flight.
   */
  private async transfer(ref: ShardRef, from: StorageArea, to: StorageArea, watch?: Watch): Promise<void> {
    const presence = await this.presence(ref);
    const names = shardFileNames(ref);
    const fromPaths = shardPaths(this.root, ref, from);
    const toPaths = shardPaths(this.root, ref, to);

    const both = names.filter((_, i) => presence[from][i] && presence[to][i]);
    if (both.length > 0)
      throw new StorageInvariantError(`cannot move ${shardLabel(ref)} from ${from} to ${to}: ${both.join(', ')} exist in both`);
    const missing = names.filter((_, i) => !presence[from][i] && !presence[to][i]);
    if (missing.length === names.length) {
      const elsewhere = AREAS.filter((a) => a !== from && a !== to && presence[a].some(Boolean));
      const hint = elsewhere.length > 0 ? ` (found in ${elsewhere.join(', ')})` : '';
      throw new StorageInvariantError(`cannot move ${shardLabel(ref)} from ${from} to ${to}: it is in neither${hint}`);
    }
    if (missing.length > 0)
      throw new StorageInvariantError(
        `cannot move ${shardLabel(ref)} from ${from} to ${to}: the set is incomplete, missing ${missing.join(', ')}`,
      );

    const pending = fromPaths.flatMap((file, i): RenamePair[] => (presence[from][i] ? [[file, toPaths[i]!]] : []));
    if (pending.length === 0) return;
    await fs.mkdir(areaDir(this.root, ref.node, to), { recursive: true });
    await renameSet(pending, this.renameOps, watch);
  }

  /**
   * discardSet's first half, purge's mark for either area: renames the part of the set that is in `area` to
   * its garbage names, so that a crash while deleting leaves files everyone knows to be garbage, never a torn
   * set that looks like a damaged shard. Not transfer: a set that is partial (a crashed create's leftovers),
   * or already gone, is no error here, only less to do.
   */
  private async renameToGarbage(ref: ShardRef, area: ShardArea, watch?: Watch): Promise<void> {
    const presence = await this.presence(ref);
    const garbage = shardPaths(this.root, ref, 'garbage');
    const pending = shardPaths(this.root, ref, area).flatMap((file, i): RenamePair[] => (presence[area][i] ? [[file, garbage[i]!]] : []));
    // Nothing (left) in the area: what garbage there is, discardSet deletes next.
    if (pending.length === 0) return;
    // Garbage now is left over (no purge runs while the caller holds the table's lock): from a purge or a
    // discard that crashed, maybe this very discard, half renamed. It is deleted first, so that no rename
    // below finds its target taken; the set in the other area shares no name with it and is not touched.
    if (count(presence.garbage) > 0) await removeAll(garbage, watch);
    // Garbage lives in the trash directory, which a live set's node may not have yet; live -> garbage is a
    // rename between two directories of one node, so of one file system.
    await fs.mkdir(areaDir(this.root, ref.node, 'garbage'), { recursive: true });
    await renameSet(pending, this.renameOps, watch);
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

  private async presence(ref: ShardRef): Promise<Presence> {
    const entries = await Promise.all(
      AREAS.map(async (area) => [area, await Promise.all(shardPaths(this.root, ref, area).map(exists))] as const),
    );
    return Object.fromEntries(entries) as Presence;
  }

  /** Writes a complete new set under names no one else uses, so a crash mid-write never looks like a shard. */
  private async writeFreshSet(ref: ShardRef): Promise<string[]> {
    const tmpDir = path.join(this.root, ref.node, 'tmp');
    await fs.mkdir(tmpDir, { recursive: true });
    // Unique per call: a retried activity running alongside a stale attempt must not rename the other's files.
    const nonce = randomBytes(6).toString('hex');
    const temps = shardFileNames(ref).map((name) => path.join(tmpDir, `${name}.${nonce}.tmp`));
    const meta = JSON.stringify({ tableId: ref.tableId, shard: ref.shard, createdAt: Date.now() });
    const contents = shardFileNames(ref).map((name) => (name.endsWith('.meta') ? meta : ''));
    // The three files at once: each waits for its own sync, and the syncs overlap.
    const written = await Promise.allSettled(temps.map((temp, i) => writeDurably(temp, contents[i]!)));
    const failed = written.find((w): w is PromiseRejectedResult => w.status === 'rejected');
    if (failed) {
      await removeAll(temps).catch(() => undefined);
      throw failed.reason;
    }
    return temps;
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

/** listSets' order: node number, then area in AREAS order, then tableId and shard. */
function bySetOrder(a: StoredSet, b: StoredSet): number {
  return byNodeNumber(a.node, b.node) || AREAS.indexOf(a.area) - AREAS.indexOf(b.area) || a.tableId - b.tableId || a.shard - b.shard;
}
