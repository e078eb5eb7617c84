import {
  ScheduleAlreadyRunning,
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  type Client,
  type ScheduleOptionsStartWorkflowAction,
} from '@temporalio/client';
import type { ReconcileInput } from '../domain/health';
import { OPERATIONS } from '../domain/operations';
import type { reconcileTables } from '../workflows';

/** The reconciler's schedule, one per catalog (like every workflow id): `tablefate-reconcile@<catalog>`. */
export const RECONCILE_SCHEDULE = 'tablefate-reconcile';

export function reconcileScheduleId(catalogId: string): string {
  return `${RECONCILE_SCHEDULE}@${catalogId}`;
}

export interface ReconcileScheduleOptions {
  catalogId: string;
  taskQueue: string;
  everySeconds: number;
}

/**
 * Makes sure the reconcile schedule exists and runs as configured: creates it if missing, updates its interval
 * or task queue if a worker was started with other settings. A pass still running when the next is due is not
 * doubled (overlap: skip), and passes missed while the server was down are not replayed beyond one.
 */
export async function ensureReconcileSchedule(client: Client, opts: ReconcileScheduleOptions): Promise<'created' | 'updated' | 'kept'> {
  const scheduleId = reconcileScheduleId(opts.catalogId);
  const input: ReconcileInput = { catalogId: opts.catalogId, mode: 'repair' };
  const action: ScheduleOptionsStartWorkflowAction<typeof reconcileTables> = {
    type: 'startWorkflow',
    workflowType: OPERATIONS.reconcile.workflowType,
    workflowId: OPERATIONS.reconcile.workflowId({ mode: 'repair' }, opts.catalogId),
    taskQueue: opts.taskQueue,
    args: [input],
  };
  const spec = { intervals: [{ every: opts.everySeconds * 1000 }] };
  try {
    await client.schedule.create({
      scheduleId,
      spec,
      action,
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute' },
    });
    return 'created';
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
  const handle = client.schedule.getHandle(scheduleId);
  const current = await handle.describe();
  const every = current.spec.intervals?.[0]?.every;
  const queue = current.action.type === 'startWorkflow' ? current.action.taskQueue : undefined;
  if (every === opts.everySeconds * 1000 && queue === opts.taskQueue) return 'kept';
  await handle.update((previous) => ({ ...previous, spec, action }));
  return 'updated';
}

/** Deletes the reconcile schedule of a catalog; false if there was none. */
export async function removeReconcileSchedule(client: Client, catalogId: string): Promise<boolean> {
  try {
    await client.schedule.getHandle(reconcileScheduleId(catalogId)).delete();
    return true;
  } catch (err) {
    if (err instanceof ScheduleNotFoundError) return false;
    throw err;
  }
}
