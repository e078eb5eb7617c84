import {
  ActivityFailure,
  ApplicationFailure,
  executeChild,
  getExternalWorkflowHandle,
  patched,
  proxyActivities,
  proxyLocalActivities,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { OPERATIONS, STORAGE_STOPPED_HERE, storageQueue, type PurgeInput } from '../domain/operations';
import { settleAll } from '../domain/settle';
import { endTimerSignal, type CallScope, type ShardChange, type ShardRef } from '../domain/contracts';
import type { Activities } from '../activities';

/**
 * Every patch of the workflows, and the old branches they keep: what runs started before each patch replay (see
 * docs/changing-workflows.md for how a patch is added and retired). The operations' own files say only what a run
 * started today does; where a patch decides, they ask `patched(PATCHES.x)` and hand the old branch to a function
 * here. Retiring a patch is deleting its entry and its function, and the one line that asks for it.
 */
export const PATCHES = {
  /** v3: lock waits are workflow timers with continue-as-new (before: the lock activity's retries were the wait). */
  lockWaitsInWorkflow: 'lock-waits-in-workflow',
  /** v3: past the pace's tries per run, a failing expiry purge continues as new (before: it tried for ever in one run). */
  expiryRetriesContinueAsNew: 'expiry-retries-continue-as-new',
  /** v4: shard work goes to the queue of the shard's node (before: the workflow's queue, every worker local). */
  storageOnNodeQueues: 'storage-on-node-queues',
  /** v5: the operation's last change releases its locks in the same local activity (before: a call of its own). */
  lastChangeReleasesLocks: 'last-change-releases-locks',
  /** v5: the trash timer is ended from a local activity (before: the workflow's signal command). */
  endTimerFromLocalActivity: 'end-timer-from-local-activity',
  /**
   * v6: an operation's shard changes run as one local activity on the nodes its worker serves, the others on their
   * nodes' queues (before: one activity per shard, always on a node's queue).
   */
  shardChangesInWorkflowTask: 'shard-changes-in-workflow-task',
  /**
   * v7: the expiry purges the table in the trash run itself, in the workflow task its timer starts (before: a purge
   * run as a child, which cost the trash run three more workflow tasks and the purge run its own).
   */
  expiryPurgesInTrashRun: 'expiry-purges-in-trash-run',
  /**
   * v7: an end of this trash heard before the run knew its drop time ends the timer once it does (before: it was
   * ignored, and the run waited for its expiry to find the table gone).
   */
  endHeardBeforeArmed: 'end-heard-before-armed',
  /**
   * v9: an operation's shard changes run as one ordinary activity per node, on the node's queue, heartbeating, and a
   * cancelled one is waited for until it has stopped (before: a local activity in the workflow task, which a cancel
   * request abandoned while it still ran, so that the undo raced it; and which held the workflow task for as long as
   * it took).
   */
  shardChangesOnNodeActivities: 'shard-changes-on-node-activities',
  /**
   * v9: the `trashed` update answers a trash that failed or was cancelled only once its compensation is over (before:
   * a cancel request failed the update at once, while the shards were still being moved back).
   */
  answerAfterCompensation: 'answer-after-compensation',
  /**
   * v11: a drop first stops new leases (READY to DRAINING while the table has live ones, in one call that goes straight
   * to TRASHING when it has none) and waits for them within its drain deadline (before: READY to TRASHING, no leases).
   */
  drainsLeases: 'drains-leases',
} as const;

const RETRY = { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '10s' } as const;

// ---- before lock-waits-in-workflow (v3) ----

/** The activity's retries were the wait, and never gave up. Its local activity's name is kept for these runs. */
const lockingBeforeWaits = proxyLocalActivities<Pick<Activities, 'acquireLock'>>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '100ms', backoffCoefficient: 1.5, maximumInterval: '2s' },
});

/** Takes `lock` the way runs started before v3 did: inside one local activity's retries. */
export const acquireLockBeforeWaits = (scope: CallScope & { lock: string }): Promise<void> => lockingBeforeWaits.acquireLock(scope);

// ---- before storage-on-node-queues (v4), shard-changes-in-workflow-task (v6), shard-changes-on-node-activities (v9) ----

type StorageCalls = Pick<
  Activities,
  'createShard' | 'dropShard' | 'moveShard' | 'markGarbage' | 'unmarkGarbage' | 'deleteGarbage' | 'collectOrphan'
>;

/** A storage call per shard: ordinary activities that heartbeat. */
const STORAGE_OPTIONS = { startToCloseTimeout: '5 minutes', heartbeatTimeout: '20s', retry: RETRY } as const;

