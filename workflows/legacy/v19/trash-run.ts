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
  setHandler,
} from '@temporalio/workflow';
import type { TrashRunInput } from './input';
import { trashedUpdate, type TrashTimerState } from '../../../domain/contracts';
import { toTableInfo, type TableInfo, type TableRecord } from '../../../domain/table';
import type { TrashCommitted } from '../../../activities';
import { reportOutcome } from '../../observe';
import { inThatTrash, trashTimer, waitOutExpiry, type ExpiryCalls, type TrashTimer } from './trash-expiry';

/** What a trash run is made of: how it moves the table to the trash, and the calls its expiry makes. */
export interface TrashParts {
  calls: ExpiryCalls & { requestEviction: () => Promise<void> };
  moveToTrash: (timer: TrashTimer) => Promise<TrashCommitted>;
}

/**
 * Soft-deletes a table: it becomes unreachable at once and its shards move to the trash. The caller is
 * answered (through the `trashed` update) as soon as the table is TRASHED; the workflow then sleeps on a
 * durable timer until the retention runs out and purges the table, unless an undelete or a manual purge
 * ends the timer first (trash-expiry.ts).
 */
export async function trashRun(input: TrashRunInput, { calls: expiry, moveToTrash }: TrashParts): Promise<TrashTimerState> {
  const caller = answerTheCaller(input);
  const timer = trashTimer(expiry, input.tableId);
  let trashed: TrashCommitted;
  try {
    if (input.rearm) {
      // The reconciler's run for a trash whose own run was lost: it takes over that trash's expiry, if it has one left.
      const found = await inThatTrash(expiry, input.tableId, input.rearm.droppedAt);
      if ('ended' in found) {
        log.info('re-armed trash found the table no longer in that trash', { tableId: input.tableId, ended: found.ended });
        timer.state.ended = found.ended;
        return timer.state;
      }
      trashed = found.table;
    } else {
      trashed = await moveToTrash(timer);
    }
    timer.arm(trashed);
  } catch (err) {
    // A long lock wait starts over in a new run, which answers the caller (who asks again: see the client).
    if (err instanceof ContinueAsNew) throw err;
    await caller.failed(err);
    throw err;
  }
  // The trash is off where the table was dropped (trash.enabled false): it is deleted at once, unless it is held.
  if (trashed.policy?.enabled === false && !trashed.hold) {
    const purged = await purgeAtOnce(expiry, trashed, input);
    if (purged) {
      timer.state.ended = 'purged';
      caller.trashed(purged);
      timer.refuseRetentions();
      await condition(allHandlersFinished);
      return timer.state;
    }
  }
  caller.trashed(trashed);
  // A space cap where it was dropped: the cap's run looks at the trash again now that it holds this table too.
  if (trashed.policy && trashed.policy.maxBytes !== null) await expiry.requestEviction();
  return waitOutExpiry(expiry, trashed, input, timer);
}

/**
 * The trash is off (trash.enabled false): the table just trashed is purged in the same run, before its caller is
 * answered (with the PURGED table). A purge that fails leaves it in the trash, for its expiry to purge (the caller
 * hears TRASHED); one held meanwhile stays there until it is released.
 */
async function purgeAtOnce(calls: ExpiryCalls, trashed: TableRecord, input: TrashRunInput): Promise<TableRecord | undefined> {
  const droppedAt = trashed.droppedAt!;
  try {
    const table = await calls.purge(
      { tableId: trashed.id, trigger: 'policy', droppedAt, catalogId: input.catalogId, lockWait: input.lockWait },
      { policy: input.lockWait, input: { ...input, rearm: { droppedAt } } },
    );
    return table.state === 'PURGED' ? table : undefined;
  } catch (err) {
    if (err instanceof ContinueAsNew) throw err;
    log.warn('the trash is disabled, but purging the table at once failed: it waits in the trash for its expiry', {
      tableId: trashed.id,
      error: String(err),
    });
    return undefined;
  }
}

type Outcome = { table: TableInfo } | { error: unknown };

/**
 * The `trashed` update, through which the caller waits for its answer: the table once it is TRASHED, or why the trash
 * failed once what it had done is taken back.
 */
function answerTheCaller(input: TrashRunInput) {
  let outcome: Outcome | undefined;
  setHandler(
    trashedUpdate,
    async () => {
      // A cancel request must not answer the caller while the trash is still being taken back: the answer waits for
      // the compensation.
      await CancellationScope.nonCancellable(() => condition(() => outcome !== undefined));
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
      reportOutcome('succeeded');
    },
    /** The trash failed, and what it had done is taken back: every caller waiting hears why before the run ends. */
    async failed(error: unknown): Promise<void> {
      outcome = { error };
      await condition(allHandlersFinished);
    },
  };
}
