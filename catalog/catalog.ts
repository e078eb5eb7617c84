import type { TableName } from '../domain/names';
import type { TableState } from '../domain/states';
import type { CreateParams, Hold, ShardPlacement, TableRecord } from '../domain/table';
import type { Lease } from '../domain/leases';
import type { SettingKey, SettingRow, SettingValue } from '../domain/settings';

/**
 * The catalog's contract: what a catalog answers and what its callers pass it. Types only, importing nothing of
 * the catalog's own modules, so that every one of them (the rules, both stores) can import it.
 */

/** Who holds a lock: the workflow (and its run) that took it. */
export interface LockOwner {
  workflowId: string;
  runId: string;
}

export interface LockHolder extends LockOwner {
  resource: string;
  since: number;
}

/** Whether the workflow run holding a lock has closed (its lock may then be taken over). */
export type IsOwnerClosed = (holder: LockHolder) => Promise<boolean>;

/**
 * Names one call a workflow run makes to the catalog (its run id and the call's place in the run). A call
 * made again under the same key (the workflow task that made it was lost, so its result never reached the
 * history) returns what the first one did, even after the run has released its lock: every call of a run is
 * applied at most once.
 */
export interface StepKey {
  runId: string;
  step: string;
}

/** A journaled outcome: what the call returned, or the error it failed with for good (a domain error, a storage fault). */
export type Outcome<T> = { value: T } | { error: { type: string; message: string } };

/**
 * A lock another running operation holds, named: the call changed nothing, and its caller waits its turn (an answer,
 * never journaled, so that the same call made again tries again). Every catalog call that takes a lock answers so.
 */
export interface Busy {
  outcome: 'busy';
  holder: LockHolder;
}

/** Whether a catalog call's answer is Busy. */
export const isBusy = (answer: object): answer is Busy => 'outcome' in answer && answer.outcome === 'busy';

export type AcquireResult = { acquired: true; tookOverFrom: LockHolder | null } | Busy;

/** What a create finds when it prepares. */
export type PrepareResult =
  /** The name is free or held by this create's own prepare record: go on with this record, whose lock it now holds. */
  | { outcome: 'prepared'; table: TableRecord; resumed: boolean }
  /** The same create already committed: nothing to do. */
  | { outcome: 'exists'; table: TableRecord }
  /** Another running operation holds the name's lock or the lock of the table the record belongs to: try again later. */
  | Busy;

export interface PrepareCreateRequest extends TableName {
  params: CreateParams;
  owner: LockOwner;
  /** The name lock the create holds (`name:<ns>.<name>`); the prepare also takes the table's own lock. */
  nameLock: string;
  /**
   * The prepare takes the name lock itself, in its own transaction, rather than find it held (since v17: one local
   * activity less); a name lock another operation holds is `busy`, as the table's is.
   */
  takeNameLock?: boolean;
  /** Chooses placement once, when the id is known; a resumed create keeps the placement it has. */
  place: (tableId: number, params: CreateParams) => ShardPlacement[];
  now: number;
  step?: StepKey;
}

export interface ListOptions {
  includeTrashed: boolean;
  afterId?: number;
  limit?: number;
}

export interface TransitionRequest {
  tableId: number;
  from: readonly TableState[];
  to: TableState;
  /** Must hold the table's lock (`table:<id>`). */
  owner: LockOwner;
  /** Workflow time: the one clock drop times and expiries come from. */
  now: number;
  /** Entering TRASHED: how long the data is kept. */
  retentionSeconds?: number;
  /** Entering TRASHED from TRASHING: who dropped it (the drop's startedBy), recorded with the drop time; null when absent. */
  droppedBy?: string;
  /** Entering TRASHED from TRASHING: what the drop took along (TableRecord.family); none when absent or empty. */
  family?: string[];
  /** Leaving READY for the trash, and entering TRASHED from TRASHING: the tables dropped with it as one (TableRecord.droppedWith). */
  droppedWith?: number[];
  /** Give the table this name with the move (undelete under a new name, or back to its old one). */
  rename?: TableName;
  /** The name the caller believes the table has: a table bearing another name is refused. */
  expectName?: TableName;
  /** Entering TRUNCATING: the trash entry its rows go to (TableRecord.truncateInto). */
  truncateInto?: number;
  /**
   * Entering TRASHED from TRASHING: the drop time `now` stands for instead of the one the table was stamped with on
   * entering TRASHING (a drop of several as one: one drop time for all its tables, the commit's).
   */
  restamp?: true;
  step?: StepKey;
}

