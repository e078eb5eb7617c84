/**
 * Every error the SDK throws on purpose is a TableFateError with a `type`:
 * - domain failures (the request is refused: nothing changed). Each type name crosses the workflow boundary
 *   unchanged (as the `type` of a non-retryable ApplicationFailure), so the client rebuilds the same class;
 * - OperationFailedError: the operation ran and failed otherwise (OPERATION_FAILURE_TYPES);
 * - the client's own: OperationTimeoutError, NoWorkerError, CatalogNotFoundError, ServerUnreachableError,
 *   OperationNotFoundError.
 * Each type is said once, below, with the command line's exit code (README's table says the same to a person).
 */

/** The domain failures: what each means, and the command line's exit code. Its class is made from this (below). */
const DOMAIN_ERRORS = {
  /** The request is malformed; nothing was started and nothing changed. */
  InvalidInput: { exitCode: 2 },
  TableNotFound: { exitCode: 3 },
  /** The table exists but is in the trash: it can be recalled, not used (Accumulo's TableDeletedException). */
  TableInTrash: { exitCode: 3 },
  TableExists: { exitCode: 4 },
  /** An undelete's target name belongs to another table; recall under a new name. */
  NameTaken: { exitCode: 4 },
  /** The table is not in a state that allows the operation (for instance purge of a READY table). */
  WrongState: { exitCode: 4 },
  /** PostgreSQL driver: objects outside the table depend on it, so it is not trashed (or purged); nothing changed. */
  HasDependents: { exitCode: 4 },
  /** Leases, or (PostgreSQL) other sessions, held the table past the drop's drain deadline; the drop was taken back. */
  TableBusy: { exitCode: 4 },
  /** The table is under a legal hold: nothing purges it until it is released; nothing changed. */
  OnHold: { exitCode: 4 },
  /** No such lease: never taken, released already, or expired and forgotten. */
  LeaseNotFound: { exitCode: 3 },
  /**
   * PostgreSQL driver: a shard table is not where tablefate put it (dropped, renamed or moved outside tablefate, or its
   * oid now names another relation). Nothing was done to whatever is there; `tablefate doctor` reports it.
   */
  ShardMissing: { exitCode: 4 },
} as const satisfies Record<string, { exitCode: number }>;

export type DomainErrorType = keyof typeof DOMAIN_ERRORS;
export const DOMAIN_ERROR_TYPES = Object.keys(DOMAIN_ERRORS) as DomainErrorType[];

export function isDomainErrorType(type: unknown): type is DomainErrorType {
  return typeof type === 'string' && Object.hasOwn(DOMAIN_ERRORS, type);
}

/**
 * Why an operation that ran failed, when the reason is not the request (an OperationFailedError's `type`); each ends
 * the command line with 7.
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

/** The client's own failures, and their exit codes. */
const CLIENT_ERRORS = {
  OperationNotFound: { exitCode: 3 },
  // The call gave up waiting; the operation goes on in the background.
  OperationTimeout: { exitCode: 5 },
  // Nothing could start: the deployment is not there (or not where the environment says).
  CatalogNotFound: { exitCode: 6 },
  NoWorker: { exitCode: 6 },
  ServerUnreachable: { exitCode: 6 },
} as const satisfies Record<string, { exitCode: number }>;

/** Every `type` a TableFateError can have: the domain's, an operation's failure, or the client's own. */
export type TableFateErrorType = DomainErrorType | OperationFailureType | keyof typeof CLIENT_ERRORS;

/** The command line's exit code for an error of `type`. */
export function exitCodeForType(type: TableFateErrorType): number {
  if (isDomainErrorType(type)) return DOMAIN_ERRORS[type].exitCode;
  if (isOperationFailureType(type)) return 7;
  return CLIENT_ERRORS[type].exitCode;
}

/** Everything the SDK throws on purpose is one of these: `type` says which, `name` is the class's name. */
export abstract class TableFateError extends Error {
  abstract readonly type: TableFateErrorType;
}

const CLASSES = {} as Record<DomainErrorType, new (message: string) => TableFateError>;

/** The class of a domain failure: `<type>Error`, whose `type` is the type. */
function domainErrorClass<T extends DomainErrorType>(type: T) {
  const name = `${type}Error`;
  const made = class extends TableFateError {
    readonly type: T = type;
    override readonly name: string = name;
  };
  Object.defineProperty(made, 'name', { value: name });
  CLASSES[type] = made;
  return made;
}

export const InvalidInputError = domainErrorClass('InvalidInput');
export type InvalidInputError = InstanceType<typeof InvalidInputError>;
export const TableNotFoundError = domainErrorClass('TableNotFound');
export type TableNotFoundError = InstanceType<typeof TableNotFoundError>;
export const TableInTrashError = domainErrorClass('TableInTrash');
export type TableInTrashError = InstanceType<typeof TableInTrashError>;
export const TableExistsError = domainErrorClass('TableExists');
export type TableExistsError = InstanceType<typeof TableExistsError>;
export const NameTakenError = domainErrorClass('NameTaken');
export type NameTakenError = InstanceType<typeof NameTakenError>;
export const WrongStateError = domainErrorClass('WrongState');
export type WrongStateError = InstanceType<typeof WrongStateError>;
export const HasDependentsError = domainErrorClass('HasDependents');
export type HasDependentsError = InstanceType<typeof HasDependentsError>;
export const TableBusyError = domainErrorClass('TableBusy');
export type TableBusyError = InstanceType<typeof TableBusyError>;
export const OnHoldError = domainErrorClass('OnHold');
export type OnHoldError = InstanceType<typeof OnHoldError>;
export const LeaseNotFoundError = domainErrorClass('LeaseNotFound');
export type LeaseNotFoundError = InstanceType<typeof LeaseNotFoundError>;
export const ShardMissingError = domainErrorClass('ShardMissing');
export type ShardMissingError = InstanceType<typeof ShardMissingError>;

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
