import { ActivityFailure, ApplicationFailure } from '@temporalio/workflow';
import type { TableFateError } from '../domain/errors';

/**
 * Unwraps an activity's non-retryable application failure (TableExists, NameTaken, ...) so that the workflow fails with
 * that type itself, not with a generic "activity failed".
 */
export function domainFailure(err: unknown): unknown {
  const failure = err instanceof ActivityFailure ? applicationFailureOf(err) : undefined;
  if (!failure?.nonRetryable) return err;
  return ApplicationFailure.create({ message: failure.message, type: failure.type ?? undefined, nonRetryable: true, cause: err as Error });
}

/** A domain error raised inside workflow code, as the non-retryable failure the client maps back. */
export function asFailure(err: TableFateError): ApplicationFailure {
  return ApplicationFailure.nonRetryable(err.message, err.type);
}

/** The application failure an activity failed with (a retryable one too), or `err` itself if it is one. */
export function applicationFailureOf(err: unknown): ApplicationFailure | undefined {
  const failure = err instanceof ActivityFailure ? err.cause : err;
  return failure instanceof ApplicationFailure ? failure : undefined;
}
