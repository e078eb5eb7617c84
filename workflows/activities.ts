import { patched, proxyActivities, proxyLocalActivities, workflowInfo } from '@temporalio/workflow';
import { storageQueue } from '../domain/operations';
import type { Activities, CallScope } from '../activities';
import type { TableRecord } from '../domain/table';
import type { ShardArea, ShardRef } from '../storage/driver';

/** Transient faults are retried with backoff (bounded by the worker); domain failures come back non-retryable. */
const RETRY = { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '10s' } as const;

/**
 * Catalog steps are short transactions on the worker's own catalog: local activities, run by the worker in
 * the workflow task that asks for them, without a round trip through the server's task queues (measured: it
 * halves the time of every operation; see README).
 */
const catalog = proxyLocalActivities<Pick<Activities, 'prepareCreate' | 'transition' | 'commitTrash' | 'getTable' | 'endTrashTimer'>>({
  startToCloseTimeout: '30s',
  retry: RETRY,
});

/** Lock attempts and releases: transient faults are retried; a busy lock is an answer (see lock.ts). */
const locking = proxyLocalActivities<Pick<Activities, 'tryLock' | 'releaseLock'>>({ startToCloseTimeout: '30s', retry: RETRY });

/**
 * Runs started before workflows waited for locks in their own code replay this: the activity's retries were
 * the wait, and never gave up. Kept for them only (see lock.ts's patch).
 */
const lockingBeforeWaits = proxyLocalActivities<Pick<Activities, 'acquireLock'>>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '100ms', backoffCoefficient: 1.5, maximumInterval: '2s' },
});

/**
 * Shard work touches a storage node's bytes: ordinary activities, on the task queue of the worker that owns the
 * node the shard's placement names (domain/operations.ts's storageQueue). A node whose worker is down holds its
 * calls in its queue until the worker is back. They heartbeat, so an attempt lost with its worker is retried
 * after the heartbeat timeout, not the whole start-to-close timeout.
 */
const STORAGE_OPTIONS = { startToCloseTimeout: '5 minutes', heartbeatTimeout: '20s', retry: RETRY } as const;
type StorageCalls = Pick<Activities, 'createShard' | 'dropShard' | 'moveShard' | 'markGarbage' | 'unmarkGarbage' | 'deleteGarbage' | 'collectOrphan'>;

/** Runs started before shard work moved to the nodes' queues replay this: the workflow's own queue. */
const storageBeforeNodeQueues = proxyActivities<StorageCalls>(STORAGE_OPTIONS);

/** Patch: the operation's last change releases its locks in the same local activity (before: a call of its own). */
export const LAST_CHANGE_RELEASES_LOCKS = 'last-change-releases-locks';

/** Patch: shard work goes to the queue of the shard's node (before: the workflow's queue, every worker local). */
export const STORAGE_ON_NODE_QUEUES = 'storage-on-node-queues';

/** The storage calls of one node, on its worker's queue; runs started before the patch use their own queue. */
export function storageOn(node: string): StorageCalls {
  if (!patched(STORAGE_ON_NODE_QUEUES)) return storageBeforeNodeQueues;
  return proxyActivities<StorageCalls>({ ...STORAGE_OPTIONS, taskQueue: storageQueue(workflowInfo().taskQueue, node) });
}

type Args<F> = F extends (input: infer I) => unknown ? Omit<I, keyof CallScope> : never;

/**
 * Every call one operation makes, scoped to its catalog. Catalog calls are numbered in the order the run makes
 * them (deterministic, like all workflow code), and the catalog journals each outcome under that number: a
 * call made again because the workflow task that made it was lost answers what it answered the first time,
 * even after this run released its lock.
 */
export function operationCalls(catalogId: string | undefined) {
  let calls = 0;
  const step = (name: string): CallScope => ({ catalogId, step: `${++calls}:${name}` });
  const scope: CallScope = { catalogId };
  /** Whether the run's last change released its locks, and none has been taken since. */
  let released = false;
  /** The operation's last change, releasing the run's locks in the same local activity (one call less). */
  const lastChange = async (change: (releaseLocks: boolean) => Promise<TableRecord>): Promise<TableRecord> => {
    const releaseLocks = patched(LAST_CHANGE_RELEASES_LOCKS);
    const table = await change(releaseLocks);
    released = releaseLocks;
    return table;
  };
  return {
    tryLock: async (lock: string) => {
      const attempt = await locking.tryLock({ lock, ...step('tryLock') });
      if (attempt.acquired) released = false;
      return attempt;
    },
    /** Runs started before the lock-wait patch only: waits inside the activity's retries. */
    acquireLockBeforeWaits: async (lock: string) => {
      await lockingBeforeWaits.acquireLock({ lock, ...step('acquireLock') });
      released = false;
    },
    /** Releases every lock the run holds (nothing to do when its last change did). */
    releaseLocks: () => (released ? Promise.resolve() : locking.releaseLock(scope)),
    /** The transition that ends the operation: the locks go with it. */
    commit: (args: Args<Activities['transition']>) =>
      lastChange((releaseLocks) => catalog.transition({ ...args, ...(releaseLocks ? { releaseLocks } : {}), ...step('transition') })),
    prepareCreate: (args: Args<Activities['prepareCreate']>) => catalog.prepareCreate({ ...args, ...step('prepareCreate') }),
    getTable: (tableId: number) => catalog.getTable({ tableId, ...step('getTable') }),
    transition: (args: Args<Activities['transition']>) => catalog.transition({ ...args, ...step('transition') }),
    /** TRASHING -> TRASHED, the trash's last change under its lock: the locks go with it. */
    commitTrash: (args: Args<Activities['commitTrash']>) =>
      lastChange((releaseLocks) => catalog.commitTrash({ ...args, ...(releaseLocks ? { releaseLocks } : {}), ...step('commitTrash') })),
    endTrashTimer: (tableId: number, reason: 'restored' | 'purged', droppedAt: number) => catalog.endTrashTimer({ tableId, reason, droppedAt, ...scope }),
    createShard: (shard: ShardRef) => storageOn(shard.node).createShard({ shard, ...scope }),
    dropShard: (shard: ShardRef) => storageOn(shard.node).dropShard({ shard, ...scope }),
    moveShard: (shard: ShardRef, from: ShardArea, to: ShardArea) => storageOn(shard.node).moveShard({ shard, from, to, ...scope }),
    markGarbage: (shard: ShardRef) => storageOn(shard.node).markGarbage({ shard, ...scope }),
    unmarkGarbage: (shard: ShardRef) => storageOn(shard.node).unmarkGarbage({ shard, ...scope }),
    deleteGarbage: (shard: ShardRef) => storageOn(shard.node).deleteGarbage({ shard, ...scope }),
  };
}

export type OperationCalls = ReturnType<typeof operationCalls>;

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
