import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { ShardRef } from './driver';
import { errnoOf } from './errors';
import { removeAll, writeDurably } from './files';
import { shardFileNames } from './shard-files';

/**
 * The empty set a create writes, and the one test of whether a set is still that: both read the same contents
 * (freshContents), so what "nothing was written to it" means cannot drift from what a create writes.
 */

/** What a fresh set's files hold, in shardFileNames' order: no rows, no index, and the meta naming the shard. */
function freshContents(ref: ShardRef, createdAt: number): string[] {
  const meta = JSON.stringify({ tableId: ref.tableId, shard: ref.shard, createdAt });
  return shardFileNames(ref).map((name) => (name.endsWith('.meta') ? meta : ''));
}

/** Writes a complete new set under names no one else uses, so a crash mid-write never looks like a shard. */
export async function writeFreshSet(root: string, ref: ShardRef): Promise<string[]> {
  const tmpDir = path.join(root, ref.node, 'tmp');
  await fs.mkdir(tmpDir, { recursive: true });
  // Unique per call: a retried activity running alongside a stale attempt must not rename the other's files.
  const nonce = randomBytes(6).toString('hex');
  const temps = shardFileNames(ref).map((name) => path.join(tmpDir, `${name}.${nonce}.tmp`));
  const contents = freshContents(ref, Date.now());
  // The three files at once: each waits for its own sync, and the syncs overlap.
  const written = await Promise.allSettled(temps.map((temp, i) => writeDurably(temp, contents[i]!)));
  const failed = written.find((w): w is PromiseRejectedResult => w.status === 'rejected');
  if (failed) {
    await removeAll(temps).catch(() => undefined);
    throw failed.reason;
  }
  return temps;
}

/**
 * A fresh meta is some 50 bytes; a file longer than this is not read whole, only known not to be fresh (a .dat written
 * to can be as large as a table).
 */
const LONGEST_FRESH_FILE = 1024;

/**
 * The names of the files at `paths` (a set of `ref` in shardFileNames' order; a missing file is no difference) that are
 * not byte for byte what writeFreshSet wrote, at the creation time their own meta records. Empty: nothing was ever
 * written to the set, or what was has been taken out again, so that no row would be lost with it.
 */
export async function filesChangedSinceFresh(ref: ShardRef, paths: readonly string[]): Promise<string[]> {
  const names = shardFileNames(ref);
  const found = await Promise.all(paths.map(readIfShort));
  const meta = found[names.findIndex((name) => name.endsWith('.meta'))];
  const createdAt = meta === undefined || meta === 'long' ? undefined : createdAtOf(meta);
  // Without a creation time to rebuild the meta from, only the files whose fresh content does not depend on it compare.
  const expected = freshContents(ref, createdAt ?? Number.NaN);
  return names.filter((name, i) => {
    const content = found[i];
    if (content === undefined) return false;
    if (content === 'long' || (name.endsWith('.meta') && createdAt === undefined)) return true;
    return !content.equals(Buffer.from(expected[i]!));
  });
}

/** The creation time a fresh meta records, or undefined when the meta could not be one writeFreshSet wrote. */
function createdAtOf(meta: Buffer): number | undefined {
  try {
    const parsed: unknown = JSON.parse(meta.toString('utf8'));
    const createdAt = typeof parsed === 'object' && parsed !== null && 'createdAt' in parsed ? parsed.createdAt : undefined;
    return typeof createdAt === 'number' && Number.isSafeInteger(createdAt) ? createdAt : undefined;
  } catch {
    return undefined;
  }
}

/** The file's bytes; 'long' past LONGEST_FRESH_FILE; undefined when it is not there. */
async function readIfShort(file: string): Promise<Buffer | 'long' | undefined> {
  let handle;
  try {
    handle = await fs.open(file, 'r');
  } catch (error) {
    if (errnoOf(error) === 'ENOENT') return undefined;
    throw error;
  }
  try {
    const buffer = Buffer.alloc(LONGEST_FRESH_FILE + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length === buffer.length) return 'long';
    }
    return buffer.subarray(0, length);
  } finally {
    await handle.close();
  }
}
