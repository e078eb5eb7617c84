import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  patched,
  proxyActivities,
  proxyLocalActivities,
  workflowInfo,
} from '@temporalio/workflow';
import { STORAGE_STOPPED_HERE, storageQueue } from '../domain/operations';
import { settleAll } from '../domain/settle';
import type { Activities } from '../activities';
import type { TableRecord } from '../domain/table';
import type { CallScope, ShardChange, ShardRef } from '../domain/contracts';

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
type StorageCalls = Pick<
  Activities,
  'createShard' | 'dropShard' | 'moveShard' | 'markGarbage' | 'unmarkGarbage' | 'deleteGarbage' | 'collectOrphan'
>;

/**
 * One step's change on every shard a node holds: one ordinary activity per node, on the node's queue. It may take
 * long (256 shards, big files, a node whose disk is slow), so it heartbeats shard file by shard file, and a cancel
 * request reaches it through its heartbeats; a dead worker's attempt is retried after the heartbeat timeout. The
 * workflow waits until a cancelled change has really stopped (and put back the set it was renaming) before it runs
 * anything else, an undo above all: two changes of one shard must never run at once.
 */
const shardsOnNode = (node: string) =>
  proxyActivities<Pick<Activities, 'changeShardsOnNode'>>({
    startToCloseTimeout: '1 hour',
    heartbeatTimeout: '20s',
    retry: RETRY,
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    taskQueue: storageQueue(workflowInfo().taskQueue, node),
  }).changeShardsOnNode;

/**
 * Runs started from v6 to v8 replay this: an operation's change on the shards of the nodes this worker serves itself
 * (every node, with `--storage local`), one local activity, in the workflow task, for all of them. Journaled and fenced (activities/storage.ts), so a
 * lost workflow task's repeat touches nothing. Its timeout is a storage call's: a local activity has no heartbeat,
 * but it dies with its worker, and the workflow task is then retried.
 */
const shardsHere = proxyLocalActivities<Pick<Activities, 'changeShardsHere'>>({ startToCloseTimeout: '5 minutes', retry: RETRY });

/** Runs started before shard work moved to the nodes' queues replay this: the workflow's own queue. */
const storageBeforeNodeQueues = proxyActivities<StorageCalls>(STORAGE_OPTIONS);

/** Patch: the operation's last change releases its locks in the same local activity (before: a call of its own). */
export const LAST_CHANGE_RELEASES_LOCKS = 'last-change-releases-locks';

/** Patch: shard work goes to the queue of the shard's node (before: the workflow's queue, every worker local). */
export const STORAGE_ON_NODE_QUEUES = 'storage-on-node-queues';

/**
 * Patch: an operation's shard changes run as one local activity on the nodes its worker serves, the others on
 * their nodes' queues (before: one activity per shard, always on a node's queue).
 */
export const SHARD_CHANGES_IN_WORKFLOW_TASK = 'shard-changes-in-workflow-task';

/**
 * Patch: an operation's shard changes run as one ordinary activity per node, on the node's queue, heartbeating,
 * and a cancelled one is waited for until it has stopped (before: a local activity in the workflow task, which a
 * cancel request abandoned while it still ran, so that the undo raced it; and which held the workflow task for as
 * long as it took).
 */
export const SHARD_CHANGES_ON_NODE_ACTIVITIES = 'shard-changes-on-node-activities';

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
  /** Whether this run's worker was found to serve none of the table's nodes (shard changes go to their queues). */
  let noneHere = false;
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
    endTrashTimer: (tableId: number, reason: 'restored' | 'purged', droppedAt: number) =>
      catalog.endTrashTimer({ tableId, reason, droppedAt, ...scope }),
    /**
     * One step's change on every shard of `table`, settling when every shard has (an undo must never race a change
     * still running). `onShard` hears each shard done.
     */
    changeShards: async (table: TableRecord, change: ShardChange, onShard: () => void = () => undefined): Promise<void> => {
      const shards = shardsOf(table);
      if (patched(SHARD_CHANGES_ON_NODE_ACTIVITIES)) {
        return settleAll(nodesOf(shards), async ([node, held]) => {
          await shardsOnNode(node)({ change, shards: held, ...scope });
          held.forEach(() => onShard());
        });
      }
      const onQueue = (shard: ShardRef) => changeOnQueue(shard, change, scope).then(onShard);
      if (!patched(SHARD_CHANGES_IN_WORKFLOW_TASK)) return settleAll(shards, onQueue);
      // A worker found to serve none of the nodes (`--storage remote`) is not asked again in this run.
      if (!noneHere) {
        let elsewhere: string[];
        try {
          ({ elsewhere } = await shardsHere.changeShardsHere({ change, shards, ...step('changeShardsHere') }));
        } catch (err) {
          if (!stoppedHere(err)) throw err;
          // This worker's storage failed fatally and it is stopping: the nodes' queues hold the change for a
          // worker that serves them again.
          return settleAll(shards, onQueue);
        }
        noneHere = elsewhere.length === new Set(shards.map((s) => s.node)).size;
        for (const shard of shards) if (!elsewhere.includes(shard.node)) onShard();
        return settleAll(
          shards.filter((s) => elsewhere.includes(s.node)),
          onQueue,
        );
      }
      return settleAll(shards, onQueue);
    },
  };
}

/** A shard change as an activity on its node's queue (the workflow's own queue for runs started before that). */
function changeOnQueue(shard: ShardRef, change: ShardChange, scope: CallScope): Promise<void> {
  const node = storageOn(shard.node);
  return change.method === 'moveShard'
    ? node.moveShard({ shard, from: change.from, to: change.to, ...scope })
    : node[change.method]({ shard, ...scope });
}

/** Whether a local activity failed with STORAGE_STOPPED_HERE (the failure comes as it is, or as an activity's cause). */
function stoppedHere(err: unknown): boolean {
  const failure = err instanceof ActivityFailure ? err.cause : err;
  return failure instanceof ApplicationFailure && failure.type === STORAGE_STOPPED_HERE;
}

/** The shards grouped by the node that holds them, in placement order. */
function nodesOf(shards: readonly ShardRef[]): Array<[node: string, shards: ShardRef[]]> {
  const byNode = new Map<string, ShardRef[]>();
  for (const shard of shards) byNode.set(shard.node, [...(byNode.get(shard.node) ?? []), shard]);
  return [...byNode];
}

const shardsOf = (table: TableRecord): ShardRef[] => table.placement.map((p) => ({ tableId: table.id, shard: p.shard, node: p.node }));

export type OperationCalls = ReturnType<typeof operationCalls>;
