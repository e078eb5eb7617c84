import {
  LeaseNotFoundError,
  NameTakenError,
  TableExistsError,
  TableFateError,
  WrongStateError,
  domainError,
  isDomainErrorType,
} from '../domain/errors';
import { formatTableName, type TableName } from '../domain/names';
import { lockFor } from '../domain/operations';
import { nameChanged, notLeasable, notOnHold, tableNotFound } from '../domain/refusals';
import { canTransition, columnsOnEntering, type TableState } from '../domain/states';
import { canBeHeld, describeCreateParams, sameCreateParams, type TableRecord } from '../domain/table';
import type { Lease } from '../domain/leases';
import { describeLease } from '../domain/leases';
import type { SettingRow } from '../domain/settings';
import type {
  AcquireResult,
  Catalog,
  DrainResult,
  DrainStart,
  ExpiryChange,
  HoldChange,
  LeaseRequest,
  SettingChange,
  IsOwnerClosed,
  ListOptions,
  LockHolder,
  LockOwner,
  Outcome,
  PrepareCreateRequest,
  PrepareResult,
  StepKey,
  TransitionRequest,
} from './catalog';
import { LockLostError } from './lock-lost';
import { RetryTransaction, type CatalogTx } from './tx';

/**
 * The catalog's rules, written once for every store: the prepare of a create, the compare-and-set of a state
 * change, locks with their take-over, the journal of step keys. A store (sqlite.ts, postgres.ts) extends
 * TransactionalCatalog with its transactions and the row-level primitives of CatalogTx, and nothing else; no
 * driver is imported here.
 */

/** How many times a transaction is run when it meets a race it cannot settle, or its store aborts it (a deadlock). */
const MAX_ATTEMPTS = 5;

export abstract class TransactionalCatalog implements Catalog {
  abstract readonly id: string;
  abstract close(): Promise<void>;

  /** Runs `fn` once in a write transaction of its own: committed if `fn` resolves, rolled back if it throws. */
  protected abstract runTransaction<T>(fn: (tx: CatalogTx) => Promise<T>): Promise<T>;
  /** Runs `fn` outside any transaction: reads see what has committed, each write commits on its own. */
  protected abstract runOutside<T>(fn: (tx: CatalogTx) => Promise<T>): Promise<T>;
  /** Whether the store aborted a transaction that may simply run again (a deadlock, a serialization failure). */
  protected isTransient(_err: unknown): boolean {
    return false;
  }

  prepareCreate(req: PrepareCreateRequest, isOwnerClosed: IsOwnerClosed): Promise<PrepareResult> {
    return this.withTakeOver(isOwnerClosed, req.step, (tx) => prepare(tx, req)).then(({ result }) => unwrap(result));
  }

  transition(req: TransitionRequest): Promise<TableRecord> {
    return this.transaction((tx) => journaled(tx, req.step, () => transition(tx, req))).then(unwrap);
  }

  async getTable(tableId: number, step?: StepKey): Promise<TableRecord | undefined> {
    if (!step) return this.runOutside((tx) => tx.tableById(tableId));
    const outcome = await this.transaction((tx) => journaled(tx, step, async () => (await tx.tableById(tableId)) ?? null));
    return unwrap(outcome) ?? undefined;
  }

  findByName(name: TableName): Promise<TableRecord | undefined> {
    return this.runOutside((tx) => tx.nameHolder(name));
  }

  findTrashed(name: TableName): Promise<TableRecord | undefined> {
    return this.runOutside((tx) => tx.newestTrashed(name));
  }

  listTables(opts: ListOptions): Promise<TableRecord[]> {
    return this.runOutside((tx) => tx.listTables(opts));
  }

  countByState(): Promise<Partial<Record<TableState, number>>> {
    return this.runOutside((tx) => tx.countByState());
  }

  acquireLock(resource: string, owner: LockOwner, now: number, isOwnerClosed: IsOwnerClosed, step?: StepKey): Promise<AcquireResult> {
    // A journaled acquire answers "acquired" even if the run has since released the lock (its later calls
    // are journaled too): re-taking it would let a run that already finished hold a table again.
    return this.withTakeOver(isOwnerClosed, step, (tx) => tryLock(tx, resource, owner, now)).then(({ result, tookOverFrom }) => {
      const acquired = unwrap(result);
      return acquired.acquired ? { acquired: true, tookOverFrom } : acquired;
    });
  }

