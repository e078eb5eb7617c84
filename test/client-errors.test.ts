import { failureOf, waitFor } from './support/wait';
import { Harness } from './support/harness';
import { cancelHeard } from './support/runs';
import { promptAndSlowHarnesses, RenameGate } from './support/rename-gate';
import { OperationFailedError, TableFateError } from '../client';
import { applicationFailureOf } from '../client/errors';
import { workflowIdFor } from '../domain/operations';

/*
 * However an operation fails, the SDK's caller gets a TableFateError with a `type`, never a raw Temporal error:
 * proved here on the real paths (a storage fault, a worker of another catalog, a workflow terminated or
 * cancelled while the caller waits); for every failure type on the mapping itself in test/unit/failure-mapping.test.ts.
 */

let h: Harness;
/** A worker whose storage renames wait at `gate` while it is held: operations stay half way as long as needed. */
let slow: Harness;
const gate = new RenameGate();
const harnesses = promptAndSlowHarnesses(gate);
beforeAll(() => {
  h = harnesses.prompt();
  slow = harnesses.slow();
});

test('a storage fault the trash cannot get past reaches the caller as OperationFailedError StorageFault naming the workflow', async () => {
  const table = await h.client.create({ table: 'errs.faulty', shards: 2 });
  // Shard 1's move to the trash fails for good, once: the trash compensates (its undo succeeds) and fails.
  h.storage.faults.inject({ op: 'moveShard', tableId: table.id, shard: 1, kind: 'permanent', times: 1 });
  const err = await failureOf(h.client.trash({ table: 'errs.faulty', retentionSeconds: 3600 }));
  h.storage.faults.clear();

  const workflowId = workflowIdFor.trash(table.id, h.catalog.id);
  expect(err).toBeInstanceOf(OperationFailedError);
  expect(err).toBeInstanceOf(TableFateError);
  expect(err).toMatchObject({ name: 'OperationFailedError', type: 'StorageFault', workflowId });
  expect((err as Error).message).toMatch(/injected permanent fault/);
  expect((err as Error).message).toContain(workflowId);
  // The Temporal failure stays reachable as the cause, for whoever wants its details.
  expect(applicationFailureOf(err)?.type).toBe('StorageFault');
  expect((await h.catalog.getTable(table.id))?.state).toBe('READY');
});

test('an operation picked up by a worker of another catalog is OperationFailedError WrongCatalog, and changes neither catalog', async () => {
  // A second catalog whose client starts on the first one's task queue (a misconfiguration): h's worker refuses.
  const stranger = await Harness.start({ taskQueue: h.taskQueue, startWorker: false });
  try {
    const before = await h.catalog.listTables({ includeTrashed: true });
    const err = await failureOf(stranger.client.create({ table: 'errs.stranger', shards: 1 }));
    expect(err).toBeInstanceOf(OperationFailedError);
    expect(err).toMatchObject({
      type: 'WrongCatalog',
      workflowId: workflowIdFor.create({ namespace: 'errs', name: 'stranger' }, stranger.catalog.id),
    });
    expect((err as Error).message).toContain(stranger.catalog.id);
    expect(await h.catalog.listTables({ includeTrashed: true })).toEqual(before);
    expect(await stranger.catalog.listTables({ includeTrashed: true })).toEqual([]);
  } finally {
    await stranger.close();
  }
});

test('a trash whose workflow is terminated while the caller waits is OperationFailedError WorkflowTerminated', async () => {
  const table = await slow.client.create({ table: 'errs.terminated', shards: 2 });
  const workflowId = workflowIdFor.trash(table.id, slow.catalog.id);
  gate.hold();
  try {
    const call = failureOf(slow.client.trash({ table: 'errs.terminated', retentionSeconds: 3600 }));
    await gate.someoneWaiting(table.id);
    await slow.temporal.workflow.getHandle(workflowId).terminate('an operator stopped it');
    const err = await call;
    expect(err).toBeInstanceOf(OperationFailedError);
    expect(err).toMatchObject({ type: 'WorkflowTerminated', workflowId });
    expect((err as Error).message).toMatch(new RegExp(`workflow ${workflowId} was terminated .*an operator stopped it`));
    expect((err as Error).message).toContain(`tablefate describe ${table.id}`);
  } finally {
    gate.open();
  }
});

// A create's shard change on the nodes this worker serves runs in the workflow task (since v14), where the cancel
// cannot reach it: the workflow hears the cancel when the SDK hands the task over (at 80 % of its timeout: hence the
// short task timeout this create is given), lets the change end, then compensates. (Where other workers serve the
// nodes, the change is an activity the cancel stops: test/cancel-while-moving.test.ts.)
test('a create whose workflow is cancelled while the caller waits is OperationFailedError WorkflowCancelled, and is compensated', async () => {
  const workflowId = workflowIdFor.create({ namespace: 'errs', name: 'cancelled' }, slow.catalog.id);
  const run = slow.temporal.workflow.getHandle(workflowId);
  gate.hold();
  slow.workflowTaskTimeoutMs = 3_000;
  let call: Promise<unknown>;
  try {
    call = failureOf(slow.client.create({ table: 'errs.cancelled', shards: 2 }));
    // Half way: its table prepared, and a rename of that table's files at the gate (not one an earlier test left there).
    const prepared = await waitFor(
      () => slow.catalog.findByName({ namespace: 'errs', name: 'cancelled' }),
      (t) => t !== undefined,
      { what: 'the create to prepare its table' },
    );
    await gate.someoneWaiting(prepared!.id);
    await run.cancel();
    // The workflow has heard the cancel while its shard change still waits at the gate.
    await cancelHeard(run);
    expect(gate.waiting(prepared!.id)).toBeGreaterThan(0);
  } finally {
    gate.open(); // the compensation needs the disk too
    slow.workflowTaskTimeoutMs = undefined;
  }
  const err = await call;
  expect(err).toBeInstanceOf(OperationFailedError);
  expect(err).toMatchObject({ type: 'WorkflowCancelled', workflowId });
  expect((err as Error).message).toContain('tablefate describe errs.cancelled');
  const table = await slow.catalog.findByName({ namespace: 'errs', name: 'cancelled' });
  expect(table?.state).toBe('CREATE_FAILED');
  expect(
    await slow.shardAreas({ ...table!, shards: 2, createdAt: '', droppedAt: null, expireAt: null, purgedAt: null, hold: null }),
  ).toEqual([null, null]);
  // Its own locks are released (the trash terminated above may still hold its table's lock: nobody ended that run).
  expect((await slow.catalog.listLocks()).filter((lock) => lock.workflowId === workflowId)).toEqual([]);
}, 40_000);
