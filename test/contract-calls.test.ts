import { randomUUID } from 'node:crypto';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { Harness, workflowBundleFile } from './support/harness';
import { waitFor } from './support/wait';
import { runsOf } from './support/runs';
import { startCrashingWorker } from './support/crashing-worker';
import { workflowIdFor } from '../domain/operations';
import { CONTRACT_CALLS, contractWorkflowType, type ContractCallName } from '../domain/contract';
import * as workflows from '../workflows';

/**
 * The contract's calls as a service in another language makes them: a workflow started by its type name
 * (`tablefate.v1.create`) with the request as plain JSON, its answer read back as JSON, its failure read by type name.
 * Nothing of tablefate's code on the caller's side: only a Temporal client.
 */
let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.close();
});

/** Starts the call `name` by its workflow type, with an id of the caller's, and waits for its answer. */
function call(name: ContractCallName, request: unknown, workflowId = `svc-${name}-${randomUUID()}`): Promise<Record<string, unknown>> {
  return h.temporal.workflow.execute(contractWorkflowType(name), {
    taskQueue: h.taskQueue,
    workflowId,
    args: [request],
    // The contract's rule: the same id joins the run going on, and does not start a closed one again.
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
  });
}

/** The failure a call ended with: its type name, retryability and message, as any SDK reads them. */
async function failureOf(name: ContractCallName, request: unknown): Promise<ApplicationFailure> {
  const err = await call(name, request).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowFailedError);
  const cause = (err as WorkflowFailedError).cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  return cause as ApplicationFailure;
}

test('every call of the contract is a workflow type the worker runs', () => {
  const exported = Object.keys(workflows).filter((name) => name.startsWith('tablefate.'));
  expect(exported.sort()).toEqual(CONTRACT_CALLS.map(contractWorkflowType).sort());
});

test('create, trash, undelete and purge by type name: each answers the table as the SDK does, in JSON', async () => {
  const created = await call('create', { table: 'svc.orders', shards: 2 });
  expect(created).toMatchObject({ namespace: 'svc', name: 'orders', state: 'READY', shards: 2 });
  expect(await h.catalog.getTable(created.id as number)).toMatchObject({ state: 'READY' });

  // The trash answers once the table is TRASHED, as the SDK's does, while its expiry timer runs on. Who dropped it is
  // the call: its workflow type and the caller's workflow id.
  const trashId = `svc-trash-${randomUUID()}`;
  const trashed = await call('trash', { table: 'svc.orders', retentionSeconds: 3600 }, trashId);
  expect(trashed).toMatchObject({ id: created.id, state: 'TRASHED', droppedBy: `tablefate.v1.trash ${trashId}` });
  expect(Date.parse(trashed.expireAt as string) - Date.parse(trashed.droppedAt as string)).toBe(3600 * 1000);
  expect(await h.shardAreas(created as never)).toEqual(['trash', 'trash']);

  const recalled = await call('undelete', { table: 'svc.orders' });
  expect(recalled).toMatchObject({ id: created.id, state: 'READY', droppedAt: null, droppedBy: null });
  expect(await h.shardAreas(created as never)).toEqual(['live', 'live']);

  await call('trash', { table: 'svc.orders', retentionSeconds: 3600 });
  const purged = await call('purge', { tableId: created.id });
  expect(purged).toMatchObject({ id: created.id, state: 'PURGED' });
  expect(await h.catalog.getTable(created.id as number)).toMatchObject({ state: 'PURGED' });

  // A read answers from its plan alone.
  expect(await call('describe', { table: created.id })).toMatchObject({ id: created.id, state: 'PURGED' });
});

test('a refusal is the failure of the call, by its type name, not retried: NameTaken, OnHold, InvalidInput', async () => {
  const first = await call('create', { table: 'svc.taken', shards: 1 });
  await call('trash', { table: 'svc.taken' });
  await call('create', { table: 'svc.taken', shards: 1 });
  const taken = await failureOf('undelete', { table: first.id });
  expect(taken).toMatchObject({ type: 'NameTaken', nonRetryable: true });
  expect(taken.message).toContain('svc.taken');
  // Nothing changed: the table is still in the trash.
  expect(await h.catalog.getTable(first.id as number)).toMatchObject({ state: 'TRASHED' });

  await call('hold', { table: first.id, reason: 'audit' });
  const held = await failureOf('purge', { tableId: first.id });
  expect(held).toMatchObject({ type: 'OnHold', nonRetryable: true });
  expect(held.message).toContain('audit');

  const invalid = await failureOf('create', { table: 'Not A Name' });
  expect(invalid).toMatchObject({ type: 'InvalidInput', nonRetryable: true });
  // Only what a person would give: a field of tablefate's own is refused, not passed on.
  expect(await failureOf('create', { table: 'svc.inner', catalogId: 'x' })).toMatchObject({ type: 'InvalidInput' });
});