  async holdsLock(resource: string, owner: LockOwner): Promise<boolean> {
    const holder = await this.runOutside((tx) => tx.lockHolder(resource));
    return holder !== undefined && sameOwner(holder, owner);
  }

  stepOutcome(step: StepKey): Promise<Outcome<unknown> | undefined> {
    return this.runOutside((tx) => tx.stepOutcome(step));
  }

  recordStep(step: StepKey, outcome: Outcome<unknown>): Promise<void> {
    return this.runOutside((tx) => tx.recordStep(step, outcome));
  }

  releaseLocks(owner: LockOwner): Promise<void> {
    // In a transaction: deleting several lock rows at once may meet a prepare in a deadlock, and is then run again.
    return this.transaction((tx) => tx.deleteLocksOf(owner));
  }

  listLocks(): Promise<LockHolder[]> {
    return this.runOutside((tx) => tx.listLocks());
  }

  pruneJournal(before: number): Promise<number> {
    return this.runOutside((tx) => tx.pruneJournal(before));
  }

  async listSettings(step?: StepKey): Promise<SettingRow[]> {
    if (!step) return this.runOutside((tx) => tx.settingRows());
    return unwrap(await this.transaction((tx) => journaled(tx, step, () => tx.settingRows())));
  }

  async listLeases(opts: { tableId?: number; now: number }, step?: StepKey): Promise<Lease[]> {
    if (!step) return this.runOutside((tx) => tx.liveLeases(opts));
    return unwrap(await this.transaction((tx) => journaled(tx, step, () => tx.liveLeases(opts))));
  }

  changeSetting(req: SettingChange): Promise<SettingRow[]> {
    return this.transaction((tx) =>
      journaled(tx, req.step, async () => {
        if (req.value === undefined) await tx.deleteSetting(req.key, req.namespace);
        else await tx.upsertSetting({ key: req.key, namespace: req.namespace, value: req.value, updatedAt: req.now });
        return tx.settingRows();
      }),
    ).then(unwrap);
  }

  changeHold(req: HoldChange): Promise<TableRecord> {
    return this.transaction((tx) => journaled(tx, req.step, () => changeHold(tx, req))).then(unwrap);
  }

  changeExpiry(req: ExpiryChange): Promise<TableRecord> {
    return this.transaction((tx) => journaled(tx, req.step, () => changeExpiry(tx, req))).then(unwrap);
  }

  startDrain(req: DrainStart, isOwnerClosed: IsOwnerClosed): Promise<DrainResult> {
    return this.withTakeOver(isOwnerClosed, req.step, (tx) => startDrain(tx, req)).then(({ result }) => unwrap(result));
  }

  changeLease(req: LeaseRequest): Promise<Lease> {
    return this.transaction((tx) => journaled(tx, req.step, () => changeLease(tx, req))).then(unwrap);
  }

  pruneLeases(before: number): Promise<number> {
    return this.runOutside((tx) => tx.pruneLeases(before));
  }

  /**
   * Runs `fn` in a transaction, and again (a few times, after a short random pause) when it met a race it could
   * not settle or the store aborted it for one. Any other error is thrown.
   */
  private async transaction<T>(fn: (tx: CatalogTx) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.runTransaction(fn);
      } catch (err) {
        if (attempt >= MAX_ATTEMPTS || !(err instanceof RetryTransaction || this.isTransient(err))) throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));
    }
  }

  /**
   * Runs `attempt` (a call that takes a lock, and may find it busy) in a transaction, journaled under `step` (a busy
   * answer is not final: its claim is withdrawn), and, while the holder it reports has closed without releasing (a
   * terminated workflow, say), takes that lock over and tries again. The holder's status is asked outside any
   * transaction: it is a call to the Temporal server.
   */
  private async withTakeOver<T extends object>(
    isOwnerClosed: IsOwnerClosed,
    step: StepKey | undefined,
    attempt: (tx: CatalogTx) => Promise<T>,
  ): Promise<{ result: Outcome<T>; tookOverFrom: LockHolder | null }> {
    let tookOverFrom: LockHolder | null = null;
    for (;;) {
      const result = await this.transaction((tx) =>
        journaled(
          tx,
          step,
          () => attempt(tx),
          (answer) => busyHolderOf(answer) === undefined,
        ),
      );
      const holder = busyHolder(result);
      if (!holder || !(await isOwnerClosed(holder))) return { result, tookOverFrom };
      // Unless it changed hands meanwhile: then the next attempt sees the new holder.
      if (await this.runOutside((tx) => tx.deleteLock(holder))) tookOverFrom = holder;
    }
  }
}

