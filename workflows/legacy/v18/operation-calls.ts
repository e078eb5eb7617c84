import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  proxyActivities,
  proxyLocalActivities,
  workflowInfo,
} from '@temporalio/workflow';
import { STORAGE_STOPPED_HERE, storageQueue } from '../../../domain/operations';
import { settleAll } from '../../../domain/settle';
import type { Activities, FirstChangeMade, LockAttempt } from '../../../activities';
import type { TableRecord } from '../../../domain/table';
import type { TableName } from '../../../domain/names';
import type { TableState } from '../../../domain/states';
import type { CallScope, ShardChange, ShardRef } from '../../../domain/contracts';
import { takes } from './patches';
import { describeFirstChange, describeShardChange, describeTransition, nodesOf, shardsOf, type FirstChange } from './describe';
export type { FirstChange } from './describe';

/** Transient faults are retried with backoff (bounded by the worker); domain failures come back non-retryable. */
const RETRY = { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '10s' } as const;

/**
 * Catalog steps are short transactions on the worker's own catalog: local activities, run by the worker in
 * the workflow task that asks for them, without a round trip through the server's task queues (measured: it
 * halves the time of every operation; see README).
 */
const catalog = proxyLocalActivities<
  Pick<
    Activities,
    | 'prepareCreate'
    | 'transition'
    | 'commitTrash'
    | 'getTable'
    | 'endTrashTimer'
    | 'startDrain'
    | 'liveLeases'
    | 'changeHold'
    | 'changeExpiry'
    | 'changeLease'
    | 'changeSetting'
    | 'trashPage'
    | 'wakeTrash'
    | 'requestEviction'
  >
>({
  startToCloseTimeout: '30s',
  retry: RETRY,
});

/** Lock attempts and releases: transient faults are retried; a busy lock is an answer (see lock.ts). */
const locking = proxyLocalActivities<Pick<Activities, 'tryLock' | 'releaseLock'>>({ startToCloseTimeout: '30s', retry: RETRY });

/**
 * A lock attempt (or a create's prepare) that makes its operation's first shard call too (since v18): as long as a
 * shard call may take.
 */
const withFirstShards = proxyLocalActivities<Pick<Activities, 'lockThenChangeShardsHere' | 'prepareThenCreateShardsHere'>>({
  startToCloseTimeout: '1 hour',
  retry: RETRY,
});

/**
 * One step's change on every shard of the nodes this worker serves (every node with `--storage local`, the embedded
 * default): a local activity, in the workflow task, with no round trip through the server (createShardsHereActivity).
 * It may take long (256 shards on a slow disk): the SDK keeps the workflow task alive meanwhile, and a retry after a
 * lost worker finishes what is left. It is journaled, so a lost workflow task's repeat touches nothing.
 */
/** How many shards one local activity changes: a long change (256 shards, a slow disk) is seen to progress between calls. */
const SHARDS_PER_CALL = 16;
const shardsHere = proxyLocalActivities<Pick<Activities, 'changeShardsHere'>>({
  startToCloseTimeout: '1 hour',
  retry: RETRY,
}).changeShardsHere;

/**
 * One step's change on every shard a node holds that this worker does not serve: one ordinary activity per node, on
 * the node's queue. It may take
 * long (256 shards, big files, a node whose disk is slow), so it heartbeats shard file by shard file, and a cancel
 * request reaches it through its heartbeats; a dead worker's attempt is retried after the heartbeat timeout. The
 * workflow waits until a cancelled change has really stopped (and put back the set it was renaming) before it runs
 * anything else, an undo above all: two changes of one shard must never run at once.
 */
const shardsOnNode = (node: string, summary: string) =>
  proxyActivities<Pick<Activities, 'changeShardsOnNode'>>({
    startToCloseTimeout: '1 hour',
    heartbeatTimeout: '20s',
    retry: RETRY,
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    taskQueue: storageQueue(workflowInfo().taskQueue, node),
    summary,
  }).changeShardsOnNode;

type Args<F> = F extends (input: infer I) => unknown ? Omit<I, keyof CallScope> : never;

/**
 * Every call one operation makes, scoped to its catalog. Catalog calls are numbered in the order the run makes
 * them (deterministic, like all workflow code), and the catalog journals each outcome under that number: a
 * call made again because the workflow task that made it was lost answers what it answered the first time,
 * even after this run released its lock.
 */
