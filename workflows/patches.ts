import { patched } from '@temporalio/workflow';

/**
 * The patches of v14: each is asked (`takes`) where a run started on v13 took the old branch, which stays beside the
 * new one for a release (docs/changing-workflows.md says when it goes).
 */
export const PATCHES = {
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
  /** v14: `describe` and `ls` measure the shards of the nodes this worker serves in the workflow task (`measureSizes`). */
  measuresHere: 'measures-here',
} as const;

/** Whether this run takes the patch's new branch (every run started on v14 or later does). */
export function takes(patch: keyof typeof PATCHES): boolean {
  return patched(PATCHES[patch]);
}
