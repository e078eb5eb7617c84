// A run of a table operation as the SDK, the command line and the web UI's users see it.

/** The memo key of the identity that started a run (CatalogScoped.startedBy). */
export const STARTED_BY_MEMO = 'startedBy';

/**
 * The visibility query of the runs that wait on trashes' expiries on `taskQueue`: the expiries' runs, and trash runs as
 * v19 made them (its drop and its expiry in one run; a drop since, `drop:<id>`, is counted while it runs too).
 */
export function trashTimersQuery(taskQueue: string): string {
  const types = ['trashExpiry', 'trashTable'].map((type) => `WorkflowType = '${type}'`).join(' OR ');
  return `(${types}) AND ExecutionStatus = 'Running' AND TaskQueue = '${taskQueue}'`;
}

/** The visibility query of the drops' runs of table `tableId`: the SDK's, a SQL door request's own, an adopt and drop's. */
export function dropsOfTableQuery(tableId: number): string {
  return `TableId = ${tableId} AND TableOp IN ('trash', 'adoptTrash')`;
}

/** The memo key of the drop time a trash's expiry run waits for: how a starter tells its own trash's run from another's. */
export const DROPPED_AT_MEMO = 'droppedAt';

/** How a run stands or ended, as Temporal's visibility says it. */
export type OperationStatus =
  'RUNNING' | 'COMPLETED' | 'FAILED' | 'CANCELLED' | 'TERMINATED' | 'CONTINUED_AS_NEW' | 'TIMED_OUT' | 'PAUSED' | 'UNKNOWN';

/** One run of a table operation as the SDK and the command line show it (`ops`, `history`, `cancel`). */
export interface OperationInfo {
  workflowId: string;
  runId: string;
  /** Its TableOp: create, adopt, trash, undelete, purge, rename, hold, release, lease. */
  operation: string;
  /** The table it is about, as its run's search attributes say (null: not known to the run, a lease's renewal say). */
  tableId: number | null;
  /** `<namespace>.<name>`, as its run's search attributes say (a rename: the new name). */
  table: string | null;
  status: OperationStatus;
  /** ISO 8601. */
  startedAt: string;
  closedAt: string | null;
  /** Who started it: its memo's `startedBy`, else the workflow that started it (see starterOf), else `unknown`. */
  startedBy: string;
  /**
   * A running one's current details, what its workflow says it is doing (`draining table 5 until ...`, `move shards to
   * trash: 3/8`); null when it says nothing, is not running, or no worker answered in time.
   */
  currentStep: string | null;
}

/**
 * Who started a run that carries no `startedBy` of its own, from the workflow that started it as a child (its parent's
 * workflow id, as the records below make it): the reconciler, a trash's expiry, the trash's space cap; `unknown` with
 * no parent (a run started before identities were recorded, or by another tool).
 */
export function starterOf(parentWorkflowId: string | undefined): string {
  if (parentWorkflowId === undefined) return 'unknown';
  const bare = parentWorkflowId.replace(/@[^@]*$/, '');
  if (bare === 'reconcile') return 'reconciler';
  if (bare === 'evict') return 'trash space cap';
  if (/^trash:[0-9]+$/.test(bare)) return 'trash expiry';
  return `workflow ${parentWorkflowId}`;
}