/** A create's prepare, under its name lock: the table's record made or found, and the table's lock taken. */
async function prepare(tx: CatalogTx, req: PrepareCreateRequest): Promise<PrepareResult> {
  if (req.takeNameLock) {
    const name = await tryLock(tx, req.nameLock, req.owner, req.now);
    if (!name.acquired) return { outcome: 'busy', holder: name.holder };
  } else {
    await assertHolds(tx, req.nameLock, req.owner);
  }
  const holder = await tx.nameHolder(req, { forUpdate: true });
  if (!holder) {
    const id = await tx.nextTableId();
    const table: TableRecord = {
      id,
      namespace: req.namespace,
      name: req.name,
      state: 'CREATING',
      params: req.params,
      placement: req.place(id, req.params),
      createdAt: req.now,
      droppedAt: null,
      expireAt: null,
      purgedAt: null,
      updatedAt: req.now,
      hold: null,
    };
    // Another table took the name after our read (we hold the name lock, so only a caller that does not honour
    // it could): read again, from the start.
    if (!(await tx.insertTable(table))) throw new RetryTransaction('the name was taken meanwhile');
    // A new id: nobody can hold its lock yet.
    await tryLock(tx, lockFor.table(id), req.owner, req.now);
    return { outcome: 'prepared', table: await mustGet(tx, id), resumed: false };
  }
  const plan = planPrepare(holder, req);
  if (plan === 'exists') return { outcome: 'exists', table: holder };
  const lock = await tryLock(tx, lockFor.table(holder.id), req.owner, req.now);
  if (!lock.acquired) return { outcome: 'busy', holder: lock.holder };
  const redefined = plan === 'redefine' ? { params: req.params, placement: req.place(holder.id, req.params) } : {};
  await write(tx, holder, { ...holder, ...redefined, state: 'CREATING', updatedAt: req.now });
  return { outcome: 'prepared', table: await mustGet(tx, holder.id), resumed: true };
}

/** A state change: a compare-and-set on (id, expected state, lock owner), with the columns the new state stamps. */
async function transition(tx: CatalogTx, req: TransitionRequest): Promise<TableRecord> {
  const current = await tx.tableById(req.tableId, { forUpdate: true });
  if (!current) throw tableNotFound(req.tableId);
  await assertHolds(tx, lockFor.table(req.tableId), req.owner);
  const plan = planTransition(current, req);
  if (plan.made) return plan.table;
  await write(tx, current, { ...current, ...plan.name, ...plan.columns, state: req.to, updatedAt: req.now });
  return mustGet(tx, req.tableId);
}

/**
 * A legal hold placed or released, under the table's lock: only a READY or trashed table can be held (any other is
 * on its way somewhere, and its operation holds the lock anyway). The table's updatedAt is left alone: a hold is not
 * a move, and a trash compares its answer with it.
 */
async function changeHold(tx: CatalogTx, req: HoldChange): Promise<TableRecord> {
  const current = await tx.tableById(req.tableId, { forUpdate: true });
  if (!current || current.state === 'PURGED') throw tableNotFound(req.tableId, { orPurged: true });
  await assertHolds(tx, lockFor.table(req.tableId), req.owner);
  checkName(current, req.expectName);
  if (req.hold) {
    if (!canBeHeld(current)) {
      throw new WrongStateError(`table ${req.tableId} is ${current.state}; only a READY or trashed table can be held`);
    }
    if (current.hold) {
      if (current.hold.reason === req.hold.reason) return current;
      throw new WrongStateError(
        `table ${req.tableId} is already on hold since ${new Date(current.hold.since).toISOString()}${reasonOf(current)}`,
      );
    }
  } else if (!current.hold) {
    throw notOnHold(req.tableId);
  }
  await write(tx, current, { ...current, hold: req.hold });
  return mustGet(tx, req.tableId);
}

