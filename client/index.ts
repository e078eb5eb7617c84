/**
 * The tablefate SDK: the client, its options, its configuration and every error it throws on purpose (all
 * TableFateErrors, each with a `type`). Imports no worker code.
 */
export {
  DEFAULT_TIMEOUT_MS,
  TableFateClient,
  type CancelOutcome,
  type LeaseOptions,
  type PurgeAllProgress,
  type PurgeAllSummary,
  type TableFateClientOptions,
  type TableHistory,
  type UndeleteOptions,
  type WriteOptions,
} from './client';
export type { LeaseInfo } from '../domain/leases';
export type { OperationInfo, OperationStatus } from '../domain/operation-runs';
export type { EffectiveSetting, SettingKey, SettingSource } from '../domain/settings';
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
  OnHoldError,
  LeaseNotFoundError,
  OperationNotFoundError,
  type DomainErrorType,
  type OperationFailureType,
  type TableFateErrorType,
} from '../domain/errors';
export type { TableInfo } from '../domain/table';
export type { RecallProgress } from '../domain/contracts';
export type {
  AdoptRequest,
  CancelRequest,
  HistoryRequest,
  OperationsRequest,
  ConfigGetRequest,
  ConfigSetRequest,
  ConfigUnsetRequest,
  HoldRequest,
  ListLeasesRequest,
  PurgeAllRequest,
  ReleaseRequest,
  RetentionRequest,
  CreateRequest,
  DescribeRequest,
  ListRequest,
  PurgeRequest,
  RenameRequest,
  TrashRequest,
  TruncateRequest,
  UndeleteRequest,
} from '../domain/requests';
