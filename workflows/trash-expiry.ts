import { CancellationScope, condition, allHandlersFinished, ContinueAsNew, log, setHandler } from '@temporalio/workflow';
import type { CatalogCalls } from './catalog-calls';
import type { PurgeInput, TrashExpiryInput } from '../domain/operation-inputs';
import { DEFAULT_EXPIRY_RETRY, type Backoff } from '../domain/backoff';
import { endTimerSignal, retentionUpdate, trashChangedSignal, trashTimerQuery, type TrashTimerState } from '../domain/contracts';
import { toTableInfo, type TableInfo, type TableRecord } from '../domain/table';
import { MAX_RETENTION_SECONDS, MIN_RETENTION_SECONDS } from '../domain/limits';
import { WrongStateError } from '../domain/errors';
import { trashEnded } from '../domain/refusals';
import { asFailure, domainFailure } from './failures';
import { catalogCalls } from './catalog-calls';
import { operationRun } from './execute';
import { purge } from './purge';
import { pauseOrStartOver, type Waiting } from './wait-turn';
import { reportExpiryPurgeFailure, waiting as waitingFor } from './observe';

type Ending = 'restored' | 'purged';

/** What a trash's expiry asks of the catalog, and how it purges (under the table's lock, like any purge). */
export interface ExpiryCalls {
  getTable: (tableId: number) => Promise<TableRecord | null>;
  changeExpiry: (args: { tableId: number; droppedAt: number; expireAt: number }) => Promise<TableRecord>;
  purge: (input: PurgeInput, waiting: Waiting) => Promise<TableRecord>;
}

/**
 * How an expiry looks again at a trash whose drop is still moving its shards (a long drain of the sessions on a table, a
 * move of many shards): from a second up to every 5 s, 30 looks a run. Nothing tells it of the commit (that would put a
 * signal back on the drop's path), so a new retention asked right after such a drop waits for its next look.
 */
const COMMIT_LOOKS: Backoff = { firstMs: 1_000, maxMs: 5_000, attemptsPerRun: 30 };

/**
 * A trashed table's expiry, a run of its own (`trash:<tableId>`): started by the drop as its shards move (its commit for
 * a truncate's entry), it waits for the expiry of the trash made at `droppedAt` and purges the table then, unless that
 * trash ends first: a recall or a purge by hand ends it (the `endTimer` signal their last step sends), a new retention
 * moves it, a hold keeps the table until it is released. It first reads the table, so that a trash ended before the
 * run began (its signal had nobody to reach; or the drop's move taken back) ends it at once, and a drop still moving
 * is waited for.
 */
export async function trashExpiry(input: TrashExpiryInput): Promise<TrashTimerState> {
  const calls: ExpiryCalls & CatalogCalls = {
    ...catalogCalls(input.catalogId),
    purge: (what, waiting) => operationRun(purge, { ...what, fromTrashRun: true }, { waiting }).table(),
  };
  const timer = trashTimer(calls, input.tableId, input.droppedAt);
  // A cancel request, even one made before the run began, must not end it: waitOutExpiry says why it is ignored.
  const shielded = <T>(fn: () => Promise<T>) => CancellationScope.nonCancellable(fn);
  let found = await shielded(() => inThatTrash(calls, input.tableId, input.droppedAt));
  for (let looks = 1; 'moving' in found; looks++) {
    waitingFor(`table ${input.tableId} is going to the trash: its expiry begins when its drop commits`);
    await shielded(() =>
      pauseOrStartOver(COMMIT_LOOKS, looks, input, {
        why: "the drop is still moving the table's shards; continuing as new to keep the history short",
        about: { tableId: input.tableId },
        summary: `look again at table ${input.tableId}, going to the trash`,
      }),
    );
    found = await shielded(() => inThatTrash(calls, input.tableId, input.droppedAt));
  }
  if ('ended' in found) {
    log.info('the trash ended before its expiry began', { tableId: input.tableId, ended: found.ended });
    timer.state.ended ??= found.ended;
    timer.refuseRetentions();
    await shielded(() => condition(allHandlersFinished));
    return timer.state;
  }
  timer.arm(found.table);
  // A space cap where it was dropped: the cap's run looks at the trash again now that it holds this table too.
  if (input.requestEviction) await shielded(() => calls.requestEviction());
  return waitOutExpiry(calls, found.table, input, timer);
}

