import { ApplicationFailure } from '@temporalio/common';
import type { TableName } from '../domain/names';
import { STORAGE_STOPPED_HERE } from '../domain/operations';
import { firstStateChanges, verdictFor, type FirstChangeFor } from '../domain/legacy-v18-checks';
import type { TableState } from '../domain/states';
import type { TableRecord } from '../domain/table';
import type { ShardChange, ShardRef } from '../domain/contracts';
import type { PrepareResult } from '../catalog/catalog';
import type { CallScope, LockAttempt } from './scope';
import type { ShardsHereAnswer, createShardsHereActivity } from './storage';

/*
 * The local activities of release v18's operations, which made a step's first shard call along with the call that took
 * the lock (or prepared a create), and a step's state change and commit along with its shards. Runs v18 started call
 * them until they end (workflows/legacy/v18/); retired with the patch `step-executor` (docs/changing-workflows.md).
 */

interface LegacyDeps {
  catalogCalls: {
    tryLock(input: CallScope & { lock: string; readTable?: number; now?: number }): Promise<LockAttempt>;
    transition(
      input: CallScope & {
        tableId: number;
        from: TableState[];
        to: TableState;
        now: number;
        rename?: TableName;
        expectName?: TableName;
        releaseLocks?: boolean;
        endTrashTimer?: { reason: 'restored' | 'purged'; droppedAt: number };
      },
    ): Promise<TableRecord>;
    prepareCreate(
      input: CallScope & TableName & { params: TableRecord['params']; lock: string; takeLock?: boolean; now: number },
    ): Promise<PrepareResult>;
  };
  shardsHere: ReturnType<typeof createShardsHereActivity>;
}

