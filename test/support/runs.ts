import { randomUUID } from 'node:crypto';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { waitFor } from './wait';

/**
 * The events that record the workflow's own commands (activities, timers, markers, children, continue-as-new): what
 * its code asked for, however the server batched it into workflow tasks. A machine under load splits the same work
 * into more workflow tasks (three events each), so a count of all events varies from run to run; this does not.
 */
const COMMAND_EVENTS = [
  'activityTaskScheduledEventAttributes',
  'timerStartedEventAttributes',
  'markerRecordedEventAttributes',
  'startChildWorkflowExecutionInitiatedEventAttributes',
  'signalExternalWorkflowExecutionInitiatedEventAttributes',
  'upsertWorkflowSearchAttributesEventAttributes',
  'workflowExecutionContinuedAsNewEventAttributes',
] as const;

/**
 * Every run of a workflow id (continued-as-new ones included), oldest first, with its history length (`events`) and
 * how many of those record its commands (`commands`).
 */
export async function runsOf(
  temporal: Client,
  workflowId: string,
): Promise<Array<{ runId: string; status: string; events: number; commands: number }>> {
  const runs: Array<{ runId: string; status: string; startTime: Date }> = [];
  for await (const run of temporal.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    runs.push({ runId: run.runId, status: run.status.name, startTime: run.startTime });
  }
  runs.sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
  return Promise.all(
    runs.map(async (r) => {
      const events = (await temporal.workflow.getHandle(workflowId, r.runId).fetchHistory()).events ?? [];
      const commands = events.filter((e) => COMMAND_EVENTS.some((kind) => e[kind])).length;
      return { runId: r.runId, status: r.status, events: events.length, commands };
    }),
  );
}

/**
 * Resolves once a cancel request has reached the run's code: until a workflow task has started after the request,
 * the workflow has not heard of it (until v8, one busy in a long local activity heard it only when that task handed over).
 */
export async function cancelHeard(run: WorkflowHandle): Promise<void> {
  await waitFor(
    async () => (await run.fetchHistory()).events ?? [],
    (events) => {
      const requested = events.findIndex((e) => e.workflowExecutionCancelRequestedEventAttributes);
      return requested >= 0 && events.slice(requested).some((e) => e.workflowTaskStartedEventAttributes);
    },
    { what: 'the cancel request to reach the workflow', timeoutMs: 20_000 },
  );
}

/**
 * Resolves once the server's visibility has caught up with every start made before the call: a marker run is started
 * (on a task queue nobody polls, so nothing runs it) and waited for in visibility, then terminated. Visibility records
 * a namespace's starts in order on the dev server (one history shard), so a count made after this sees every run
 * started before it, and a count of 0 means none was, not "none yet". Answers the marker's workflow id (a count of the
 * whole namespace leaves it out by that).
 */
export async function visibilityCaughtUp(client: Client): Promise<string> {
  const id = `visibility-marker-${randomUUID()}`;
  const marker = await client.workflow.start('visibilityMarker', { workflowId: id, taskQueue: `nobody-polls-${randomUUID()}`, args: [] });
  try {
    await waitFor(
      async () => (await client.workflow.count(`WorkflowId = '${id}'`)).count,
      (count) => count === 1,
      { what: 'visibility to catch up', intervalMs: 50 },
    );
  } finally {
    await marker.terminate('visibility caught up');
  }
  return id;
}
