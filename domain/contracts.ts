/**
 * The contracts between the parts of tablefate, in one pure module: what a client says to a running workflow
 * (updates, signals, queries), what a workflow asks of the activities (the call scope, the shard change), and
 * how a shard is addressed. Workflows, activities, storage and the SDK all import them from here, so that no
 * part needs another's code to speak to it.
 */
import type { QueryDefinition, SignalDefinition, UpdateDefinition } from '@temporalio/common';
import type { CreateParams, ShardPlacement, TableInfo } from './table';
import type { TableName } from './names';

// A definition is only its kind and name, as @temporalio/workflow's defineUpdate/defineSignal/defineQuery make it: made
// here, so that the SDK and the command line, which import these contracts, do not load the workflow library for them
// (some 10 ms of every command's start).
const defineUpdate = <Ret, Args extends unknown[]>(name: string) => ({ type: 'update', name }) as UpdateDefinition<Ret, Args>;
const defineSignal = <Args extends unknown[] = []>(name: string) => ({ type: 'signal', name }) as SignalDefinition<Args>;
const defineQuery = <Ret>(name: string) => ({ type: 'query', name }) as QueryDefinition<Ret>;

/**
 * What the workflow adds to every call it makes: the catalog the operation belongs to, and for catalog calls
 * the call's place in the run (`step`), under which the catalog journals its outcome.
 */
export interface CallScope {
  catalogId?: string;
  step?: string;
}

/** Where a shard's set of files currently is. */
export type ShardArea = 'live' | 'trash';

/** Every place a shard's set of files can be: the driver's two areas plus trash renamed as garbage. */
export type StorageArea = ShardArea | 'garbage';

/**
 * Identifies one shard of one table on one storage node. The files driver's names derive from the id only; the
 * PostgreSQL driver's live tables are named after the table, which the storage activities read from the catalog
 * (under the operation's lock) and add as `table`: a workflow never sends it.
 */
export interface ShardRef extends ShardPlacement {
  tableId: number;
  table?: ShardOfTable;
}

/** What a driver may need of the table a shard belongs to: its name now, how many shards it has, its definition. */
export interface ShardOfTable {
  namespace: string;
  name: string;
  shards: number;
  params: CreateParams;
}

/** What one step of an operation does to each shard of its table: a driver method, and for a move its areas. */
export type ShardChange =
  | { method: 'createShard' | 'dropShard' | 'markGarbage' | 'unmarkGarbage' | 'deleteGarbage' }
  | {
      method: 'moveShard';
      from: ShardArea;
      to: ShardArea;
      drainTimeoutMs?: number;
      /** Out of the live area with what depends on the table (PostgreSQL: a drop's `cascade`), rather than refused. */
      cascade?: boolean;
      /**
       * Into the live area under this name rather than the one the catalog gives the table now: a rename taken back moves
       * its tables to the name they had, after the catalog already calls them by the new one.
       */
      liveAs?: TableName;
      /**
       * The shards of several tables moved as one (a drop of several tables): each node moves its shards of them in one
       * transaction where its driver can (`StorageDriver.moveShards`), so that none of them is seen moved without the others.
       */
      together?: true;
      /**
       * Into the trash, together: the whole namespace these tables are of is dropped with them (PostgreSQL: the schema, with
       * what else it holds, is set aside until their recall).
       */
      namespace?: string;
    }
  | {
      /**
       * The live shard's rows into the trash as the same shard of its entry (`into`: the trash entry a truncate makes),
       * and an empty shard of the same definition left live in their place, as one change (PostgreSQL: one transaction).
       */
      method: 'truncateShard';
      into: TruncateEntries;
      drainTimeoutMs?: number;
      /**
       * The shards of several tables truncated as one (a cascade): each node truncates its shards of them in one
       * transaction where its driver can (`StorageDriver.truncateShards`), the referenced tables' twins made first.
       */
      together?: true;
    }
  /** A truncate taken back: the trashed shard of its entry live again in place of the empty one, if that is still empty. */
  | { method: 'untruncateShard'; into: TruncateEntries }
  /**
   * A read, changing nothing: refuses as `truncateShard` into `into` would refuse on the shard now (PostgreSQL: what no
   * empty twin can stand in for; another table's key to it, unless that table is truncated with it), so that a truncate
   * of several shards is refused before any of them is emptied.
   */
  | { method: 'checkTruncateShard'; into: TruncateEntries };

/**
 * The trash entry a truncate moves each table's rows into: of one table, its entry's id; of several as one (a cascade),
 * each table's, by table id.
 */
export type TruncateEntries = number | Readonly<Record<string, number>>;

/** The trash entry of table `tableId`'s rows. */
export function entryFor(into: TruncateEntries, tableId: number): number {
  const entry = typeof into === 'number' ? into : into[String(tableId)];
  if (entry === undefined) throw new Error(`the truncate names no trash entry for table ${tableId}`);
  return entry;
}

/** The tables a truncate addresses (their keys to one another refuse nothing): of one table, none but the shard's own. */
export function truncatedTables(into: TruncateEntries): number[] {
  return typeof into === 'number' ? [] : Object.keys(into).map(Number);
}

/**
 * The early return of a trash run as v19 made it (workflows/legacy/v19/): answers as soon as the table is TRASHED,
 * while the run goes on to wait for the expiry. The argument is the caller's request id (TrashRunInput.requestId).
 */
export const trashedUpdate = defineUpdate<TableInfo, [requestId: string]>('trashed');

/**
 * Ends a trash timer early: the table was restored or purged by hand, so the expiry must not purge it. It
 * names the trash it ends by its drop time, so that it cannot end a later trash of the same table.
 */
export const endTimerSignal = defineSignal<[reason: 'restored' | 'purged', droppedAt: number]>('endTimer');

/**
 * Something a trash run waits on changed, and it should read its table again: a lease released (a drop that drains), a
 * hold released (an expiry that waits for it).
 */
export const trashChangedSignal = defineSignal('trashChanged');

/**
 * A new retention for the trashed table, counted from its drop time (seconds): the trash run moves its expiry in the
 * catalog and re-arms its durable timer (an expiry already past purges at once). Answers the table as it is then.
 */
export const retentionUpdate = defineUpdate<TableInfo, [retentionSeconds: number]>('retention');

/** Wakes the trash's space cap (the evictTrash run), or starts it: a drop committed, or a cap was set. */
export const evictSignal = defineSignal('evict');

export interface TrashTimerState {
  droppedAt: number | null;
  expireAt: string | null;
  ended: 'restored' | 'purged' | 'expired' | null;
}

/** How far a recall is: shards back in the live area, of all (Pegasus's "still waiting... (7/8)"). */
export interface RecallProgress {
  shardsBack: number;
  shards: number;
}

export const recallProgressQuery = defineQuery<RecallProgress>('recallProgress');

/** When the trashed table expires and whether the timer is still pending. */
export const trashTimerQuery = defineQuery<TrashTimerState>('trashTimer');
