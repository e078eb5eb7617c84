import { promises as fs } from 'node:fs';
import path from 'node:path';
import {
  classifyStorageError,
  FatalStorageError,
  LocalFileStorage,
  PermanentStorageError,
  QuarantinedNodeError,
  shardPaths,
  StorageIoError,
  writeQuarantine,
  type RenameOps,
  type ShardRef,
  type StorageArea,
} from '../../storage';
import { filesIn, filesUnder, tempRootPerTest } from '../support/temp-root';
import type { StoredSet } from '../../storage/driver';

/**
 * The reconciler's two storage calls: listSets (every set on disk, whatever the catalog says) and discardSet
 * (one area's copy of a shard, through garbage, leaving its other copies alone). Real files in a temp dir.
 */

let root: string;
tempRootPerTest('tablefate-sets-', (dir) => (root = dir));

const ref: ShardRef = { tableId: 42, shard: 1, node: 'node-2' };

const presentIn = (r: ShardRef, area: StorageArea) => filesIn(root, r, area);

/** Writes a set's files (or the chosen ones, by position) in an area, each holding its own name and a tag. */
async function writeSet(r: ShardRef, area: StorageArea, tag: string = area, which: readonly number[] = [0, 1, 2]): Promise<void> {
  const files = shardPaths(root, r, area);
  await fs.mkdir(path.dirname(files[0]!), { recursive: true });
  for (const i of which) await fs.writeFile(files[i]!, `${tag}: ${path.basename(files[i]!)}`);
}

async function contentsIn(r: ShardRef, area: StorageArea): Promise<string[]> {
  return Promise.all(shardPaths(root, r, area).map((file) => fs.readFile(file, 'utf8')));
}

/** Renames for real, except the chosen calls (1-based), which fail without touching the disk. */
function renameOpsFailingOn(...failingCalls: number[]): RenameOps & { calls: Array<[string, string]> } {
  const calls: Array<[string, string]> = [];
  return {
    calls,
    async rename(from, to) {
      calls.push([from, to]);
      if (failingCalls.includes(calls.length)) throw new Error(`simulated failure of rename #${calls.length}`);
      await fs.rename(from, to);
    },
  };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a failure');
    },
    (error: unknown) => error,
  );
}

/** What listSets says, without the ages (which the age tests check on their own). */
async function setsOf(storage: LocalFileStorage): Promise<Array<Omit<StoredSet, 'changedAt'>>> {
  return (await storage.listSets()).sets.map(({ changedAt: _changedAt, ...rest }) => rest);
}