export function legacyV18Activities({ catalogCalls, shardsHere }: LegacyDeps) {
  return {
    /**
     * Since v15, one local activity makes a step's changes in the catalog along with its shards:
     * - `before`: the table's state change first, journaled under its own step as the `transition` call would be; a
     *   refused change (NameTaken) touches no shard;
     * - `commit`: the operation's commit last (a transition releasing the run's locks), if every shard was changed
     *   here, and with `then`, the follow-up too.
     * The shards' answer comes with the table as each change left it.
     */
    async changeShardsHere(
      input: Parameters<typeof shardsHere.changeShardsHere>[0] & {
        before?: Parameters<typeof catalogCalls.transition>[0];
        commit?: Parameters<typeof catalogCalls.transition>[0];
      },
    ): Promise<ShardsHereAnswer & { before?: TableRecord; committed?: TableRecord }> {
      const { before, commit, ...change } = input;
      const table = before && (await catalogCalls.transition(before));
      const answer = await shardsHere.changeShardsHere(change);
      const every = answer.elsewhere.length === 0 && (change.then === undefined || answer.thenMade === true);
      const committed = commit && every ? await catalogCalls.transition(commit) : undefined;
      return { ...answer, ...(table ? { before: table } : {}), ...(committed ? { committed } : {}) };
    },

    /**
     * Since v18, a create's prepare and its first shard call, in one local activity: the prepare as `prepareCreate`
     * makes it (busy, or found made: nothing else is done), then, for a table prepared, its first `shardsPerCall`
     * shards, journaled under their own step. A shard change that fails for good is answered, not thrown: the create's
     * shard step fails with it, and takes back what was made.
     */
    async prepareThenCreateShardsHere(
      input: Parameters<typeof catalogCalls.prepareCreate>[0] & { change: ShardChange; shardsPerCall: number; shardsStep: string },
    ): Promise<PrepareResult & { first?: FirstChangeMade }> {
      const { change, shardsPerCall, shardsStep, ...prepare } = input;
      const prepared = await catalogCalls.prepareCreate(prepare);
      if (prepared.outcome !== 'prepared') return prepared;
      const first = await firstShardCall(input.catalogId, shardsStep, prepared.table, { change, shardsPerCall });
      return { ...prepared, first: first.made };
    },

    /**
     * Since v18, an undelete's or a purge's lock attempt and its first shard call, in one local activity: the table's
     * lock taken (busy: nothing else is done) and the table read under it, as `tryLock` does, then the operation's
     * check (domain/checks.ts) made on what was read, and only where it lets the operation go on, the first step's
     * state change and its first `shardsPerCall` shards; with `then` and the commit too, where that call changes every
     * shard here. Each part is journaled under its own step, as the separate calls would be. A shard change that fails
     * for good is answered, not thrown: the step it belongs to fails with it, and takes back what was made.
     */
    async lockThenChangeShardsHere(
      input: CallScope & {
        lock: string;
        now: number;
        for: FirstChangeFor;
        change: ShardChange;
        then?: ShardChange;
        shardsPerCall: number;
        steps: { lock: string; before: string; shards: string; commit: string };
      },
    ): Promise<LockAttempt & { first?: FirstChangeMade }> {
      const { catalogId, steps, now } = input;
      const attempt = await catalogCalls.tryLock({ catalogId, step: steps.lock, lock: input.lock, readTable: input.for.tableId, now });
      if (!attempt.acquired) return attempt;
      const table = attempt.table ?? null;
      if (!table || !('proceed' in verdictFor(input.for, table, attempt.readAt ?? now))) return attempt;
      const changes = firstStateChanges(input.for, table);
      const before = await catalogCalls.transition({ catalogId, step: steps.before, tableId: table.id, now, ...changes.before });
      const first = await firstShardCall(catalogId, steps.shards, table, input);
      const committed =
        first.every && changes.commit
          ? await catalogCalls.transition({ catalogId, step: steps.commit, tableId: table.id, now, ...changes.commit, releaseLocks: true })
          : undefined;
      return {
        ...attempt,
        first: {
          before,
          ...first.made,
          ...(committed ? { committed, ...(changes.commit?.endTrashTimer ? { endedTimer: true as const } : {}) } : {}),
        },
      };
    },
  };

  /**
   * The first shard call of a step, made along with the call that took the operation's lock (or prepared its create):
   * the first `shardsPerCall` shards of the table's placement, here; with `then` where that is every shard. Answers what
   * it made, and whether it made the whole step (`every`: every shard, here, `then` too). A change that fails for good
   * is answered as `failed`; a storage that stopped here, as nothing made (the step hands the shards to the nodes'
   * queues).
   */
  async function firstShardCall(
    catalogId: string | undefined,
    step: string,
    table: TableRecord,
    ask: { change: ShardChange; then?: ShardChange; shardsPerCall: number },
  ): Promise<{ made: Omit<FirstChangeMade, 'before'>; every: boolean }> {
    const whole = table.placement.length <= ask.shardsPerCall;
    const shards = table.placement.slice(0, ask.shardsPerCall).map((p) => ({ tableId: table.id, shard: p.shard, node: p.node }));
    const then = whole ? ask.then : undefined;
    let answer: ShardsHereAnswer;
    try {
      answer = await shardsHere.changeShardsHere({ catalogId, step, change: ask.change, shards, ...(then ? { then } : {}) });
    } catch (err) {
      if (!(err instanceof ApplicationFailure && err.nonRetryable)) throw err;
      const nothing = { shards: [], elsewhere: [], notes: [] };
      if (err.type === STORAGE_STOPPED_HERE) return { made: nothing, every: false };
      return { made: { ...nothing, failed: { type: err.type ?? 'Error', message: err.message } }, every: false };
    }
    const every = whole && answer.elsewhere.length === 0 && (then === undefined || answer.thenMade === true);
    return {
      made: {
        shards: shards.filter((shard) => !answer.elsewhere.includes(shard.node)),
        elsewhere: answer.elsewhere,
        notes: answer.notes,
        ...(answer.thenMade ? { thenMade: true } : {}),
      },
      every,
    };
  }
}

/**
 * What a create's prepare (prepareThenCreateShardsHere) or an undelete's or a purge's lock attempt
 * (lockThenChangeShardsHere) made of the first step, where it went on.
 */
export interface FirstChangeMade {
  /** The table after the step's state change (an undelete's, a purge's). */
  before?: TableRecord;
  /** The shards changed here (with `then` too, where `thenMade`). */
  shards: ShardRef[];
  /** The nodes this worker does not serve: their shards are left to the step, for the nodes' queues. */
  elsewhere: string[];
  notes: ShardsHereAnswer['notes'];
  thenMade?: true;
  /** The operation's commit, made too (a purge whose every shard was changed here): the run's locks went with it. */
  committed?: TableRecord;
  /** That commit told the table's trash run that its timer is over. */
  endedTimer?: true;
  /** The shard change failed for good: the step fails with this, and its undo runs. */
  failed?: { type: string; message: string };
}

export type { FirstChangeFor } from '../domain/legacy-v18-checks';
