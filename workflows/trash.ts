import { HandlerUnfinishedPolicy, WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import {
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  ContinueAsNew,
  allHandlersFinished,
  condition,
  continueAsNew,
  executeChild,
  isCancellation,
  log,
  patched,
  setCurrentDetails,
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import {
  DEFAULT_EXPIRY_RETRY,
  lockFor,
  pauseAfter,
  searchAttributesFor,
  workflowIdFor,
  type PurgeInput,
  type TrashInput,
} from '../domain/operations';
import { toTableInfo, type TableInfo, type TableRecord } from '../domain/table';
import { operationCalls, type OperationCalls } from './activities';
import { endTimerSignal, trashedUpdate, trashTimerQuery, type TrashTimerState } from '../domain/contracts';
import { withLock } from './lock';
import { runSteps } from './steps';
import { purgeSteps, purgeTable } from './purge';

type Outcome = { table: TableInfo } | { error: unknown };

/**
 * Soft-deletes a table: it becomes unreachable at once and its shards move to the trash. The caller is
 * answered (through the `trashed` update) as soon as the table is TRASHED; the workflow then sleeps on a
 * durable timer until the retention runs out and purges the table, unless an undelete or a manual purge
 * ends the timer first.
 */
export async function trashTable(input: TrashInput): Promise<TrashTimerState> {
  let outcome: Outcome | undefined;
  const timer: TrashTimerState = { droppedAt: null, expireAt: null, ended: null };

  setHandler(
    trashedUpdate,
    async () => {
      // A cancel request must not answer the caller while the trash is still being taken back: the answer waits for
      // the compensation (runs started before the patch answered at once, and compensated after).
      const answered = () => condition(() => outcome !== undefined);
      await (patched(ANSWER_AFTER_COMPENSATION) ? CancellationScope.nonCancellable(answered) : answered());
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
  // An end can be heard before this run knows its own drop time: its first workflow task (which commits the trash)
  // was lost after the commit, and an undelete or purge ended the trash meanwhile. Kept, it is applied once armed.
  const heardEarly: Array<{ reason: 'restored' | 'purged'; droppedAt: number }> = [];
  setHandler(endTimerSignal, (reason, droppedAt) => {
    if (timer.droppedAt === droppedAt) timer.ended ??= reason;
    else if (timer.droppedAt === null) heardEarly.push({ reason, droppedAt });
  });
  setHandler(trashTimerQuery, () => timer);

  const calls = operationCalls(input.catalogId);
  let trashed: TableRecord;
  try {
    // From the commit on, an undelete or a purge may end this trash: know which trash that is before unlocking.
    const armTimer = (table: TableRecord) => {
      timer.droppedAt = table.droppedAt;
      timer.expireAt = new Date(table.expireAt!).toISOString();
      const early = heardEarly.find((end) => end.droppedAt === table.droppedAt);
      if (early && patched(END_HEARD_BEFORE_ARMED)) timer.ended ??= early.reason;
    };
    if (input.rearm) {
      const found = await inThatTrash(calls, input.tableId, input.rearm.droppedAt);
      if ('ended' in found) {
        // Recalled or purged since this trash's run was lost: there is no expiry left to wait for.
        log.info('re-armed trash found the table no longer in that trash', { tableId: input.tableId, ended: found.ended });
        timer.ended = found.ended;
        return timer;
      }
      trashed = found.table;
    } else {
      trashed = await moveToTrash(calls, input, armTimer);
    }
    armTimer(trashed);
  } catch (err) {
    // A long lock wait starts over in a new run, which answers the caller (who asks again: see the client).
    if (err instanceof ContinueAsNew) throw err;
    outcome = { error: err };
    await condition(allHandlersFinished);
    throw err;
  }
  outcome = { table: toTableInfo(trashed) };

  // From here on the table is in the trash and this run is its expiry: a cancel request (the web UI's "Request
  // Cancellation", say) must not lose it, so the wait and the purge run where cancellation cannot reach, and the
  // request is answered with why and what ends a trash instead.
  const waiting = `table ${trashed.id} is in the trash until ${timer.expireAt}; recall it or purge it to end this trash`;
  setCurrentDetails(waiting);
  CancellationScope.current().cancelRequested.catch(() => {
    log.warn('cancel request ignored: a trashed table keeps its expiry', { tableId: trashed.id, expireAt: timer.expireAt });
    setCurrentDetails(`cancel request ignored: ${waiting}`);
  });
  return CancellationScope.nonCancellable(async () => {
    // The durable timer: it lives in the Temporal server's history, so it fires even if every worker and the
    // server restarted in between.
    const ended = await condition(() => timer.ended !== null, Math.max(trashed.expireAt! - Date.now(), 1));
    if (!ended) {
      timer.ended = 'expired';
      await purgeOnExpiry(calls, trashed, input);
    }
    await condition(allHandlersFinished);
    return timer;
  });
}

/**
 * Patch: the `trashed` update answers a trash that failed or was cancelled only once its compensation is over
 * (before: a cancel request failed the update at once, while the shards were still being moved back).
 */
export const ANSWER_AFTER_COMPENSATION = 'answer-after-compensation';

/**
 * Patch: an end of this trash heard before the run knew its drop time ends the timer once it does (before: it was
 * ignored, and the run waited for its expiry to find the table gone).
 */
export const END_HEARD_BEFORE_ARMED = 'end-heard-before-armed';

/** The steps of a trash: READY -> TRASHING, shards to the trash area, TRASHED with its drop time and expiry. */
function moveToTrash(calls: OperationCalls, input: TrashInput, committed: (table: TableRecord) => void): Promise<TableRecord> {
  return withLock(calls, lockFor.table(input.tableId), { policy: input.lockWait, input }, () =>
    runSteps(
      {
        name: 'mark trashing',
        call: () =>
          calls.transition({
            tableId: input.tableId,
            from: ['READY'],
            to: 'TRASHING',
            now: Date.now(),
            expectName: input.expectedName,
          }),
        undo: (table) => calls.transition({ tableId: table.id, from: ['TRASHING'], to: 'READY', now: Date.now() }).then(() => undefined),
      },
      {
        name: 'move shards to trash',
        call: async (table) => {
          await calls.changeShards(table, { method: 'moveShard', from: 'live', to: 'trash' });
          return table;
        },
        undo: (table) => calls.changeShards(table, { method: 'moveShard', from: 'trash', to: 'live' }),
      },
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

/**
 * A re-armed trash: the table as the trash at `droppedAt` left it (TRASHED, or PURGING from a purge that stopped
 * past its point of no return, which the expiry finishes), or how that trash ended (purged, or recalled: a table
 * trashed again since is in another trash, whose own run waits for it).
 */
async function inThatTrash(
  calls: OperationCalls,
  tableId: number,
  droppedAt: number,
): Promise<{ table: TableRecord } | { ended: 'purged' | 'restored' }> {
  const table = await calls.getTable(tableId);
  if (table && (table.state === 'TRASHED' || table.state === 'PURGING') && table.droppedAt === droppedAt) return { table };
  return { ended: !table || table.state === 'PURGED' ? 'purged' : 'restored' };
}

/** The patch that bounds the expiry's retries: past the pace's attempts per run, the trash continues as new. */
export const EXPIRY_RETRIES_CONTINUE_AS_NEW = 'expiry-retries-continue-as-new';

/**
 * Patch: the expiry purges the table in the trash run itself, in the workflow task its timer starts (before: a
 * purge run as a child, which cost the trash run three more workflow tasks and the purge run its own).
 */
export const EXPIRY_PURGES_IN_TRASH_RUN = 'expiry-purges-in-trash-run';

/**
 * Purges the table at its expiry, again and again until it is purged or no longer in this trash: an expiry must not
 * be lost to a purge that failed, or to a manual purge that was running and then failed. The purge's steps run
 * here, under the table's lock like any purge (a manual one waits for it, or it for the manual one); runs started
 * before that ran them as a purge run of their own (`purge:<id>`), which outlived the trash run if it was
 * terminated. The tries are paced by `input.expiryRetry` (DEFAULT_EXPIRY_RETRY: some two hours of them a run); past a
 * run's share the trash continues as new, re-armed on the same drop time, so that its history stays short however
 * long the purge keeps failing. A lock wait that outgrows its run does the same.
 */
async function purgeOnExpiry(calls: OperationCalls, trashed: TableRecord, input: TrashInput): Promise<void> {
  const { id: tableId, droppedAt, namespace, name } = trashed;
  const catalogId = input.catalogId;
  const purge: PurgeInput = { tableId, trigger: 'expiry', droppedAt: droppedAt!, catalogId, lockWait: input.lockWait };
  const rearmed: TrashInput = { ...input, rearm: { droppedAt: droppedAt! } };
  const pace = input.expiryRetry ?? DEFAULT_EXPIRY_RETRY;
  for (let attempt = 0; ; attempt++) {
    if (patched(EXPIRY_PURGES_IN_TRASH_RUN)) {
      try {
        const table = await purgeSteps(calls, purge, { policy: input.lockWait, input: rearmed });
        // Purged, or found no longer in this trash (recalled, or trashed again): the expiry is over.
        if (table.state === 'PURGED' || table.droppedAt !== droppedAt) return;
      } catch (err) {
        if (err instanceof ContinueAsNew) throw err;
        log.warn('purge on expiry failed; will try again', { tableId, attempt, error: String(err) });
      }
    } else {
      try {
        await executeChild(purgeTable, {
          workflowId: workflowIdFor.purge(tableId, catalogId),
          args: [purge],
          typedSearchAttributes: searchAttributesFor('purge', { tableId, namespace, name }),
          parentClosePolicy: 'ABANDON',
        });
      } catch (err) {
        // Already started: a manual purge is running; see below whether it got there.
        if (!(err instanceof WorkflowExecutionAlreadyStartedError)) {
          log.warn('purge on expiry failed; will try again', { tableId, attempt, error: String(err) });
        }
      }
    }
    const now = await calls.getTable(tableId);
    if (!now || now.state === 'PURGED' || now.droppedAt !== droppedAt) return;
    const bounded = attempt + 1 >= pace.attemptsPerRun || workflowInfo().continueAsNewSuggested;
    if (bounded && patched(EXPIRY_RETRIES_CONTINUE_AS_NEW)) {
      log.info('purge on expiry still failing; continuing as new to keep the history short', { tableId, attempt });
      await continueAsNew<typeof trashTable>(rearmed);
    }
    await sleep(pauseAfter(pace, attempt + 1));
  }
}
