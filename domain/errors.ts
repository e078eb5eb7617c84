/**
 * Every error the SDK throws on purpose is a TableFateError with a `type`:
 * - domain failures (the request is refused: nothing changed). Each type name crosses the workflow boundary
 *   unchanged (as the `type` of a non-retryable ApplicationFailure), so the client rebuilds the same class;
 * - OperationFailedError: the operation ran and failed otherwise (OPERATION_FAILURE_TYPES);
 * - the client's own: OperationTimeoutError, NoWorkerError, CatalogNotFoundError, ServerUnreachableError,
 *   OperationNotFoundError.
 * What each type means, and the command line's exit code for it, is said once, in domain/error-meanings.ts.
 */

/** The domain failures. Each one's class is made from its name (below). */
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

/** Why an operation that ran failed, when the reason is not the request (an OperationFailedError's `type`). */
export const OPERATION_FAILURE_TYPES = [
  'LockLost',
  'StorageFault',
  'WrongCatalog',
  'WorkflowTerminated',
  'WorkflowCancelled',
  'WorkflowTimedOut',
  'OperationFailed',
] as const;

export type OperationFailureType = (typeof OPERATION_FAILURE_TYPES)[number];

export function isOperationFailureType(type: unknown): type is OperationFailureType {
  return typeof type === 'string' && (OPERATION_FAILURE_TYPES as readonly string[]).includes(type);
}

/** The client's own failures (each a class of its own, below). */
export const CLIENT_ERROR_TYPES = ['OperationNotFound', 'OperationTimeout', 'CatalogNotFound', 'NoWorker', 'ServerUnreachable'] as const;

/** Every `type` a TableFateError can have: the domain's, an operation's failure, or the client's own. */
export type TableFateErrorType = DomainErrorType | OperationFailureType | (typeof CLIENT_ERROR_TYPES)[number];

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
 * The operation ran (its workflow started) and failed for a reason other than the request: its `type` is one of
 * OPERATION_FAILURE_TYPES. `workflowId` names the run, to look at in the Temporal UI; `cause` is the Temporal error it
 * came from.
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

/** `workflowId`: the operation's run, which goes on (`started` false: it may not have started at all). */
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

/** `taskQueue`: the task queue the client starts operations on, which no worker polls. */
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

/** `workflowId`: the id no operation of this catalog runs or ran under (`tablefate cancel`'s). */
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

/** `path`: where the configuration ($TABLEFATE_HOME) points, and no catalog is. */
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
 * `address`: the server that did not answer (refused, unreachable, or no answer within the client's bound);
 * `mayHaveStarted`: lost after a write's start, whose operation may go on as workflow `workflowId`.
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