export function operationCalls(catalogId: string | undefined) {
  let calls = 0;
  const step = (name: string): CallScope => ({ catalogId, step: `${++calls}:${name}` });
  const scope: CallScope = { catalogId };
  /** Whether the run's last change released its locks, and none has been taken since. */
  let released = false;
  /** Whether the run's commit ended the trash timer. */
  let timerEnded = false;
  /** The operation's last change, which releases the run's locks in the same local activity (one call less). */
  const lastChange = async <T extends TableRecord>(change: (locks: { releaseLocks: true }) => Promise<T>): Promise<T> => {
    const table = await change({ releaseLocks: true });
    released = true;
    return table;
  };
  const notes: string[] = [];
  /** The shard changes already made by an earlier call's `then` (a purge's deletes): a later step skips them. */
  const madeAhead = new Set<string>();
  // (A move is keyed by its direction too: the move back of a recall made ahead is not its undo's move to the trash.)
  const aheadKey = (change: ShardChange, shard: ShardRef) =>
    `${change.method}${change.method === 'moveShard' ? `:${change.from}>${change.to}` : ''}:${shard.tableId}:${shard.shard}`;
  /** The nodes this worker was found not to serve (`--storage remote`): not asked about again in this run. */
  const away = new Set<string>();
  /**
   * The change on the shards of the nodes this worker serves, in the workflow task, a few shards per local activity
   * (a recall's progress moves as each call ends). Each call is awaited where a cancel cannot reach it: a local
   * activity the SDK is told to cancel is abandoned while it still renames files, and an undo would race it (v8's
   * defect, docs/design.md). A cancel waits for the call to end and is taken before the next, where the step's
   * compensation takes back what was done. Answers the shards left to their nodes' queues: those of the nodes this
   * worker does not serve, and all not yet changed once its storage has failed fatally (a worker that serves them
   * again takes them from the queues).
   */
  const changeHere = async (
    table: TableRecord,
    change: ShardChange,
    shards: ShardRef[],
    { onShard, then, before, commit, whole }: AlongTheShards,
  ): Promise<ShardRef[]> => {
    // Since v15 `then` is made only where it follows the change on every shard of the step (a purge deletes nothing
    // before every shard is marked): where one call makes the whole step. v14 made it in every call.
    const thenEveryCall = then !== undefined && !takes('changesWithShards');
    for (let first = 0; first < shards.length; first += SHARDS_PER_CALL) {
      const ask = shards.slice(first, first + SHARDS_PER_CALL).filter((shard) => !away.has(shard.node));
      if (ask.length === 0) continue;
      notCancelled();
      const last = first + SHARDS_PER_CALL >= shards.length;
      // (`whole`: `shards` are every shard of the step, none made ahead by an earlier call.)
      const follow = then && (thenEveryCall || (whole && first === 0 && last && away.size === 0)) ? then : undefined;
      // The step's state change rides with its first call, and the operation's commit with its last when no shard of the
      // step was left to a node's queue: each numbered as a call of its own, before and after the shards'.
      const stateChange = before && !before.made ? { ...before.args, ...step('transition') } : undefined;
      const shardsStep = step('changeShardsHere');
      const commitAlong =
        commit && whole && last && away.size === 0 && (!then || follow)
          ? { ...commit, ...step('transition'), releaseLocks: true as const }
          : undefined;
      const summary = [
        stateChange && describeTransition(stateChange),
        describeShardChange(
          change,
          table.id,
          ask.map((shard) => shard.shard),
          'the nodes this worker serves',
        ),
        follow?.method,
        commitAlong && `${describeTransition(commitAlong)}, releasing the locks (once every shard is done)`,
      ]
        .filter(Boolean)
        .join(', then ');
      try {
        const answer = await CancellationScope.nonCancellable(() =>
          shardsHere.executeWithOptions({ summary }, [
            {
              change,
              shards: ask,
              ...(follow ? { then: follow } : {}),
              ...(stateChange ? { before: stateChange } : {}),
              ...(commitAlong ? { commit: commitAlong } : {}),
              ...shardsStep,
            },
          ]),
        );
        if (before && answer.before) before.made = answer.before;
        if (answer.committed) committed(answer.committed, commitAlong?.endTrashTimer !== undefined);
        notes.push(...answer.notes);
        answer.elsewhere.forEach((node) => away.add(node));
        if (follow && answer.thenMade) for (const shard of ask) if (!away.has(shard.node)) madeAhead.add(aheadKey(follow, shard));
      } catch (err) {
        const failure = err instanceof ActivityFailure ? err.cause : err;
        if (!(failure instanceof ApplicationFailure && failure.type === STORAGE_STOPPED_HERE)) throw err;
        return shards.filter((shard, i) => i >= first || away.has(shard.node));
      }
      ask.filter((shard) => !away.has(shard.node)).forEach(() => onShard());
    }
    return shards.filter((shard) => away.has(shard.node));
  };
  /** The operation's commit, made by a shard call (since v15): the run's locks went with it, and the commit step finds it made. */
  let committedAhead: TableRecord | undefined;
  const committed = (table: TableRecord, endedTimer: boolean) => {
    committedAhead = table;
    released = true;
    if (endedTimer) timerEnded = true;
  };
  /** The commit made ahead, once: the commit step's answer. */
  const takeCommitted = (): TableRecord | undefined => {
    const table = committedAhead;
    committedAhead = undefined;
    return table;
  };
  /** The state change a lock attempt made with the first step's first shard call (since v18): the step finds it made. */
  let stateAhead: TableRecord | undefined;
  /** That call's shard change, failed for good: the step it belongs to fails with it (and its undo runs). */
  let failedAhead: ApplicationFailure | undefined;
  /** What a lock attempt or a prepare made of the first step, as if the step's own first call had made it. */
  const madeAlong = (first: FirstChangeMade, change: ShardChange, then: ShardChange | undefined) => {
    stateAhead = first.before;
    first.elsewhere.forEach((node) => away.add(node));
    for (const shard of first.shards) {
      madeAhead.add(aheadKey(change, shard));
      if (then && first.thenMade) madeAhead.add(aheadKey(then, shard));
    }
    notes.push(...first.notes);
    if (first.committed) committed(first.committed, first.endedTimer === true);
    if (first.failed) failedAhead = ApplicationFailure.nonRetryable(first.failed.message, first.failed.type);
  };
  /** A local activity called with a summary the web UI shows beside it. */
  const said = (summary: string) => ({ summary });
  const operation = {
    /** One try at `lock`; with `readTable`, the table as read under it once taken (in runs since v14). */
    tryLock: async (lock: string, readTable?: number) => {
      const reads = readTable !== undefined && takes('fewerLocalActivities');
      const attempt = await locking.tryLock.executeWithOptions(said(`take lock ${lock}${reads ? `, read table ${readTable}` : ''}`), [
        { lock, ...(reads ? { readTable, now: Date.now() } : {}), ...step('tryLock') },
      ]);
      if (attempt.acquired) released = false;
      return attempt;
    },
    /**
     * One try at `lock` that, once it holds it and the operation's check (`first.for`) lets it go on, makes the first
     * step's state change and first shard call too (since v18): one local activity less than a lock attempt of its
     * own. The step then finds them made. Answers as `tryLock` does, with the table as read under the lock.
     */
    tryLockWithFirstChange: async (lock: string, first: FirstChange): Promise<LockAttempt> => {
      notCancelled();
      const steps = {
        lock: step('tryLock').step!,
        before: step('transition').step!,
        shards: step('changeShardsHere').step!,
        commit: step('transition').step!,
      };
      // (Taken before the answer is in: a refused state change (NameTaken) fails the call with the lock held.)
      released = false;
      const shards = `the first ${SHARDS_PER_CALL} shards`;
      const attempt = await CancellationScope.nonCancellable(() =>
        withFirstShards.lockThenChangeShardsHere.executeWithOptions(
          said(
            `take lock ${lock}, read table ${first.for.tableId}; if its ${first.for.op} may go on: its first change (${describeFirstChange(first)}) on ${shards}`,
          ),
          [
            {
              ...scope,
              lock,
              now: Date.now(),
              for: first.for,
              change: first.change,
              ...(first.then ? { then: first.then } : {}),
              shardsPerCall: SHARDS_PER_CALL,
              steps,
            },
          ],
        ),
      );
      if (attempt.acquired && attempt.first) madeAlong(attempt.first, first.change, first.then);
      const { first: _made, ...answer } = attempt;
      return answer;
    },
    /** Releases every lock the run holds (nothing to do when its last change did). */
    releaseLocks: () => (released ? Promise.resolve() : locking.releaseLock.executeWithOptions(said("release this run's locks"), [scope])),
    /**
     * The transition that ends the operation: the locks go with it, and, with `endTrashTimer` (since v14), the trash
     * run hears that its timer is over.
     */
    commit: async (args: Args<Activities['transition']>) => {
      const ahead = takeCommitted();
      if (ahead) return ahead;
      const ends = args.endTrashTimer !== undefined;
      if (ends) timerEnded = true;
      return lastChange((locks) =>
        catalog.transition.executeWithOptions(
          said(`${describeTransition(args)}, releasing the locks${ends ? ', ending the trash timer' : ''}`),
          [{ ...args, ...locks, ...step('transition') }],
        ),
      );
    },
    /** Whether the run's commit told the trash run that its timer is over. */
    timerEnded: () => timerEnded,
    /**
     * With `takeLock` (since v17), it takes the create's name lock too: the run holds locks from its first try on. With
     * `firstShards` (since v18), a table prepared has its first shards made in the same call (`change`): the create's
     * shard step finds them made.
     */
    prepareCreate: async (args: Args<Activities['prepareCreate']>, firstShards?: ShardChange) => {
      if (args.takeLock) released = false;
      const summary = `prepare table ${args.namespace}.${args.name}: its id, shards and locks${args.takeLock ? `, taking ${args.lock}` : ''}`;
      if (!firstShards) return catalog.prepareCreate.executeWithOptions(said(summary), [{ ...args, ...step('prepareCreate') }]);
      notCancelled();
      const prepareStep = step('prepareCreate');
      const shardsStep = step('changeShardsHere').step!;
      const prepared = await CancellationScope.nonCancellable(() =>
        withFirstShards.prepareThenCreateShardsHere.executeWithOptions(
          said(`${summary}; if prepared, its first ${SHARDS_PER_CALL} shards made`),
          [{ ...args, ...prepareStep, change: firstShards, shardsPerCall: SHARDS_PER_CALL, shardsStep }],
        ),
      );
      if (prepared.outcome !== 'prepared' || !prepared.first) return prepared;
      madeAlong(prepared.first, firstShards, undefined);
      const { first: _made, ...answer } = prepared;
      return answer;
    },
    getTable: (tableId: number) => catalog.getTable.executeWithOptions(said(`read table ${tableId}`), [{ tableId, ...step('getTable') }]),
    transition: (args: Args<Activities['transition']>) =>
      catalog.transition.executeWithOptions(said(describeTransition(args)), [{ ...args, ...step('transition') }]),
    /** TRASHING -> TRASHED, the trash's last change under its lock: the locks go with it. */
    commitTrash: (args: Args<Activities['commitTrash']>) =>
      lastChange((locks) =>
        catalog.commitTrash.executeWithOptions(said(`table ${args.tableId}: TRASHING to TRASHED, its expiry set, releasing the locks`), [
          { ...args, ...locks, ...step('commitTrash') },
        ]),
      ),
    endTrashTimer: (tableId: number, reason: 'restored' | 'purged', droppedAt: number) =>
      catalog.endTrashTimer.executeWithOptions(said(`end the trash timer of table ${tableId} (${reason})`), [
        { tableId, reason, droppedAt, ...scope },
      ]),
    /**
     * A drop's first change: DRAINING while the table has live leases, else TRASHING; with the leases to wait for. With
     * `takeLock` (since v17) it takes the table's lock too, or answers who holds it.
     */
    startDrain: async (tableId: number, expectName?: TableName, takeLock = false) => {
      if (takeLock) released = false;
      return catalog.startDrain.executeWithOptions(
        said(`table ${tableId}: READY to DRAINING (leases live) or TRASHING; no new leases${takeLock ? `; taking its lock` : ''}`),
        [{ tableId, now: Date.now(), ...(expectName ? { expectName } : {}), ...(takeLock ? { takeLock } : {}), ...step('startDrain') }],
      );
    },
    liveLeases: (tableId: number) =>
      catalog.liveLeases.executeWithOptions(said(`read the live leases of table ${tableId}`), [
        { tableId, now: Date.now(), ...step('liveLeases') },
      ]),
    /** A hold placed or released: the operation's last change, the locks go with it. */
    changeHold: (args: Args<Activities['changeHold']>) =>
      lastChange((locks) =>
        catalog.changeHold.executeWithOptions(said(`${args.hold ? 'place a hold on' : 'release the hold of'} table ${args.tableId}`), [
          { ...args, ...locks, ...step('changeHold') },
        ]),
      ),
    changeExpiry: (args: Args<Activities['changeExpiry']>) =>
      catalog.changeExpiry.executeWithOptions(said(`table ${args.tableId} expires at ${new Date(args.expireAt).toISOString()}`), [
        { ...args, ...step('changeExpiry') },
      ]),
    changeLease: (args: Args<Activities['changeLease']>) =>
      catalog.changeLease.executeWithOptions(said(`lease ${args.request.action}`), [{ ...args, ...step('changeLease') }]),
    changeSetting: (args: Args<Activities['changeSetting']>) =>
      catalog.changeSetting.executeWithOptions(
        said(`${'value' in args ? 'set' : 'unset'} ${args.key}${args.namespace ? ` for ${args.namespace}` : ''}`),
        [{ ...args, ...step('changeSetting') }],
      ),
    trashPage: (afterId: number) =>
      catalog.trashPage.executeWithOptions(said(`read the trash after table ${afterId}`), [{ afterId, ...scope }]),
    /** Tells the table's trash run to read it again, if the table is in one of `states` (any, without). */
    wakeTrash: (tableId: number, states?: TableState[]) =>
      catalog.wakeTrash.executeWithOptions(said(`wake the trash run of table ${tableId}`), [
        { tableId, ...(states ? { states } : {}), ...scope },
      ]),
    requestEviction: () => catalog.requestEviction.executeWithOptions(said('ask the trash space cap to look again'), [scope]),
    /**
     * One step's change on every shard of `table`, settling when every shard has (an undo must never race a change
     * still running). `onShard` hears each shard done. `then`: a change the next step makes, tried in the same calls
     * once this one is made (where this worker serves the nodes); the next step skips the shards it was made on.
     */
    changeShards: async (
      table: TableRecord,
      change: ShardChange,
      {
        onShard = () => undefined,
        then,
        before: state,
        commit,
      }: { onShard?: () => void; then?: ShardChange; before?: Args<Activities['transition']>; commit?: CommitAhead } = {},
    ): Promise<TableRecord> => {
      if (failedAhead) {
        const failure = failedAhead;
        failedAhead = undefined;
        throw failure;
      }
      const all = shardsOf(table);
      const ahead = all.filter((shard) => madeAhead.has(aheadKey(change, shard)));
      ahead.forEach(() => onShard());
      const shards = all.filter((shard) => !madeAhead.has(aheadKey(change, shard)));
      const before: StateChangeAhead | undefined = state && { args: state, ...(stateAhead ? { made: stateAhead } : {}) };
      if (state) stateAhead = undefined;
      const along: AlongTheShards = {
        onShard,
        then,
        before,
        commit: commit && takes('changesWithShards') ? commit : undefined,
        whole: ahead.length === 0,
      };
      const left = takes('shardChangesHere') && shards.length > 0 ? await changeHere(table, change, shards, along) : shards;
      // No call here made the state change (every node is served elsewhere, or this worker's storage stopped before it
      // answered): it is made on its own, before any node's (a change made already is answered as it is).
      const changed = before ? (before.made ?? (await operation.transition(before.args))) : table;
      await settleAll(nodesOf(left), async ([node, held]) => {
        const summary = describeShardChange(
          change,
          table.id,
          held.map((shard) => shard.shard),
          node,
        );
        // (A node's answer before nodes said anything is empty.)
        const answer = await shardsOnNode(node, summary)({ change, shards: held, ...scope });
        notes.push(...(answer?.notes ?? []));
        held.forEach(() => onShard());
      });
      return changed;
    },
    /** What the run's shard changes said beyond doing them (a recall's foreign keys it could not put back as they were). */
    notes: (): readonly string[] => notes,
  };
  return operation;
}

