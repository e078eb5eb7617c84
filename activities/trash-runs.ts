import { Context } from '@temporalio/activity';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import { endTimerSignal, trashChangedSignal } from '../domain/contracts';
import { OPERATIONS, workflowIdFor } from '../domain/operations';
import { type TrashExpiryInput } from '../domain/operation-inputs';
import { DROPPED_AT_MEMO } from '../domain/operation-runs';
import type { EndOfTrash } from '../domain/steps';
import type { TableRecord } from '../domain/table';
import type { TrashPolicy } from '../domain/settings';

/**
 * The messages a worker sends the runs that wait on a table's trash: the drop that drains (`drop:<id>`) and the trash's
 * expiry (`trash:<id>`, workflows/trash-expiry.ts). Sent from local activities, in the workflow task of the step that
 * causes them, rather than as the workflow's own commands, whose delivery the operation would wait for in one more
 * workflow task.
 */

/** A trash just committed, with the policy in force where it was dropped (absent in runs recorded before policies). */
export type TrashCommitted = TableRecord & { policy?: TrashPolicy };

const client = () => Context.current().client;

/**
 * How long after its drop an expiry's run begins. It has nothing to do for a retention's length (1 s at the least), and
 * its first task, begun at once, would run beside its drop's last one and the caller's next call (on 2 cores: 1.2x the
 * floor for a drop instead of 1.0x). What reaches it before then waits for it: a signal is kept, and an update (a new
 * retention) or a query makes the server begin the run at once.
 */
const EXPIRY_START_DELAY = '1s';

/** Sends `send` to the run of `workflowId` if it runs; false when there is none (nothing to tell). */
async function tell(workflowId: string, send: (id: string) => Promise<void>): Promise<boolean> {
  try {
    await send(workflowId);
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/** Tells the expiry of the trash at `droppedAt` that it has nothing left to do (a recall, a purge by hand). */
export function endTrashTimer(tableId: number, end: EndOfTrash, catalogId: string | undefined): Promise<boolean> {
  return tell(workflowIdFor.expiry(tableId, catalogId), (id) =>
    client().workflow.getHandle(id).signal(endTimerSignal, end.reason, end.droppedAt),
  );
}

/**
 * Tells the runs waiting on the table to read it again: a DRAINING table's drop or a TRUNCATING one's truncate (a lease
 * released), a TRASHED table's expiry (a hold released). A drop run that a v19 client started is its table's `trash:`
 * run: it is told too. The drop (or truncate) is the run holding the table's lock (`drainer`), whatever its id (a
 * request's own run has one of its own), else the operation's usual run.
 */
export async function wakeTrashRuns(table: TableRecord, catalogId: string | undefined, drainer?: string): Promise<boolean> {
  const usual = table.state === 'DRAINING' ? workflowIdFor.trash : table.state === 'TRUNCATING' ? workflowIdFor.truncate : undefined;
  const ids = [workflowIdFor.expiry(table.id, catalogId), ...(usual ? [drainer ?? usual(table.id, catalogId)] : [])];
  const told = await Promise.all(
    ids.map((workflowId) => tell(workflowId, (id) => client().workflow.getHandle(id).signal(trashChangedSignal))),
  );
  return told.some(Boolean);
}

/**
 * Starts the expiry of the trash at `droppedAt` (`trash:<tableId>`), once its drop has stamped the table with that drop
 * time (its move begun, or its commit made). A run of this trash found there (a repeat, or the reconciler's re-arm) is
 * it. A run of any other trash is of one that has ended (the table is in this trash now, and in one trash at a time): a
 * recall or a purge ended it, and it may not even have begun (an expiry begins a second after its drop). It is
 * terminated, having nothing left to do, and this trash's started, unless `stillCurrent` says this trash has ended too.
 */
export async function startTrashExpiry(
  input: TrashExpiryInput & { table: TableRecord; taskQueue: string; stillCurrent: () => Promise<boolean> },
): Promise<'started' | 'running' | 'ended'> {
  const { table, taskQueue, stillCurrent, ...expiry } = input;
  const record = OPERATIONS.expiry;
  const workflowId = record.workflowId(table.id, expiry.catalogId);
  const start = () =>
    client().workflow.start(record.workflowType, {
      workflowId,
      taskQueue,
      args: [expiry],
      memo: { [DROPPED_AT_MEMO]: expiry.droppedAt },
      typedSearchAttributes: record.searchAttributes({ tableId: table.id, namespace: table.namespace, name: table.name }),
      staticSummary: `keep table ${table.id} in the trash until it expires, then purge it`,
      startDelay: EXPIRY_START_DELAY,
      ...record.start,
    });
  for (;;) {
    try {
      await start();
      return 'started';
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    const running = client().workflow.getHandle(workflowId);
    const { memo, runId } = await running.describe();
    if (memo?.[DROPPED_AT_MEMO] === expiry.droppedAt) return 'running';
    // (A start made again long after its drop, a recall and a new drop between: that run is the newer trash's, and
    // this trash is over.)
    if (!(await stillCurrent())) return 'ended';
    await client()
      .workflow.getHandle(workflowId, runId)
      .terminate(`its trash has ended: table ${table.id} is in the trash of ${new Date(expiry.droppedAt).toISOString()}`)
      .catch((err: unknown) => {
        // (Closed by itself meanwhile: the start is tried again all the same.)
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      });
  }
}
