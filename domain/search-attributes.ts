/**
 * The search attributes every table operation workflow carries, so operations can be listed by table.
 *
 * Pure: workflows import these keys to upsert them. `@temporalio/workflow` does not re-export
 * `defineSearchAttributeKey` / `SearchAttributeType` (SDK 1.24), so they come from `@temporalio/common`,
 * which is deterministic and meant to be bundled into workflow code.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** The table's catalog id. */
export const tableId = defineSearchAttributeKey('TableId', SearchAttributeType.INT);
/** The namespace part of the table's name. */
export const tableNamespace = defineSearchAttributeKey('TableNamespace', SearchAttributeType.KEYWORD);
/** The name part of the table's name. */
export const tableName = defineSearchAttributeKey('TableName', SearchAttributeType.KEYWORD);
/** The operation: create, trash, undelete, purge. */
export const tableOp = defineSearchAttributeKey('TableOp', SearchAttributeType.KEYWORD);

export const SEARCH_ATTRIBUTES = { tableId, tableNamespace, tableName, tableOp } as const;
