import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import {
  FatalStorageError,
  InvalidShardRefError,
  FaultInjector,
  LocalFileStorage,
  PermanentStorageError,
  QuarantinedNodeError,
  writeQuarantine,
  renameSet,
  shardPaths,
  type RenameOps,
  type ShardRef,
  type StorageArea,
} from '../../storage';
import { exists, filesIn, tempRootPerTest } from '../support/temp-root';

let root: string;
tempRootPerTest('tablefate-storage-', (dir) => (root = dir));

const ref: ShardRef = { tableId: 42, shard: 1, node: 'node-2' };

const presentIn = (r: ShardRef, area: StorageArea) => filesIn(root, r, area);

async function writeRandomData(r: ShardRef, area: StorageArea = 'live'): Promise<Buffer> {
  const data = randomBytes(4096 + Math.floor(Math.random() * 4096));
  await fs.writeFile(shardPaths(root, r, area)[0]!, data);
  return data;
}

async function listFiles(dir: string): Promise<string[]> {
  const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
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

describe('renameSet', () => {
  async function makeFiles(names: string[]): Promise<Array<readonly [string, string]>> {
    const pairs = names.map((n) => [path.join(root, n), path.join(root, `${n}.renamed`)] as const);
    for (const [from] of pairs) await fs.writeFile(from, path.basename(from));
    return pairs;
  }

  it('renames every pair', async () => {
    const pairs = await makeFiles(['a', 'b', 'c']);
    await renameSet(pairs);
    for (const [from, to] of pairs) {
      expect(await exists(from)).toBe(false);
      expect(await fs.readFile(to, 'utf8')).toBe(path.basename(from));
    }
  });

  it('rolls back when the 2nd of 3 renames fails and rethrows the original error', async () => {
    const pairs = await makeFiles(['a', 'b', 'c']);
    const ops = renameOpsFailingOn(2);
    await expect(renameSet(pairs, ops)).rejects.toThrow('simulated failure of rename #2');
    for (const [from, to] of pairs) {
      expect(await fs.readFile(from, 'utf8')).toBe(path.basename(from));
      expect(await exists(to)).toBe(false);
    }
    // forward a, forward b (fails), back a; c is never tried.
    expect(ops.calls).toEqual([pairs[0], pairs[1], [pairs[0]![1], pairs[0]![0]]]);
  });

  it('throws FatalStorageError naming both renames when the roll-back fails too', async () => {
    const pairs = await makeFiles(['a', 'b', 'c']);
    const error = await renameSet(pairs, renameOpsFailingOn(2, 3)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(FatalStorageError);
    const message = (error as FatalStorageError).message;
    expect(message).toContain(`${pairs[1]![0]} -> ${pairs[1]![1]}`);
    expect(message).toContain(`${pairs[0]![1]} -> ${pairs[0]![0]}`);
    // Stuck exactly as the failures left it: a renamed, b and c not.
    expect(await exists(pairs[0]![1])).toBe(true);
    expect(await exists(pairs[1]![0])).toBe(true);
    expect(await exists(pairs[2]![0])).toBe(true);
  });
});

describe('FaultInjector', () => {
  it('matches only the op, table and shard it names', () => {
    const faults = new FaultInjector();
    faults.inject({ op: 'moveShard', tableId: 7, kind: 'permanent' });
    expect(() => faults.check('moveShard', { tableId: 8, shard: 0 })).not.toThrow();
    expect(() => faults.check('dropShard', { tableId: 7, shard: 0 })).not.toThrow();
    expect(() => faults.check('moveShard', { tableId: 7, shard: 3 })).toThrow(PermanentStorageError);
  });

  it('rejects a times that is not a positive integer', () => {
    expect(() => new FaultInjector().inject({ op: 'createShard', kind: 'transient', times: 0 })).toThrow(RangeError);
  });
});

describe('LocalFileStorage', () => {
  it('names nodes node-0..node-{n-1}', () => {
    expect(new LocalFileStorage({ root, nodeCount: 4 }).nodes).toEqual(['node-0', 'node-1', 'node-2', 'node-3']);
    expect(new LocalFileStorage({ root }).nodes).toHaveLength(3);
  });

  it('creates, inspects and moves a shard to trash and back with the same checksum', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    const fresh = await storage.inspect(ref);
    expect(fresh).toMatchObject({ tableId: 42, shard: 1, node: 'node-2', area: 'live' });
    expect(fresh.checksum).toMatch(/^[0-9a-f]{64}$/);

    const data = await writeRandomData(ref);
    const live = await storage.inspect(ref);
    expect(live.bytes).toBe(fresh.bytes + data.length);
    expect(live.checksum).not.toBe(fresh.checksum);

    await storage.moveShard(ref, 'live', 'trash');
    const trashed = await storage.inspect(ref);
    expect(trashed).toMatchObject({ area: 'trash', bytes: live.bytes, checksum: live.checksum });
    expect(await presentIn(ref, 'live')).toEqual([false, false, false]);

    await storage.moveShard(ref, 'trash', 'live');
    expect(await storage.inspect(ref)).toMatchObject({ area: 'live', bytes: live.bytes, checksum: live.checksum });
    expect(await fs.readFile(shardPaths(root, ref, 'live')[0]!)).toEqual(data);
  });

  it('measures many shards at once, in order, wherever each is, as inspect counts them', async () => {
    const storage = new LocalFileStorage({ root });
    const at = (tableId: number, node = 'node-1'): ShardRef => ({ tableId, shard: 0, node });
    const [live, trashed, garbage, halfMoved, nowhere, other] = [at(1), at(2), at(3), at(4), at(5), at(6, 'node-0')];
    for (const r of [live, trashed, garbage, halfMoved, other]) {
      await storage.createShard(r);
      await writeRandomData(r);
    }
    await storage.moveShard(trashed, 'live', 'trash');
    await storage.moveShard(garbage, 'live', 'trash');
    await storage.markGarbage(garbage);
    // One file of the set in the trash, two still live: a move stopped half way.
    await fs.rename(shardPaths(root, halfMoved, 'live')[0]!, shardPaths(root, halfMoved, 'trash')[0]!);
    const asked = [other, nowhere, halfMoved, garbage, trashed, live];
    const expected = await Promise.all(asked.map(async (r) => (await storage.inspect(r)).bytes));
    expect(expected.filter((bytes) => bytes > 4096)).toHaveLength(5);
    expect(await storage.sizesOf(asked)).toEqual(expected);
    expect(await storage.sizesOf([])).toEqual([]);

    await expect(storage.sizesOf([live, { ...live, node: '../escape' }])).rejects.toThrow(InvalidShardRefError);
    await writeQuarantine(root, 'node-1', 'a fatal error');
    await expect(storage.sizesOf([other, live])).rejects.toThrow(QuarantinedNodeError);
    expect(await storage.sizesOf([other])).toEqual([expected[0]]);
  });

  it('writes meta JSON and reports a missing shard as area null', async () => {
    const storage = new LocalFileStorage({ root });
    expect(await storage.inspect(ref)).toMatchObject({ area: null, bytes: 0 });
    await storage.createShard(ref);
    const meta = JSON.parse(await fs.readFile(shardPaths(root, ref, 'live')[2]!, 'utf8')) as Record<string, unknown>;
    expect(meta).toMatchObject({ tableId: 42, shard: 1 });
    expect(typeof meta.createdAt).toBe('number');
  });

  it('places files under the node dir, named from the ids only', async () => {
    const storage = new LocalFileStorage({ root });
    const r: ShardRef = { tableId: 7, shard: 2, node: 'node-1' };
    await storage.createShard(r);
    expect((await listFiles(root)).sort()).toEqual(['node-1/live/t7-s2.dat', 'node-1/live/t7-s2.idx', 'node-1/live/t7-s2.meta']);
    await storage.moveShard(r, 'live', 'trash');
    await storage.markGarbage(r);
    expect((await listFiles(root)).sort()).toEqual([
      'node-1/trash/t7-s2.dat.gar',
      'node-1/trash/t7-s2.idx.gar',
      'node-1/trash/t7-s2.meta.gar',
    ]);
  });

  it('rejects a node it does not have', async () => {
    const storage = new LocalFileStorage({ root });
    await expect(storage.createShard({ ...ref, node: '../escape' })).rejects.toThrow(/unknown storage node/);
    expect(await listFiles(root)).toEqual([]);
  });

  it('runs every operation twice without harm', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    const data = await writeRandomData(ref);
    await storage.createShard(ref); // must not replace the existing set
    expect(await fs.readFile(shardPaths(root, ref, 'live')[0]!)).toEqual(data);
    const before = await storage.inspect(ref);

    for (const step of [
      () => storage.moveShard(ref, 'live', 'trash'),
      () => storage.markGarbage(ref),
      () => storage.unmarkGarbage(ref),
      () => storage.moveShard(ref, 'trash', 'live'),
    ]) {
      await step();
      const once = await storage.inspect(ref);
      await step();
      expect(await storage.inspect(ref)).toEqual(once);
      expect(once.checksum).toBe(before.checksum);
    }

    await storage.moveShard(ref, 'live', 'trash');
    await storage.markGarbage(ref);
    await storage.deleteGarbage(ref);
    await storage.deleteGarbage(ref);
    expect(await storage.inspect(ref)).toMatchObject({ area: null, bytes: 0 });

    await storage.createShard(ref);
    await storage.dropShard(ref);
    await storage.dropShard(ref);
    expect(await storage.inspect(ref)).toMatchObject({ area: null });
  });

  it('completes a half-moved set on the next moveShard', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    await writeRandomData(ref);
    const before = await storage.inspect(ref);
    // What a crash after the first rename of the set leaves behind.
    await fs.mkdir(path.dirname(shardPaths(root, ref, 'trash')[0]!), { recursive: true });
    await fs.rename(shardPaths(root, ref, 'live')[0]!, shardPaths(root, ref, 'trash')[0]!);

    await storage.moveShard(ref, 'live', 'trash');
    expect(await presentIn(ref, 'trash')).toEqual([true, true, true]);
    expect(await presentIn(ref, 'live')).toEqual([false, false, false]);
    expect(await storage.inspect(ref)).toMatchObject({ area: 'trash', checksum: before.checksum });
  });

  it('replaces a partial set left in live by a crashed create', async () => {
    const storage = new LocalFileStorage({ root });
    await fs.mkdir(path.dirname(shardPaths(root, ref, 'live')[0]!), { recursive: true });
    await fs.writeFile(shardPaths(root, ref, 'live')[0]!, '');
    await storage.createShard(ref);
    expect(await presentIn(ref, 'live')).toEqual([true, true, true]);
  });

  it('refuses to move a shard that is not there, naming it', async () => {
    const storage = new LocalFileStorage({ root });
    await expect(storage.moveShard(ref, 'live', 'trash')).rejects.toThrow('t42-s1 on node-2');
    await storage.createShard(ref);
    await storage.moveShard(ref, 'live', 'trash');
    await storage.markGarbage(ref);
    await expect(storage.moveShard(ref, 'trash', 'live')).rejects.toThrow(/found in garbage/);
  });

  it('refuses to create over a trashed shard', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    await storage.moveShard(ref, 'live', 'trash');
    await expect(storage.createShard(ref)).rejects.toThrow(/already exists in trash/);
    expect(await presentIn(ref, 'live')).toEqual([false, false, false]);
  });

  it('marks, unmarks and deletes garbage', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    await writeRandomData(ref);
    await storage.moveShard(ref, 'live', 'trash');
    const trashed = await storage.inspect(ref);

    await storage.markGarbage(ref);
    expect(await presentIn(ref, 'garbage')).toEqual([true, true, true]);
    expect(await presentIn(ref, 'trash')).toEqual([false, false, false]);
    expect(await storage.inspect(ref)).toMatchObject({ area: 'garbage', checksum: trashed.checksum, bytes: trashed.bytes });

    await storage.unmarkGarbage(ref);
    expect(await storage.inspect(ref)).toMatchObject({ area: 'trash', checksum: trashed.checksum });
    // Deleting garbage that was never (fully) marked would tear the set: it must refuse.
    await expect(storage.deleteGarbage(ref)).rejects.toThrow(/still in trash/);
    expect(await presentIn(ref, 'trash')).toEqual([true, true, true]);

    await storage.markGarbage(ref);
    await storage.deleteGarbage(ref);
    expect(await presentIn(ref, 'garbage')).toEqual([false, false, false]);
    expect(await storage.inspect(ref)).toMatchObject({ area: null, bytes: 0 });
  });

  it('refuses to mark a shard as garbage while any file of its set is live, touching nothing', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    // Never trashed: the whole set is live.
    await expect(storage.markGarbage(ref)).rejects.toThrow(PermanentStorageError);
    await expect(storage.markGarbage(ref)).rejects.toThrow(/cannot mark shard t42-s1 on node-2 as garbage: .* are live/);
    expect(await presentIn(ref, 'live')).toEqual([true, true, true]);

    // Trashed, but one file of the set is back in live (a restore half done): still refused, and nothing moves.
    await storage.moveShard(ref, 'live', 'trash');
    await fs.copyFile(shardPaths(root, ref, 'trash')[1]!, shardPaths(root, ref, 'live')[1]!);
    const before = await listFiles(root);
    await expect(storage.markGarbage(ref)).rejects.toThrow(/t42-s1\.idx is live; a live shard is never purged/);
    expect(await listFiles(root)).toEqual(before);
    expect(await presentIn(ref, 'trash')).toEqual([true, true, true]);
    expect(await presentIn(ref, 'garbage')).toEqual([false, false, false]);

    // Once the live file is gone the purge may go on.
    await fs.rm(shardPaths(root, ref, 'live')[1]!);
    await storage.markGarbage(ref);
    expect(await presentIn(ref, 'garbage')).toEqual([true, true, true]);
  });

  it('fails createShard with PermanentStorageError under a permanent fault, creating nothing, until cleared', async () => {
    const storage = new LocalFileStorage({ root });
    storage.faults.inject({ op: 'createShard', tableId: ref.tableId, kind: 'permanent' });
    await expect(storage.createShard(ref)).rejects.toBeInstanceOf(PermanentStorageError);
    await expect(storage.createShard(ref)).rejects.toBeInstanceOf(PermanentStorageError);
    expect(await listFiles(root)).toEqual([]);

    storage.faults.clear();
    await storage.createShard(ref);
    expect(await presentIn(ref, 'live')).toEqual([true, true, true]);
  });

  it('fails once with a plain error under a transient fault with times: 1', async () => {
    const faults = new FaultInjector();
    const storage = new LocalFileStorage({ root, faults });
    expect(storage.faults).toBe(faults);
    await storage.createShard(ref);
    faults.inject({ op: 'moveShard', shard: ref.shard, kind: 'transient', times: 1 });

    const error = await storage.moveShard(ref, 'live', 'trash').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(PermanentStorageError);
    expect((error as Error).message).toMatch(/injected transient fault/);
    expect(await presentIn(ref, 'live')).toEqual([true, true, true]);

    await storage.moveShard(ref, 'live', 'trash');
    expect(await presentIn(ref, 'trash')).toEqual([true, true, true]);
  });

  it('rolls a failed move back, and throws FatalStorageError when the roll-back fails too', async () => {
    await new LocalFileStorage({ root }).createShard(ref);

    const rolledBack = new LocalFileStorage({ root, renameOps: renameOpsFailingOn(2) });
    await expect(rolledBack.moveShard(ref, 'live', 'trash')).rejects.toThrow('simulated failure of rename #2');
    expect(await presentIn(ref, 'live')).toEqual([true, true, true]);
    expect(await presentIn(ref, 'trash')).toEqual([false, false, false]);

    const stuck = new LocalFileStorage({ root, renameOps: renameOpsFailingOn(2, 3) });
    await expect(stuck.moveShard(ref, 'live', 'trash')).rejects.toBeInstanceOf(FatalStorageError);
  });

  it('leaves no temp files behind when a create is rolled back', async () => {
    const storage = new LocalFileStorage({ root, renameOps: renameOpsFailingOn(3) });
    await expect(storage.createShard(ref)).rejects.toThrow('simulated failure of rename #3');
    expect(await listFiles(root)).toEqual([]);
  });
});