/**
 * A call that changes shards (`changeHere`'s, and since v18 one that takes a lock or prepares too) is awaited where a
 * cancel cannot reach it (the cancel is taken at the next step, whose compensation takes back what it made); an
 * operation cancelled before such a call begins makes none: the cancel is taken here.
 */
function notCancelled(): void {
  if (CancellationScope.current().consideredCancelled) throw new CancelledFailure('the operation was cancelled');
}

/** A step's state change to be made with its first shard call, and the table once it is. */
interface StateChangeAhead {
  args: Args<Activities['transition']>;
  made?: TableRecord;
}

/**
 * The operation's commit, which the last call of a step's shard change makes too (since v15) when every shard of the
 * step was changed here, releasing the run's locks: only past the point of no return (a purge's), where a cancel has
 * nothing left to take back.
 */
export type CommitAhead = Args<Activities['transition']>;

/** What a step's shard calls make along with the shards. */
interface AlongTheShards {
  onShard: () => void;
  then: ShardChange | undefined;
  before: StateChangeAhead | undefined;
  commit: CommitAhead | undefined;
  /** No shard of the step was made ahead (by a lock attempt's call, or an earlier step's `then`): its calls make it whole. */
  whole: boolean;
}

export type OperationCalls = ReturnType<typeof operationCalls>;
