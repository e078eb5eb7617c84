import { HandlerUnfinishedPolicy } from '@temporalio/common';
import {
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  condition,
  ContinueAsNew,
  isCancellation,
  log,
  patched,
  setHandler,
} from '@temporalio/workflow';
import { OPERATIONS, type TrashInput } from '../domain/operations';
import { trashedUpdate, type ShardChange, type TrashTimerState } from '../domain/contracts';
import { toTableInfo, type TableInfo, type TableRecord } from '../domain/table';
import { operationCalls, type OperationCalls } from './activities';
import { withLock } from './lock';
import { PATCHES } from './patches';
import { changeState, everyShard, runSteps, SHARDS } from './steps';
import { inThatTrash, trashTimer, waitOutExpiry } from './trash-expiry';

/**
 * Soft-deletes a table: it becomes unreachable at once and its shards move to the trash. The caller is
 * answered (through the `trashed` update) as soon as the table is TRASHED; the workflow then sleeps on a
 * durable timer until the retention runs out and purges the table, unless an undelete or a manual purge
 * ends the timer first (trash-expiry.ts).
 */
export async function trashTable(input: TrashInput): Promise<TrashTimerState> {
  const caller = answerTheCaller(input);
  const timer = trashTimer();
  const calls = operationCalls(input.catalogId);
  let trashed: TableRecord;
  try {
    if (input.rearm) {
      // The reconciler's run for a trash whose own run was lost: it takes over that trash's expiry, if it has one left.
      const found = await inThatTrash(calls, input.tableId, input.rearm.droppedAt);
      if ('ended' in found) {
        log.info('re-armed trash found the table no longer in that trash', { tableId: input.tableId, ended: found.ended });
        timer.state.ended = found.ended;
        return timer.state;
      }
      trashed = found.table;
    } else {
      trashed = await moveToTrash(calls, input, timer.arm);
    }
    timer.arm(trashed);
  } catch (err) {
    // A long lock wait starts over in a new run, which answers the caller (who asks again: see the client).
    if (err instanceof ContinueAsNew) throw err;
    await caller.failed(err);
    throw err;
  }
  caller.trashed(trashed);
  return waitOutExpiry(calls, trashed, input, timer);
}

/** The steps of a trash, under the table's lock: READY -> TRASHING, shards to the trash area, TRASHED with its expiry. */
function moveToTrash(calls: OperationCalls, input: TrashInput, committed: (table: TableRecord) => void): Promise<TableRecord> {
  const [tableLock] = OPERATIONS.trash.locks(input);
  return withLock(calls, tableLock!, { policy: input.lockWait, input }, () =>
    runSteps(
      changeState(calls, input.tableId, ['READY', 'TRASHING'], input.expectedName),
      everyShard(calls, 'move shards to trash', drained(SHARDS.toTrash, input), { undo: SHARDS.backFromTrash }),
      {
        name: 'commit trashed',
        call: async (table) => {
          const trashed = await calls.commitTrash({ tableId: table.id, now: Date.now(), retentionSeconds: input.retentionSeconds });
          committed(trashed);
          return trashed;
        },
      },
    ),
  );
}

/** The move to the trash with the drop's drain deadline, when it names one (the PostgreSQL driver's; files ignore it). */
const drained = (change: ShardChange, input: TrashInput): ShardChange =>
  input.drainTimeoutSeconds === undefined || change.method !== 'moveShard'
    ? change
    : { ...change, drainTimeoutMs: input.drainTimeoutSeconds * 1000 };

type Outcome = { table: TableInfo } | { error: unknown };

/**
 * The `trashed` update, through which the caller waits for its answer: the table once it is TRASHED, or why the trash
 * failed once what it had done is taken back.
 */
function answerTheCaller(input: TrashInput) {
  let outcome: Outcome | undefined;
  setHandler(
    trashedUpdate,
    async () => {
      // A cancel request must not answer the caller while the trash is still being taken back: the answer waits for
      // the compensation (runs started before the patch answered at once, and compensated after).
      const answered = () => condition(() => outcome !== undefined);
      await (patched(PATCHES.answerAfterCompensation) ? CancellationScope.nonCancellable(answered) : answered());
      if ('error' in outcome!) {
        // Cancelled, and taken back: the caller hears the cancellation itself, not the activity it interrupted.
        if (isCancellation(outcome.error)) throw new CancelledFailure('the trash was cancelled, and what it had done was taken back');
        throw outcome.error;
      }
      return outcome!.table;
    },
    {
      // A run that continues as new during a long lock wait leaves its caller to ask the next run.
      unfinishedPolicy: HandlerUnfinishedPolicy.ABANDON,
      // A caller that joins this run while it is still trashing gets the same answer; once the table is in
      // the trash, only the request that started the run may read the answer. Anyone else (a new trash
      // after an undelete, say) must not be handed this old one.
      validator: (requestId) => {
        if (outcome !== undefined && requestId !== input.requestId) {
          throw ApplicationFailure.nonRetryable('this trash run has already answered', 'TrashRunAnswered');
        }
      },
    },
  );
  return {
    /** The table is in the trash: the caller hears it. */
    trashed(table: TableRecord): void {
      outcome = { table: toTableInfo(table) };
    },
    /** The trash failed, and what it had done is taken back: every caller waiting hears why before the run ends. */
    async failed(error: unknown): Promise<void> {
      outcome = { error };
      await condition(allHandlersFinished);
    },
  };
}
