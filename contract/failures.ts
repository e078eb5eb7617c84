import { RETRIED_FAILURE_TYPES } from '../domain/contract';
import { ERROR_MEANINGS } from '../domain/error-meanings';
import { OPERATION_FAILURE_TYPES, type TableFateErrorType } from '../domain/errors';

/**
 * The failures of the contract's calls: which error types a call can end with (or meet and retry), in the order the
 * document lists them, what each carries in its details[0], and what it means to a caller: the error type's meaning
 * (domain/error-meanings.ts), but where a call meets it otherwise than the SDK's caller does.
 */

/**
 * The failures a contract call can end with, or meet and retry. Not CatalogNotFound (the worker that runs a call has its
 * catalog open) nor OperationNotFound (cancel's, which the contract does not offer).
 */
export type ContractFailureType = Exclude<TableFateErrorType, 'CatalogNotFound' | 'OperationNotFound'>;

const isContractFailure = (type: TableFateErrorType): type is ContractFailureType =>
  type !== 'CatalogNotFound' && type !== 'OperationNotFound';

/** Every failure of the contract, in the order the document lists them. */
export const FAILURE_TYPES = (Object.keys(ERROR_MEANINGS) as TableFateErrorType[]).filter(isContractFailure);

/** What a failure's details[0] may carry: the error's own fields (contract/activities.ts's `typed`). */
export const DETAIL_FIELDS = {
  workflowId: "the operation's run, by its workflow id (drop:42@<catalog>), to look at in the Temporal UI",
  timeoutMs: 'how long the call waited, in ms',
  started: "whether the operation's run had started",
  taskQueue: 'the task queue no worker polled',
  namespace: 'the Temporal namespace',
  address: "the Temporal server's address",
  mayHaveStarted: 'whether the operation may have started before the server was lost',
} as const;
export type DetailField = keyof typeof DETAIL_FIELDS;

/** The fields each failure carries: an OperationFailedError its run's, the client's failures their own. */
const DETAILS: Partial<Record<ContractFailureType, readonly DetailField[]>> = {
  ...Object.fromEntries(OPERATION_FAILURE_TYPES.map((type) => [type, ['workflowId']])),
  OperationTimeout: ['workflowId', 'timeoutMs', 'started'],
  NoWorker: ['taskQueue', 'namespace', 'address'],
  ServerUnreachable: ['address', 'mayHaveStarted', 'workflowId'],
};

/** A failure's details[0] fields, each with what it says. */
export const detailsOf = (type: ContractFailureType): Partial<Record<DetailField, string>> =>
  Object.fromEntries((DETAILS[type] ?? []).map((field) => [field, DETAIL_FIELDS[field]]));

/**
 * Where a call meets a failure otherwise than the SDK's caller: its activity waits a day for its operation, and its
 * worker's client retries a lost server.
 */
const IN_A_CALL: Partial<Record<ContractFailureType, string>> = {
  OperationTimeout: "the call's wait for its operation passed a day; the operation goes on, and the call's next attempt joins it",
  ServerUnreachable: 'the worker running the call lost the Temporal server for a moment',
};

/** What a failure means to a contract's caller. */
export const meaningOf = (type: ContractFailureType): string => IN_A_CALL[type] ?? ERROR_MEANINGS[type].meaning;

/** The call's activity tries it again: the call does not end with it. */
export const isRetried = (type: ContractFailureType): boolean => RETRIED_FAILURE_TYPES.includes(type);

/** What the run a write starts (or addresses) changes, which says how it can fail besides its refusals. */
export type RunKind = 'shards' | 'locked' | 'lockFree';

const ANY_RUN: readonly ContractFailureType[] = [
  'WrongCatalog',
  'WorkflowTerminated',
  'WorkflowCancelled',
  'WorkflowTimedOut',
  'OperationFailed',
];
/** How a write's run can fail, by what it changes. */
export const RUN_FAILURES: Record<RunKind, readonly ContractFailureType[]> = {
  shards: ['LockLost', 'StorageFault', ...ANY_RUN],
  locked: ['LockLost', ...ANY_RUN],
  lockFree: ANY_RUN,
};

/** What a write meets on its way to the server, and its activity retries. */
export const RETRIED = FAILURE_TYPES.filter(isRetried);
