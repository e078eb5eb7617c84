import { NameTakenError, TableExistsError, WrongStateError } from '../domain/errors';
import { formatTableName, type TableName } from '../domain/names';
import { lockFor } from '../domain/operations';
import { nameChanged, notOnHold, tableNotFound } from '../domain/refusals';
import { canTransition, columnsOnEntering } from '../domain/states';
import { canBeHeld, describeCreateParams, sameCreateParams, type TableRecord } from '../domain/table';
import {
  isBusy,
  type DrainResult,
  type DrainStart,
  type ExpiryChange,
  type HoldChange,
  type PrepareCreateRequest,
  type PrepareResult,
  type TransitionRequest,
  type TruncateCommit,
} from './catalog';
import { assertHolds, sameOwner, tryLock } from './rules-locks';
import { RetryTransaction, type CatalogTx } from './tx';

/**
 * What each call does to a table's record, inside a store's transaction (rules.ts): a create's prepare, the
 * compare-and-set of a state change, a legal hold, a trash's new expiry, a drop's first change. Each checks the
 * table's lock where it needs it, and decides before it writes.
 */

/** A create's prepare, under its name lock: the table's record made or found, and the table's lock taken. */
export async function prepare(tx: CatalogTx, req: PrepareCreateRequest): Promise<PrepareResult> {
  if (req.takeNameLock) {
    const name = await tryLock(tx, req.nameLock, req.owner, req.now);
    if (isBusy(name)) return name;
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
      droppedBy: null,
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
  if (isBusy(lock)) return lock;
  const redefined = plan === 'redefine' ? { params: req.params, placement: req.place(holder.id, req.params) } : {};
  await write(tx, holder, { ...holder, ...redefined, state: 'CREATING', updatedAt: req.now });
  return { outcome: 'prepared', table: await mustGet(tx, holder.id), resumed: true };
}

/** A state change: a compare-and-set on (id, expected state, lock owner), with the columns the new state stamps. */
export async function transition(tx: CatalogTx, req: TransitionRequest): Promise<TableRecord> {
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
export async function changeHold(tx: CatalogTx, req: HoldChange): Promise<TableRecord> {
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
export async function changeExpiry(tx: CatalogTx, req: ExpiryChange): Promise<TableRecord> {
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
 *
 * A truncate's (`truncate`): READY to TRUNCATING, leases or not (none is taken after it), with the id of the trash entry
 * its rows will be (`truncateInto`), chosen now and locked for the run, so that nothing else acts on that id's shards
 * before the entry is recorded. A table found TRUNCATING (a truncate resumed) is answered as it is, with its entry's id.
 */
export async function startDrain(tx: CatalogTx, req: DrainStart): Promise<DrainResult> {
  if (req.takeLock) {
    const lock = await tryLock(tx, lockFor.table(req.tableId), req.owner, req.now);
    if (isBusy(lock)) return lock;
  }
  const current = await tx.tableById(req.tableId, { forUpdate: true });
  if (!current) throw tableNotFound(req.tableId);
  const leases = await tx.liveLeases({ tableId: req.tableId, now: req.now });
  const resumed = req.truncate ? current.state === 'TRUNCATING' : current.state === 'DRAINING' || current.state === 'TRASHING';
  const to = resumed ? current.state : req.truncate ? 'TRUNCATING' : leases.length > 0 ? 'DRAINING' : 'TRASHING';
  const truncateInto = req.truncate && !resumed && current.state === 'READY' ? await tx.nextTableId() : undefined;
  // (Resumed, the entry's lock is taken again: the lost run's, closed, is taken over as its table's is.)
  const entry = truncateInto ?? (resumed && req.truncate ? current.truncateInto : undefined);
  if (entry !== undefined) {
    const lock = await tryLock(tx, lockFor.table(entry), req.owner, req.now);
    if (isBusy(lock)) return lock;
  }
  const table = await transition(tx, {
    tableId: req.tableId,
    from: ['READY'],
    to,
    owner: req.owner,
    now: req.now,
    expectName: req.expectName,
    droppedWith: req.droppedWith,
    ...(truncateInto !== undefined ? { truncateInto } : {}),
  });
  return { table, leases };
}

/**
 * A truncate's commit, under the table's lock: its rows' trash entry (`truncateInto`) recorded TRASHED under the
 * table's name, definition, placement and legal hold, with its drop time, expiry and dropper, and the table READY
 * again (its shards are the empty ones the truncate left; still held, if it was). Answers the entry. Made already (the
 * table READY, the entry there): answered as it is.
 */
export async function commitTruncate(tx: CatalogTx, req: TruncateCommit): Promise<TableRecord> {
  const current = await tx.tableById(req.tableId, { forUpdate: true });
  if (!current) throw tableNotFound(req.tableId);
  await assertHolds(tx, lockFor.table(req.tableId), req.owner);
  if (current.state !== 'TRUNCATING') {
    const made = req.into === undefined ? undefined : await tx.tableById(req.into);
    if (made?.truncatedFrom === req.tableId) return made;
    throw new WrongStateError(`table ${req.tableId} is ${current.state}; expected TRUNCATING to commit its truncate`);
  }
  const into = current.truncateInto!;
  const stamped = columnsOnEntering('TRASHING', 'TRASHED', req.now, { retentionSeconds: req.retentionSeconds, droppedBy: req.droppedBy });
  const entry: TableRecord = {
    id: into,
    namespace: current.namespace,
    name: current.name,
    state: 'TRASHED',
    params: current.params,
    placement: current.placement,
    createdAt: current.createdAt,
    droppedAt: stamped.droppedAt!,
    droppedBy: stamped.droppedBy ?? null,
    expireAt: stamped.expireAt!,
    purgedAt: null,
    updatedAt: req.now,
    // A held table's rows stay held in the trash, as a held table dropped does: no expiry may purge them.
    hold: current.hold,
    truncatedFrom: current.id,
  };
  // (TRASHED holds no name: the entry and its table bear the same one.)
  if (!(await tx.insertTable(entry))) throw new Error(`the trash entry ${into} of table ${current.id}'s truncate could not be recorded`);
  await transition(tx, { tableId: current.id, from: ['TRUNCATING'], to: 'READY', owner: req.owner, now: req.now });
  return mustGet(tx, into);
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

async function mustGet(tx: CatalogTx, tableId: number): Promise<TableRecord> {
  const table = await tx.tableById(tableId);
  if (!table) throw new Error(`table ${tableId} vanished inside its own transaction`);
  return table;
}

/** What a transition asks of a table's row, decided before any write: nothing (already made), or these columns. */
type TransitionPlan =
  | { made: true; table: TableRecord }
  | {
      made: false;
      name: TableName;
      columns: Pick<TableRecord, 'droppedAt' | 'droppedBy' | 'family' | 'droppedWith' | 'expireAt' | 'purgedAt' | 'truncateInto'>;
    };

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
  const set = columnsOnEntering(current.state, req.to, req.now, {
    retentionSeconds: req.retentionSeconds,
    droppedBy: req.droppedBy,
    family: req.family,
    droppedWith: req.droppedWith,
    truncateInto: req.truncateInto,
    droppedAt: req.restamp ? null : current.droppedAt,
  });
  const columns = {
    droppedAt: set.droppedAt !== undefined ? set.droppedAt : current.droppedAt,
    droppedBy: set.droppedBy !== undefined ? set.droppedBy : current.droppedBy,
    // (null: cleared; undefined: kept as it is.)
    family: set.family === null ? undefined : (set.family ?? current.family),
    droppedWith: set.droppedWith === null ? undefined : (set.droppedWith ?? current.droppedWith),
    expireAt: set.expireAt !== undefined ? set.expireAt : current.expireAt,
    purgedAt: set.purgedAt !== undefined ? set.purgedAt : current.purgedAt,
    truncateInto: set.truncateInto === null ? undefined : (set.truncateInto ?? current.truncateInto),
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
