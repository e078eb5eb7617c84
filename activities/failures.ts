import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { TableFateError } from '../domain/errors';
import { DEFAULT_STORAGE_RETRY_ATTEMPTS } from '../domain/limits';
import { LockLostError } from '../catalog/lock-lost';
import { classifyStorageError, FatalStorageError, messageOf } from '../storage/errors';

export interface FailureMappingOptions {
  /** Called when storage can neither finish nor undo a change: the worker must stop. */
  onFatal: (err: FatalStorageError) => void;
  /**
   * How many attempts an activity gets for a transient storage fault (a full disk, a set seen half moved, an
   * unknown error inside the driver) before the operation ends with a non-retryable StorageFault. Default 10:
   * with the workflows' backoff (200 ms doubling to 10 s) about 40 s of trying.
   */
  storageRetryAttempts?: number;
}

/** The failure type every storage fault that ends an operation carries. */
const STORAGE_FAULT = 'StorageFault';

/**
 * Decides, at the activity boundary, which errors retrying cannot fix. Those cross into the workflow as
 * non-retryable failures whose type names them; everything else is left for Temporal to retry.
 *
 * - ApplicationFailures pass unchanged: the activity chose its failure itself (WrongCatalog, ...), and its
 *   retryability is its own, whatever the storage budget.
 * - Domain errors become non-retryable failures of their type; a lost lock becomes `LockLost`.
 * - Storage faults (storage/errors.ts decides which is which): permanent ones become a non-retryable
 *   `StorageFault` at once; transient ones are retried until `attempt` reaches the budget, then become a
 *   non-retryable `StorageFault` "gave up after N attempts: ..."; a fatal one stops the worker (onFatal) and
 *   stays retryable, so that the operation carries on once an operator has looked (its node is quarantined
 *   meanwhile, which ends any attempt on it with a StorageFault).
 * - Anything else (a catalog error, the Temporal server out of reach) is retried as before.
 */
export function toActivityFailure(err: unknown, options: FailureMappingOptions, attempt = 1): unknown {
  const { onFatal, storageRetryAttempts = DEFAULT_STORAGE_RETRY_ATTEMPTS } = options;
  if (err instanceof ApplicationFailure) return err;
  if (err instanceof TableFateError) return ApplicationFailure.nonRetryable(err.message, err.type);
  if (err instanceof LockLostError) return ApplicationFailure.nonRetryable(err.message, 'LockLost');
  switch (classifyStorageError(err)) {
    case 'fatal':
      // Files are in an unknown state: stop this worker before it touches more (Manticore's rule).
      onFatal(err as FatalStorageError);
      return err;
    case 'permanent':
      return storageFault(messageOf(err), err);
    case 'transient':
      if (attempt >= storageRetryAttempts) {
        return storageFault(`gave up after ${attempt} attempt${attempt === 1 ? '' : 's'}: ${messageOf(err)}`, err);
      }
      return err;
    default:
      return err;
  }
}

function storageFault(message: string, cause: unknown): ApplicationFailure {
  return ApplicationFailure.create({
    message,
    type: STORAGE_FAULT,
    nonRetryable: true,
    cause: cause instanceof Error ? cause : undefined,
  });
}

/** The attempt of the running activity (local ones included), 1 outside one. */
function currentAttempt(): number {
  try {
    return Context.current().info.attempt;
  } catch {
    return 1;
  }
}

/** Wraps every function of an activity object with the failure mapping above. */
export function withFailureMapping<T extends Record<string, (...args: never[]) => Promise<unknown>>>(
  activities: T,
  options: FailureMappingOptions,
): T {
  const budget = options.storageRetryAttempts;
  if (budget !== undefined && !(Number.isInteger(budget) && budget >= 1)) {
    throw new RangeError(`storageRetryAttempts must be a positive integer, got ${budget}`);
  }
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(activities)) {
    wrapped[name] = async (...args: never[]) => {
      try {
        return await fn(...args);
      } catch (err) {
        throw toActivityFailure(err, options, currentAttempt());
      }
    };
  }
  return wrapped as T;
}
