import { CancellationScope, condition, allHandlersFinished, ContinueAsNew, log, setHandler } from '@temporalio/workflow';
import type { PurgeInput } from '../../../domain/operation-inputs';
import type { TrashRunInput } from './input';
import { DEFAULT_EXPIRY_RETRY } from '../../../domain/backoff';
import { endTimerSignal, retentionUpdate, trashChangedSignal, trashTimerQuery, type TrashTimerState } from '../../../domain/contracts';
import { toTableInfo, type TableInfo, type TableRecord } from '../../../domain/table';
import { MAX_RETENTION_SECONDS, MIN_RETENTION_SECONDS } from '../../../domain/limits';
import { WrongStateError } from '../../../domain/errors';
import { notTrashedYet, trashEnded } from '../../../domain/refusals';
import { asFailure, domainFailure } from '../../failures';
import { pauseOrStartOver, type Waiting } from '../../wait-turn';
import { reportExpiryPurgeFailure, waiting as waitingFor } from '../../observe';

type Ending = 'restored' | 'purged';

/** What a trash's expiry asks of the catalog, and how it purges (under the table's lock, like any purge). */
export interface ExpiryCalls {
  getTable: (tableId: number) => Promise<TableRecord | null>;
  changeExpiry: (args: { tableId: number; droppedAt: number; expireAt: number }) => Promise<TableRecord>;
  purge: (input: PurgeInput, waiting: Waiting) => Promise<TableRecord>;
}

/**
 * A trash's expiry: the drop time and expiry it waits for, and what ends it before then. An undelete or a purge
 * ends it by signal (or, since v5, through the catalog's activity that sends it), and tools read it by query. A new
 * retention moves it (the `retention` update: the catalog first, then the timer), and the `trashChanged` signal wakes
 * whatever the run waits on to read its table again (a lease or a hold released).
 */
