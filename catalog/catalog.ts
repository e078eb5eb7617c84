import type { TableName } from '../domain/names';
import type { TableState } from '../domain/states';
import type { CreateParams, ShardPlacement, TableRecord } from '../domain/table';

/** Who holds a lock: the workflow (and its run) that took it. */
export interface LockOwner {
  workflowId: string;
  runId: string;
}

/** The lock that guards a state change: compare-and-set succeeds only while `owner` holds `resource`. */
export interface LockGuard {
  resource: string;
  owner: LockOwner;
}

export interface LockHolder extends LockOwner {
  resource: string;
  since: number;
}

export type AcquireResult = { acquired: true; tookOverFrom: LockHolder | null } | { acquired: false; holder: LockHolder };

/** What a create finds when it prepares. */
export type PrepareResult =
  /** The name is free or held by this create's own prepare record: go on with this record. */
  | { outcome: 'prepared'; table: TableRecord; resumed: boolean }
  /** The same create already committed: nothing to do. */
  | { outcome: 'exists'; table: TableRecord };

export interface PrepareCreateRequest extends TableName {
  params: CreateParams;
  guard: LockGuard;
  /** Chooses placement once, when the id is known; a resumed create keeps the placement it has. */
  place: (tableId: number, params: CreateParams) => ShardPlacement[];
  now: number;
}

export interface TransitionRequest {
  tableId: number;
  from: readonly TableState[];
  to: TableState;
  guard: LockGuard;
  now: number;
  /** Columns that change with the state. */
  set?: Partial<Pick<TableRecord, 'namespace' | 'name' | 'droppedAt' | 'expireAt' | 'purgedAt'>>;
}

/**
 * The source of truth for tables, states, trash entries (TRASHED rows with their drop and expiry times),
 * locks and the id counter. Every change is a transaction; every state change is a compare-and-set on
 * (id, expected state, lock owner). Asynchronous so that a networked store (PostgreSQL) fits the same shape.
 */
export interface Catalog {
  /**
   * Allocates the id and placement of a new table once and records them with the create's parameters
   * (the prepare record), or finds the record of an earlier attempt of the same create. Throws TableExists
   * when the name is held by another table or by the same name created with other parameters.
   */
  prepareCreate(req: PrepareCreateRequest): Promise<PrepareResult>;
  /** Moves a table from one of `from` to `to`. Throws WrongState, TableNotFound or NameTaken (unique names). */
  transition(req: TransitionRequest): Promise<TableRecord>;

  getTable(tableId: number): Promise<TableRecord | undefined>;
  /** The table that holds this name now (any name-holding state), if any. */
  findByName(name: TableName): Promise<TableRecord | undefined>;
  /** The most recently trashed table of this name still in the trash, if any. */
  findTrashed(name: TableName): Promise<TableRecord | undefined>;
  /** Live tables; with `includeTrashed`, trashed ones too. Purged tombstones are never listed. */
  listTables(opts: { includeTrashed: boolean }): Promise<TableRecord[]>;

  /** Takes `resource` for `owner`; re-entrant for the same owner. `isOwnerClosed` decides a take-over. */
  acquireLock(
    resource: string,
    owner: LockOwner,
    now: number,
    isOwnerClosed: (holder: LockHolder) => Promise<boolean>,
  ): Promise<AcquireResult>;
  /** Releases `resource` if `owner` holds it; releasing a lock one does not hold is a no-op. */
  releaseLock(resource: string, owner: LockOwner): Promise<void>;
  listLocks(): Promise<LockHolder[]>;

  close(): Promise<void>;
}