export const reasonOf = (table: TableRecord): string => (table.hold?.reason ? ` (reason: ${table.hold.reason})` : ' (no reason given)');

/**
 * A new expiry for the trash at `droppedAt`, asked by that trash's own run (which holds no lock while it waits). Refused
 * if the table is no longer in that trash, or another operation holds it (a recall or a purge under way).
 */
async function changeExpiry(tx: CatalogTx, req: ExpiryChange): Promise<TableRecord> {
  const current = await tx.tableById(req.tableId, { forUpdate: true });
  if (!current || current.state === 'PURGED') throw tableNotFound(req.tableId, { orPurged: true });
  if (current.state !== 'TRASHED' || current.droppedAt !== req.droppedAt) {
    throw new WrongStateError(`table ${req.tableId} is ${current.state}, no longer in the trash whose retention was to change`);
  }
  const holder = await tx.lockHolder(lockFor.table(req.tableId), { forUpdate: true });
  if (holder && !sameOwner(holder, req.owner)) {
    throw new WrongStateError(`table ${req.tableId} is busy: ${holder.workflowId} holds it; try again once it is done`);
  }
  if (current.expireAt === req.expireAt) return current;
  await write(tx, current, { ...current, expireAt: req.expireAt });
  return mustGet(tx, req.tableId);
}

/**
 * A drop's first change, under the table's lock: READY to DRAINING while leases are live, so that none is taken after
 * it, and the drop waits for them; straight to TRASHING when there are none. A table found DRAINING or TRASHING (a
 * drop resumed) is answered as it is, with the leases still live.
 */
async function startDrain(tx: CatalogTx, req: DrainStart): Promise<DrainResult> {
  if (req.takeLock) {
    const lock = await tryLock(tx, lockFor.table(req.tableId), req.owner, req.now);
    if (!lock.acquired) return { outcome: 'busy', holder: lock.holder };
  }
  const current = await tx.tableById(req.tableId, { forUpdate: true });
  if (!current) throw tableNotFound(req.tableId);
  const leases = await tx.liveLeases({ tableId: req.tableId, now: req.now });
  const resumed = current.state === 'DRAINING' || current.state === 'TRASHING';
  const to = resumed ? current.state : leases.length > 0 ? 'DRAINING' : 'TRASHING';
  const table = await transition(tx, {
    tableId: req.tableId,
    from: ['READY'],
    to,
    owner: req.owner,
    now: req.now,
    expectName: req.expectName,
  });
  return { table, leases };
}

/** A lease taken, renewed or released (see Catalog.changeLease). */
async function changeLease(tx: CatalogTx, req: LeaseRequest): Promise<Lease> {
  if (req.action === 'acquire') {
    const table = await tx.tableById(req.lease.tableId, { forUpdate: true });
    if (!table || table.state === 'PURGED') throw tableNotFound(req.lease.tableId);
    if (table.state !== 'READY') throw notLeasable(table);
    if (await tx.leaseById(req.lease.id)) throw new WrongStateError(`a lease ${req.lease.id} exists already`);
    await tx.insertLease(req.lease);
    return req.lease;
  }
  const lease = await tx.leaseById(req.leaseId, { forUpdate: true });
  if (!lease) throw new LeaseNotFoundError(`there is no lease ${req.leaseId}: never taken, or released already`);
  if (req.action === 'release') {
    await tx.deleteLease(lease.id);
    return lease;
  }
  if (lease.expiresAt <= req.now) {
    throw new LeaseNotFoundError(`${describeLease(lease)} has expired; take a new one`);
  }
  const ttlSeconds = req.ttlSeconds ?? lease.ttlSeconds;
  const renewed = { ...lease, ttlSeconds, expiresAt: req.now + ttlSeconds * 1000 };
  await tx.renewLease(lease.id, renewed.ttlSeconds, renewed.expiresAt);
  return renewed;
}

