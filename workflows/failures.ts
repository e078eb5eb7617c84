import { ActivityFailure, ApplicationFailure } from '@temporalio/workflow';
import type { TableFateError } from '../domain/errors';

/**
 * Unwraps an activity's non-retryable application failure (TableExists, NameTaken, ...) so that the workflow fails with
 * that type itself, not with a generic "activity failed".
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

/** The application failure an activity failed with, if it did (a retryable one too). */
export function applicationFailureOf(err: unknown): ApplicationFailure | undefined {
  const failure = err instanceof ActivityFailure ? err.cause : err;
  return failure instanceof ApplicationFailure ? failure : undefined;
}