/**
 * A trash's expiry: the drop time and expiry it waits for, and what ends it before then. An undelete or a purge
 * ends it by signal (sent by the catalog activity of its last step), and tools read it by query. A new retention moves
 * it (the `retention` update: the catalog first, then the timer), and the `trashChanged` signal wakes whatever the run
 * waits on to read its table again (a hold released).
 */
export function trashTimer(calls: ExpiryCalls, tableId: number, droppedAt: number) {
  const state: TrashTimerState = { droppedAt, expireAt: null, ended: null };
  /** The expiry in epoch ms (state.expireAt is its ISO form, what the query shows). */
  let expireAtMs: number | null = null;
  let woken = false;
  setHandler(trashChangedSignal, () => {
    woken = true;
  });
  /**
   * Retention changes asked and not yet answered (one asked before the run has read its table waits for that read). The
   * run's own wait makes each one's catalog change, one at a time, and
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
        if (state.ended !== null) throw asFailure(trashEnded(tableId, state.ended));
      },
    },
  );
  const pending = () => retentions.filter((r) => r.outcome === undefined);
  setHandler(endTimerSignal, (reason, endedAt) => {
    if (endedAt === droppedAt) state.ended ??= reason;
  });
  setHandler(trashTimerQuery, () => state);
  return {
    state,
    /** The table found in this trash: the expiry to wait for. */
    arm: (table: TableRecord): void => {
      expireAtMs = table.expireAt;
      state.expireAt = new Date(table.expireAt!).toISOString();
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
            droppedAt,
            expireAt: droppedAt + request.seconds * 1000,
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
function waitOutExpiry(calls: ExpiryCalls, trashed: TableRecord, input: TrashExpiryInput, timer: TrashTimer): Promise<TrashTimerState> {
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
 * paced by `input.expiryRetry` (DEFAULT_EXPIRY_RETRY: some two hours of them a run); past a run's share the expiry
 * continues as new, on the same drop time, so that its history stays short however long the purge keeps
 * failing. A lock wait that outgrows its run does the same.
 */
async function purgeOnExpiry(calls: ExpiryCalls, trashed: TableRecord, input: TrashExpiryInput): Promise<'done' | 'held' | 'later'> {
  const { id: tableId, droppedAt } = trashed;
  const purge: PurgeInput = { tableId, trigger: 'expiry', droppedAt: droppedAt!, catalogId: input.catalogId, lockWait: input.lockWait };
  const pace = input.expiryRetry ?? DEFAULT_EXPIRY_RETRY;
  for (let attempt = 0; ; attempt++) {
    try {
      const table = await calls.purge(purge, { policy: input.lockWait, input });
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
    await pauseOrStartOver(pace, attempt + 1, input, {
      why: 'purge on expiry still failing; continuing as new to keep the history short',
      about: { tableId, attempt },
      summary: `try again to purge table ${tableId} (try ${attempt + 2})`,
    });
  }
}

/**
 * The trash at `droppedAt` as the expiry finds it: the table as that trash left it (TRASHED; PURGING from a purge that stopped
 * past its point of no return, which the expiry finishes; RESTORING, a recall under way), still on its way there (TRASHING
 * with that drop time: the drop that started this run moves its shards), or how that trash ended (purged, or recalled: a
 * table trashed again since is in another trash, whose own run waits for it; a move taken back reads as recalled).
 */
async function inThatTrash(
  calls: ExpiryCalls,
  tableId: number,
  droppedAt: number,
): Promise<{ table: TableRecord } | { moving: TableRecord } | { ended: Ending }> {
  const table = await calls.getTable(tableId);
  if (table?.state === 'TRASHING' && table.droppedAt === droppedAt) return { moving: table };
  // (RESTORING: a recall under way, which ends this trash if it commits, and leaves it to this run if it is taken back.)
  const stillIn = table && ['TRASHED', 'PURGING', 'RESTORING'].includes(table.state) && table.droppedAt === droppedAt;
  if (stillIn) return { table };
  return { ended: !table || table.state === 'PURGED' ? 'purged' : 'restored' };
}
