import { deprecatePatch, patched } from '@temporalio/workflow';

/**
 * The release of the workflow code: a run started on it records the markers of every patch below, and a worker of it
 * replays the runs of the release before (docs/changing-workflows.md). A patch lives for one release: the unit test
 * test/unit/patches.test.ts fails once one outlives that.
 */
export const RELEASE = 20;

/** The live patches: each is asked (`takes`) where a run started on an earlier release took another branch. */
export const PATCHES = {
  /**
   * Every operation's steps are run by one executor (workflows/execute.ts) from their own descriptions; runs started on
   * v18 run v18's code (workflows/legacy/v18/), asked once, at the top of each operation's workflow (workflows/index.ts).
   */
  stepExecutor: { id: 'step-executor', since: 19 },
  /**
   * A drop's run ends when its table is TRASHED, and the trash's expiry is a run of its own (workflows/trash-expiry.ts);
   * trash runs started on v19 (or by a v19 client, or a v19 reconcile pass: their input has a request id) wait out their
   * expiry in the same run, on v19's code (workflows/legacy/v19/). Asked at the top of the trash's workflow
   * (workflows/index.ts) and where the reconciler starts a trash's run (workflows/reconcile.ts).
   */
  dropEndsAtTrashed: { id: 'drop-ends-at-trashed', since: 20 },
  /**
   * A cancel found before the run's first call is taken only once that call is made: the call may have run already in a
   * workflow task that was lost (its journal answers it again), and what it did is then taken back rather than left to
   * the reconciler, which would finish it. Runs started before it took the cancel at once. Asked in the executor
   * (workflows/execute.ts), only when a cancel is there before the first call.
   */
  firstCallBeforeCancel: { id: 'first-call-before-cancel', since: 20 },
} as const satisfies Record<string, { id: string; since: number }>;

/** Whether this run takes the patch's new branch (every run started on its release or later does). */
export function takes(patch: keyof typeof PATCHES): boolean {
  return patched(PATCHES[patch].id);
}

/**
 * A patch retired: its old branch is gone, but runs of the release before recorded its marker here, and their replay must
 * meet a call at that point. New runs record it as deprecated.
 */
export function passed(id: string): void {
  deprecatePatch(id);
}
