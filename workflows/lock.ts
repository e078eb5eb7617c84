import { CancellationScope } from '@temporalio/workflow';
import { locking } from './activities';

/**
 * Runs `body` while holding `lock`. The lock is released on every way out (success, failure, cancellation,
 * even a cancellation that lands while the lock is being taken), in a scope cancellation cannot interrupt.
 * Releasing a lock one does not hold changes nothing. A terminated workflow leaves its lock behind; the
 * next operation takes it over once it sees the holder closed.
 */
export async function withLock<T>(lock: string, body: () => Promise<T>): Promise<T> {
  try {
    await locking.acquireLock(lock);
    return await body();
  } finally {
    await CancellationScope.nonCancellable(() => locking.releaseLock(lock));
  }
}