describe('moves that race or resume', () => {
  test('renameSet counts a pair another attempt already renamed as done, and rolls nothing back', async () => {
    const names = ['a', 'b', 'c'].map((n) => path.join(root, n));
    for (const file of names) await fs.writeFile(file, n(file));
    const pairs = names.map((file) => [file, `${file}.moved`] as const);
    // The other attempt got to "b" first.
    await fs.rename(names[1]!, `${names[1]!}.moved`);
    await renameSet(pairs);
    for (const file of names) {
      expect(await exists(file)).toBe(false);
      expect(await fs.readFile(`${file}.moved`, 'utf8')).toBe(n(file));
    }
  });

  test('two concurrent moves of one shard both succeed and leave the whole set moved', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    await Promise.all([storage.moveShard(ref, 'live', 'trash'), storage.moveShard(ref, 'live', 'trash')]);
    expect(await presentIn(ref, 'trash')).toEqual([true, true, true]);
    expect(await presentIn(ref, 'live')).toEqual([false, false, false]);
  });

  test('markGarbage of a shard a resumed purge already (partly) deleted is a success', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    await storage.moveShard(ref, 'live', 'trash');
    await storage.markGarbage(ref);
    await fs.rm(shardPaths(root, ref, 'garbage')[0]!);
    await storage.markGarbage(ref);
    await storage.deleteGarbage(ref);
    await storage.markGarbage(ref);
    expect((await storage.inspect(ref)).area).toBeNull();
  });
});

