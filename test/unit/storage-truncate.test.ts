import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import {
  FatalStorageError,
  InvalidShardRefError,
  LocalFileStorage,
  PermanentStorageError,
  shardPaths,
  type RenameOps,
  type ShardRef,
  type StorageArea,
} from '../../storage';
import { filesIn, filesUnder, tempRootPerTest } from '../support/temp-root';

let root: string;
tempRootPerTest('tablefate-truncate-', (dir) => (root = dir));

/** The table truncated, and the same shard of the trash entry its rows go to. */
const ref: ShardRef = { tableId: 42, shard: 1, node: 'node-2' };
const INTO = 97;
const rows: ShardRef = { tableId: INTO, shard: 1, node: 'node-2' };

const presentIn = (r: ShardRef, area: StorageArea) => filesIn(root, r, area);
const NONE = [false, false, false];
const ALL = [true, true, true];

async function writeRandomData(r: ShardRef, file = 0): Promise<Buffer> {
  const data = randomBytes(4096 + Math.floor(Math.random() * 4096));
  await fs.writeFile(shardPaths(root, r, 'live')[file]!, data);
  return data;
}

/** Every file under the root with its content: what a refusal must leave exactly as it was. */
async function snapshot(): Promise<Record<string, string>> {
  const files = await filesUnder(root);
  const contents = await Promise.all(files.map((file) => fs.readFile(path.join(root, file), 'base64')));
  return Object.fromEntries(files.map((file, i) => [file, contents[i]!]));
}

/** Renames for real, except the chosen calls (1-based), which fail without touching the disk. */
function renameOpsFailingOn(...failingCalls: number[]): RenameOps {
  let calls = 0;
  return {
    async rename(from, to) {
      calls += 1;
      if (failingCalls.includes(calls)) throw new Error(`simulated failure of rename #${calls}`);
      await fs.rename(from, to);
    },
  };
}

/**
 * The content of each file of the set, in the set's order. What shows that the rows moved: inspect's checksum hashes the
 * files' names too, and those name the table (t42-s1.dat becomes t97-s1.dat).
 */
function contentsOf(r: ShardRef, area: StorageArea): Promise<string[]> {
  return Promise.all(shardPaths(root, r, area).map((file) => fs.readFile(file, 'base64')));
}

/** A shard with rows in it: what inspect said of it full and when fresh, and its files' contents. */
async function tableWithRows(storage: LocalFileStorage) {
  await storage.createShard(ref);
  const fresh = await storage.inspect(ref);
  await writeRandomData(ref);
  const full = await storage.inspect(ref);
  expect(full.bytes).toBeGreaterThan(fresh.bytes);
  return { fresh, full, contents: await contentsOf(ref, 'live') };
}

/** The state every run of a truncate converges on: the rows in the trash as `rows`, an empty set live, no garbage. */
async function expectTruncated(storage: LocalFileStorage, contents: string[], freshBytes: number): Promise<void> {
  expect(await contentsOf(rows, 'trash')).toEqual(contents);
  expect(await storage.inspect(rows)).toMatchObject({ area: 'trash' });
  expect(await presentIn(rows, 'live')).toEqual(NONE);
  expect(await storage.inspect(ref)).toMatchObject({ area: 'live', bytes: freshBytes });
  expect(await presentIn(ref, 'live')).toEqual(ALL);
  expect(await presentIn(ref, 'garbage')).toEqual(NONE);
}

/** The state every run of an undo converges on: the rows live again as `ref`, and nothing else of either shard. */
async function expectUntruncated(storage: LocalFileStorage, checksum: string): Promise<void> {
  expect(await storage.inspect(ref)).toMatchObject({ area: 'live', checksum });
  expect(await presentIn(ref, 'live')).toEqual(ALL);
  expect(await storage.inspect(rows)).toMatchObject({ area: null, bytes: 0 });
  expect((await storage.listSets()).sets.map((s) => [s.tableId, s.area, s.files])).toEqual([[42, 'live', 3]]);
}

