/**
 * Every error the SDK throws on purpose is a TableFateError with a `type`:
 * - domain failures (the request is refused: nothing changed). Each type name crosses the workflow boundary
 *   unchanged (as the `type` of a non-retryable ApplicationFailure), so the client rebuilds the same class;
 * - OperationFailedError: the operation ran and failed otherwise (OPERATION_FAILURE_TYPES);
 * - the client's own: OperationTimeoutError, NoWorkerError, CatalogNotFoundError, ServerUnreachableError,
 *   OperationNotFoundError.
 * The command line's exit code follows the type (cli/main.ts, README).
 */
export const DOMAIN_ERROR_TYPES = [
  'InvalidInput',
  'TableNotFound',
  'TableInTrash',
  'TableExists',
  'NameTaken',
  'WrongState',
  'HasDependents',
  'TableBusy',
  'OnHold',
  'LeaseNotFound',
  'ShardMissing',
] as const;

export type DomainErrorType = (typeof DOMAIN_ERROR_TYPES)[number];

export function isDomainErrorType(type: unknown): type is DomainErrorType {
  return typeof type === 'string' && (DOMAIN_ERROR_TYPES as readonly string[]).includes(type);
}

/**
 * Why an operation that ran failed, when the reason is not the request (an OperationFailedError's `type`):
 * - `LockLost`: another operation took the table's lock over while this one ran; it stopped, undoing nothing.
 * - `StorageFault`: a storage fault retrying cannot fix; what the operation had done was undone where possible.
 * - `WrongCatalog`: the worker that picked it up serves another catalog (two catalogs share a task queue).
 * - `TrashRunAnswered`: an earlier trash of the table has answered and did not close in time for a new one.
 * - `WorkflowTerminated`, `WorkflowCancelled`, `WorkflowTimedOut`: the operation's workflow ended so (an
 *   operator, or a Temporal timeout) while the caller waited for it.
 * - `OperationFailed`: any other failure; the message carries Temporal's type and message.
 */
export const OPERATION_FAILURE_TYPES = [
  'LockLost',
  'StorageFault',
  'WrongCatalog',
  'TrashRunAnswered',
  'WorkflowTerminated',
  'WorkflowCancelled',
  'WorkflowTimedOut',
  'OperationFailed',
] as const;

export type OperationFailureType = (typeof OPERATION_FAILURE_TYPES)[number];

export function isOperationFailureType(type: unknown): type is OperationFailureType {
  return typeof type === 'string' && (OPERATION_FAILURE_TYPES as readonly string[]).includes(type);
}

/** Every `type` a TableFateError can have: the domain's, an operation's failure, or the client's own. */
export type TableFateErrorType =
  DomainErrorType | OperationFailureType | 'OperationTimeout' | 'NoWorker' | 'CatalogNotFound' | 'ServerUnreachable' | 'OperationNotFound';

/** Everything the SDK throws on purpose is one of these: `type` says which, `name` is the class's name. */
export abstract class TableFateError extends Error {
  abstract readonly type: TableFateErrorType;
}

/** The request is malformed; nothing was started and nothing changed. */
export class InvalidInputError extends TableFateError {
  readonly type = 'InvalidInput';
  override readonly name = 'InvalidInputError';
}

export class TableNotFoundError extends TableFateError {
  readonly type = 'TableNotFound';
  override readonly name = 'TableNotFoundError';
}

/** The table exists but is in the trash: it can be recalled, not used (Accumulo's TableDeletedException). */
export class TableInTrashError extends TableFateError {
  readonly type = 'TableInTrash';
  override readonly name = 'TableInTrashError';
}

export class TableExistsError extends TableFateError {
  readonly type = 'TableExists';
  override readonly name = 'TableExistsError';
}

/** An undelete's target name belongs to another table; recall under a new name. */
export class NameTakenError extends TableFateError {
  readonly type = 'NameTaken';
  override readonly name = 'NameTakenError';
}

/** The table is not in a state that allows the operation (for instance purge of a READY table). */
export class WrongStateError extends TableFateError {
  readonly type = 'WrongState';
  override readonly name = 'WrongStateError';
}

/** PostgreSQL driver: views or other tables' foreign keys depend on the table, so it is not trashed; nothing changed. */
export class HasDependentsError extends TableFateError {
  readonly type = 'HasDependents';
  override readonly name = 'HasDependentsError';
}

