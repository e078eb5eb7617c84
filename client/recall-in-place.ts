import { InvalidInputError, WrongStateError } from '../domain/errors';
import { formatTableName, type TableName } from '../domain/names';
import { OPERATIONS } from '../domain/operations';
import { notTrashed } from '../domain/refusals';
import { defaultSettings, trashPolicy } from '../domain/settings';
import type { TableInfo, TableRecord } from '../domain/table';
import type { recallInPlace } from '../workflows';
import { callTimeout, type ClientContext } from './context';
import type { ExecuteOptions } from './calls';
import type { WriteOptions } from './options';
import { onTable, startAndWait } from './start';

/** A truncate's entry recalled into its table's place (workflows/recall-in-place.ts): the entry, its table, the name. */
export interface InPlacePlan {
  entryId: number;
  tableId: number;
  name: TableName;
}

/**
 * What a recall in place needs, read and refused at once where it can be: a truncate's entry still in the trash, and its
 * table live under the entry's name, in a namespace whose trash is on (off, the table's drop would purge the rows written
 * to it since the truncate).
 */
export async function inPlacePlan(ctx: ClientContext, entry: TableRecord): Promise<InPlacePlan> {
  const label = formatTableName(entry);
  if (entry.truncatedFrom === undefined) {
    throw new InvalidInputError(
      `table ${entry.id} (${label}) is no truncate's entry: it has no table to come back in place of; recall it by its name`,
    );
  }
  if (entry.state !== 'TRASHED') throw notTrashed(entry, 'can be restored');
  const table = await ctx.catalog.getTable(entry.truncatedFrom);
  if (!table || table.state !== 'READY' || table.namespace !== entry.namespace || table.name !== entry.name) {
    const now = table ? `is ${table.state} as ${formatTableName(table)}` : 'is gone';
    throw new WrongStateError(
      `table ${entry.truncatedFrom}, which ${label} was truncated from, ${now}: there is no place to recall table ${entry.id} into; recall it under a name`,
    );
  }
  if (!trashPolicy(await ctx.catalog.listSettings(), table.namespace, defaultSettings()).enabled) {
    throw new WrongStateError(
      `the trash is off in namespace ${table.namespace}: table ${table.id}'s drop would purge the rows written to it since its truncate; recall table ${entry.id} under another name`,
    );
  }
  return { entryId: entry.id, tableId: table.id, name: { namespace: table.namespace, name: table.name } };
}

/** Starts (or joins) the recall in place and answers the entry, live under the name, with a note of where the table went. */
export function recallInPlaceOf(ctx: ClientContext, plan: InPlacePlan, opts: WriteOptions & ExecuteOptions): Promise<TableInfo> {
  const { entryId, tableId, name } = plan;
  const record = OPERATIONS.recallInPlace;
  const label = formatTableName(name);
  return startAndWait<typeof recallInPlace>(ctx, {
    ...onTable(ctx, record, entryId, `recall of table ${entryId} in place of table ${tableId}`, callTimeout(ctx, opts), opts),
    run: {
      record,
      input: { entryId, tableId, name, expiryRetry: ctx.expiryRetry },
      target: { tableId: entryId, ...name },
      summary: `recall table ${entryId} as ${label}, in place of table ${tableId} (into the trash)`,
    },
  });
}
