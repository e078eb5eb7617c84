import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { TableInfo } from '../domain/table';

/**
 * The trash workflow's early return: answers as soon as the table is TRASHED, while the workflow goes on
 * to wait for the expiry. The argument is the caller's request id (see TrashInput.requestId).
 */
export const trashedUpdate = defineUpdate<TableInfo, [requestId: string]>('trashed');

/**
 * Ends a trash timer early: the table was restored or purged by hand, so the expiry must not purge it. It
 * names the trash it ends by its drop time, so that it cannot end a later trash of the same table.
 */
export const endTimerSignal = defineSignal<[reason: 'restored' | 'purged', droppedAt: number]>('endTimer');

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