function n(file: string): string {
  return `content of ${path.basename(file)}`;
}

describe('a watched change', () => {
  test('a move stopped by its caller half way puts the set back and answers with the reason', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    const controller = new AbortController();
    let beats = 0;
    const stopped = new Error('activity cancelled');
    const watch = {
      signal: controller.signal,
      // Two files go; by the third the caller has learnt that its attempt was superseded.
      beat: () => {
        if (++beats === 2) controller.abort(stopped);
      },
    };
    await expect(storage.moveShard(ref, 'live', 'trash', watch)).rejects.toBe(stopped);
    expect(await presentIn(ref, 'live')).toEqual([true, true, true]);
    expect(await presentIn(ref, 'trash')).toEqual([false, false, false]);
    // A re-run without a stop finishes the job.
    await storage.moveShard(ref, 'live', 'trash', { beat: () => (beats += 1) });
    expect(await presentIn(ref, 'trash')).toEqual([true, true, true]);
  });

  test('a deletion stopped by its caller stops between files; running it again deletes the rest', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.createShard(ref);
    await storage.moveShard(ref, 'live', 'trash');
    await storage.markGarbage(ref);
    const controller = new AbortController();
    let beats = 0;
    await expect(
      storage.deleteGarbage(ref, {
        signal: controller.signal,
        beat: () => (++beats === 1 ? controller.abort(new Error('stop')) : undefined),
      }),
    ).rejects.toThrow('stop');
    expect(await presentIn(ref, 'garbage')).toEqual([false, true, true]);
    await storage.deleteGarbage(ref);
    expect(await presentIn(ref, 'garbage')).toEqual([false, false, false]);
  });
});