test('the same request id joins the same run: one table, one answer', async () => {
  const workflowId = `svc-create-${randomUUID()}`;
  const [a, b] = await Promise.all([
    call('create', { table: 'svc.once', shards: 3 }, workflowId),
    call('create', { table: 'svc.once', shards: 3 }, workflowId),
  ]);
  expect(a).toEqual(b);
  expect((await h.catalog.listTables({ includeTrashed: true })).filter((t) => t.name === 'once')).toHaveLength(1);
});

test('a cancel of a call cancels its operation: the drop held in its drain is taken back, and the call ends cancelled', async () => {
  const table = await h.client.create({ table: 'svc.cancelled', shards: 2 });
  const lease = await h.client.acquireLease(table.id, { ttlSeconds: 600 });
  const workflowId = `svc-trash-${randomUUID()}`;
  const run = await h.temporal.workflow.start(contractWorkflowType('trash'), {
    taskQueue: h.taskQueue,
    workflowId,
    args: [{ table: 'svc.cancelled', drainTimeoutSeconds: 120 }],
  });
  await waitFor(
    () => h.catalog.getTable(table.id),
    (t) => t?.state === 'DRAINING',
    { what: 'the drop to wait for the lease' },
  );
  await run.cancel();
  const ended = await run.result().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(ended).toBeInstanceOf(WorkflowFailedError);
  expect((ended as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
  // Taken back before the call ended: READY, its shards live, the drop's run closed as cancelled, the lease kept.
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY' });
  expect(await h.shardAreas(table)).toEqual(['live', 'live']);
  const trashRun = await h.temporal.workflow.getHandle(workflowIdFor.trash(table.id, h.catalog.id)).describe();
  expect(trashRun.status.name).toBe('CANCELLED');
  expect((await h.client.listLeases({ table: table.id })).map((l) => l.id)).toEqual([lease.id]);
});

describe('a worker killed while a call waits for its operation', () => {
  // The operation's lost workflow task is repeated after 3 s, the call's activity after its heartbeat timeout.
  let k: Harness;
  let bundleFile: string;
  beforeAll(async () => {
    k = await Harness.start({ startWorker: false, workflowTaskTimeoutMs: 3_000 });
    bundleFile = await workflowBundleFile();
  });
  afterAll(async () => {
    await k.close();
  });

  test('a trash called by type name answers TRASHED once a worker is back, one trash run, its shards in the trash', async () => {
    await k.startWorker();
    const table = await k.client.create({ table: 'svc.killed', shards: 2 });
    await k.stopWorker();
    // Dies right after the trash committed: the trash's workflow task and the call's activity die with it.
    const worker = await startCrashingWorker({
      on: k,
      bundleFile,
      // (The trash's second call of its steps commits it.)
      activity: 'runStepsHere',
      env: { CRASH_ON_CALL: '2' },
    });
    const workflowId = `svc-trash-${randomUUID()}`;
    const answer = k.temporal.workflow.execute(contractWorkflowType('trash'), {
      taskQueue: k.taskQueue,
      workflowId,
      args: [{ table: 'svc.killed', retentionSeconds: 3600 }],
    });
    expect(await worker.exited).toBe('SIGKILL');
    expect(await k.catalog.getTable(table.id)).toMatchObject({ state: 'TRASHED' });
    await k.startWorker();
    expect(await answer).toMatchObject({ id: table.id, state: 'TRASHED' });
    expect(await k.shardAreas(table)).toEqual(['trash', 'trash']);
    // The call's second attempt joined the first attempt's run: the table has one drop run, which ended at TRASHED, and
    // the trash's expiry it started waits.
    const dropRuns = await waitFor(
      () => runsOf(k.temporal, workflowIdFor.trash(table.id, k.catalog.id)),
      (runs) => runs.length > 0 && runs.every((r) => r.status !== 'RUNNING'),
      { what: 'the drop run listed closed' },
    );
    expect(dropRuns.map((r) => r.status)).toEqual(['COMPLETED']);
    const expiryRun = await k.temporal.workflow.getHandle(workflowIdFor.expiry(table.id, k.catalog.id)).describe();
    expect(expiryRun.status.name).toBe('RUNNING');
    const history = await k.temporal.workflow.getHandle(workflowId).fetchHistory();
    const attempts = history
      .events!.filter((e) => e.activityTaskStartedEventAttributes)
      .map((e) => e.activityTaskStartedEventAttributes!.attempt);
    expect(attempts).toEqual([2]);
    await k.stopWorker();
  }, 60_000);
});
