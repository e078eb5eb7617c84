import { CancellationScope } from '@temporalio/workflow';
import type { OperationCalls } from './activities';

/**
 * Runs `body` while holding `lock`. Every lock the run holds is released on every way out (success, failure,
 * cancellation, even a cancellation that lands while the lock is being taken), in a scope cancellation cannot
 * interrupt. Releasing in the same workflow task as the last state change is safe: if that task is lost, the
 * catalog's journal answers the repeated calls without the lock (see operationCalls). A terminated workflow
 * leaves its lock behind; the next operation takes it over once it sees the holder closed.
 */
export async function withLock<T>(calls: OperationCalls, lock: string, body: () => Promise<T>): Promise<T> {
  try {
    await calls.acquireLock(lock);
    return await body();
  } finally {
    await CancellationScope.nonCancellable(() => calls.releaseLocks());
  }
}
