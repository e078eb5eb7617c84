import { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { domainError, isDomainErrorType } from '../domain/errors';

/** The application failure a workflow or update failed with, however deeply the client wrapped it. */
export function applicationFailureOf(err: unknown): ApplicationFailure | undefined {
  let cause: unknown = err;
  while (cause instanceof Error) {
    if (cause instanceof ApplicationFailure) return cause;
    if (!(cause instanceof WorkflowFailedError || cause instanceof WorkflowUpdateFailedError)) return undefined;
    cause = cause.cause;
  }
  return undefined;
}

/** Turns a domain failure that crossed the workflow boundary back into its typed error class. */
export function rethrowAsDomainError(err: unknown): never {
  const failure = applicationFailureOf(err);
  if (failure && isDomainErrorType(failure.type)) throw domainError(failure.type, failure.message);
  throw err;
}