/** PostgreSQL driver: other sessions held the table past the drop's drain deadline; the drop was taken back. */
export class TableBusyError extends TableFateError {
  readonly type = 'TableBusy';
  override readonly name = 'TableBusyError';
}

/** The table is under a legal hold: nothing purges it until it is released; nothing changed. */
export class OnHoldError extends TableFateError {
  readonly type = 'OnHold';
  override readonly name = 'OnHoldError';
}

/** No such lease: never taken, released already, or expired and forgotten. */
export class LeaseNotFoundError extends TableFateError {
  readonly type = 'LeaseNotFound';
  override readonly name = 'LeaseNotFoundError';
}

/**
 * PostgreSQL driver: a shard table is not where tablefate put it (dropped, renamed or moved outside tablefate, or its
 * oid now names another relation). Nothing was done to whatever is there; `tablefate doctor` reports it.
 */
export class ShardMissingError extends TableFateError {
  readonly type = 'ShardMissing';
  override readonly name = 'ShardMissingError';
}

const CLASSES: Record<DomainErrorType, new (message: string) => TableFateError> = {
  InvalidInput: InvalidInputError,
  TableNotFound: TableNotFoundError,
  TableInTrash: TableInTrashError,
  TableExists: TableExistsError,
  NameTaken: NameTakenError,
  WrongState: WrongStateError,
  HasDependents: HasDependentsError,
  TableBusy: TableBusyError,
  OnHold: OnHoldError,
  LeaseNotFound: LeaseNotFoundError,
  ShardMissing: ShardMissingError,
};

export function domainError(type: DomainErrorType, message: string): TableFateError {
  return new CLASSES[type](message);
}

/**
 * The operation ran (its workflow started) and failed for a reason other than the request: see
 * OPERATION_FAILURE_TYPES for what `type` can be. `workflowId` names the run, to look at in the Temporal UI;
 * `cause` is the Temporal error it came from.
 */
export class OperationFailedError extends TableFateError {
  override readonly name = 'OperationFailedError';

  constructor(
    readonly type: OperationFailureType,
    message: string,
    readonly workflowId: string | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * The call's deadline passed before the operation answered. The operation was not stopped: its workflow,
 * `workflowId`, goes on in the background (unless `started` is false: it may then not have started at all).
 */
export class OperationTimeoutError extends TableFateError {
  readonly type = 'OperationTimeout';
  override readonly name = 'OperationTimeoutError';

  constructor(
    message: string,
    readonly workflowId: string,
    readonly timeoutMs: number,
    readonly started: boolean,
  ) {
    super(message);
  }
}

/** No worker polls the task queue the client starts operations on: nothing was started. */
export class NoWorkerError extends TableFateError {
  readonly type = 'NoWorker';
  override readonly name = 'NoWorkerError';

  constructor(
    message: string,
    readonly taskQueue: string,
    readonly namespace: string,
    readonly address: string,
  ) {
    super(message);
  }
}

/**
 * No operation of this catalog runs or ran under that workflow id (`tablefate cancel`): an id of another catalog, a
 * typing error, or a run the server has forgotten (past the namespace's retention). Nothing was changed.
 */
export class OperationNotFoundError extends TableFateError {
  readonly type = 'OperationNotFound';
  override readonly name = 'OperationNotFoundError';

  constructor(
    message: string,
    readonly workflowId: string,
  ) {
    super(message);
  }
}

/** There is no catalog where the configuration ($TABLEFATE_HOME) points; nothing was created or read. */
export class CatalogNotFoundError extends TableFateError {
  readonly type = 'CatalogNotFound';
  override readonly name = 'CatalogNotFoundError';

  constructor(
    message: string,
    readonly path: string,
  ) {
    super(message);
  }
}

/**
 * The Temporal server did not answer (refused, unreachable, or no answer within the client's bound). Before a
 * write's start (`mayHaveStarted` false) nothing started; lost after it, the operation may go on, as workflow
 * `workflowId`.
 */
export class ServerUnreachableError extends TableFateError {
  readonly type = 'ServerUnreachable';
  override readonly name = 'ServerUnreachableError';
  readonly mayHaveStarted: boolean;
  readonly workflowId: string | undefined;

  constructor(
    message: string,
    readonly address: string,
    options: { cause?: unknown; mayHaveStarted?: boolean; workflowId?: string } = {},
  ) {
    super(message, { cause: options.cause });
    this.mayHaveStarted = options.mayHaveStarted ?? false;
    this.workflowId = options.workflowId;
  }
}