describe('truncateShard', () => {
  test("moves the rows into the trash as the entry's shard and leaves a fresh empty set live", async () => {
    const storage = new LocalFileStorage({ root });
    const { fresh, contents } = await tableWithRows(storage);

    await storage.truncateShard(ref, INTO);

    await expectTruncated(storage, contents, fresh.bytes);
    expect(await presentIn(ref, 'trash')).toEqual(NONE);
    // The entry's set is the entry's: listed as table 97's, in the trash, whole.
    const listed = (await storage.listSets()).sets.map((s) => [s.tableId, s.shard, s.area, s.files]);
    expect(listed).toEqual([
      [42, 1, 'live', 3],
      [INTO, 1, 'trash', 3],
    ]);
  });

  test('run again, it is a no-op that leaves what was written to the empty set since where it is', async () => {
    const storage = new LocalFileStorage({ root });
    const { contents } = await tableWithRows(storage);
    await storage.truncateShard(ref, INTO);
    const written = await writeRandomData(ref);

    await storage.truncateShard(ref, INTO);

    expect(await fs.readFile(shardPaths(root, ref, 'live')[0]!)).toEqual(written);
    expect(await contentsOf(rows, 'trash')).toEqual(contents);
  });

  test('refuses a shard that is neither live nor in the trash as the entry, creating nothing', async () => {
    const storage = new LocalFileStorage({ root });
    const refused = storage.truncateShard(ref, INTO);
    await expect(refused).rejects.toThrow(PermanentStorageError);
    await expect(storage.truncateShard(ref, INTO)).rejects.toThrow(
      /cannot truncate shard t42-s1 on node-2 into table 97: it is neither live/,
    );
    expect(await filesUnder(root)).toEqual([]);
  });

  test('refuses to truncate a shard into its own table, at once', async () => {
    const storage = new LocalFileStorage({ root });
    await tableWithRows(storage);
    const before = await snapshot();
    await expect(storage.truncateShard(ref, ref.tableId)).rejects.toThrow(InvalidShardRefError);
    await expect(storage.untruncateShard(ref, ref.tableId)).rejects.toThrow(InvalidShardRefError);
    expect(await snapshot()).toEqual(before);
  });

  test('rolled back by a failed rename of the rows, it changed nothing; run again, it is made', async () => {
    const { fresh, contents } = await tableWithRows(new LocalFileStorage({ root }));
    const failing = new LocalFileStorage({ root, renameOps: renameOpsFailingOn(2) });
    const before = await snapshot();

    await expect(failing.truncateShard(ref, INTO)).rejects.toThrow('simulated failure of rename #2');
    expect(await snapshot()).toEqual(before);

    await new LocalFileStorage({ root }).truncateShard(ref, INTO);
    await expectTruncated(new LocalFileStorage({ root }), contents, fresh.bytes);
  });

  test('stopped after the rows moved, before the empty set was made: a re-run only makes the empty set', async () => {
    const { fresh, contents } = await tableWithRows(new LocalFileStorage({ root }));
    // Renames 1-3 move the rows; the 4th would publish the empty set.
    const failing = new LocalFileStorage({ root, renameOps: renameOpsFailingOn(4) });

    await expect(failing.truncateShard(ref, INTO)).rejects.toThrow('simulated failure of rename #4');
    expect(await presentIn(rows, 'trash')).toEqual(ALL);
    expect(await presentIn(ref, 'live')).toEqual(NONE);

    const storage = new LocalFileStorage({ root });
    await storage.truncateShard(ref, INTO);
    await expectTruncated(storage, contents, fresh.bytes);
  });

  test('left split between the table and the entry by a failed rename and roll-back, a re-run finishes it forwards', async () => {
    const { fresh, contents } = await tableWithRows(new LocalFileStorage({ root }));
    const stuck = new LocalFileStorage({ root, renameOps: renameOpsFailingOn(2, 3) });

    await expect(stuck.truncateShard(ref, INTO)).rejects.toThrow(FatalStorageError);
    // What a crash mid-rename leaves: the first file with the entry, the others still the table's.
    expect(await presentIn(rows, 'trash')).toEqual([true, false, false]);
    expect(await presentIn(ref, 'live')).toEqual([false, true, true]);

    const storage = new LocalFileStorage({ root });
    await storage.clearQuarantine(ref.node);
    await storage.truncateShard(ref, INTO);
    await expectTruncated(storage, contents, fresh.bytes);
  });

  test('left with a torn empty set by a failed create of it, a re-run replaces it with a whole one', async () => {
    const { fresh, contents } = await tableWithRows(new LocalFileStorage({ root }));
    // Rename 4 publishes the empty set's first file; the 5th fails and so does putting the 4th back.
    const stuck = new LocalFileStorage({ root, renameOps: renameOpsFailingOn(5, 6) });

    await expect(stuck.truncateShard(ref, INTO)).rejects.toThrow(FatalStorageError);
    expect(await presentIn(ref, 'live')).toEqual([true, false, false]);

    const storage = new LocalFileStorage({ root });
    await storage.clearQuarantine(ref.node);
    await storage.truncateShard(ref, INTO);
    await expectTruncated(storage, contents, fresh.bytes);
  });

  test('fails under an injected fault before touching anything, until the fault is used up', async () => {
    const storage = new LocalFileStorage({ root });
    const { fresh, contents } = await tableWithRows(storage);
    storage.faults.inject({ op: 'truncateShard', tableId: ref.tableId, kind: 'permanent', times: 1 });
    const before = await snapshot();

    await expect(storage.truncateShard(ref, INTO)).rejects.toThrow(PermanentStorageError);
    expect(await snapshot()).toEqual(before);

    await storage.truncateShard(ref, INTO);
    await expectTruncated(storage, contents, fresh.bytes);
  });
});

