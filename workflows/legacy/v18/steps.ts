import { ApplicationFailure, CancellationScope, ContinueAsNew, log } from '@temporalio/workflow';
import { domainFailure } from '../../failures';
export { asFailure } from '../../failures';
import type { ShardChange } from '../../../domain/contracts';
import type { TableName } from '../../../domain/names';
import type { TableState } from '../../../domain/states';
import type { TableRecord } from '../../../domain/table';
import type { CommitAhead, OperationCalls } from './operation-calls';
import type { EndOfTrash } from '../../../domain/steps';
import { enterStep, stepProgress, tookBack, undoingStep } from '../../observe';

/** A step's answer that ends the operation now, successfully (for example: found already done). */
export class Finished<T> {
  constructor(readonly value: T) {}
}

/**
 * A step's answer that the operation is past a point of no return that an earlier run crossed (a resumed
 * purge whose deletes had begun): from here on it only goes forward, nothing is undone.
 */
export class ForwardOnly<T> {
  constructor(readonly value: T) {}
}

export const finished = <T>(value: T) => new Finished(value);
export const forwardOnly = <T>(value: T) => new ForwardOnly(value);

type StepResult<T> = T | Finished<T> | ForwardOnly<T>;

/**
 * One step of an operation, in the manner of Accumulo FATE's Repo: what it does (`call`) beside how to take
 * it back (`undo`). The table as the previous step left it comes in, the table as this one leaves it goes
 * out: state passes from step to step, explicitly. A step with no undo changes nothing that needs taking back.
 */
export interface Step<In, Out = In> {
  name: string;
  call: (table: In) => Promise<StepResult<Out>>;
  undo?: (table: Out) => Promise<void>;
  /**
   * Once this step starts, the operation can only go forward (purge's deletes): the undos of earlier steps
   * are dropped, and a failure leaves the operation to be resumed by running it again.
   */
  pointOfNoReturn?: true;
}

/**
 * Failures after which the operation must not compensate: it no longer owns the table (its lock was taken
 * over) or the table is not of its catalog. Undoing would touch what belongs to someone else.
 */
const NOT_OURS = ['LockLost', 'WrongCatalog'];

/**
 * Runs the steps in order, the first one finding the table the rest work on. When one fails for good, the
 * undos of every step begun (the failing one included, since it may have half happened) run in reverse, in a
 * scope that cancellation cannot interrupt, and the failure is rethrown in the form the client understands.
 *
 * If an undo itself fails for good, compensation stops there: the earlier undos are the catalog's, and running
 * them would record a state the bytes are not in. The table stays in its transitional state (TRASHING,
 * RESTORING, PURGING, CREATING), from which running the same operation again resumes. An operation that has
 * lost its table compensates nothing at all.
 */
export async function runSteps<T>(first: Step<void, T>, ...rest: Array<Step<T>>): Promise<T> {
  let table: T | undefined;
  let begun: Array<Step<T>> = [];
  let onlyForward = false;
  try {
    enterStep(first.name);
    const answer = await first.call();
    table = valueOf(answer);
    if (answer instanceof Finished) return table;
    if (answer instanceof ForwardOnly) onlyForward = true;
    else if (first.undo) begun.push({ name: first.name, call: () => Promise.resolve(table!), undo: first.undo });
    for (const step of rest) {
      if (step.pointOfNoReturn) begun = [];
      if (!onlyForward && !step.pointOfNoReturn) begun.push(step);
      if (step.pointOfNoReturn) onlyForward = true;
      enterStep(step.name);
      const result = await step.call(table);
      table = valueOf(result);
      if (result instanceof Finished) return table;
      if (result instanceof ForwardOnly) {
        onlyForward = true;
        begun = [];
      }
    }
    return table;
  } catch (err) {
    // A run that continues as new (a long lock wait) starts over in the next run: nothing to undo.
    if (err instanceof ContinueAsNew) throw err;
    const failure = domainFailure(err);
    const type = failure instanceof ApplicationFailure ? failure.type : undefined;
    if (type && NOT_OURS.includes(type)) {
      log.error('the operation no longer owns its table; stopping without undoing anything', { error: String(err) });
    } else if (table !== undefined) {
      if (begun.some((step) => step.undo)) {
        log.warn('the operation stopped; taking back what it did', {
          error: String(failure),
          undo: begun.filter((s) => s.undo).map((s) => s.name),
        });
      }
      await compensate(begun.reverse(), table);
    }
    throw failure;
  }
}

async function compensate<T>(steps: Array<Step<T>>, table: T): Promise<void> {
  await CancellationScope.nonCancellable(async () => {
    for (const step of steps) {
      if (!step.undo) continue;
      undoingStep(step.name);
      try {
        await step.undo(table);
      } catch (undoErr) {
        log.error('compensation failed; the table stays in its transitional state until the operation is run again', {
          step: step.name,
          error: String(undoErr),
        });
        return;
      }
    }
    if (steps.some((step) => step.undo)) tookBack();
  });
}

function valueOf<T>(result: StepResult<T>): T {
  return result instanceof Finished || result instanceof ForwardOnly ? result.value : result;
}

