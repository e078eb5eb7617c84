import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { TableRecord } from '../domain/table';
import type { ShardRef } from '../storage/driver';

/**
 * Activities with the retry policy for side effects: transient faults (a slow disk, a worker crash) are
 * retried with backoff for as long as it takes; domain and permanent failures come back non-retryable.
 */
export const act = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '10s' },
});

/**
 * The lock activity: its retries are FATE's isReady, the wait while another operation holds the table,
 * so they start quickly and never give up.
 */
export const locking = proxyActivities<Pick<Activities, 'acquireLock' | 'releaseLock'>>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '100ms', backoffCoefficient: 1.5, maximumInterval: '2s' },
});

/** Runs `fn` on every shard of the table at once; shard activities are independent and idempotent. */
export async function forEachShard(table: TableRecord, fn: (shard: ShardRef) => Promise<void>): Promise<void> {
  await Promise.all(table.placement.map((p) => fn({ tableId: table.id, shard: p.shard, node: p.node })));
}