/** Runs started before shard work moved to the nodes' queues: the workflow's own queue. */
const storageBeforeNodeQueues = proxyActivities<StorageCalls>(STORAGE_OPTIONS);

/** The storage calls of one node, on its worker's queue; runs started before v4 use their own queue. */
export function storageOn(node: string): StorageCalls {
  if (!patched(PATCHES.storageOnNodeQueues)) return storageBeforeNodeQueues;
  return proxyActivities<StorageCalls>({ ...STORAGE_OPTIONS, taskQueue: storageQueue(workflowInfo().taskQueue, node) });
}

/**
 * v6 to v8: one step's change on the shards of the nodes this worker serves itself (every node, with `--storage
 * local`), one local activity in the workflow task for all of them, journaled and fenced (activities/storage.ts), so
 * a lost workflow task's repeat touches nothing. A local activity has no heartbeat, but it dies with its worker, and
 * the workflow task is then retried.
 */
const shardsHere = proxyLocalActivities<Pick<Activities, 'changeShardsHere'>>({ startToCloseTimeout: '5 minutes', retry: RETRY });

/**
 * How runs started before v9 change every shard of a table: one activity per shard on its node's queue (before v6,
 * or for the nodes this worker does not serve), or the local activity above. One per run: it remembers a worker
 * found to serve none of the nodes (`--storage remote`), which is not asked again in that run.
 */
export function shardChangesBeforeNodeActivities(scope: CallScope, numbered: (name: string) => CallScope) {
  let noneHere = false;
  const onQueue = (change: ShardChange, onShard: () => void) => (shard: ShardRef) => {
    const node = storageOn(shard.node);
    const done =
      change.method === 'moveShard'
        ? node.moveShard({ shard, from: change.from, to: change.to, ...scope })
        : node[change.method]({ shard, ...scope });
    return done.then(onShard);
  };
  return async (shards: ShardRef[], change: ShardChange, onShard: () => void): Promise<void> => {
    if (!patched(PATCHES.shardChangesInWorkflowTask) || noneHere) {
      await settleAll(shards, onQueue(change, onShard));
      return;
    }
    let elsewhere: string[];
    try {
      ({ elsewhere } = await shardsHere.changeShardsHere({ change, shards, ...numbered('changeShardsHere') }));
    } catch (err) {
      if (!stoppedHere(err)) throw err;
      // This worker's storage failed fatally and it is stopping: the nodes' queues hold the change for a worker that
      // serves them again.
      await settleAll(shards, onQueue(change, onShard));
      return;
    }
    noneHere = elsewhere.length === new Set(shards.map((s) => s.node)).size;
    for (const shard of shards) if (!elsewhere.includes(shard.node)) onShard();
    await settleAll(
      shards.filter((s) => elsewhere.includes(s.node)),
      onQueue(change, onShard),
    );
  };
}

/** Whether a local activity failed with STORAGE_STOPPED_HERE (the failure comes as it is, or as an activity's cause). */
function stoppedHere(err: unknown): boolean {
  const failure = err instanceof ActivityFailure ? err.cause : err;
  return failure instanceof ApplicationFailure && failure.type === STORAGE_STOPPED_HERE;
}

// ---- before end-timer-from-local-activity (v5) ----

/** Ends the trash run's timer with a signal command from this workflow. */
export function endTrashTimerBySignal(trashWorkflowId: string, reason: 'restored' | 'purged', droppedAt: number): Promise<void> {
  return getExternalWorkflowHandle(trashWorkflowId).signal(endTimerSignal, reason, droppedAt);
}

// ---- before expiry-purges-in-trash-run (v7) ----

/**
 * The expiry's purge as a run of its own (`purge:<id>`), a child the trash run waits for but does not own: it outlived
 * the trash run if that was terminated. A failure is logged; the caller looks at the table to see whether it is
 * purged (a manual purge already running under that id counts too).
 */
export async function purgeAsChild(purge: PurgeInput, target: { namespace: string; name: string }, log: (err: unknown) => void) {
  const op = OPERATIONS.purge;
  try {
    await executeChild(op.workflowType, {
      workflowId: op.workflowId(purge.tableId, purge.catalogId),
      args: [purge],
      typedSearchAttributes: op.searchAttributes({ tableId: purge.tableId, ...target }),
      parentClosePolicy: 'ABANDON',
    });
  } catch (err) {
    // Already started: a manual purge is running; the caller sees whether it got there.
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) log(err);
  }
}