/** One table's share of a change made on several at once (Catalog.changeTogether). */
export type TogetherRequest = { transition: TransitionRequest } | { commitTruncate: TruncateCommit };

/** A truncate's commit (Catalog.commitTruncate). */
export interface TruncateCommit {
  /** The table truncating; must hold its lock. */
  tableId: number;
  owner: LockOwner;
  now: number;
  /** How long the trash keeps the rows. */
  retentionSeconds: number;
  /** Who truncated it, recorded as the entry's dropper. */
  droppedBy?: string;
  /** The entry the caller read the truncate as making (its truncateInto), by which a repeated commit finds it made. */
  into?: number;
  step?: StepKey;
}

/**
 * What the SDK and the command line read of the catalog: tables, by id and by name, and nothing that changes
 * it. A client holds its catalog as this type, so that every change goes through a workflow.
 */
export interface CatalogReader {
  /** This catalog's identity, made once when it is created; operations carry it and workers check it. */
  readonly id: string;
  getTable(tableId: number): Promise<TableRecord | undefined>;
  /** The table that holds this name now (any name-holding state), if any. */
  findByName(name: TableName): Promise<TableRecord | undefined>;
  /** The most recently trashed table of this name still in the trash, if any. */
  findTrashed(name: TableName): Promise<TableRecord | undefined>;
  /**
   * Live tables; with `includeTrashed`, trashed ones too. Purged tombstones are never listed. By id; a page of
   * them with `afterId` (ids above it) and `limit` (at most that many).
   */
  listTables(opts: ListOptions): Promise<TableRecord[]>;
  /** How many tables are in each state, tombstones (PURGED) included; a state no table is in is absent. */
  countByState(): Promise<Partial<Record<TableState, number>>>;
  /** The runtime settings stored, global (namespace null) and namespaces'; with `step`, journaled. */
  listSettings(step?: StepKey): Promise<SettingRow[]>;
  /** The leases not expired at `now`, of every table or of one, soonest to expire first; with `step`, journaled. */
  listLeases(opts: { tableId?: number; now: number }, step?: StepKey): Promise<Lease[]>;
  close(): Promise<void>;
}

/** A runtime setting set (`value`) or unset (`value` undefined), globally (namespace null) or for a namespace. */
export interface SettingChange {
  key: SettingKey;
  namespace: string | null;
  value?: SettingValue;
  now: number;
  step?: StepKey;
}

/** A legal hold placed (`hold`) or released (`hold` null), under the table's lock. */
export interface HoldChange {
  tableId: number;
  hold: Hold | null;
  owner: LockOwner;
  expectName?: TableName;
  step?: StepKey;
}

/** A trashed table's expiry moved by its trash run (the run owns no lock while it waits: nobody else may hold one). */
export interface ExpiryChange {
  tableId: number;
  droppedAt: number;
  expireAt: number;
  owner: LockOwner;
  step?: StepKey;
}

/** The first change of a drop: READY to DRAINING while leases are live (none are taken after it), else to TRASHING. */
export interface DrainStart {
  tableId: number;
  owner: LockOwner;
  now: number;
  expectName?: TableName;
  /**
   * The drop takes the table's lock in this transaction rather than hold it already (since v17: one local activity
   * less); a lock another operation holds is `busy`, and nothing is changed.
   */
  takeLock?: boolean;
  /** The other tables of a drop of several as one (TableRecord.droppedWith), recorded from its start: a drop resumed takes them all. */
  droppedWith?: number[];
  /** A truncate's first change rather than a drop's: READY to TRUNCATING, its trash entry's id chosen and locked. */
  truncate?: boolean;
  step?: StepKey;
}

/** A drop's first change made (the table, and the leases it waits for), or the table's lock found held by another. */
export type DrainResult = { table: TableRecord; leases: Lease[] } | Busy;

export type LeaseRequest =
  | { action: 'acquire'; lease: Lease; step?: StepKey }
  | { action: 'renew'; leaseId: string; now: number; ttlSeconds?: number; step?: StepKey }
  | { action: 'release'; leaseId: string; step?: StepKey };

