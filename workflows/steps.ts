import { ActivityFailure, ApplicationFailure, CancellationScope, log } from '@temporalio/workflow';
import type { TableFateError } from '../domain/errors';

/** Returned by a step's `call` to end the operation early, successfully (for example: already done). */
export const FINISHED = 'finished';

/**
 * One step of an operation, in the manner of Accumulo FATE's Repo: what it does (`call`) beside how to take
 * it back (`undo`). A step with no undo changes nothing that needs taking back.
 */
export interface Step {
  name: string;
  call: () => Promise<void | typeof FINISHED>;
  undo?: () => Promise<void>;
  /**
   * Once this step starts, the operation can only go forward (purge's deletes): the undos of earlier steps
   * are dropped, and a failure leaves the operation to be resumed by running it again.
   */
  pointOfNoReturn?: true;
}

/**
 * Runs the steps in order. When one fails for good, the undos of every step begun (the failing one included,
 * since it may have half happened) run in reverse, in a scope that cancellation cannot interrupt, and the
 * failure is rethrown in the form the client understands.
 *
 * If an undo itself fails for good, compensation stops there: the earlier undos are the catalog's, and running
 * them would record a state the bytes are not in. The table stays in its transitional state (TRASHING,
 * RESTORING, PURGING, CREATING), from which running the same operation again resumes.
 */
export async function runSteps(steps: readonly Step[]): Promise<void> {
  let begun: Step[] = [];
  try {
    for (const step of steps) {
      if (step.pointOfNoReturn) begun = [];
      begun.push(step);
      if ((await step.call()) === FINISHED) return;
    }
  } catch (err) {
    await CancellationScope.nonCancellable(async () => {
      for (const step of begun.reverse()) {
        if (!step.undo) continue;
        try {
          await step.undo();
        } catch (undoErr) {
          log.error('compensation failed; the table stays in its transitional state until the operation is run again', {
            step: step.name,
            error: String(undoErr),
          });
          break;
        }
      }
    });
    throw domainFailure(err);
  }
}

/**
 * Unwraps an activity's non-retryable application failure (TableExists, NameTaken, ...) so that the workflow
 * fails with that type itself, not with a generic "activity failed".
 */
export function domainFailure(err: unknown): unknown {
  if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.nonRetryable) {
    return ApplicationFailure.create({
      message: err.cause.message,
      type: err.cause.type ?? undefined,
      nonRetryable: true,
      cause: err,
    });
  }
  return err;
}

/** A domain error raised inside workflow code, as the non-retryable failure the client maps back. */
export function asFailure(err: TableFateError): ApplicationFailure {
  return ApplicationFailure.nonRetryable(err.message, err.type);
}
