import type { TableName } from '../domain/names';
import type { TableState } from '../domain/states';
import type { TableRecord } from '../domain/table';
import type { ListOptions, LockHolder, LockOwner, Outcome, StepKey } from './catalog';
import type { Lease } from '../domain/leases';
import type { SettingKey, SettingRow } from '../domain/settings';

/**
 * The row-level primitives a store gives the catalog's rules (rules.ts), inside one of its transactions or, for
 * plain reads and single-statement writes, outside any. Each is one statement or two; none decides anything.
 */
export interface CatalogTx {
  /** The table with this id; `forUpdate` keeps its row locked until the transaction ends. */
  tableById(id: number, opts?: RowLock): Promise<TableRecord | undefined>;
  /** The table that holds this name (a name-holding state), if any. */
  nameHolder(name: TableName, opts?: RowLock): Promise<TableRecord | undefined>;
  /** The most recently dropped TRASHED table of this name, if any. */
  newestTrashed(name: TableName): Promise<TableRecord | undefined>;
  listTables(opts: ListOptions): Promise<TableRecord[]>;
  countByState(): Promise<Partial<Record<TableState, number>>>;
  /** The next table id: the counter (seeded with the catalog's first id) incremented in place. */
  nextTableId(): Promise<number>;
  /** Inserts the table's row; false if another table holds its name (the transaction stays usable). */
  insertTable(table: TableRecord): Promise<boolean>;
  /**
   * Writes the table's state, name, parameters, placement and state columns if its row is still in state `expected`: `missed` if it
   * was not, `nameTaken` if another table holds the new name (nothing written; the transaction stays usable).
   */
  updateTable(expected: TableState, table: TableRecord): Promise<'updated' | 'missed' | 'nameTaken'>;

  /** Who holds `resource`; `forUpdate` keeps the lock row locked until the transaction ends. */
  lockHolder(resource: string, opts?: RowLock): Promise<LockHolder | undefined>;
  /** Takes `resource` for `owner` if nobody holds it; false if somebody does (whoever). */
  insertLock(resource: string, owner: LockOwner, since: number): Promise<boolean>;
  /** Frees `holder.resource` if `holder` still holds it; whether it did. */
  deleteLock(holder: LockHolder): Promise<boolean>;
  deleteLocksOf(owner: LockOwner): Promise<void>;
  listLocks(): Promise<LockHolder[]>;

  /**
   * Claims `step` for this transaction, or returns the outcome journaled under it. How depends on the store: one
   * whose writers run one at a time only reads; one whose writers run side by side inserts a claim that a second
   * claimer of the same step waits on.
   */
  claimStep(step: StepKey): Promise<Outcome<unknown> | undefined>;
  /** Journals the outcome of a claimed step, or withdraws the claim (`undefined`: a result that is not final). */
  settleStep(step: StepKey, outcome: Outcome<unknown> | undefined): Promise<void>;
  /** The outcome journaled under `step`, if any. */
  stepOutcome(step: StepKey): Promise<Outcome<unknown> | undefined>;
  /** Journals `outcome` under `step` unless the step has one already. */
  recordStep(step: StepKey, outcome: Outcome<unknown>): Promise<void>;
  /** Deletes the journal entries made before `before`; how many. */
  pruneJournal(before: number): Promise<number>;

  /** Every stored setting, global ones and namespaces' alike. */
  settingRows(): Promise<SettingRow[]>;
  /** Writes a setting, replacing the value it had. */
  upsertSetting(row: SettingRow): Promise<void>;
  /** Deletes a setting; whether there was one. */
  deleteSetting(key: SettingKey, namespace: string | null): Promise<boolean>;

  /** The leases not expired at `now`, of one table or of all, soonest to expire first. */
  liveLeases(opts: { tableId?: number; now: number }): Promise<Lease[]>;
  /** A lease, expired or not; `forUpdate` keeps its row locked until the transaction ends. */
  leaseById(id: string, opts?: RowLock): Promise<Lease | undefined>;
  insertLease(lease: Lease): Promise<void>;
  /** A lease's new ttl and expiry (a renewal). */
  renewLease(id: string, ttlSeconds: number, expiresAt: number): Promise<void>;
  /** Deletes a lease; whether there was one. */
  deleteLease(id: string): Promise<boolean>;
  /** Deletes the leases that expired before `before`; how many. */
  pruneLeases(before: number): Promise<number>;

  savepoint(name: string): Promise<void>;
  releaseSavepoint(name: string): Promise<void>;
  rollbackToSavepoint(name: string): Promise<void>;
}

export interface RowLock {
  forUpdate?: boolean;
}

/** A transaction met a race it cannot settle itself (a row changed between two statements): run it again. */
export class RetryTransaction extends Error {
  override readonly name = 'RetryTransaction';
}
