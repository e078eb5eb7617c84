/**
 * Domain failures. Each has a type name that crosses the workflow boundary unchanged (as the `type` of a
 * non-retryable ApplicationFailure), so the client can rebuild the same class on its side.
 */
export const DOMAIN_ERROR_TYPES = [
  'InvalidInput',
  'TableNotFound',
  'TableInTrash',
  'TableExists',
  'NameTaken',
  'WrongState',
] as const;

export type DomainErrorType = (typeof DOMAIN_ERROR_TYPES)[number];

export function isDomainErrorType(type: unknown): type is DomainErrorType {
  return typeof type === 'string' && (DOMAIN_ERROR_TYPES as readonly string[]).includes(type);
}

export abstract class TableFateError extends Error {
  abstract readonly type: DomainErrorType;
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

const CLASSES: Record<DomainErrorType, new (message: string) => TableFateError> = {
  InvalidInput: InvalidInputError,
  TableNotFound: TableNotFoundError,
  TableInTrash: TableInTrashError,
  TableExists: TableExistsError,
  NameTaken: NameTakenError,
  WrongState: WrongStateError,
};

export function domainError(type: DomainErrorType, message: string): TableFateError {
  return new CLASSES[type](message);
}
