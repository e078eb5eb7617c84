import { randomUUID } from 'node:crypto';
import { Client, type WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { TableFateClient } from '../../client';
import type { Harness } from './harness';
import { testNamespace } from './test-server';
import { waitFor } from './wait';
import { workflowIdFor } from '../../domain/operations';
import { trashTimerQuery, type TrashTimerState } from '../../domain/contracts';

/*
 * What a trash run shows of where it is, for a test to wait on that instead of on time: its current details, the
 * timers in its history, the updates the server holds for it.
 */

/**
 * Resolves once the trash run has met its table's expiry and found the table held: it says so (its current details,
 * the web UI's line) and waits for the release. Answers that line.
 */
export async function heldPastExpiry(run: WorkflowHandle, timeoutMs = 30_000): Promise<string> {
  return waitFor(
    () =>
      run
        .query<{ currentDetails?: string }>('__temporal_workflow_metadata')
        .then((m) => m.currentDetails ?? '')
        .catch(() => ''),
    (details) => /expired at .* but is on hold/.test(details),
    { what: `${run.workflowId} to find its table held at expiry`, timeoutMs },
  );
}

/**
 * The timer of the trash's expiry run once it is armed: the run, started by its drop's commit, arms once it has read its
 * table, a moment after the drop has answered.
 */
export function armedTimer(h: Harness, tableId: number): Promise<TrashTimerState> {
  return waitFor(
    () => h.temporal.workflow.getHandle(workflowIdFor.expiry(tableId, h.catalog.id)).query(trashTimerQuery),
    (state) => state.expireAt !== null || state.ended !== null,
    { what: `the expiry of table ${tableId} to arm` },
  );
}

/** The durable timers of the run's history so far: how many it started, and of those how many fired or were cancelled. */
export async function timerEvents(run: WorkflowHandle): Promise<{ started: number; fired: number; canceled: number }> {
  const events = (await run.fetchHistory()).events ?? [];
  return {
    started: events.filter((e) => e.timerStartedEventAttributes).length,
    fired: events.filter((e) => e.timerFiredEventAttributes).length,
    canceled: events.filter((e) => e.timerCanceledEventAttributes).length,
  };
}

/** Resolves once a timer of the run has fired (the server's clock reached it), whether or not a worker has seen it. */
export async function timerFired(run: WorkflowHandle, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    () => timerEvents(run),
    (timers) => timers.fired > 0,
    { what: `a timer of ${run.workflowId} to fire`, timeoutMs },
  );
}

const { UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED: ADMITTED } = temporal.api.enums.v1.UpdateWorkflowExecutionLifecycleStage;
const GRPC_NOT_FOUND = 5;

/**
 * A client of the harness's catalog and task queue whose updates are known by id, and a wait for the server to have
 * admitted them: an update sent while no worker polls is held by the server (not in the run's history yet) until a
 * worker's task takes it, and only asking for it by id shows it is there.
 */
export function admittedUpdates(h: Harness): {
  client: TableFateClient;
  /** Resolves once the server holds `count` updates this client sent to `run`. */
  admitted: (run: WorkflowHandle, count: number) => Promise<void>;
} {
  const sent: string[] = [];
  const temporalClient = new Client({
    connection: h.temporal.connection,
    namespace: testNamespace(),
    interceptors: {
      workflow: [
        {
          startUpdate: (input, next) => {
            const updateId = input.options.updateId ?? randomUUID();
            sent.push(updateId);
            return next({ ...input, options: { ...input.options, updateId } });
          },
        },
      ],
    },
  });
  const client = new TableFateClient({ client: temporalClient, catalog: h.catalog, taskQueue: h.taskQueue });
  /** Whether the server holds update `updateId` of `workflowId` (asked without waiting: the stage it reached). */
  const held = async (workflowId: string, updateId: string): Promise<boolean> => {
    try {
      await h.temporal.workflowService.pollWorkflowExecutionUpdate({
        namespace: testNamespace(),
        updateRef: { workflowExecution: { workflowId }, updateId },
        waitPolicy: { lifecycleStage: ADMITTED },
      });
      return true;
    } catch (err) {
      if ((err as { code?: number }).code === GRPC_NOT_FOUND) return false;
      throw err;
    }
  };
  const admitted = async (run: WorkflowHandle, count: number): Promise<void> => {
    await waitFor(
      async () => (await Promise.all(sent.map((id) => held(run.workflowId, id)))).filter(Boolean).length,
      (n) => n >= count,
      { what: `the server to admit ${count} update(s) of ${run.workflowId}`, intervalMs: 50, timeoutMs: 10_000 },
    );
  };
  return { client, admitted };
}
