import { formatTableName, type TableName } from './names';
import type { SearchAttributePair } from '@temporalio/common';
import { SEARCH_ATTRIBUTES } from './search-attributes';

/** The four operations; also the value of the `TableOp` search attribute. */
export type TableOp = 'create' | 'trash' | 'undelete' | 'purge';

/**
 * What every operation's input carries: the identity of the catalog it belongs to, so that a worker serving
 * another catalog refuses it. Absent only in runs started before catalogs had identities.
 */
export interface CatalogScoped {
  catalogId?: string;
}

/**
 * How a workflow paces a try it repeats (waiting for a busy table, purging at an expiry that keeps failing): tries
 * back off from `firstMs` by half again each time up to `maxMs`, and after `attemptsPerRun` tries the run continues
 * as new, so that its history stays short however long it keeps trying.
 */
export interface Backoff {
  firstMs: number;
  maxMs: number;
  attemptsPerRun: number;
}

/** The pause after the `tries`-th failed try (1 for the first). */
export function pauseAfter(backoff: Backoff, tries: number): number {
  return Math.min(backoff.firstMs * 1.5 ** (tries - 1), backoff.maxMs);
}

/** How an operation waits while another holds its table. */
export type LockWaitPolicy = Backoff;

/** About 100 tries per run: some 600 history events, 7 to 8 minutes of waiting. */
export const DEFAULT_LOCK_WAIT: LockWaitPolicy = { firstMs: 100, maxMs: 5_000, attemptsPerRun: 100 };

/**
 * How a trash's expiry tries again when its purge fails (a storage node down, say): from 10 s up to every 10
 * minutes, 20 tries a run (about two hours), for as long as it takes.
 */
export const DEFAULT_EXPIRY_RETRY: Backoff = { firstMs: 10_000, maxMs: 600_000, attemptsPerRun: 20 };

/** What every operation's input carries besides its own arguments. */
export interface OperationScope extends CatalogScoped {
  /** How to wait for a busy table; DEFAULT_LOCK_WAIT when absent. */
  lockWait?: LockWaitPolicy;
}

export interface CreateInput extends TableName, OperationScope {
  shards: number;
}

export interface TrashInput extends OperationScope {
  tableId: number;
  /** The name the client resolved to `tableId`: the trash refuses a table that no longer bears it. */
  expectedName?: TableName;
  /** Seconds to keep the data; the worker's configured default when absent. */
  retentionSeconds?: number;
  /** Identifies the request that started this run, so that a late caller is not handed an older answer. */
  requestId: string;
  /**
   * Waits out the trash that happened at `droppedAt` without moving anything: the table is already TRASHED.
   * Set when the expiry's retries continue as new, and when the reconciler re-arms a trash whose run is gone.
   */
  rearm?: { droppedAt: number };
  /** How the expiry tries again when its purge fails; DEFAULT_EXPIRY_RETRY when absent. */
  expiryRetry?: Backoff;
}

export interface UndeleteInput extends OperationScope {
  tableId: number;
  /** The trashed name the client resolved to `tableId`, when it was given a name. */
  expectedName?: TableName;
  /** Restore under this name instead of the one the table had. */
  newName?: TableName;
}

export interface PurgeInput extends OperationScope {
  tableId: number;
  /**
   * `manual`: purge a trashed table now. `expiry`: the trash timer fired for the trash that happened at
   * `droppedAt`; if the table has been restored (or trashed again since), there is nothing to do.
   */
  trigger: 'manual' | 'expiry';
  droppedAt?: number;
}

/**
 * Workflow ids a person can read in the Temporal UI; one operation per table at a time. The catalog's identity
 * ends each one (`trash:42@1f0c9a2e`), so that two catalogs sharing a Temporal namespace never address each
 * other's workflows; runs started before catalogs had identities keep the bare form.
 */
export const workflowIdFor = {
  create: (table: TableName, catalogId?: string) => scoped(`create:${formatTableName(table)}`, catalogId),
  trash: (tableId: number, catalogId?: string) => scoped(`trash:${tableId}`, catalogId),
  undelete: (tableId: number, catalogId?: string) => scoped(`undelete:${tableId}`, catalogId),
  purge: (tableId: number, catalogId?: string) => scoped(`purge:${tableId}`, catalogId),
};

function scoped(id: string, catalogId: string | undefined): string {
  return catalogId === undefined ? id : `${id}@${catalogId}`;
}

/** Lock resources. A create locks the name it is making; everything else locks the table id. */
export const lockFor = {
  name: (table: TableName) => `name:${formatTableName(table)}`,
  table: (tableId: number) => `table:${tableId}`,
};

/** The search attributes of one operation's run, so the UI answers "what happened to table 42" in one query. */
export function searchAttributesFor(op: TableOp, table: { tableId?: number; namespace?: string; name?: string }): SearchAttributePair[] {
  const pairs: SearchAttributePair[] = [{ key: SEARCH_ATTRIBUTES.tableOp, value: op }];
  if (table.tableId !== undefined) pairs.push({ key: SEARCH_ATTRIBUTES.tableId, value: table.tableId });
  if (table.namespace !== undefined) pairs.push({ key: SEARCH_ATTRIBUTES.tableNamespace, value: table.namespace });
  if (table.name !== undefined) pairs.push({ key: SEARCH_ATTRIBUTES.tableName, value: table.name });
  return pairs;
}

/**
 * The task queue of one storage node's worker, beside the deployment's queue `taskQueue` (so `tablefate` gives
 * `tablefate-storage-node-1`): shard work goes only to the worker that owns the node its placement names.
 */
export function storageQueue(taskQueue: string, node: string): string {
  return `${taskQueue}-storage-${node}`;
}

/**
 * The failure of a shard change made in the workflow task when the storage of the worker making it failed fatally
 * (a set left half renamed): that worker is stopping, and the workflow hands the change to the nodes' queues,
 * where it waits for a worker that serves the node again (once an operator has cleared its quarantine).
 */
export const STORAGE_STOPPED_HERE = 'StorageStoppedHere';
