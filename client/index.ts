/**
 * The tablefate SDK: the client, its options, its configuration and every error it throws on purpose (all
 * TableFateErrors, each with a `type`). Imports no worker code.
 */
export { DEFAULT_TIMEOUT_MS, TableFateClient, type TableFateClientOptions, type UndeleteOptions, type WriteOptions } from './client';
export { loadClientConfig, type ClientConfig } from '../config/client';
export {
  CatalogNotFoundError,
  InvalidInputError,
  NameTakenError,
  NoWorkerError,
  OPERATION_FAILURE_TYPES,
  OperationFailedError,
  OperationTimeoutError,
  ServerUnreachableError,
  TableExistsError,
  TableFateError,
  TableInTrashError,
  TableNotFoundError,
  WrongStateError,
  HasDependentsError,
  TableBusyError,
  type DomainErrorType,
  type OperationFailureType,
  type TableFateErrorType,
} from '../domain/errors';
export type { TableInfo } from '../domain/table';
export type { RecallProgress } from '../domain/contracts';
export type {
  AdoptRequest,
  CreateRequest,
  DescribeRequest,
  ListRequest,
  PurgeRequest,
  RenameRequest,
  TrashRequest,
  UndeleteRequest,
} from '../domain/requests';
