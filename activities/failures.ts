import { ApplicationFailure } from '@temporalio/common';
import { TableFateError } from '../domain/errors';
import { LockLostError } from '../catalog/lock-lost';
import { FatalStorageError, PermanentStorageError } from '../storage/driver';

/**
 * Decides, at the activity boundary, which errors retrying cannot fix. Those cross into the workflow as
 * non-retryable failures whose type names them; everything else is left for Temporal to retry.
 */
export function toActivityFailure(err: unknown, onFatal: (err: FatalStorageError) => void): unknown {
  if (err instanceof TableFateError) return ApplicationFailure.nonRetryable(err.message, err.type);
  if (err instanceof LockLostError) return ApplicationFailure.nonRetryable(err.message, 'LockLost');
  if (err instanceof PermanentStorageError) return ApplicationFailure.nonRetryable(err.message, 'StorageFault');
  if (err instanceof FatalStorageError) {
    // Files are in an unknown state: stop this worker before it touches more (Manticore's rule). The activity
    // stays retryable so that it runs again once an operator has looked and restarted a worker.
    onFatal(err);
  }
  return err;
}

/** Wraps every function of an activity object with the failure mapping above. */
export function withFailureMapping<T extends Record<string, (...args: never[]) => Promise<unknown>>>(
  activities: T,
  onFatal: (err: FatalStorageError) => void,
): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(activities)) {
    wrapped[name] = async (...args: never[]) => {
      try {
        return await fn(...args);
      } catch (err) {
        throw toActivityFailure(err, onFatal);
      }
    };
  }
  return wrapped as T;
}
