import { CancellationScope } from '@temporalio/workflow';
import { untilFree, type Waiting } from '../../wait-turn';
export { untilFree, type Waiting } from '../../wait-turn';
import type { FirstChange, OperationCalls } from './operation-calls';
import type { TableRecord } from '../../../domain/table';

/**
 * The table `withLock` was asked to read, as the lock attempt read it under the lock (null: no such table), and the
 * workflow time of the first attempt that read it (a repeat after a lost workflow task answers the same); undefined
 * when it was not read there (a run from before v14 reads it with a call of its own: `tableUnderLock`).
 */
export type ReadUnderLock = { table: TableRecord | null; at?: number } | undefined;

/** The table read under the lock, or, where it was not, read now. */
export function tableUnderLock(calls: OperationCalls, read: ReadUnderLock, tableId: number): Promise<TableRecord | null> {
  return read !== undefined ? Promise.resolve(read.table) : calls.getTable(tableId);
}

/**
 * The time a check made under the lock decides on: when the table was first read under it, so that a repeat of the
 * check (a lost workflow task, made again later) decides as the first attempt did, whose changes may have been made.
 */
export function checkedAt(read: ReadUnderLock): number {
  return read?.at ?? Date.now();
}

/**
 * Runs `body` while holding `lock`, once the operation holding it (if any) has let go. Every lock the run holds
 * is released on every way out (success, failure, cancellation, continue-as-new, even a cancellation that lands
 * while the lock is being taken), in a scope cancellation cannot interrupt. Releasing in the same workflow task
 * as the last state change is safe: if that task is lost, the catalog's journal answers the repeated calls
 * without the lock (see operationCalls). A terminated workflow leaves its lock behind; the next operation
 * takes it over once it sees the holder closed, and the reconciler releases it. With `readTable`, the attempt that
 * takes the lock also reads that table under it, and `body` gets it (one call less than reading it first thing). With
 * `firstChange` (an undelete's or a purge's, since v18), it makes the first step's first call too, where the operation's
 * check lets it go on (domain/checks.ts): `body`'s steps find that call made (one call less again).
 */
export function withLock<T>(
  calls: OperationCalls,
  lock: string,
  waiting: Waiting,
  body: (read: ReadUnderLock) => Promise<T>,
  readTable?: number,
  firstChange?: FirstChange,
): Promise<T> {
  return holdingLocks(calls, async () => {
    const attempt = await untilFree(
      `lock ${lock}`,
      () => (firstChange ? calls.tryLockWithFirstChange(lock, firstChange) : calls.tryLock(lock, readTable)),
      (answer) => (answer.acquired ? undefined : answer.holder),
      waiting,
    );
    return body(attempt.acquired && attempt.table !== undefined ? { table: attempt.table, at: attempt.readAt } : undefined);
  });
}

/**
 * Runs `body`, whose first step takes the run's locks itself (a create's prepare, since v17), and releases every lock
 * the run holds on every way out, as withLock does.
 */
export async function holdingLocks<T>(calls: OperationCalls, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } finally {
    await CancellationScope.nonCancellable(() => calls.releaseLocks());
  }
}
