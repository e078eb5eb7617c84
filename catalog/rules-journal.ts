import { domainError, isDomainErrorType, TableFateError } from '../domain/errors';
import type { Outcome, StepKey } from './catalog';
import type { CatalogTx } from './tx';

/** The journal of step keys (see StepKey): each call of a workflow run applied at most once, its outcome kept. */

/**
 * Runs `fn` once per step key, inside the caller's transaction. The key is claimed first: a key seen before
 * returns its journaled outcome (the value, or the same domain error) without running `fn`. Otherwise `fn` runs
 * and its outcome is journaled with its changes, atomically; a domain error undoes what `fn` did (a savepoint)
 * and is journaled like a value, returned rather than thrown so that the transaction keeps its journal entry.
 * `keep` says which values are final (a busy lock is not: its claim is withdrawn). The caller unwraps the
 * outcome once the transaction has committed.
 */
export async function journaled<T>(
  tx: CatalogTx,
  step: StepKey | undefined,
  fn: () => Promise<T>,
  keep: (value: T) => boolean = () => true,
): Promise<Outcome<T>> {
  if (!step) return { value: await fn() };
  const seen = await tx.claimStep(step);
  if (seen) return seen as Outcome<T>;
  let outcome: Outcome<T>;
  await tx.savepoint('step_body');
  try {
    outcome = { value: await fn() };
    await tx.releaseSavepoint('step_body');
  } catch (err) {
    if (!(err instanceof TableFateError)) throw err;
    await tx.rollbackToSavepoint('step_body');
    outcome = { error: { type: err.type, message: err.message } };
  }
  await tx.settleStep(step, 'value' in outcome && !keep(outcome.value) ? undefined : outcome);
  return outcome;
}

/** The journaled value, or the journaled domain error thrown again. */
export function unwrap<T>(outcome: Outcome<T>): T {
  if ('value' in outcome) return outcome.value;
  if (isDomainErrorType(outcome.error.type)) throw domainError(outcome.error.type, outcome.error.message);
  throw new Error(outcome.error.message);
}
