import { patched } from '@temporalio/workflow';

/**
 * The patches of v14, v15, v17 and v18: each is asked (`takes`) where a run started on an earlier release took the old branch, which stays beside the
 * new one for a release (docs/changing-workflows.md says when it goes).
 */
export const PATCHES = {
  /**
   * v18: an undelete's and a purge's lock attempt makes their first step's first shard call too, where their check (now
   * domain/checks.ts, made in that call and again by the check step) lets them go on (`withLock`'s `firstChange`): one
   * local activity less.
   */
  lockWithFirstChange: 'lock-with-first-change',
  /** v18: a create's prepare makes the shard step's first call too (`prepareThenCreateShardsHere`): one local activity less. */
  prepareCreatesShards: 'prepare-creates-shards',
  /**
   * v17: a create's prepare takes its name lock in its own call (`prepareCreate`'s `takeLock`, under `holdingLocks`)
   * rather than after a lock attempt of its own: one local activity less.
   */
  prepareTakesNameLock: 'prepare-takes-name-lock',
  /**
   * v17: a drop's first change (`startDrain`'s `takeLock`, under `holdingLocks`) takes the table's lock rather than
   * after a lock attempt of its own: one local activity less.
   */
  drainTakesTableLock: 'drain-takes-table-lock',
  /**
   * v15: the local activity that changes a step's shards makes the table's state change before them (a recall's claim
   * of its name, a purge's PURGING: `everyShard`'s `state`) and the operation's commit after them, when every shard of
   * the step is changed here (`everyShard`'s `commit`): two local activities less. A purge's deletes ride with its
   * marks only where one call marks every shard (v14 deleted after each call's marks).
   */
  changesWithShards: 'changes-with-shards',
  /**
   * v14: a step's change on the nodes this worker serves is a journaled local activity in the workflow task, awaited
   * where a cancel cannot reach it (`changeShards`); v13 sent every node's share to the node's queue.
   */
  shardChangesHere: 'shard-changes-here',
  /**
   * v14: fewer local activities per operation: the lock attempt reads the table under the lock it takes (`withLock`'s
   * `readTable`); the commit of an undelete or a purge by hand tells the trash run that its timer is over (`commit`'s
   * `endTrashTimer`); a purge's call that marks the shards garbage deletes them too once all are marked (`then`).
   */
  fewerLocalActivities: 'fewer-local-activities',
} as const;

/** Whether this run takes the patch's new branch (every run started on v14 or later does). */
export function takes(patch: keyof typeof PATCHES): boolean {
  return patched(PATCHES[patch]);
}
