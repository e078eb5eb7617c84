import type { Client } from '@temporalio/client';

/**
 * A run's current details: the one line its workflow says it is doing now (`setCurrentDetails`: `draining table 5 until
 * ...: lease ...`, `move shards to trash: 3/8`), as the web UI shows it. Every TypeScript workflow answers the SDK's
 * built-in query `__temporal_workflow_metadata` with `{ definition, currentDetails }`; a query needs a worker, so it
 * is asked with a short deadline.
 */
const METADATA_QUERY = '__temporal_workflow_metadata';

/** How long one question about a run's details may take: a worker that has the run cached answers in milliseconds. */
export const DETAILS_DEADLINE_MS = 2_000;
/** A write that has not answered after this long starts showing its run's details (a quick one never does). */
const WATCH_AFTER_MS = 1_000;
/** Then, how often it asks again. */
const WATCH_EVERY_MS = 500;

/**
 * The current details of `workflowId` (its run `runId`, or the latest), or null if it says nothing, or no worker answered
 * within `deadlineMs` (none polls, the run is gone, the server refused): a read that never fails.
 */
export async function currentDetails(
  client: Client,
  workflowId: string,
  runId?: string,
  deadlineMs = DETAILS_DEADLINE_MS,
): Promise<string | null> {
  if (deadlineMs <= 0) return null;
  try {
    const handle = client.workflow.getHandle(workflowId, runId);
    const metadata = await client.connection.withDeadline(Date.now() + deadlineMs, () =>
      handle.query<{ currentDetails?: unknown } | undefined>(METADATA_QUERY),
    );
    const details = metadata?.currentDetails;
    return typeof details === 'string' && details !== '' ? details : null;
  } catch {
    return null;
  }
}

/**
 * Asks `ask` while `until` is pending (first after `afterMs`, then every `everyMs`) and tells `onChange` each answer that
 * is not null and differs from the last (by `key`), until `until` settles or `signal` aborts. The one poll behind
 * every progress a caller watches: a run's current details, a recall's shard count.
 */
export async function watchChanges<T>(
  ask: () => Promise<T | null>,
  key: (answer: T) => string,
  until: Promise<unknown>,
  onChange: (answer: T) => void,
  signal: AbortSignal,
  { afterMs, everyMs }: { afterMs: number; everyMs: number },
): Promise<void> {
  let ended = false;
  const settled = until.then(
    () => (ended = true),
    () => (ended = true),
  );
  const pause = (ms: number) => Promise.race([settled, new Promise((resolve) => setTimeout(resolve, ms).unref())]);
  await pause(afterMs);
  let last: string | null = null;
  while (!ended && !signal.aborted) {
    const answer = await ask();
    if (!ended && !signal.aborted && answer !== null && key(answer) !== last) {
      last = key(answer);
      onChange(answer);
    }
    await pause(everyMs);
  }
}

/**
 * Shows what a write's run says it is doing while the caller waits for it: from WATCH_AFTER_MS on, asks the run's
 * current details every WATCH_EVERY_MS and tells `onDetails` each new line. The one way every write shows progress
 * (a drop that drains, a recall, a purge, a cancel's compensation).
 */
export function watchDetails(
  client: Client,
  workflowId: string,
  until: Promise<unknown>,
  onDetails: (details: string) => void,
  signal: AbortSignal,
): Promise<void> {
  return watchChanges(
    () => currentDetails(client, workflowId),
    (details) => details,
    until,
    onDetails,
    signal,
    { afterMs: WATCH_AFTER_MS, everyMs: WATCH_EVERY_MS },
  );
}
