import { proxyActivities } from '@temporalio/workflow';

/**
 * The floor every measurement is compared with: a workflow that runs one activity that does nothing. Nothing
 * built on Temporal can answer faster on the same server, so tablefate's operations are reported as multiples
 * of it.
 */
const { noop } = proxyActivities<{ noop(): Promise<void> }>({ startToCloseTimeout: '10s' });

export async function floorWorkflow(): Promise<void> {
  await noop();
}