describe('listSets', () => {
  test('listSets finds every set in every area with its age, in node, area, table and shard order', async () => {
    const storage = new LocalFileStorage({ root, nodeCount: 11 });
    const before = Date.now();
    await writeSet({ tableId: 10, shard: 0, node: 'node-2' }, 'live');
    await writeSet({ tableId: 2, shard: 3, node: 'node-2' }, 'garbage');
    await writeSet({ tableId: 2, shard: 1, node: 'node-2' }, 'live');
    await writeSet({ tableId: 2, shard: 0, node: 'node-2' }, 'trash');
    await writeSet({ tableId: 7, shard: 0, node: 'node-10' }, 'live');
    await writeSet({ tableId: 7, shard: 1, node: 'node-0' }, 'trash');
    const after = Date.now();

    const listing = await storage.listSets();
    expect(listing.skippedNodes).toEqual([]);
    expect(listing.sets.map(({ changedAt: _c, ...rest }) => rest)).toEqual([
      { tableId: 7, shard: 1, node: 'node-0', area: 'trash', files: 3 },
      { tableId: 2, shard: 1, node: 'node-2', area: 'live', files: 3 },
      { tableId: 10, shard: 0, node: 'node-2', area: 'live', files: 3 },
      { tableId: 2, shard: 0, node: 'node-2', area: 'trash', files: 3 },
      { tableId: 2, shard: 3, node: 'node-2', area: 'garbage', files: 3 },
      { tableId: 7, shard: 0, node: 'node-10', area: 'live', files: 3 },
    ]);
    // File times come from a coarser clock than Date.now(): allow for its tick.
    for (const set of listing.sets) {
      expect(set.changedAt).toBeGreaterThanOrEqual(before - 50);
      expect(set.changedAt).toBeLessThanOrEqual(after + 50);
    }
  });

  test('a set moved to trash looks as new as the move, not as old as its data', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    const [created] = (await storage.listSets()).sets;
    await sleep(100);
    const beforeMove = Date.now();
    await storage.moveShard(ref, 'live', 'trash');
    const [moved] = (await storage.listSets()).sets;
    expect(moved).toMatchObject({ area: 'trash', files: 3 });
    expect(moved!.changedAt).toBeGreaterThan(created!.changedAt + 50);
    expect(moved!.changedAt).toBeGreaterThanOrEqual(beforeMove - 50);
  });

  test('the age of a set is that of its newest file', async () => {
    const storage = new LocalFileStorage({ root });
    await writeSet(ref, 'live', 'live', [0, 2]);
    await sleep(100);
    await writeSet(ref, 'live', 'live', [1]);
    const [set] = (await storage.listSets()).sets;
    const idx = await fs.lstat(shardPaths(root, ref, 'live')[1]!);
    expect(set).toMatchObject({ files: 3, changedAt: idx.ctimeMs });
  });

  test('a set half renamed shows in both areas with its file counts', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    // What a crash after the first rename of a move to trash leaves behind.
    await fs.mkdir(path.dirname(shardPaths(root, ref, 'trash')[0]!), { recursive: true });
    await fs.rename(shardPaths(root, ref, 'live')[0]!, shardPaths(root, ref, 'trash')[0]!);
    // And a garbage set of another shard of the same table torn by a crashed deletion.
    const other: ShardRef = { ...ref, shard: 0 };
    await writeSet(other, 'garbage', 'garbage', [2]);

    expect(await setsOf(storage)).toEqual([
      { tableId: 42, shard: 1, node: 'node-2', area: 'live', files: 2 },
      { tableId: 42, shard: 1, node: 'node-2', area: 'trash', files: 1 },
      { tableId: 42, shard: 0, node: 'node-2', area: 'garbage', files: 1 },
    ]);
  });

  test('missing node and area directories are empty, and so is a storage root that does not exist', async () => {
    expect(await new LocalFileStorage({ root }).listSets()).toEqual({ sets: [], skippedNodes: [] });
    expect(await new LocalFileStorage({ root: path.join(root, 'not-yet') }).listSets()).toEqual({ sets: [], skippedNodes: [] });
    // A node with a trash directory and no live one.
    await writeSet({ tableId: 1, shard: 0, node: 'node-1' }, 'trash');
    expect(await setsOf(new LocalFileStorage({ root }))).toEqual([{ tableId: 1, shard: 0, node: 'node-1', area: 'trash', files: 3 }]);
  });

  test('a quarantined node is skipped and reported', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard({ tableId: 1, shard: 0, node: 'node-0' });
    await storage.createShard({ tableId: 1, shard: 1, node: 'node-1' });
    await storage.createShard({ tableId: 1, shard: 2, node: 'node-2' });
    await writeQuarantine(root, 'node-1', 'a test quarantined it');

    const listing = await storage.listSets();
    expect(listing.skippedNodes).toEqual(['node-1']);
    expect(listing.sets.map((s) => `${s.node} t${s.tableId}-s${s.shard}`)).toEqual(['node-0 t1-s0', 'node-2 t1-s2']);

    // A quarantined node that does not even have a directory of sets is still reported as skipped.
    await writeQuarantine(root, 'node-0', 'and this one');
    await fs.rm(path.join(root, 'node-0', 'live'), { recursive: true });
    expect((await storage.listSets()).skippedNodes).toEqual(['node-0', 'node-1']);

    await storage.clearQuarantine('node-1');
    expect((await storage.listSets()).skippedNodes).toEqual(['node-0']);
  });

  test('files that are not shard files are ignored', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    const live = path.join(root, 'node-2', 'live');
    const trash = path.join(root, 'node-2', 'trash');
    await fs.mkdir(trash, { recursive: true });
    for (const stray of [
      path.join(live, 'README'),
      path.join(live, 't42-s1.dat.tmp'),
      path.join(live, 't42-s1.bak'),
      path.join(live, 'T42-S1.dat'),
      // A spelling the driver never writes: no ShardRef names it, so nothing could ever discard it.
      path.join(live, 't042-s1.dat'),
      path.join(live, 't99999999999999999999-s1.dat'),
      // Garbage names belong in the trash directory only.
      path.join(live, 't42-s1.dat.gar'),
      path.join(trash, 't42-s1.dat.gar.gar'),
      path.join(trash, 'notes.txt'),
      // A create's temporary files, and a node outside the configured three.
      path.join(root, 'node-2', 'tmp', 't42-s1.dat.abc123.tmp'),
      path.join(root, 'node-3', 'live', 't1-s0.dat'),
      path.join(root, 't1-s0.dat'),
    ]) {
      await fs.mkdir(path.dirname(stray), { recursive: true });
      await fs.writeFile(stray, 'not a shard file');
    }
    expect(await setsOf(storage)).toEqual([{ tableId: 42, shard: 1, node: 'node-2', area: 'live', files: 3 }]);
  });

  test('a node whose area directory cannot be read fails the listing with a StorageIoError naming the node', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard({ tableId: 1, shard: 0, node: 'node-0' });
    // A symlink loop where node-1's trash directory belongs: readdir fails with ELOOP (root can read anything else).
    await fs.mkdir(path.join(root, 'node-1'), { recursive: true });
    await fs.symlink('trash', path.join(root, 'node-1', 'trash'));
    const error = await failureOf(storage.listSets());
    expect(error).toBeInstanceOf(StorageIoError);
    expect(error).toMatchObject({ op: 'listSets', node: 'node-1', code: 'ELOOP' });
    expect((error as Error).message).toMatch(/^listSets of the shard sets on node-1 failed: .*ELOOP/);
    expect(classifyStorageError(error)).toBe('permanent');
  });
});

