import { deprecatePatch } from '@temporalio/workflow';

/**
 * The patches retired in v13. Their old branches are gone: runs that took them (started on v10 or earlier) are not
 * on a supported upgrade path (docs/changing-workflows.md says how such runs move to current code). What is left is
 * each patch's marker: a run started on v11 or v12 recorded it where the code asked `patched(id)`, and its replay
 * must meet a call at the same point. `passed(id)` is that call: it takes no branch, and it records the marker as
 * deprecated in new runs, so that a worker still on v12 during a rolling deploy replays them on its new branch.
 *
 * Removing a `passed()` call (and its id here) is the second step of retiring a patch: once no run started before
 * v13 is open (the short ones end within minutes; waiting trash runs are terminated and the reconciler re-arms them on
 * today's code: docs/changing-workflows.md).
 */
export const RETIRED_IN_V13 = {
  /** v3: lock waits are workflow timers with continue-as-new (`withLock`). */
  lockWaitsInWorkflow: 'lock-waits-in-workflow',
  /** v3: a failing expiry purge continues as new past its tries for one run (`purgeOnExpiry`). */
  expiryRetriesContinueAsNew: 'expiry-retries-continue-as-new',
  /** v4: shard work goes to the queue of the shard's node (the reconciler's survey and orphan collection). */
  storageOnNodeQueues: 'storage-on-node-queues',
  /** v5: the operation's last change releases its locks in the same local activity (`lastChange`). */
  lastChangeReleasesLocks: 'last-change-releases-locks',
  /** v5: undelete and a manual purge end the trash timer from a local activity (`endTrashTimer`). */
  endTimerFromLocalActivity: 'end-timer-from-local-activity',
  /** v7: the expiry purges the table in the trash run itself (`purgeOnExpiry`). */
  expiryPurgesInTrashRun: 'expiry-purges-in-trash-run',
  /** v7: an end of the trash heard before the run knew its drop time ends the timer once it does (`trashTimer`). */
  endHeardBeforeArmed: 'end-heard-before-armed',
  /** v9: a step's shard changes are one ordinary activity per node, on the node's queue (`changeShards`). */
  shardChangesOnNodeActivities: 'shard-changes-on-node-activities',
  /** v9: the `trashed` update answers a failed or cancelled trash once its compensation is over. */
  answerAfterCompensation: 'answer-after-compensation',
  /** v11: a drop stops new leases and waits for the live ones (`moveToTrash`). */
  drainsLeases: 'drains-leases',
} as const;

/** Where a retired patch was asked: the marker of a run started on v11 or v12 is met here, and no branch is taken. */
export function passed(patch: keyof typeof RETIRED_IN_V13): void {
  deprecatePatch(RETIRED_IN_V13[patch]);
}