/** WrongState unless the table still bears the name the caller resolved. */
function checkName(current: TableRecord, expectName: TableName | undefined): void {
  if (expectName && (expectName.namespace !== current.namespace || expectName.name !== current.name)) {
    throw nameChanged(current, expectName);
  }
}

/** Writes `next` over `current`, under the name uniqueness the database keeps: a name held by another is NameTaken. */
async function write(tx: CatalogTx, current: TableRecord, next: TableRecord): Promise<void> {
  const written = await tx.updateTable(current.state, next);
  if (written === 'nameTaken') {
    const other = await tx.nameHolder(next);
    throw new NameTakenError(`the name ${formatTableName(next)} is taken by table ${other?.id ?? '?'}; give a new name`);
  }
  // The row is locked since it was read (or the store runs one writer at a time): the compare-and-set cannot
  // miss. Were it to, start over.
  if (written === 'missed') throw new RetryTransaction(`table ${current.id} changed under its row lock`);
}

/**
 * Takes `resource` for `owner` if it is free or already theirs, inside the caller's transaction, and keeps its
 * row locked until that commits. Of two callers racing for a free resource, the second's insert finds the first
 * as the holder.
 */
async function tryLock(tx: CatalogTx, resource: string, owner: LockOwner, now: number): Promise<AcquireResult> {
  for (let i = 0; i < 3; i++) {
    if (await tx.insertLock(resource, owner, now)) return { acquired: true, tookOverFrom: null };
    const holder = await tx.lockHolder(resource, { forUpdate: true });
    // Released between the two statements: try to insert again.
    if (!holder) continue;
    return sameOwner(holder, owner) ? { acquired: true, tookOverFrom: null } : { acquired: false, holder };
  }
  throw new RetryTransaction(`the lock on ${resource} kept changing hands`);
}

/** Throws LockLost unless `owner` holds `resource`; keeps the lock row locked (a take-over waits for this transaction). */
async function assertHolds(tx: CatalogTx, resource: string, owner: LockOwner): Promise<void> {
  const holder = await tx.lockHolder(resource, { forUpdate: true });
  if (!holder || !sameOwner(holder, owner)) {
    throw new LockLostError(
      `${owner.workflowId} does not hold the lock on ${resource}` + (holder ? ` (held by ${holder.workflowId})` : ''),
    );
  }
}

async function mustGet(tx: CatalogTx, tableId: number): Promise<TableRecord> {
  const table = await tx.tableById(tableId);
  if (!table) throw new Error(`table ${tableId} vanished inside its own transaction`);
  return table;
}

/**
 * Runs `fn` once per step key, inside the caller's transaction. The key is claimed first: a key seen before
 * returns its journaled outcome (the value, or the same domain error) without running `fn`. Otherwise `fn` runs
 * and its outcome is journaled with its changes, atomically; a domain error undoes what `fn` did (a savepoint)
 * and is journaled like a value, returned rather than thrown so that the transaction keeps its journal entry.
 * `keep` says which values are final (a busy lock is not: its claim is withdrawn). The caller unwraps the
 * outcome once the transaction has committed.
 */
async function journaled<T>(
  tx: CatalogTx,
  step: StepKey | undefined,
  fn: () => Promise<T>,
  keep: (value: T) => boolean = () => true,
): Promise<Outcome<T>> {
  if (!step) return { value: await fn() };
  const seen = await tx.claimStep(step);
  if (seen) return seen as Outcome<T>;
  let outcome: Outcome<T>;
  await tx.savepoint('step_body');
  try {
    outcome = { value: await fn() };
    await tx.releaseSavepoint('step_body');
  } catch (err) {
    if (!(err instanceof TableFateError)) throw err;
    await tx.rollbackToSavepoint('step_body');
    outcome = { error: { type: err.type, message: err.message } };
  }
  await tx.settleStep(step, 'value' in outcome && !keep(outcome.value) ? undefined : outcome);
  return outcome;
}

const sameOwner = (a: LockOwner, b: LockOwner) => a.workflowId === b.workflowId && a.runId === b.runId;