describe('discardSet', () => {
  test('discardSet removes a trash duplicate and leaves the live copy', async () => {
    const storage = new LocalFileStorage({ root });
    await writeSet(ref, 'live');
    await writeSet(ref, 'trash');
    const live = await contentsIn(ref, 'live');

    await storage.discardSet(ref, 'trash');
    expect(await presentIn(ref, 'trash')).toEqual([false, false, false]);
    expect(await presentIn(ref, 'garbage')).toEqual([false, false, false]);
    expect(await contentsIn(ref, 'live')).toEqual(live);
    expect(await setsOf(storage)).toEqual([{ tableId: 42, shard: 1, node: 'node-2', area: 'live', files: 3 }]);
  });

  test('discardSet of a live set goes through garbage and leaves nothing of it, while the trash copy stays', async () => {
    const ops = renameOpsFailingOn();
    const storage = new LocalFileStorage({ root, renameOps: ops });
    await storage.createShard(ref);
    ops.calls.length = 0;
    await writeSet(ref, 'trash');
    const trash = await contentsIn(ref, 'trash');

    await storage.discardSet(ref, 'live');
    // Renamed to the garbage names (in the trash directory) first, then deleted.
    const garbage = shardPaths(root, ref, 'garbage');
    expect(ops.calls).toEqual(shardPaths(root, ref, 'live').map((file, i) => [file, garbage[i]]));
    expect(await presentIn(ref, 'live')).toEqual([false, false, false]);
    expect(await presentIn(ref, 'garbage')).toEqual([false, false, false]);
    expect(await contentsIn(ref, 'trash')).toEqual(trash);
  });

  test('discardSet of a live set on a node without a trash directory leaves nothing behind', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    await storage.discardSet(ref, 'live');
    expect(await filesUnder(root)).toEqual([]);
    expect(await storage.listSets()).toEqual({ sets: [], skippedNodes: [] });
  });

  test('discardSet of garbage deletes only the garbage', async () => {
    const ops = renameOpsFailingOn();
    const storage = new LocalFileStorage({ root, renameOps: ops });
    await writeSet(ref, 'live');
    await writeSet(ref, 'trash');
    await writeSet(ref, 'garbage');
    await storage.discardSet(ref, 'garbage');
    expect(ops.calls).toEqual([]);
    expect(await presentIn(ref, 'garbage')).toEqual([false, false, false]);
    expect(await contentsIn(ref, 'live')).toEqual(shardPaths(root, ref, 'live').map((f) => `live: ${path.basename(f)}`));
    expect(await contentsIn(ref, 'trash')).toEqual(shardPaths(root, ref, 'trash').map((f) => `trash: ${path.basename(f)}`));
  });

  test('discardSet deletes garbage left over by a crashed purge before it renames the set to those names', async () => {
    const storage = new LocalFileStorage({ root });
    await writeSet(ref, 'live');
    await writeSet(ref, 'trash');
    // A purge that crashed half way through its deletion left two garbage files.
    await writeSet(ref, 'garbage', 'stale', [0, 2]);

    await storage.discardSet(ref, 'trash');
    expect(await presentIn(ref, 'trash')).toEqual([false, false, false]);
    expect(await presentIn(ref, 'garbage')).toEqual([false, false, false]);
    expect(await presentIn(ref, 'live')).toEqual([true, true, true]);
  });

  test('discardSet removes a partial set, and of another shard or table touches nothing', async () => {
    const storage = new LocalFileStorage({ root });
    const sibling: ShardRef = { ...ref, shard: 2 };
    const otherTable: ShardRef = { ...ref, tableId: 421 };
    await writeSet(ref, 'live', 'live', [1]);
    await writeSet(sibling, 'live');
    await writeSet(otherTable, 'garbage');

    await storage.discardSet(ref, 'live');
    await storage.discardSet(ref, 'garbage');
    expect(await setsOf(storage)).toEqual([
      { tableId: 42, shard: 2, node: 'node-2', area: 'live', files: 3 },
      { tableId: 421, shard: 1, node: 'node-2', area: 'garbage', files: 3 },
    ]);
  });

  test('discardSet run twice, or of a set that was never there, is a success', async () => {
    const storage = new LocalFileStorage({ root });
    for (const area of ['live', 'trash', 'garbage'] as const) await storage.discardSet(ref, area);
    await storage.createShard(ref);
    await storage.moveShard(ref, 'live', 'trash');
    await storage.discardSet(ref, 'trash');
    await storage.discardSet(ref, 'trash');
    expect(await filesUnder(root)).toEqual([]);
  });

  test('discardSet after a crash half way through its renames finishes the job', async () => {
    const storage = new LocalFileStorage({ root });
    await writeSet(ref, 'live');
    await writeSet(ref, 'trash');
    // A process killed after the first rename of a discard of the trash copy: no roll-back ran.
    await fs.rename(shardPaths(root, ref, 'trash')[0]!, shardPaths(root, ref, 'garbage')[0]!);
    expect(await setsOf(storage)).toEqual([
      { tableId: 42, shard: 1, node: 'node-2', area: 'live', files: 3 },
      { tableId: 42, shard: 1, node: 'node-2', area: 'trash', files: 2 },
      { tableId: 42, shard: 1, node: 'node-2', area: 'garbage', files: 1 },
    ]);

    await storage.discardSet(ref, 'trash');
    expect(await setsOf(storage)).toEqual([{ tableId: 42, shard: 1, node: 'node-2', area: 'live', files: 3 }]);
  });

  test('discardSet after a crash half way through its deletion finishes the job', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    // Killed after the renames and the first deletion.
    await writeSet(ref, 'garbage', 'renamed', [1, 2]);
    await fs.rm(path.join(root, 'node-2', 'live'), { recursive: true });
    await storage.discardSet(ref, 'live');
    expect(await filesUnder(root)).toEqual([]);
  });

  test('a failed rename puts the set back and answers with a transient StorageIoError; a re-run finishes the job', async () => {
    await new LocalFileStorage({ root }).createShard(ref);
    const failing = new LocalFileStorage({ root, renameOps: renameOpsFailingOn(2) });
    const error = await failureOf(failing.discardSet(ref, 'live'));
    expect(error).toBeInstanceOf(StorageIoError);
    expect(error).toMatchObject({ op: 'discardSet', node: 'node-2' });
    expect((error as Error).message).toContain('discardSet of shard t42-s1 on node-2 failed: simulated failure of rename #2');
    expect(classifyStorageError(error)).toBe('transient');
    expect(await presentIn(ref, 'live')).toEqual([true, true, true]);
    expect(await presentIn(ref, 'garbage')).toEqual([false, false, false]);

    await new LocalFileStorage({ root }).discardSet(ref, 'live');
    expect(await filesUnder(root)).toEqual([]);
  });

  test('a rename that can be neither done nor undone is fatal and quarantines the node, which every method then refuses', async () => {
    await new LocalFileStorage({ root }).createShard(ref);
    const stuck = new LocalFileStorage({ root, renameOps: renameOpsFailingOn(2, 3) });
    const error = await failureOf(stuck.discardSet(ref, 'live'));
    expect(error).toBeInstanceOf(FatalStorageError);
    expect((error as Error).message).toContain('node-2 is quarantined');

    const storage = new LocalFileStorage({ root });
    expect(await storage.quarantineOf('node-2')).toMatchObject({
      reason: expect.stringContaining('discardSet of shard t42-s1') as unknown,
    });
    // Left exactly as the failures left it: nothing may touch it until someone has looked.
    expect(await presentIn(ref, 'live')).toEqual([false, true, true]);
    expect(await presentIn(ref, 'garbage')).toEqual([true, false, false]);
    await expect(storage.discardSet(ref, 'garbage')).rejects.toBeInstanceOf(QuarantinedNodeError);
    expect(await presentIn(ref, 'garbage')).toEqual([true, false, false]);
    expect(await storage.listSets()).toEqual({ sets: [], skippedNodes: ['node-2'] });

    // Once an operator has cleared it, a re-run finishes the job.
    await storage.clearQuarantine('node-2');
    await storage.discardSet(ref, 'live');
    expect(await filesUnder(root)).toEqual([]);
  });

  test('discardSet stopped by its caller half way puts a rename back or stops between deletions; a re-run finishes', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    const stop = (after: number): { signal: AbortSignal; beat: () => void } => {
      const controller = new AbortController();
      let beats = 0;
      return {
        signal: controller.signal,
        beat: () => (++beats === after ? controller.abort(new Error(`stopped after ${after}`)) : undefined),
      };
    };

    // Stopped before the third rename: the two done are put back.
    await expect(storage.discardSet(ref, 'live', stop(2))).rejects.toThrow('stopped after 2');
    expect(await presentIn(ref, 'live')).toEqual([true, true, true]);
    expect(await presentIn(ref, 'garbage')).toEqual([false, false, false]);

    // Three renames, then stopped before the second deletion.
    await expect(storage.discardSet(ref, 'live', stop(4))).rejects.toThrow('stopped after 4');
    expect(await presentIn(ref, 'live')).toEqual([false, false, false]);
    expect(await presentIn(ref, 'garbage')).toEqual([false, true, true]);

    let beats = 0;
    await storage.discardSet(ref, 'live', { beat: () => (beats += 1) });
    // One beat per file: nothing left to rename, three garbage paths to delete (gone or not).
    expect(beats).toBe(3);
    expect(await filesUnder(root)).toEqual([]);
  });

  test('discardSet refuses a quarantined node, an unknown node and an unknown area, touching nothing', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    await storage.moveShard(ref, 'live', 'trash');
    const before = await filesUnder(root);

    const bogus = await failureOf(storage.discardSet(ref, 'Trash' as StorageArea));
    expect(bogus).toBeInstanceOf(PermanentStorageError);
    expect((bogus as Error).message).toBe('cannot discard shard t42-s1 on node-2: unknown area "Trash"');
    await expect(storage.discardSet({ ...ref, node: 'node-3' }, 'trash')).rejects.toThrow(/unknown storage node/);
    await expect(storage.discardSet({ ...ref, tableId: -1 }, 'trash')).rejects.toThrow(/invalid tableId/);

    await writeQuarantine(root, 'node-2', 'a test quarantined it');
    const quarantined = await failureOf(storage.discardSet(ref, 'trash'));
    expect(quarantined).toBeInstanceOf(QuarantinedNodeError);
    expect(classifyStorageError(quarantined)).toBe('permanent');
    expect(await filesUnder(root)).toEqual([...before, 'node-2/QUARANTINED'].sort());
  });
});
