import type { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { checkWatch, type Watch } from './driver';
import { errnoOf } from './errors';

/**
 * The file operations the local-files driver is made of. A look or a delete takes a file already gone, or a directory
 * never made, as an answer rather than an error (after a crash, either is what a repeated change finds); a write
 * reaches the disk before it returns.
 */

export async function exists(file: string): Promise<boolean> {
  try {
    await fs.stat(file);
    return true;
  } catch (error) {
    const code = errnoOf(error);
    if (code === 'ENOENT' || code === 'ENOTDIR') return false;
    throw error;
  }
}

/** A directory's entries; a directory that is missing (or where a file sits instead) holds nothing. */
export async function listDir(dir: string): Promise<string[]> {
  try {
    return await fs.readdir(dir);
  } catch (error) {
    const code = errnoOf(error);
    if (code === 'ENOENT' || code === 'ENOTDIR') return [];
    throw error;
  }
}

/**
 * When the entry itself last changed (lstat: a rename changes the entry, whatever a link points to), in ms
 * since the epoch; undefined once it is gone.
 */
export async function changedAtOf(file: string): Promise<number | undefined> {
  try {
    return (await fs.lstat(file)).ctimeMs;
  } catch (error) {
    if (errnoOf(error) === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * Deletes files, treating already-missing ones as deleted. unlink, not rm: rm retries a refused unlink as an
 * rmdir and reports that call's ENOTDIR, which would read as "the file cannot be there".
 */
export async function removeAll(files: readonly string[], watch?: Watch): Promise<void> {
  for (const file of files) {
    checkWatch(watch);
    try {
      await fs.unlink(file);
    } catch (error) {
      const code = errnoOf(error);
      // ENOTDIR: a component of the path is not a directory, so the file cannot exist.
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error;
    }
  }
}

/** Content reaches the disk before the rename publishes it, so a power cut cannot publish an empty file. */
export async function writeDurably(file: string, content: string): Promise<void> {
  const handle = await fs.open(file, 'w');
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Feeds a file to the hash in chunks (data files can be large) and returns its size. */
export async function hashFile(file: string, hash: ReturnType<typeof createHash>): Promise<number> {
  const handle = await fs.open(file, 'r');
  try {
    const buffer = Buffer.alloc(64 * 1024);
    let total = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) return total;
      hash.update(buffer.subarray(0, bytesRead));
      total += bytesRead;
    }
  } finally {
    await handle.close();
  }
}
