import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  condition,
  ContinueAsNew,
  log,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  type SignalDefinition,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ShardChange, ShardRef, TruncateEntries } from '../domain/contracts';
import { lockFor, storageQueue } from '../domain/operations';
import { type OperationScope } from '../domain/operation-inputs';
import { SEARCH_ATTRIBUTES } from '../domain/search-attributes';
import { settleAll } from '../domain/settle';
import { madeElsewhere, shardsOfRun, startOf, type Operation, type Progress, type StepsAnswer, type StepsCall } from '../domain/steps';
import { toTableInfo, type TableInfo, type TableRecord } from '../domain/table';
import { nextCall, RETRY, said } from './catalog-calls';
import { applicationFailureOf, domainFailure } from './failures';
import { enterStep, stepProgress, tookBack, undoingStep } from './observe';
import { untilFree, type Waiting } from './wait-turn';
import { takes } from './patches';

/** How many shards of a step one call changes: a long change (256 shards, a slow disk) is seen to progress between calls. */
const SHARDS_PER_CALL = 16;

/**
 * The worker's half of the executor (activities/steps-here.ts), a local activity: it runs in the workflow task, without a
 * round trip through the server. It may take long (16 shards on a slow disk): the SDK keeps the task alive meanwhile.
 */
const here = proxyLocalActivities<Pick<Activities, 'runStepsHere' | 'releaseLock'>>({ startToCloseTimeout: '1 hour', retry: RETRY });

/**
 * A step's change on the shards of a node this worker does not serve: an activity on the node's queue. It heartbeats
 * shard file by shard file, and a cancel reaches it through its heartbeats; the workflow waits until a cancelled change
 * has really stopped (and put back the set it was renaming) before it runs anything else, an undo above all.
 */
const onNode = (node: string, summary: string) =>
  proxyActivities<Pick<Activities, 'changeShardsOnNode'>>({
    startToCloseTimeout: '1 hour',
    heartbeatTimeout: '20s',
    retry: RETRY,
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    taskQueue: storageQueue(workflowInfo().taskQueue, node),
    summary,
  }).changeShardsOnNode;

/**
 * Failures after which the operation must not take anything back: it no longer owns the table (its lock was taken over)
 * or the table is not of its catalog. Undoing would touch what belongs to someone else.
 */
const NOT_OURS = ['LockLost', 'WrongCatalog'];

export interface RunOptions {
  /** How the run waits for a lock another holds (and starts over with, past one run's share of waiting). */
  waiting?: Waiting;
  /** What wakes a step that waits (a lease released): the run looks again at once rather than at its timer. */
  wake?: { isWoken: () => boolean; takeWake: () => void };
}

/**
 * FATE's engine, in the workflow: runs an operation's steps (domain/steps.ts) from the first to the last, in calls to the
 * worker (activities/steps-here.ts) that each go as far as they may, and does in between what only the workflow can: wait
 * for a lock another run holds (timers, and continue-as-new past one run's share), wait for a step to be ready, hand the
 * shards of nodes served elsewhere to their nodes' queues, and take a cancel. When the operation fails for good (or is
 * cancelled), the undos of the steps begun run, the last first, where a cancel cannot reach them, and the failure is
 * rethrown as the client understands it. If an undo fails for good, compensation stops there: the table stays in its
 * transitional state, from which running the same operation again resumes. Every lock the run holds is released on
 * every way out.
 *
 * Each call is awaited where a cancel cannot reach it: a local activity told to cancel is abandoned while it may still
 * rename files, and an undo would race it. A cancel is taken before the next call instead.
 */
