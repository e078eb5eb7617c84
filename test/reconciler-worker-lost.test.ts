import { temporal } from '@temporalio/proto';
import { Harness } from './support/harness';
import { startCrashingWorker } from './support/crashing-worker';
import type { reconcileTables } from '../workflows';

/*
 * A reconcile pass whose survey is lost with its worker: the survey beats while it runs, so the server tries it again
 * on a live worker once its heartbeat is missed (seconds), not at the end of its start-to-close timeout (a minute), and
 * the pass (with every later pass the schedule skips meanwhile) goes on.
 */

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.close();
});

test('a survey lost with its worker is tried again once its heartbeat is missed, and the pass answers', async () => {
  await h.client.create({ table: 'lost.survey' });
  await h.stopWorker();
  const crashing = await startCrashingWorker({
    on: h,
    activity: 'surveyHealth',
  });
  const workflowId = `reconcile@${h.catalog.id}-lost-survey`;
  const pass = h.temporal.workflow.execute<typeof reconcileTables>('reconcileTables', {
    workflowId,
    taskQueue: h.taskQueue,
    args: [{ catalogId: h.catalog.id, mode: 'report' }],
  });
  expect(await crashing.exited).toBe('SIGKILL');
  await h.startWorker();
  expect(await pass).toMatchObject({ findings: [], actions: [] });

  // The second attempt started after the first one's heartbeat timed out.
  const { events } = await h.temporal.workflow.getHandle(workflowId).fetchHistory();
  const started = events!.filter((e) => e.activityTaskStartedEventAttributes);
  const survey = started.find((e) => e.activityTaskStartedEventAttributes!.attempt === 2);
  expect(survey?.activityTaskStartedEventAttributes?.lastFailure?.timeoutFailureInfo?.timeoutType).toBe(
    temporal.api.enums.v1.TimeoutType.TIMEOUT_TYPE_HEARTBEAT,
  );
});