/**
 * The source of truth for tables, states, trash entries (TRASHED rows with their drop and expiry times),
 * locks, the id counter and the journal of calls made by workflow runs. Every change is a transaction; every
 * state change is a compare-and-set on (id, expected state, lock owner). Asynchronous so that a networked
 * store (PostgreSQL) fits the same shape.
 */
export interface Catalog extends CatalogReader {
  /**
   * Allocates the id and placement of a new table once and records them with the create's parameters
   * (the prepare record), or finds the record of an earlier attempt of the same create, and takes the table's
   * lock for the create. Throws TableExists when the name is held by another table or by the same name created
   * with other parameters, LockLost when the caller does not hold the name lock.
   */
  prepareCreate(req: PrepareCreateRequest, isOwnerClosed: IsOwnerClosed): Promise<PrepareResult>;
  /**
   * Moves a table from one of `from` to `to`, under its lock. A move already made (the table is in `to`, under
   * the same name) is a success: an earlier attempt of this operation made it. Throws WrongState,
   * TableNotFound, NameTaken (unique names) or LockLost.
   */
  transition(req: TransitionRequest): Promise<TableRecord>;

  /**
   * Several tables' changes (a step of an operation over several tables that cannot be taken back: a drop's commit, a
   * recall's, a truncate's), all in one transaction: made on all of them, or on none. Each is journaled under its own
   * step. Answers each table as its change answers it (a truncate's commit: the trash entry it recorded).
   */
  changeTogether(reqs: readonly TogetherRequest[]): Promise<TableRecord[]>;

  /** With `step`, the read is journaled: the same step asked again answers what it answered the first time. */
  getTable(tableId: number, step?: StepKey): Promise<TableRecord | undefined>;

  /** Takes `resource` for `owner`; re-entrant for the same owner. A lock whose holder has closed is taken over. */
  acquireLock(resource: string, owner: LockOwner, now: number, isOwnerClosed: IsOwnerClosed, step?: StepKey): Promise<AcquireResult>;
  /** Whether `owner` holds `resource` now: the fence every storage change checks before it touches a file. */
  holdsLock(resource: string, owner: LockOwner): Promise<boolean>;
  /**
   * How a step a run made outside the catalog (a change of shards) ended, if the run made it: such a step
   * journals its outcome once it has one for good (recordStep), and the same step made again answers the same
   * without touching anything.
   */
  stepOutcome(step: StepKey): Promise<Outcome<unknown> | undefined>;
  /** Journals how a step made outside the catalog ended. A step journaled already keeps its first outcome. */
  recordStep(step: StepKey, outcome: Outcome<unknown>): Promise<void>;
  /** Releases every lock `owner` holds; nothing to release is a no-op. */
  releaseLocks(owner: LockOwner): Promise<void>;
  listLocks(): Promise<LockHolder[]>;
  /** Forgets journal entries older than `before` (their runs have long closed); returns how many. */
  pruneJournal(before: number): Promise<number>;

  /** Sets or unsets a runtime setting; answers every setting stored after the change. */
  changeSetting(req: SettingChange): Promise<SettingRow[]>;
  /**
   * Places or releases a legal hold on a READY or trashed table, under its lock. Holding a table held for the same
   * reason answers it as it is; for another reason, or releasing a table not held, is WrongState.
   */
  changeHold(req: HoldChange): Promise<TableRecord>;
  /** Moves the expiry of the trash at `droppedAt`; WrongState if the table is no longer in it or another operation holds it. */
  changeExpiry(req: ExpiryChange): Promise<TableRecord>;
  /**
   * A drop's first change (see DrainStart), or a truncate's, with the leases it must wait for. A table DRAINING or
   * TRASHING (TRUNCATING) is answered as it is.
   */
  startDrain(req: DrainStart, isOwnerClosed: IsOwnerClosed): Promise<DrainResult>;
  /** A truncate's commit: its rows' trash entry recorded TRASHED, the table READY; answers the entry. */
  commitTruncate(req: TruncateCommit): Promise<TableRecord>;
  /**
   * A lease taken (the table must be READY: WrongState otherwise), renewed (it must not have expired) or released
   * (LeaseNotFound if there is none by that id): the lease as the change leaves it (a released one as it was).
   */
  changeLease(req: LeaseRequest): Promise<Lease>;
  /** Forgets leases that expired before `before`; how many. */
  pruneLeases(before: number): Promise<number>;
}
