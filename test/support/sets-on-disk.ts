import fs from 'node:fs';
import path from 'node:path';
import type { ShardRef, StorageArea } from '../../storage/driver';
import { shardPaths } from '../../storage/shard-files';

/**
 * Shard sets made or moved by hand, behind the driver's back: what a crash, an operator or an old bug leaves
 * on a node (a set no row accounts for, a second copy, a set in the wrong area). `root` is the storage root
 * (`<home>/storage`).
 */

/** The set's three files in `area`, in shard-file order (.dat, .idx, .meta). */
export function setFiles(root: string, ref: ShardRef, area: StorageArea): string[] {
  return shardPaths(root, ref, area);
}

/** Writes a whole set in `area` (each file holding `content` and its own name), as a stray copy would be. */
export async function writeSet(root: string, ref: ShardRef, area: StorageArea, content = 'stray'): Promise<string[]> {
  const files = setFiles(root, ref, area);
  await fs.promises.mkdir(path.dirname(files[0]!), { recursive: true });
  for (const file of files) await fs.promises.writeFile(file, `${content} ${path.basename(file)}`);
  return files;
}

/** Copies a set from one area to another, leaving the original where it is. */
export async function copySet(root: string, ref: ShardRef, from: StorageArea, to: StorageArea): Promise<string[]> {
  const sources = setFiles(root, ref, from);
  const targets = setFiles(root, ref, to);
  await fs.promises.mkdir(path.dirname(targets[0]!), { recursive: true });
  for (const [i, source] of sources.entries()) await fs.promises.copyFile(source, targets[i]!);
  return targets;
}

/** Moves a set from one area to another by renaming its files. */
export async function moveSet(root: string, ref: ShardRef, from: StorageArea, to: StorageArea): Promise<void> {
  const sources = setFiles(root, ref, from);
  const targets = setFiles(root, ref, to);
  await fs.promises.mkdir(path.dirname(targets[0]!), { recursive: true });
  for (const [i, source] of sources.entries()) await fs.promises.rename(source, targets[i]!);
}

/** Which of the files exist. */
export function existing(files: readonly string[]): string[] {
  return files.filter((file) => fs.existsSync(file));
}
