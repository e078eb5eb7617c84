import { formatTableName, type TableName } from './names';
import type { SearchAttributePair } from '@temporalio/common';
import { SEARCH_ATTRIBUTES } from './search-attributes';

/** The four operations; also the value of the `TableOp` search attribute. */
export type TableOp = 'create' | 'trash' | 'undelete' | 'purge';

export interface CreateInput extends TableName {
  shards: number;
}

export interface TrashInput {
  tableId: number;
  /** Seconds to keep the data; the worker's configured default when absent. */
  retentionSeconds?: number;
  /** Identifies the request that started this run, so that a late caller is not handed an older answer. */
  requestId: string;
}

export interface UndeleteInput {
  tableId: number;
  /** Restore under this name instead of the one the table had. */
  newName?: TableName;
}

export interface PurgeInput {
  tableId: number;
  /**
   * `manual`: purge a trashed table now. `expiry`: the trash timer fired for the trash that happened at
   * `droppedAt`; if the table has been restored (or trashed again since), there is nothing to do.
   */
  trigger: 'manual' | 'expiry';
  droppedAt?: number;
}

/** Workflow ids a person can read in the Temporal UI; one operation per table at a time. */
export const workflowIdFor = {
  create: (table: TableName) => `create:${formatTableName(table)}`,
  trash: (tableId: number) => `trash:${tableId}`,
  undelete: (tableId: number) => `undelete:${tableId}`,
  purge: (tableId: number) => `purge:${tableId}`,
};

/** Lock resources. A create locks the name it is making; everything else locks the table id. */
export const lockFor = {
  name: (table: TableName) => `name:${formatTableName(table)}`,
  table: (tableId: number) => `table:${tableId}`,
};

/** The search attributes of one operation's run, so the UI answers "what happened to table 42" in one query. */
export function searchAttributesFor(
  op: TableOp,
  table: { tableId?: number; namespace?: string; name?: string },
): SearchAttributePair[] {
  const pairs: SearchAttributePair[] = [{ key: SEARCH_ATTRIBUTES.tableOp, value: op }];
  if (table.tableId !== undefined) pairs.push({ key: SEARCH_ATTRIBUTES.tableId, value: table.tableId });
  if (table.namespace !== undefined) pairs.push({ key: SEARCH_ATTRIBUTES.tableNamespace, value: table.namespace });
  if (table.name !== undefined) pairs.push({ key: SEARCH_ATTRIBUTES.tableName, value: table.name });
  return pairs;
}
