import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { shardPaths, type ShardRef, type StorageArea } from '../../storage';

/** A fresh storage root for every test of the file (named `<prefix>…` under the system temp dir), removed after it. */
export function tempRootPerTest(prefix: string, use: (root: string) => void): void {
  let root = '';
  beforeEach(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
    use(root);
  });
  afterEach(async () => {
    await fs.rm(root, { recursive: true, force: true });
  });
}

/** An empty file at `relative` under `root`, its directories made. */
export async function touch(root: string, relative: string): Promise<void> {
  const file = path.join(root, relative);
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, '');
}

/** Whether anything (a file, a directory, a dangling link) is at `file`. */
export async function exists(file: string): Promise<boolean> {
  return fs.lstat(file).then(
    () => true,
    () => false,
  );
}

/** Which files of the set are present in an area of the storage under `root`, in the set's order. */
export function filesIn(root: string, ref: ShardRef, area: StorageArea): Promise<boolean[]> {
  return Promise.all(shardPaths(root, ref, area).map(exists));
}

/** Every file under `dir`, as paths relative to it, sorted. */
export async function filesUnder(dir: string): Promise<string[]> {
  const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    .sort();
}
