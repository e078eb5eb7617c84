import { OnHoldError, WrongStateError } from './errors';
import type { TableRecord } from './table';

/**
 * The refusals that both the client (at once, to answer without starting a run) and a workflow (under the table's lock,
 * where it counts) make: said once, so that the two answers are the same words. Pure: workflow code imports it.
 */

/** A purge by hand of a table under a legal hold. */
export function onHold(table: Pick<TableRecord, 'id' | 'hold'> & { hold: NonNullable<TableRecord['hold']> }): OnHoldError {
  const why = table.hold.reason ? `: ${table.hold.reason}` : ' (no reason given)';
  return new OnHoldError(`table ${table.id} is on hold since ${new Date(table.hold.since).toISOString()}${why}; release it first`);
}

/** A rename of a table that is not READY (in the trash, or on its way somewhere under another operation's lock). */
export function notRenamable(table: Pick<TableRecord, 'id' | 'state'>): WrongStateError {
  return new WrongStateError(`table ${table.id} is ${table.state}; only a READY table can be renamed`);
}
