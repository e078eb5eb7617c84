import { promises as fsPromises } from 'node:fs';
import { checkWatch, type Watch } from './driver';
import { errnoOf, FatalStorageError, messageOf } from './errors';

/** The one file-system call renameSet needs; tests pass one that fails on a chosen call. */
export interface RenameOps {
  rename(from: string, to: string): Promise<void>;
}

export type RenamePair = readonly [from: string, to: string];

async function exists(file: string): Promise<boolean> {
  return fsPromises.access(file).then(
    () => true,
    () => false,
  );
}

/**
 * Renames a set of files as one step (Manticore's try-and-roll-back): either every pair is renamed, or the
 * ones already done are renamed back and the original error is rethrown unchanged, so callers can still
 * classify it. If a rename back fails too, the set is split in a way nobody can repair automatically, so
 * this throws FatalStorageError and the process must stop. A watcher that stops the set (see Watch) is a
 * failure like any other: the renames done are put back.
 */
export async function renameSet(pairs: ReadonlyArray<RenamePair>, ops: RenameOps = fsPromises, watch?: Watch): Promise<void> {
  const done: RenamePair[] = [];
  for (const pair of pairs) {
    const [from, to] = pair;
    try {
      checkWatch(watch);
      await ops.rename(from, to);
    } catch (forwardError) {
      // Gone from here and already there: another attempt at the same move (a retried activity alongside a
      // stale one) renamed it first. That attempt is finishing the set forwards; undoing ours would tear it.
      if (errnoOf(forwardError) === 'ENOENT' && (await exists(to))) continue;
      await rollBack(done, { from, to, error: forwardError }, ops);
      throw forwardError;
    }
    done.push(pair);
  }
}

async function rollBack(done: readonly RenamePair[], failed: { from: string; to: string; error: unknown }, ops: RenameOps): Promise<void> {
  for (let i = done.length - 1; i >= 0; i--) {
    const [from, to] = done[i]!;
    try {
      await ops.rename(to, from);
    } catch (rollbackError) {
      throw new FatalStorageError(
        `rename set left half renamed: rename ${failed.from} -> ${failed.to} failed (${messageOf(failed.error)}), ` +
          `then rolling back ${to} -> ${from} failed (${messageOf(rollbackError)})`,
        { cause: rollbackError },
      );
    }
  }
}
