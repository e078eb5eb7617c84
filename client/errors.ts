import type { ApplicationFailure, TemporalFailure } from '@temporalio/common';
import {
  domainError,
  isDomainErrorType,
  isOperationFailureType,
  OperationFailedError,
  ServerUnreachableError,
  TableFateError,
} from '../domain/errors';
import { temporalClient, temporalCommon } from './temporal';

/** gRPC status codes (@grpc/grpc-js's `status`) of a server that is not there: UNIMPLEMENTED, UNAVAILABLE. */
const NOT_THERE: readonly number[] = [12, 14];
/** The gRPC status (@grpc/grpc-js's `status.NOT_FOUND`) of a call to a run that is not there (closed, say, before it accepted an update). */
const GRPC_NOT_FOUND = 5;

/** Whether the server answered NOT_FOUND: the run a call addressed is not there (or no longer runs). */
export function isNotFoundStatus(err: unknown): boolean {
  const { isGrpcServiceError } = temporalClient();
  return isGrpcServiceError(err) && (err.code as number) === GRPC_NOT_FOUND;
}

/** Whether a call to a run found no such run, as the client says it or as the server does. */
export function isRunNotFound(err: unknown): boolean {
  return err instanceof temporalClient().WorkflowNotFoundError || isNotFoundStatus(err);
}

/**
 * The failure a workflow or update failed with, however deeply the client wrapped it (WorkflowFailedError,
 * WorkflowUpdateFailedError, or the OperationFailedError the SDK made of them).
 */
function temporalFailureOf(err: unknown): TemporalFailure | undefined {
  const { WorkflowFailedError, WorkflowUpdateFailedError } = temporalClient();
  const { TemporalFailure } = temporalCommon();
  let cause: unknown = err;
  while (cause instanceof Error) {
    if (cause instanceof TemporalFailure) return cause;
    const wrapper =
      cause instanceof WorkflowFailedError || cause instanceof WorkflowUpdateFailedError || cause instanceof OperationFailedError;
    if (!wrapper) return undefined;
    cause = cause.cause;
  }
  return undefined;
}

/** The application failure a workflow or update failed with, if that is what it failed with. */
export function applicationFailureOf(err: unknown): ApplicationFailure | undefined {
  const failure = temporalFailureOf(err);
  return failure instanceof temporalCommon().ApplicationFailure ? failure : undefined;
}

/**
 * What a write's failure means to the caller, as a typed error: a domain failure as its class; any other way
 * the workflow failed (an internal failure type, one this client does not know, terminated, cancelled, timed
 * out) as an OperationFailedError; a server that cannot be reached as ServerUnreachableError. Anything else
 * (a bug, a refusal of the server) is returned unchanged.
 */
export function toTableFateError(err: unknown, ctx: { workflowId: string; address: string; check: string }): unknown {
  if (err instanceof TableFateError) return err;
  const { WorkflowFailedError, WorkflowUpdateFailedError } = temporalClient();
  const { ApplicationFailure, CancelledFailure, TerminatedFailure, TimeoutFailure } = temporalCommon();
  const failure = temporalFailureOf(err);
  const { workflowId, check } = ctx;
  if (failure instanceof ApplicationFailure) {
    if (isDomainErrorType(failure.type)) return domainError(failure.type, failure.message);
    if (isOperationFailureType(failure.type)) {
      return new OperationFailedError(failure.type, `${failure.message} (workflow ${workflowId})`, workflowId, { cause: err });
    }
    return new OperationFailedError(
      'OperationFailed',
      `workflow ${workflowId} failed: ${failure.type ?? 'Error'}: ${failure.message}; check the table with ${check}`,
      workflowId,
      { cause: err },
    );
  }
  const ended = (type: 'WorkflowTerminated' | 'WorkflowCancelled' | 'WorkflowTimedOut', how: string) =>
    new OperationFailedError(
      type,
      `workflow ${workflowId} was ${how} while this call waited for it${failure?.message ? ` (${failure.message})` : ''}; ` +
        `check the table with ${check}`,
      workflowId,
      { cause: err },
    );
  if (failure instanceof TerminatedFailure) return ended('WorkflowTerminated', 'terminated');
  if (failure instanceof CancelledFailure) return ended('WorkflowCancelled', 'cancelled');
  if (failure instanceof TimeoutFailure) return ended('WorkflowTimedOut', 'timed out by Temporal');
  if (failure || err instanceof WorkflowFailedError || err instanceof WorkflowUpdateFailedError) {
    const message = failure?.message || (err as Error).message;
    return new OperationFailedError(
      'OperationFailed',
      `workflow ${workflowId} failed: ${message}; check the table with ${check}`,
      workflowId,
      {
        cause: err,
      },
    );
  }
  if (isUnreachable(err)) return unreachable(err, ctx.address);
  return err;
}

/** The error a call to a server that does not answer ends with (refused, unreachable, not a Temporal frontend). */
export function isUnreachable(err: unknown): boolean {
  const { isGrpcServiceError } = temporalClient();
  return causeChain(err).some(
    (e) =>
      (isGrpcServiceError(e) && NOT_THERE.includes(e.code)) || /failed to connect|ECONNREFUSED|No connection established/i.test(e.message),
  );
}

/** Whether a gRPC call ended because its deadline passed or it was cancelled (our abort). */
export function isDeadlineOrCancelled(err: unknown): boolean {
  const { isGrpcDeadlineError, isGrpcCancelledError } = temporalClient();
  return causeChain(err).some((e) => isGrpcDeadlineError(e) || isGrpcCancelledError(e));
}

/** The error and its causes, outermost first. */
function causeChain(err: unknown): Error[] {
  const chain: Error[] = [];
  for (let e: unknown = err; e instanceof Error && chain.length < 10; e = e.cause) chain.push(e);
  return chain;
}

export function unreachable(err: unknown, address: string, detail?: string): ServerUnreachableError {
  const why = detail ?? (err instanceof Error ? err.message.replace(/\s*\n\s*/g, ' ') : String(err));
  return new ServerUnreachableError(`cannot reach the Temporal server at ${address} (${why}); is \`tablefate dev\` running?`, address, {
    cause: err,
  });
}
