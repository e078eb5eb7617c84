import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { TableRecord } from '../domain/table';
import type { ShardRef } from '../storage/driver';

type CatalogActivities = Pick<Activities, 'prepareCreate' | 'transition' | 'commitTrash' | 'getTable'>;
type LockActivities = Pick<Activities, 'acquireLock' | 'releaseLock'>;
type ShardActivities = Pick<
  Activities,
  'createShard' | 'dropShard' | 'moveShard' | 'markGarbage' | 'unmarkGarbage' | 'deleteGarbage'
>;

/** Transient faults are retried with backoff for as long as it takes; domain failures come back non-retryable. */
const RETRY = { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '10s' } as const;

/**
 * Catalog steps are short transactions on the worker's own catalog: local activities, run by the worker in
 * the workflow task that asks for them, without a round trip through the server's task queues (measured: it
 * halves the time of every operation; see README).
 */
export const catalog = proxyLocalActivities<CatalogActivities>({ startToCloseTimeout: '30s', retry: RETRY });

/**
 * The lock: its retries are FATE's isReady, the wait while another operation holds the table, so they start
 * quickly and never give up.
 */
export const locking = proxyLocalActivities<LockActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '100ms', backoffCoefficient: 1.5, maximumInterval: '2s' },
});

/** Shard work touches the storage nodes' bytes: ordinary activities, which any worker can pick up. */
export const shards = proxyActivities<ShardActivities>({ startToCloseTimeout: '5 minutes', retry: RETRY });

/**
 * Runs `fn` on every shard of the table at once (shard activities are independent and idempotent), and
 * settles only when every one has: an undo must never race a shard's call that is still running.
 */
export async function forEachShard(table: TableRecord, fn: (shard: ShardRef) => Promise<void>): Promise<void> {
  const results = await Promise.allSettled(
    table.placement.map((p) => fn({ tableId: table.id, shard: p.shard, node: p.node })),
  );
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
