import { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, RetryState, TerminatedFailure, TimeoutFailure, TimeoutType } from '@temporalio/common';
import { OPERATION_FAILURE_TYPES, OperationFailedError, TableExistsError, TableInTrashError, WrongStateError } from '../../client';
import { toTableFateError } from '../../client/errors';
import { exitCodeOfError } from '../../domain/error-meanings';
import { ServerUnreachableError } from '../../domain/errors';

/*
 * However an operation fails, the SDK's caller gets a TableFateError with a `type`, never a raw Temporal error:
 * proved here for every failure type on the mapping itself (and on the real paths in test/client-errors.test.ts).
 */

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

describe("the command line's exit code of an error (domain/error-meanings.ts)", () => {
  test("is its type's: 4 for a refusal of the table's state, 7 for an operation that ran and failed", () => {
    expect(exitCodeOfError(new WrongStateError('already'))).toBe(4);
    expect(exitCodeOfError(new OperationFailedError('LockLost', 'lost', 'trash:7@c0ffee'))).toBe(7);
  });

  test('a server lost before the start exits 6 (nothing started), after it 5 (the operation may go on)', () => {
    expect(exitCodeOfError(new ServerUnreachableError('refused', '127.0.0.1:7233'))).toBe(6);
    expect(
      exitCodeOfError(new ServerUnreachableError('lost', '127.0.0.1:7233', { mayHaveStarted: true, workflowId: 'trash:7@c0ffee' })),
    ).toBe(5);
  });
});