export function trashTimer(calls: ExpiryCalls, tableId: number) {
  const state: TrashTimerState = { droppedAt: null, expireAt: null, ended: null };
  /** The expiry in epoch ms (state.expireAt is its ISO form, what the query shows). */
  let expireAtMs: number | null = null;
  let woken = false;
  setHandler(trashChangedSignal, () => {
    woken = true;
  });
  /**
   * Retention changes asked and not yet answered. The run's own wait makes each one's catalog change, one at a time, and
   * never the handler: two handlers' local activities side by side in one workflow task do not replay in the order they
   * ran (the timer's cancel lands between their answers the first time, after both on replay).
   */
  const retentions: Array<{ seconds: number; outcome?: { table: TableInfo } | { error: unknown } }> = [];
  setHandler(
    retentionUpdate,
    async (retentionSeconds) => {
      const request: (typeof retentions)[number] = { seconds: retentionSeconds };
      retentions.push(request);
      await condition(() => request.outcome !== undefined);
      if ('error' in request.outcome!) throw request.outcome.error;
      return request.outcome!.table;
    },
    {
      validator: (retentionSeconds) => {
        if (!Number.isInteger(retentionSeconds) || retentionSeconds < MIN_RETENTION_SECONDS || retentionSeconds > MAX_RETENTION_SECONDS) {
          throw asFailure(new WrongStateError(`a retention is ${MIN_RETENTION_SECONDS} to ${MAX_RETENTION_SECONDS} whole seconds`));
        }
        if (state.droppedAt === null) throw asFailure(notTrashedYet(tableId));
        if (state.ended !== null) throw asFailure(trashEnded(tableId, state.ended));
      },
    },
  );
  const pending = () => retentions.filter((r) => r.outcome === undefined);
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
      expireAtMs = table.expireAt;
      state.expireAt = new Date(table.expireAt!).toISOString();
      const early = heardEarly.find((end) => end.droppedAt === table.droppedAt);
      if (early) {
        state.ended ??= early.reason;
      }
    },
    /** The expiry the run waits for now (moved by a new retention). */
    expireAt: (): number => expireAtMs!,
    /** Whether the run was told to read its table again since it last asked (and forgets it). */
    takeWake: (): boolean => {
      const was = woken;
      woken = false;
      return was;
    },
    /** For a `condition`: has the run been told to read its table again. */
    isWoken: (): boolean => woken,
    /** For a `condition`: has the run been told to read its table again, or asked for a new retention. */
    hasWork: (): boolean => woken || pending().length > 0,
    /**
     * Makes the retention changes asked, in the order they came: the catalog's expiry first (`describe` reads it), then
     * the timer's, which the wait re-arms on its next turn. Each asker hears the table, or why it was refused.
     */
    applyRetentions: async (): Promise<void> => {
      for (let request = pending()[0]; request; request = pending()[0]) {
        try {
          const table = await calls.changeExpiry({
            tableId,
            droppedAt: state.droppedAt!,
            expireAt: state.droppedAt! + request.seconds * 1000,
          });
          expireAtMs = table.expireAt;
          state.expireAt = new Date(table.expireAt!).toISOString();
          request.outcome = { table: toTableInfo(table) };
        } catch (err) {
          request.outcome = { error: domainFailure(err) };
        }
      }
    },
    /** Answers the retention changes still waiting, when the trash ends before it could make them. */
    refuseRetentions: (): void => {
      for (const request of pending()) {
        request.outcome = {
          error: asFailure(trashEnded(tableId, state.ended ?? 'expired')),
        };
      }
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
export function waitOutExpiry(calls: ExpiryCalls, trashed: TableRecord, input: TrashRunInput, timer: TrashTimer): Promise<TrashTimerState> {
  const { state } = timer;
  const waiting = () => `table ${trashed.id} is in the trash until ${state.expireAt}; recall it or purge it to end this trash`;
  let cancelRequested = false;
  const say = (details: string) => waitingFor(cancelRequested ? `cancel request ignored: ${details}` : details);
  say(waiting());
  CancellationScope.current().cancelRequested.catch(() => {
    log.warn('cancel request ignored: a trashed table keeps its expiry', { tableId: trashed.id, expireAt: state.expireAt });
    cancelRequested = true;
    say(waiting());
  });
  return CancellationScope.nonCancellable(async () => {
    for (;;) {
      // The durable timer: it lives in the Temporal server's history, so it fires even if every worker and the
      // server restarted in between. A new retention wakes the run, which waits again for the expiry it moved to.
      const satisfied = await condition(() => state.ended !== null || timer.hasWork(), Math.max(timer.expireAt() - Date.now(), 1), {
        summary: `purge table ${trashed.id} at ${state.expireAt}`,
      });
      if (satisfied) {
        if (state.ended !== null) break;
        timer.takeWake();
        await timer.applyRetentions();
        say(waiting());
        continue;
      }
      state.ended = 'expired';
      const outcome = await purgeOnExpiry(calls, trashed, input);
      if (outcome === 'done') break;
      // Not yet: the expiry was moved later meanwhile, or the table is held, and its release wakes the run (it also
      // looks again every day, should a wake be lost).
      state.ended = null;
      if (outcome === 'held') {
        say(`table ${trashed.id} expired at ${state.expireAt} but is on hold: it is purged once the hold is released`);
        await condition(() => state.ended !== null || timer.hasWork(), '1 day', {
          summary: `look again at held table ${trashed.id} (its release wakes the run sooner)`,
        });
        timer.takeWake();
        await timer.applyRetentions();
      }
      say(waiting());
    }
    timer.refuseRetentions();
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
async function purgeOnExpiry(calls: ExpiryCalls, trashed: TableRecord, input: TrashRunInput): Promise<'done' | 'held' | 'later'> {
  const { id: tableId, droppedAt } = trashed;
  const purge: PurgeInput = { tableId, trigger: 'expiry', droppedAt: droppedAt!, catalogId: input.catalogId, lockWait: input.lockWait };
  const rearmed: TrashRunInput = { ...input, rearm: { droppedAt: droppedAt! } };
  const pace = input.expiryRetry ?? DEFAULT_EXPIRY_RETRY;
  for (let attempt = 0; ; attempt++) {
    try {
      const table = await calls.purge(purge, { policy: input.lockWait, input: rearmed });
      // Purged, or found no longer in this trash (recalled, or trashed again): the expiry is over.
      if (table.state === 'PURGED' || table.droppedAt !== droppedAt) return 'done';
      // Still TRASHED in this trash: held, or its retention was made longer while the timer fired.
      if (table.state === 'TRASHED' && table.hold) return 'held';
      if (table.state === 'TRASHED' && table.expireAt! > Date.now()) return 'later';
    } catch (err) {
      if (err instanceof ContinueAsNew) throw err;
      log.warn('purge on expiry failed; will try again', { tableId, attempt, error: String(err) });
      reportExpiryPurgeFailure();
    }
    const now = await calls.getTable(tableId);
    if (!now || now.state === 'PURGED' || now.droppedAt !== droppedAt) return 'done';
    await pauseOrStartOver(pace, attempt + 1, rearmed, {
      why: 'purge on expiry still failing; continuing as new to keep the history short',
      about: { tableId, attempt },
      summary: `try again to purge table ${tableId} (try ${attempt + 2})`,
    });
  }
}

/**
 * A re-armed trash: the table as the trash at `droppedAt` left it (TRASHED, or PURGING from a purge that stopped
 * past its point of no return, which the expiry finishes), or how that trash ended (purged, or recalled: a table
 * trashed again since is in another trash, whose own run waits for it).
 */
export async function inThatTrash(
  calls: ExpiryCalls,
  tableId: number,
  droppedAt: number,
): Promise<{ table: TableRecord } | { ended: Ending }> {
  const table = await calls.getTable(tableId);
  if (table && (table.state === 'TRASHED' || table.state === 'PURGING') && table.droppedAt === droppedAt) return { table };
  return { ended: !table || table.state === 'PURGED' ? 'purged' : 'restored' };
}