describe('untruncateShard', () => {
  test('puts the rows back live in place of the empty set, leaving nothing in the trash or garbage', async () => {
    const storage = new LocalFileStorage({ root });
    const { full } = await tableWithRows(storage);
    await storage.truncateShard(ref, INTO);

    await storage.untruncateShard(ref, INTO);
    await expectUntruncated(storage, full.checksum);
    expect(await filesUnder(path.join(root, ref.node, 'trash'))).toEqual([]);

    // Run again: nothing of the entry left to undo.
    await storage.untruncateShard(ref, INTO);
    await expectUntruncated(storage, full.checksum);
  });

  test('with nothing of the entry in the trash, succeeds and changes nothing', async () => {
    const storage = new LocalFileStorage({ root });
    await storage.untruncateShard(ref, INTO);
    expect(await filesUnder(root)).toEqual([]);

    await tableWithRows(storage);
    const before = await snapshot();
    await storage.untruncateShard(ref, INTO);
    expect(await snapshot()).toEqual(before);
  });

  test.each([
    ['rows written to its data file', () => writeRandomData(ref, 0), /t42-s1\.dat/],
    ['a byte written to its index', () => fs.writeFile(shardPaths(root, ref, 'live')[1]!, 'x'), /t42-s1\.idx\)/],
    [
      'its meta rewritten',
      () => fs.writeFile(shardPaths(root, ref, 'live')[2]!, JSON.stringify({ tableId: 42, shard: 1, createdAt: 1, rows: 9 })),
      /t42-s1\.meta\)/,
    ],
  ])('refuses once the empty set was written to (%s), naming it and changing nothing', async (_, write, named) => {
    const storage = new LocalFileStorage({ root });
    await tableWithRows(storage);
    await storage.truncateShard(ref, INTO);
    await write();
    const before = await snapshot();

    const refused = storage.untruncateShard(ref, INTO);
    await expect(refused).rejects.toThrow(PermanentStorageError);
    await expect(storage.untruncateShard(ref, INTO)).rejects.toThrow(
      /cannot untruncate shard t42-s1 on node-2 from table 97: its live shard was written to since the truncate .*its rows are kept/,
    );
    await expect(storage.untruncateShard(ref, INTO)).rejects.toThrow(named);
    expect(await snapshot()).toEqual(before);
  });

  test('takes an empty set whose writes were all taken out again as empty: no row would be lost with it', async () => {
    const storage = new LocalFileStorage({ root });
    const { full } = await tableWithRows(storage);
    await storage.truncateShard(ref, INTO);
    await writeRandomData(ref);
    await fs.truncate(shardPaths(root, ref, 'live')[0]!, 0);

    await storage.untruncateShard(ref, INTO);
    await expectUntruncated(storage, full.checksum);
  });

  test('refuses while a purge of the entry has begun, changing nothing', async () => {
    const storage = new LocalFileStorage({ root });
    const { fresh, full } = await tableWithRows(storage);
    await storage.truncateShard(ref, INTO);
    await storage.markGarbage(rows);
    const before = await snapshot();

    await expect(storage.untruncateShard(ref, INTO)).rejects.toThrow(/cannot untruncate .*: a purge of its rows \(t97\) has begun/);
    expect(await snapshot()).toEqual(before);
    // The truncate is made all the same: run again, it leaves the empty set as it is.
    await storage.truncateShard(ref, INTO);
    expect(await snapshot()).toEqual(before);
    expect(await storage.inspect(ref)).toMatchObject({ area: 'live', bytes: fresh.bytes });
    expect(await storage.inspect(rows)).toMatchObject({ area: 'garbage', bytes: full.bytes });
  });

  test('stopped while removing the empty set, a re-run removes the rest and puts the rows back', async () => {
    const { full } = await tableWithRows(new LocalFileStorage({ root }));
    await new LocalFileStorage({ root }).truncateShard(ref, INTO);
    // Renames 1-3 take the empty set to garbage: the 2nd fails, and so does putting the 1st back.
    const stuck = new LocalFileStorage({ root, renameOps: renameOpsFailingOn(2, 3) });

    await expect(stuck.untruncateShard(ref, INTO)).rejects.toThrow(FatalStorageError);
    expect(await presentIn(ref, 'garbage')).toEqual([true, false, false]);
    expect(await presentIn(ref, 'live')).toEqual([false, true, true]);

    const storage = new LocalFileStorage({ root });
    await storage.clearQuarantine(ref.node);
    await storage.untruncateShard(ref, INTO);
    await expectUntruncated(storage, full.checksum);
  });

  test('left split by a failed rename of the rows back, a re-run finishes putting them back', async () => {
    const { full } = await tableWithRows(new LocalFileStorage({ root }));
    await new LocalFileStorage({ root }).truncateShard(ref, INTO);
    // Renames 1-3 remove the empty set; 4-6 bring the rows back: the 5th fails, and so does putting the 4th back.
    const stuck = new LocalFileStorage({ root, renameOps: renameOpsFailingOn(5, 6) });

    await expect(stuck.untruncateShard(ref, INTO)).rejects.toThrow(FatalStorageError);
    expect(await presentIn(ref, 'live')).toEqual([true, false, false]);
    expect(await presentIn(rows, 'trash')).toEqual([false, true, true]);

    const storage = new LocalFileStorage({ root });
    await storage.clearQuarantine(ref.node);
    await storage.untruncateShard(ref, INTO);
    await expectUntruncated(storage, full.checksum);
  });

  test('undoes a truncate left split mid-rename (its compensation), putting the rows back whole', async () => {
    const { full } = await tableWithRows(new LocalFileStorage({ root }));
    await expect(new LocalFileStorage({ root, renameOps: renameOpsFailingOn(2, 3) }).truncateShard(ref, INTO)).rejects.toThrow(
      FatalStorageError,
    );
    expect(await presentIn(rows, 'trash')).toEqual([true, false, false]);

    const storage = new LocalFileStorage({ root });
    await storage.clearQuarantine(ref.node);
    await storage.untruncateShard(ref, INTO);
    await expectUntruncated(storage, full.checksum);
  });

  test('fails under an injected fault before touching anything, until the fault is used up', async () => {
    const storage = new LocalFileStorage({ root });
    const { full } = await tableWithRows(storage);
    await storage.truncateShard(ref, INTO);
    storage.faults.inject({ op: 'untruncateShard', shard: ref.shard, kind: 'transient', times: 1 });
    const before = await snapshot();

    const failed = await storage.untruncateShard(ref, INTO).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(failed).toBeInstanceOf(Error);
    expect(failed).not.toBeInstanceOf(PermanentStorageError);
    expect((failed as Error).message).toMatch(/injected transient fault on untruncateShard of table 42 shard 1/);
    expect(await snapshot()).toEqual(before);

    await storage.untruncateShard(ref, INTO);
    await expectUntruncated(storage, full.checksum);
  });
});
