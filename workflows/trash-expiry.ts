import {
  CancellationScope,
  condition,
  allHandlersFinished,
  continueAsNew,
  ContinueAsNew,
  log,
  patched,
  setCurrentDetails,
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import { DEFAULT_EXPIRY_RETRY, pauseAfter, type PurgeInput, type TrashInput } from '../domain/operations';
import { endTimerSignal, trashTimerQuery, type TrashTimerState } from '../domain/contracts';
import type { TableRecord } from '../domain/table';
import type { OperationCalls } from './activities';
import { PATCHES, purgeAsChild } from './patches';
import { purgeSteps } from './purge';
import type { trashTable } from './trash';

type Ending = 'restored' | 'purged';

/**
 * A trash's expiry: the drop time and expiry it waits for, and what ends it before then. An undelete or a purge
 * ends it by signal (or, since v5, through the catalog's activity that sends it), and tools read it by query.
 */
export function trashTimer() {
  const state: TrashTimerState = { droppedAt: null, expireAt: null, ended: null };
  // An end can be heard before this run knows its own drop time: its first workflow task (which commits the trash)
  // was lost after the commit, and an undelete or purge ended the trash meanwhile. Kept, it is applied once armed.
  const heardEarly: Array<{ reason: Ending; droppedAt: number }> = [];
  setHandler(endTimerSignal, (reason, droppedAt) => {
    if (state.droppedAt === droppedAt) state.ended ??= reason;
    else if (state.droppedAt === null) heardEarly.push({ reason, droppedAt });
  });
  setHandler(trashTimerQuery, () => state);
  return {
    state,
    /** From the commit on, an undelete or a purge may end this trash: the timer knows which trash that is. */
    arm: (table: TableRecord): void => {
      state.droppedAt = table.droppedAt;
      state.expireAt = new Date(table.expireAt!).toISOString();
      const early = heardEarly.find((end) => end.droppedAt === table.droppedAt);
      if (early && patched(PATCHES.endHeardBeforeArmed)) state.ended ??= early.reason;
    },
  };
}

export type TrashTimer = ReturnType<typeof trashTimer>;

/**
 * Waits for the table's expiry and purges it then, unless the trash ends first. From here on the table is in the trash
 * and this run is its expiry: a cancel request (the web UI's "Request Cancellation", say) must not lose it, so the wait
 * and the purge run where cancellation cannot reach, and the request is answered with why and what ends a trash
 * instead.
 */
export function waitOutExpiry(calls: OperationCalls, trashed: TableRecord, input: TrashInput, timer: TrashTimer): Promise<TrashTimerState> {
  const { state } = timer;
  const waiting = `table ${trashed.id} is in the trash until ${state.expireAt}; recall it or purge it to end this trash`;
  setCurrentDetails(waiting);
  CancellationScope.current().cancelRequested.catch(() => {
    log.warn('cancel request ignored: a trashed table keeps its expiry', { tableId: trashed.id, expireAt: state.expireAt });
    setCurrentDetails(`cancel request ignored: ${waiting}`);
  });
  return CancellationScope.nonCancellable(async () => {
    // The durable timer: it lives in the Temporal server's history, so it fires even if every worker and the
    // server restarted in between.
    const ended = await condition(() => state.ended !== null, Math.max(trashed.expireAt! - Date.now(), 1));
    if (!ended) {
      state.ended = 'expired';
      await purgeOnExpiry(calls, trashed, input);
    }
    await condition(allHandlersFinished);
    return state;
  });
}

/**
 * Purges the table at its expiry, again and again until it is purged or no longer in this trash: an expiry must not
 * be lost to a purge that failed, or to a manual purge that was running and then failed. The purge's steps run
 * here, under the table's lock like any purge (a manual one waits for it, or it for the manual one). The tries are
 * paced by `input.expiryRetry` (DEFAULT_EXPIRY_RETRY: some two hours of them a run); past a run's share the trash
 * continues as new, re-armed on the same drop time, so that its history stays short however long the purge keeps
 * failing. A lock wait that outgrows its run does the same.
 */
async function purgeOnExpiry(calls: OperationCalls, trashed: TableRecord, input: TrashInput): Promise<void> {
  const { id: tableId, droppedAt, namespace, name } = trashed;
  const purge: PurgeInput = { tableId, trigger: 'expiry', droppedAt: droppedAt!, catalogId: input.catalogId, lockWait: input.lockWait };
  const rearmed: TrashInput = { ...input, rearm: { droppedAt: droppedAt! } };
  const pace = input.expiryRetry ?? DEFAULT_EXPIRY_RETRY;
  const failed = (attempt: number) => (err: unknown) =>
    log.warn('purge on expiry failed; will try again', { tableId, attempt, error: String(err) });
  for (let attempt = 0; ; attempt++) {
    if (patched(PATCHES.expiryPurgesInTrashRun)) {
      try {
        const table = await purgeSteps(calls, purge, { policy: input.lockWait, input: rearmed });
        // Purged, or found no longer in this trash (recalled, or trashed again): the expiry is over.
        if (table.state === 'PURGED' || table.droppedAt !== droppedAt) return;
      } catch (err) {
        if (err instanceof ContinueAsNew) throw err;
        failed(attempt)(err);
      }
    } else {
      await purgeAsChild(purge, { namespace, name }, failed(attempt));
    }
    const now = await calls.getTable(tableId);
    if (!now || now.state === 'PURGED' || now.droppedAt !== droppedAt) return;
    const bounded = attempt + 1 >= pace.attemptsPerRun || workflowInfo().continueAsNewSuggested;
    if (bounded && patched(PATCHES.expiryRetriesContinueAsNew)) {
      log.info('purge on expiry still failing; continuing as new to keep the history short', { tableId, attempt });
      await continueAsNew<typeof trashTable>(rearmed);
    }
    await sleep(pauseAfter(pace, attempt + 1));
  }
}

/**
 * A re-armed trash: the table as the trash at `droppedAt` left it (TRASHED, or PURGING from a purge that stopped
 * past its point of no return, which the expiry finishes), or how that trash ended (purged, or recalled: a table
 * trashed again since is in another trash, whose own run waits for it).
 */
export async function inThatTrash(
  calls: OperationCalls,
  tableId: number,
  droppedAt: number,
): Promise<{ table: TableRecord } | { ended: Ending }> {
  const table = await calls.getTable(tableId);
  if (table && (table.state === 'TRASHED' || table.state === 'PURGING') && table.droppedAt === droppedAt) return { table };
  return { ended: !table || table.state === 'PURGED' ? 'purged' : 'restored' };
}