/** The journaled value, or the journaled domain error thrown again. */
function unwrap<T>(outcome: Outcome<T>): T {
  if ('value' in outcome) return outcome.value;
  if (isDomainErrorType(outcome.error.type)) throw domainError(outcome.error.type, outcome.error.message);
  throw new Error(outcome.error.message);
}

/** The holder of a lock an attempt found busy, if it did. */
function busyHolder(outcome: Outcome<object>): LockHolder | undefined {
  return 'value' in outcome ? busyHolderOf(outcome.value) : undefined;
}

/** The holder named by a busy answer (a prepare's, a drop's first change's, or a lock attempt's), if it is one. */
function busyHolderOf(answer: object): LockHolder | undefined {
  if ('outcome' in answer && answer.outcome === 'busy' && 'holder' in answer) return answer.holder as LockHolder;
  if ('acquired' in answer && answer.acquired === false && 'holder' in answer) return answer.holder as LockHolder;
  return undefined;
}

/** What a transition asks of a table's row, decided before any write: nothing (already made), or these columns. */
type TransitionPlan =
  { made: true; table: TableRecord } | { made: false; name: TableName; columns: Pick<TableRecord, 'droppedAt' | 'expireAt' | 'purgedAt'> };

/**
 * The checks made before a state change, on the row as it is under the lock (the caller has checked the lock):
 * the name the caller expects, a move an earlier attempt already made (a success, if it is the same move under
 * the same name), and the transition table. Throws WrongState; returns what to write otherwise.
 */
function planTransition(current: TableRecord, req: TransitionRequest): TransitionPlan {
  checkName(current, req.expectName);
  const wanted = { namespace: req.rename?.namespace ?? current.namespace, name: req.rename?.name ?? current.name };
  // Already made: an earlier run of this operation that stopped half way, which this one resumes. It must be the
  // same move, under the same name.
  const sameName = wanted.namespace === current.namespace && wanted.name === current.name;
  if (current.state === req.to && sameName) return { made: true, table: current };
  if (!req.from.includes(current.state) || !canTransition(current.state, req.to)) {
    if (current.state === req.to) {
      throw new WrongStateError(
        `table ${req.tableId} is already ${current.state} as ${formatTableName(current)}, not ${formatTableName(wanted)}`,
      );
    }
    throw new WrongStateError(`table ${req.tableId} is ${current.state}; expected ${req.from.join(' or ')} to move it to ${req.to}`);
  }
  const set = columnsOnEntering(current.state, req.to, req.now, { retentionSeconds: req.retentionSeconds });
  const columns = {
    droppedAt: set.droppedAt !== undefined ? set.droppedAt : current.droppedAt,
    expireAt: set.expireAt !== undefined ? set.expireAt : current.expireAt,
    purgedAt: set.purgedAt !== undefined ? set.purgedAt : current.purgedAt,
  };
  return { made: false, name: wanted, columns };
}

/**
 * What a create's prepare does when its name is held by `holder`: the same create already committed (`exists`),
 * or its own prepare record, to resume under the table's lock (`resume`). A create that failed and was taken back
 * whole (CREATE_FAILED: every shard dropped before the record was marked) gives its record to a create of that name
 * with other parameters (`redefine`: a definition PostgreSQL refused, corrected). Anything else is TableExists.
 */
function planPrepare(holder: TableRecord, req: PrepareCreateRequest): 'exists' | 'resume' | 'redefine' {
  const label = formatTableName(req);
  const sameParams = sameCreateParams(holder.params, req.params);
  switch (holder.state) {
    case 'READY':
      if (sameParams) return 'exists';
      throw new TableExistsError(
        `table ${label} exists (id ${holder.id}) with ${describeCreateParams(holder.params)}, not ${describeCreateParams(req.params)}`,
      );
    case 'CREATE_FAILED':
      return sameParams ? 'resume' : 'redefine';
    case 'CREATING':
      if (sameParams) return 'resume';
      throw new TableExistsError(
        `table ${label} has a prepared create (id ${holder.id}, ${describeCreateParams(holder.params)}, ${holder.state}); ` +
          `repeat that create to finish it`,
      );
    default:
      throw new TableExistsError(`the name ${label} is held by table ${holder.id}, which is ${holder.state}`);
  }
}
