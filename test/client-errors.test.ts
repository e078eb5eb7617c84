import { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, RetryState, TerminatedFailure, TimeoutFailure, TimeoutType } from '@temporalio/common';
import { failureOf, sleep } from './support/wait';
import { Harness } from './support/harness';
import { cancelHeard } from './support/runs';
import { promptAndSlowHarnesses, RenameGate } from './support/rename-gate';
import {
  OPERATION_FAILURE_TYPES,
  OperationFailedError,
  TableExistsError,
  TableFateError,
  TableInTrashError,
  WrongStateError,
} from '../client';
import { applicationFailureOf, toTableFateError } from '../client/errors';
import { workflowIdFor } from '../domain/operations';

/*
 * However an operation fails, the SDK's caller gets a TableFateError with a `type`, never a raw Temporal error:
 * proved here on the real paths (a storage fault, a worker of another catalog, a workflow terminated or
 * cancelled while the caller waits), and for every failure type on the mapping itself.
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
    await gate.someoneWaiting();
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

// A create's shard changes run in its workflow task (local activities): a cancel request reaches the workflow when
// that task hands over, which a long change does every 8 s (80 % of the task's timeout). The create then stops
// its change and compensates.
test('a create whose workflow is cancelled while the caller waits is OperationFailedError WorkflowCancelled, and is compensated', async () => {
  const workflowId = workflowIdFor.create({ namespace: 'errs', name: 'cancelled' }, slow.catalog.id);
  const run = slow.temporal.workflow.getHandle(workflowId);
  gate.hold();
  let call: Promise<unknown>;
  try {
    call = failureOf(slow.client.create({ table: 'errs.cancelled', shards: 2 }));
    await gate.someoneWaiting();
    await run.cancel();
    await cancelHeard(run);
    await sleep(500);
  } finally {
    gate.open(); // the compensation needs the disk too
  }
  const err = await call;
  expect(err).toBeInstanceOf(OperationFailedError);
  expect(err).toMatchObject({ type: 'WorkflowCancelled', workflowId });
  expect((err as Error).message).toContain('tablefate describe errs.cancelled');
  const table = await slow.catalog.findByName({ namespace: 'errs', name: 'cancelled' });
  expect(table?.state).toBe('CREATE_FAILED');
  expect(await slow.shardAreas({ ...table!, shards: 2, createdAt: '', droppedAt: null, expireAt: null, purgedAt: null })).toEqual([
    null,
    null,
  ]);
  // Its own locks are released (the trash terminated above may still hold its table's lock: nobody ended that run).
  expect((await slow.catalog.listLocks()).filter((lock) => lock.workflowId === workflowId)).toEqual([]);
}, 40_000);

describe('every way a workflow can fail becomes a typed error', () => {
  const ctx = { workflowId: 'trash:7@c0ffee', address: '127.0.0.1:7233', check: '`tablefate describe 7`' };
  const failed = (cause: Error) => new WorkflowFailedError('Workflow execution failed', cause, RetryState.NON_RETRYABLE_FAILURE);

  test.each(OPERATION_FAILURE_TYPES.filter((t) => !t.startsWith('Workflow') && t !== 'OperationFailed'))(
    'the internal failure type %s becomes OperationFailedError of that type',
    (type) => {
      const err = toTableFateError(failed(ApplicationFailure.nonRetryable(`it was ${type}`, type)), ctx);
      expect(err).toBeInstanceOf(OperationFailedError);
      expect(err).toMatchObject({ type, workflowId: ctx.workflowId, message: `it was ${type} (workflow trash:7@c0ffee)` });
    },
  );

  test('a failure type the client does not know is OperationFailedError OperationFailed, with Temporal type and message', () => {
    const err = toTableFateError(failed(ApplicationFailure.nonRetryable('the flux capacitor', 'Frobnicated')), ctx);
    expect(err).toBeInstanceOf(OperationFailedError);
    expect(err).toMatchObject({ type: 'OperationFailed', workflowId: ctx.workflowId });
    expect((err as Error).message).toBe(
      'workflow trash:7@c0ffee failed: Frobnicated: the flux capacitor; check the table with `tablefate describe 7`',
    );
    // Nor does a failure with no type at all, or one that is not an application failure, stay raw.
    expect(toTableFateError(failed(ApplicationFailure.create({ message: 'untyped' })), ctx)).toMatchObject({ type: 'OperationFailed' });
    expect(
      toTableFateError(new WorkflowFailedError('Workflow execution failed', undefined, RetryState.NON_RETRYABLE_FAILURE), ctx),
    ).toMatchObject({
      type: 'OperationFailed',
    });
  });

  test('terminated, cancelled and timed out workflows become WorkflowTerminated, WorkflowCancelled and WorkflowTimedOut', () => {
    const cases: Array<[Error, string, RegExp]> = [
      [new TerminatedFailure('by ops'), 'WorkflowTerminated', /was terminated while this call waited for it \(by ops\)/],
      [new CancelledFailure('cancelled'), 'WorkflowCancelled', /was cancelled while/],
      [new TimeoutFailure(undefined, undefined, TimeoutType.START_TO_CLOSE), 'WorkflowTimedOut', /was timed out by Temporal while/],
    ];
    for (const [cause, type, message] of cases) {
      const err = toTableFateError(failed(cause), ctx);
      expect(err).toBeInstanceOf(OperationFailedError);
      expect({ type: (err as OperationFailedError).type, message: (err as Error).message }).toEqual({
        type,
        message: expect.stringMatching(message) as unknown,
      });
    }
  });

  test('domain failures of a workflow or of an update become their own classes', () => {
    expect(toTableFateError(failed(ApplicationFailure.nonRetryable('exists', 'TableExists')), ctx)).toBeInstanceOf(TableExistsError);
    const update = new WorkflowUpdateFailedError('Workflow Update failed', ApplicationFailure.nonRetryable('binned', 'TableInTrash'));
    expect(toTableFateError(update, ctx)).toBeInstanceOf(TableInTrashError);
    const wrong = new WrongStateError('already');
    expect(toTableFateError(wrong, ctx)).toBe(wrong);
  });

  test('an error that is not the workflow failing (a bug, a refusal of the server) is left as it is', () => {
    const bug = new TypeError('x is undefined');
    expect(toTableFateError(bug, ctx)).toBe(bug);
  });
});
