import type { Client, WorkflowHandle } from '@temporalio/client';
import { waitFor } from './wait';

/** Every run of a workflow id (continued-as-new ones included), oldest first, with its history length. */
export async function runsOf(temporal: Client, workflowId: string): Promise<Array<{ runId: string; status: string; events: number }>> {
  const runs: Array<{ runId: string; status: string; startTime: Date }> = [];
  for await (const run of temporal.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    runs.push({ runId: run.runId, status: run.status.name, startTime: run.startTime });
  }
  runs.sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
  return Promise.all(
    runs.map(async (r) => ({
      runId: r.runId,
      status: r.status,
      events: (await temporal.workflow.getHandle(workflowId, r.runId).fetchHistory()).events?.length ?? 0,
    })),
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