// ---- The shapes of step that repeat from one operation to the next ----

export { SHARDS } from '../../../domain/steps';

/** What a step hands the next: the table itself, or a record that carries it (an undelete's carries its trash too). */
type Carrying = TableRecord | { table: TableRecord };
const tableIn = (carried: Carrying): TableRecord => ('table' in carried ? carried.table : carried);

/**
 * A step that moves table `tableId` from `from` to `to` in one compare-and-set of the catalog, and its undo, the move
 * back. `expectName`: refused (WrongState) unless the table still has that name.
 */
export function changeState(
  calls: OperationCalls,
  tableId: number,
  [from, to]: [TableState, TableState],
  expectName?: TableName,
): Step<unknown, TableRecord> {
  return {
    name: `mark ${to.toLowerCase()}`,
    call: () => calls.transition({ tableId, from: [from], to, now: Date.now(), ...(expectName ? { expectName } : {}) }),
    undo: async () => {
      await calls.transition({ tableId, from: [to], to: from, now: Date.now() });
    },
  };
}

/**
 * The change of the table's state that a step makes first, in one compare-and-set of the catalog (`rename`: under that
 * name), and that its undo makes back last (`backAs`: under that name).
 */
export interface StateChange {
  from: TableState;
  to: TableState;
  rename?: TableName;
  backAs?: TableName;
}

/**
 * A step that makes `change` (or the change `change()` makes, when the step runs) on every shard of the table and, if
 * it has an undo, `undo` on every shard to take it back. `then()`: the next step's change, tried in the same calls.
 * `state(carried)`: the change of the table's state the step begins with (since v15, made with its first shard call:
 * one local activity less than a step of its own), undone after the shards' undo. `commit`: the operation's commit step,
 * whose change the step's last call makes too when every shard of the step is changed here (since v15): the commit step
 * then finds it made.
 */
export function everyShard<T extends Carrying>(
  calls: OperationCalls,
  name: string,
  change: ShardChange | (() => ShardChange),
  {
    undo,
    onShard,
    then,
    state,
    commit,
  }: {
    undo?: ShardChange;
    onShard?: () => void;
    then?: () => ShardChange | undefined;
    state?: (carried: T) => StateChange;
    commit?: CommitStep<T>;
  } = {},
): Step<T> {
  return {
    name,
    call: async (carried) => {
      const begins = state?.(carried);
      const tableId = tableIn(carried).id;
      // (A change made when the step runs: a drop's move takes the drain time its deadline leaves.)
      const table = await calls.changeShards(tableIn(carried), typeof change === 'function' ? change() : change, {
        onShard: counted(name, tableIn(carried), onShard),
        then: then?.(),
        ...(begins
          ? {
              before: { tableId, from: [begins.from], to: begins.to, now: Date.now(), ...(begins.rename ? { rename: begins.rename } : {}) },
            }
          : {}),
        ...(commit ? { commit: commit.ahead(carried) } : {}),
      });
      return begins ? withTable(carried, table) : carried;
    },
    ...(undo || state
      ? {
          undo: async (carried: T) => {
            if (undo) await calls.changeShards(tableIn(carried), undo, { onShard: counted(`undo ${name}`, tableIn(carried)) });
            const begun = state?.(carried);
            if (begun) {
              await calls.transition({
                tableId: tableIn(carried).id,
                from: [begun.to],
                to: begun.from,
                now: Date.now(),
                ...(begun.backAs ? { rename: begun.backAs } : {}),
              });
            }
          },
        }
      : {}),
  };
}

/** `carried` with the table `table` in it (or `table` itself, when what is carried is the table). */
function withTable<T extends Carrying>(carried: T, table: TableRecord): T {
  return ('table' in carried ? { ...carried, table } : table) as T;
}

/** Says how many of the table's shards the step has done so far ("move shards to trash: 3/8"), and tells `onShard`. */
function counted(name: string, table: TableRecord, onShard?: () => void): () => void {
  const total = table.placement.length;
  let done = 0;
  stepProgress(name, done, total);
  return () => {
    stepProgress(name, ++done, total);
    onShard?.();
  };
}

/** The operation's last step, and the change it makes, which a shard step's last call may make ahead of it. */
export interface CommitStep<T> extends Step<T> {
  ahead: (carried: T) => CommitAhead;
}

/**
 * The operation's last step: the change to its end state, which releases its locks with it (nothing to undo), and
 * ends the table's trash timer if `endsTimer` says so.
 */
export function commit<T extends Carrying = TableRecord>(
  calls: OperationCalls,
  [from, to]: [TableState, TableState],
  endsTimer: (carried: T) => EndOfTrash | undefined = () => undefined,
): CommitStep<T> {
  const change = (carried: T) => {
    const endTrashTimer = endsTimer(carried);
    return { tableId: tableIn(carried).id, from: [from], to, now: Date.now(), ...(endTrashTimer ? { endTrashTimer } : {}) };
  };
  return {
    name: `commit ${to.toLowerCase()}`,
    call: async (carried) => withTable(carried, await calls.commit(change(carried))),
    ahead: change,
  };
}
