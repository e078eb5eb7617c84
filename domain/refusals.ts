import { OnHoldError, TableNotFoundError, WrongStateError } from './errors';
import { formatTableName, type TableName } from './names';
import type { TableRecord } from './table';

/**
 * The refusals said in more than one place: by the client (at once, to answer without starting a run), by the catalog's
 * rules (in the transaction, where it counts) and by a workflow (under the table's lock). Said once here, so that a
 * caller hears the same words whichever refuses first. Pure: workflow code imports it.
 */

type Table = Pick<TableRecord, 'id' | 'state'>;

/**
 * No such table: by id (`orPurged`: nor a tombstone, for the operations a purged table cannot take) or by name (a live
 * one, or a trashed one where the caller looks in the trash).
 */
export function tableNotFound(table: number | TableName, { orPurged = false } = {}): TableNotFoundError {
  const label = typeof table === 'number' ? String(table) : formatTableName(table);
  return new TableNotFoundError(`table ${label} does not exist${orPurged ? ' or was purged' : ''}`);
}

/** The table no longer bears the name the caller resolved to its id: another operation renamed it, or trashed it, since. */
export function nameChanged(table: Pick<TableRecord, 'id'> & TableName, expected: TableName): WrongStateError {
  return new WrongStateError(
    `table ${table.id} is named ${formatTableName(table)}, not ${formatTableName(expected)}: ` +
      `the name was resolved from a catalog that has changed since; nothing was done`,
  );
}

/** An operation on the trash (a purge, a recall, a new retention) of a table that is not in it. */
export function notTrashed(table: Table, only: 'can be purged' | 'can be restored' | 'has a retention to change'): WrongStateError {
  return new WrongStateError(`table ${table.id} is ${table.state}; only a trashed table ${only}`);
}

/**
 * A retention change that reached the trash's run before the run knew its table is in the trash (the task that
 * committed it was lost, and is being repeated): the client asks again (isNotTrashedYet).
 */
export function notTrashedYet(tableId: number): WrongStateError {
  return new WrongStateError(`table ${tableId} is ${NOT_TRASHED_YET}`);
}
const NOT_TRASHED_YET = 'not in the trash yet';
export const isNotTrashedYet = (message: string): boolean => message.includes(NOT_TRASHED_YET);

/**
 * A recall of tables dropped as one that finds, under the locks, one of the others no longer in the trash from that
 * drop (`left`: purged, recalled alone, or gone since the caller read it): nothing is recalled; the SDK asks again,
 * for the tables still there (isUnitChanged).
 */
export function unitChanged(tableId: number, other: number, left: string): WrongStateError {
  return new WrongStateError(`table ${other}, dropped with table ${tableId} as one, ${left} meanwhile; ${UNIT_CHANGED}`);
}
const UNIT_CHANGED = 'nothing was recalled: ask again for the tables still in the trash';
export const isUnitChanged = (message: string): boolean => message.includes(UNIT_CHANGED);

/** A change of a trash's run after its trash has ended (`how`: recalled, purged, expired...). */
export function trashEnded(tableId: number, how: string): WrongStateError {
  return new WrongStateError(`table ${tableId}'s trash has ended (${how})`);
}

/** A purge by hand of a table under a legal hold. */
export function onHold(table: Pick<TableRecord, 'id' | 'hold'> & { hold: NonNullable<TableRecord['hold']> }): OnHoldError {
  const why = table.hold.reason ? `: ${table.hold.reason}` : ' (no reason given)';
  return new OnHoldError(`table ${table.id} is on hold since ${new Date(table.hold.since).toISOString()}${why}; release it first`);
}

/** A release of a table that is not held. */
export function notOnHold(tableId: number): WrongStateError {
  return new WrongStateError(`table ${tableId} is not on hold; nothing to release`);
}

/** A rename of a table that is not READY (in the trash, or on its way somewhere under another operation's lock). */
export function notRenamable(table: Table): WrongStateError {
  return notReady(table, 'renamed');
}

/** A truncate of a table that is not READY (a table in the trash is recalled, or purged, not truncated). */
export function notTruncatable(table: Table): WrongStateError {
  return notReady(table, 'truncated');
}

/** A lease on a table that is not READY: DRAINING, a drop waits already, and nothing new should be scheduled on it. */
export function notLeasable(table: Table): WrongStateError {
  const why =
    table.state === 'DRAINING' || table.state === 'TRUNCATING'
      ? `: a ${table.state === 'DRAINING' ? 'drop' : 'truncate'} waits for its leases to end, and it takes no new one`
      : '';
  return notReady(table, 'leased', why);
}

function notReady(table: Table, done: string, why = ''): WrongStateError {
  return new WrongStateError(`table ${table.id} is ${table.state}${why}; only a READY table can be ${done}`);
}