export function operationRun<I extends OperationScope>(operation: Operation<I>, input: I, options: RunOptions = {}) {
  let progress = startOf(Date.now());
  const notes: string[] = [];
  const waiting = options.waiting ?? { policy: input.lockWait, input };
  let madeCall = false;

  /** One call to the worker, from where the run stands. */
  const call = async (direction: StepsCall['direction']): Promise<StepsAnswer> => {
    const request: StepsCall = {
      ...(input.catalogId !== undefined ? { catalogId: input.catalogId } : {}),
      operation: operation.name,
      input,
      progress,
      call: nextCall(operation.name),
      now: Date.now(),
      direction,
      shardsPerCall: SHARDS_PER_CALL,
      ...(notes.length > 0 ? { said: [...notes] } : {}),
    };
    const answer = await CancellationScope.nonCancellable(() =>
      here.runStepsHere.executeWithOptions(said(describeCall(operation, progress, direction)), [request]),
    );
    madeCall = true;
    progress = answer.progress;
    notes.push(...answer.notes);
    observe(direction);
    return answer;
  };

  /** What the UI shows of the run: the step it is at, and how many of its shards are changed. */
  const observe = (direction: StepsCall['direction']) => {
    const table = progress.table ?? progress.checked;
    if (direction === 'back') {
      const index = progress.begun.at(-1);
      if (index !== undefined) undoingStep(operation.steps[index]!.name);
      return;
    }
    const step = operation.steps[progress.step];
    if (step?.shards && table) stepProgress(step.name, progress.shardsDone.length, shardsOfRun(progress).length);
    else if (step) enterStep(step.name);
    // A create learns its table's id from its prepare: the UI's search finds the run by it from then on.
    if (table && workflowInfo().typedSearchAttributes.get(SEARCH_ATTRIBUTES.tableId) === undefined) {
      upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.tableId, value: table.id }]);
    }
  };

  /** Makes the change on the shards of nodes served elsewhere, on their nodes' queues, all nodes at once. */
  const onTheirNodes = async (change: ShardChange, elsewhere: ShardRef[], direction: StepsCall['direction']) => {
    await settleAll(byNode(elsewhere), async ([node, held]) => {
      const answer = await onNode(node, describeShardChange(change, held, node))({ change, shards: held, catalogId: input.catalogId });
      notes.push(...(answer?.notes ?? []));
      // (Each node's shards count as they are done: a slow node does not hide the others' progress.)
      progress = madeElsewhere(progress, direction, held);
      observe(direction);
    });
  };

  /** Forward through the steps until the operation ends. */
  const forward = async (): Promise<TableRecord> => {
    for (;;) {
      // (Past the point of no return a cancel is not taken: the operation goes on to its end, as it would after a crash.
      // Nor before the first call: a workflow task lost after it ran would leave its work undone and untaken back.)
      if (!progress.forwardOnly && CancellationScope.current().consideredCancelled && (madeCall || !takes('firstCallBeforeCancel'))) {
        throw new CancelledFailure('the operation was cancelled');
      }
      const answer = await untilFree(
        operation.lockTable ? `lock ${lockFor.table(operation.lockTable(input))}` : `the locks of this ${operation.name}`,
        () => call('forward'),
        ({ outcome }) => (outcome.kind === 'busy' ? outcome.holder : undefined),
        waiting,
      );
      const { outcome } = answer;
      switch (outcome.kind) {
        case 'done':
        case 'finished':
          if (outcome.kind === 'finished') log.info(`${operation.name} ends here: ${outcome.why}`);
          return progress.table ?? progress.checked!;
        case 'failed':
          throw ApplicationFailure.nonRetryable(outcome.message, outcome.type);
        case 'wait':
          setCurrentDetails(outcome.why);
          await condition(() => options.wake?.isWoken() ?? false, outcome.ms, { summary: outcome.why });
          options.wake?.takeWake();
          setCurrentDetails('');
          break;
        case 'elsewhere':
          await forwardOnlyPast(progress, () => onTheirNodes(outcome.change, outcome.shards, 'forward'));
          break;
        case 'busy':
        case 'goOn':
          break;
      }
    }
  };

  /** Back through the undos of the steps begun. False: an undo failed for good, and compensation stopped there. */
  const back = async (): Promise<boolean> => {
    for (;;) {
      const { outcome } = await call('back');
      if (outcome.kind === 'done') return true;
      if (outcome.kind === 'elsewhere') await onTheirNodes(outcome.change, outcome.shards, 'back');
      else if (outcome.kind === 'failed') {
        log.error('compensation failed; the table stays in its transitional state until the operation is run again', {
          error: outcome.message,
        });
        return false;
      }
    }
  };

  const table = async (): Promise<TableRecord> => {
    try {
      return await forward();
    } catch (err) {
      // A run that continues as new (a long lock wait) starts over in the next run: nothing to undo.
      if (err instanceof ContinueAsNew) throw err;
      const failure = domainFailure(err);
      const type = applicationFailureOf(failure)?.type;
      if (type && NOT_OURS.includes(type)) {
        log.error('the operation no longer owns its table; stopping without undoing anything', { error: String(err) });
      } else if (progress.begun.length > 0) {
        log.warn('the operation stopped; taking back what it did', {
          error: String(failure),
          undo: progress.begun.map((index) => operation.steps[index]!.name),
        });
        if (await CancellationScope.nonCancellable(back)) tookBack();
      }
      throw failure;
    } finally {
      if (progress.holdsLocks)
        await CancellationScope.nonCancellable(() =>
          here.releaseLock.executeWithOptions(said("release this run's locks"), [{ catalogId: input.catalogId }]),
        );
    }
  };

  return {
    /** The table as the operation left it. */
    table,
    /** The other tables of a run over several, as it left them (after `table` has answered). */
    others: (): TableRecord[] => (progress.group ?? []).slice(1).flatMap((member) => member.table ?? member.checked ?? []),
    /** What its shard changes said beyond doing them, so far. */
    said: (): string[] => [...notes],
    /** The operation's answer: the table, with what its shard changes said. */
    result: async (): Promise<TableInfo> => {
      const info = toTableInfo(await table());
      return notes.length > 0 ? { ...info, notes: [...notes] } : info;
    },
    /** How many shards step `name` has changed so far, of how many (every one, once the run is past the step). */
    shardsOf: (name: string): { done: number; total: number } => {
      const index = operation.steps.findIndex((step) => step.name === name);
      const total = shardsOfRun(progress).length;
      if (index < 0 || index > progress.step) return { done: 0, total };
      return { done: index < progress.step ? total : progress.shardsDone.length, total };
    },
  };
}

/** What wakes a step that waits: `signal` sent to the run (a lease released wakes a drop that drains). */
export function wokenBy(signal: SignalDefinition): NonNullable<RunOptions['wake']> {
  let woken = false;
  setHandler(signal, () => {
    woken = true;
  });
  return {
    isWoken: () => woken,
    takeWake: () => {
      woken = false;
    },
  };
}

/** Runs `fn` where a cancel cannot reach it once the operation is past its point of no return. */
function forwardOnlyPast<T>(progress: Progress, fn: () => Promise<T>): Promise<T> {
  return progress.forwardOnly ? CancellationScope.nonCancellable(fn) : fn();
}

/** An operation's workflow: its steps, run. */
export function operationWorkflow<I extends OperationScope>(operation: Operation<I>): (input: I) => Promise<TableInfo> {
  return (input) => operationRun(operation, input).result();
}

/** What one call is for, as the web UI shows it beside the local activity. */
function describeCall<I>(operation: Operation<I>, progress: Progress, direction: StepsCall['direction']): string {
  const names = operation.steps.map((step) => step.name);
  if (direction === 'back')
    return `${operation.name}: take back ${progress.begun
      .map((i) => names[i])
      .reverse()
      .join(', ')}`;
  return `${operation.name}: ${names.slice(progress.step).join(', ')} (as far as one call goes)`;
}

/** What a change does to shards, as a person reads it in the web UI: "move shards 0, 2 of table 12 to trash on node-1". */
export function describeShardChange(change: ShardChange, shards: readonly ShardRef[], node: string): string {
  const numbers = shards.map((shard) => shard.shard);
  const listed = numbers.length <= 8 ? numbers.join(', ') : `${numbers.slice(0, 8).join(', ')} and ${numbers.length - 8} more`;
  const tables = [...new Set(shards.map((shard) => shard.tableId))];
  const which =
    tables.length > 1
      ? `${shards.length} shards of tables ${tables.join(', ')}`
      : `${numbers.length === 1 ? 'shard' : 'shards'} ${listed} of table ${shards[0]?.tableId}`;
  const doing = {
    createShard: `create ${which}`,
    dropShard: `drop ${which}`,
    markGarbage: `mark ${which} as garbage`,
    unmarkGarbage: `take back the garbage mark of ${which}`,
    deleteGarbage: `delete ${which} (purge)`,
    moveShard: change.method !== 'moveShard' ? '' : change.from === change.to ? `rename ${which}` : `move ${which} to ${change.to}`,
    truncateShard: change.method !== 'truncateShard' ? '' : `truncate ${which} into the trash as ${entries(change.into)}`,
    untruncateShard: change.method !== 'untruncateShard' ? '' : `take back the truncate of ${which} (${entries(change.into)} live again)`,
    checkTruncateShard: `check that ${which} can be truncated into the trash`,
  }[change.method];
  return `${doing} on ${node}`;
}

/** A truncate's trash entries, as a person reads them: "table 57", "tables 57, 58". */
function entries(into: TruncateEntries): string {
  return typeof into === 'number' ? `table ${into}` : `tables ${Object.values(into).join(', ')}`;
}

/** The shards grouped by the node that holds them, in placement order. */
function byNode(shards: readonly ShardRef[]): Array<[node: string, shards: ShardRef[]]> {
  const nodes = new Map<string, ShardRef[]>();
  for (const shard of shards) nodes.set(shard.node, [...(nodes.get(shard.node) ?? []), shard]);
  return [...nodes];
}
