import type { Workflow, WorkflowHandle, WorkflowResultType, WorkflowStartOptions } from '@temporalio/client';
import { WrongStateError } from '../domain/errors';
import { requestRunId, type AnyOperation, type OperationTarget } from '../domain/operations';
import { STARTED_BY_MEMO } from '../domain/operation-runs';
import { describeCheck, type ClientContext } from './context';
import type { WriteOptions } from './options';
import { repeatable, type ExecuteOptions } from './calls';
import { temporalClient, temporalClientInternals } from './temporal';
import type { Operation } from './writes';

/** What every start adds to a run's input (see startOptions). */
type Added = 'catalogId' | 'startedBy' | 'lockWait';
/** A workflow's input less what every start adds (a union of inputs, a lease's, stays one). */
type OwnInput<W extends Workflow> = Parameters<W>[0] extends infer I ? (I extends unknown ? Omit<I, Added> : never) : never;

/** One run of an operation, as its record says to start it. */
export interface Run<W extends Workflow, R> {
  record: AnyOperation;
  /** The call's own (Call.workflowId) unless said: a trash that tries again may find its name on another table. */
  workflowId?: string;
  input: OwnInput<W>;
  /** What its search attributes say of its table. */
  target: OperationTarget;
  /** What the web UI shows of it. */
  summary: string;
  /** How the answer is read of the run once started (its result when absent): a recall's progress, a joined create's. */
  answer?: (handle: WorkflowHandle<W>, signal: AbortSignal) => Promise<R>;
}

/** How one attempt ended, and the run that answered it (started, or joined), where the server said which. */
export type Outcome<R> = ({ answer: R } | { error: unknown }) & { runId?: string };

/**
 * One SDK write: what its caller is told about it if it fails or times out (Operation), and the run it starts. With a
 * request id (a contract call's execute, which a dead worker's next attempt repeats), the server answers a start with
 * the run this id started (Temporal's start request id, which dedupes even after that run closed).
 */
export interface Call<W extends Workflow, R> extends Operation, ExecuteOptions {
  timeoutMs: number;
  /** The run to start; or what makes it, asked after the worker check and again on each attempt `again` asks for. */
  run: Run<W, R> | ((attempt: number) => Promise<Run<W, R>>);
  /**
   * Whether to start again after an attempt's answer or failure (the trash's: the run it joined may have answered an
   * earlier request). May throw what the outcome means instead. The call's deadline bounds it all.
   */
  again?: (outcome: Outcome<R>, signal: AbortSignal) => Promise<boolean>;
}

/**
 * The part of a call that names its run on table `tableId` (the record's id for it) and how a person sees it:
 * `tablefate describe <id>`. `what` is how messages tell it ("purge of table 12").
 */
export function onTable(
  ctx: ClientContext,
  record: AnyOperation,
  tableId: number,
  what: string,
  timeoutMs: number,
  opts: WriteOptions & ExecuteOptions,
): Operation & ExecuteOptions & { timeoutMs: number } {
  return {
    workflowId: record.workflowId(tableId, ctx.catalog.id),
    what,
    check: describeCheck(tableId),
    timeoutMs,
    ...repeatable(opts),
    onDetails: opts.onDetails,
  };
}

/**
 * Starts an operation's run and waits for its answer, within the call's deadline (WriteRunner: a worker polls first,
 * failures come out typed). Every SDK write that starts a run goes through here, so that each starts as its record
 * says: its id's conflict policy (FAIL: a run of that id going on is WrongState), its search attributes, who started it.
 */
export function startAndWait<W extends Workflow, R = WorkflowResultType<W>>(ctx: ClientContext, call: Call<W, R>): Promise<R> {
  return ctx.writes.run(call, call.timeoutMs, async (started, signal) => {
    for (let attempt = 0; ; attempt++) {
      const run = typeof call.run === 'function' ? await call.run(attempt) : call.run;
      let outcome: Outcome<R>;
      const operationId = run.workflowId ?? call.workflowId;
      const workflowId = call.runKey === undefined ? operationId : requestRunId(operationId, call.runKey);
      call.onRun?.(workflowId);
      const ran: { runId?: string } = {};
      try {
        outcome = { answer: await startOnce(ctx, run, workflowId, call, started, signal, ran), ...ran };
      } catch (error) {
        outcome = { error, ...ran };
      }
      // (A run of the request's own answers that request: there is no other's answer to start again after.)
      if (call.runKey !== undefined || !(await call.again?.(outcome, signal))) {
        if ('error' in outcome) throw outcome.error;
        return outcome.answer;
      }
    }
  });
}

async function startOnce<W extends Workflow, R>(
  ctx: ClientContext,
  run: Run<W, R>,
  workflowId: string,
  { requestId, runKey }: ExecuteOptions,
  started: () => void,
  signal: AbortSignal,
  ran: { runId?: string },
): Promise<R> {
  const options = startOptions(ctx, run, workflowId, requestId, runKey !== undefined);
  const { WorkflowExecutionAlreadyStartedError } = temporalClient();
  let handle: WorkflowHandle<W>;
  try {
    const begun = await ctx.client.workflow.start<W>(run.record.workflowType, options);
    // (The run started, or the one running that the start joined: the server answers its id either way.)
    ran.runId = begun.firstExecutionRunId;
    handle = begun;
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    // The request's own run has closed (it is never started twice): its answer is what it ended with.
    if (runKey !== undefined) handle = ctx.client.workflow.getHandle<W>(workflowId);
    else if (run.record.start.workflowIdConflictPolicy !== 'FAIL') throw err;
    else {
      const { name } = run.record;
      const of = run.target.tableId === undefined ? '' : ` of table ${run.target.tableId}`;
      throw new WrongStateError(`${/^[aeiou]/.test(name) ? 'an' : 'a'} ${name}${of} is already running`);
    }
  }
  started();
  // (Without `answer`, R is the workflow's result: Call's default.)
  return run.answer ? run.answer(handle, signal) : (handle.result() as Promise<R>);
}

/**
 * What every start shares, as its record says: its id, the task queue, the catalog it belongs to, who started it (in
 * its input and its memo, where `history` reads it), its search attributes and what the UI shows, and what a second
 * request for the same id does.
 */
function startOptions<W extends Workflow>(
  ctx: ClientContext,
  run: Run<W, unknown>,
  workflowId: string,
  requestId: string | undefined,
  ownRun: boolean,
): WorkflowStartOptions<W> & AnyOperation['start'] {
  const options = {
    // (The SDK's own way to give a start its request id, as its Nexus helpers do: not in WorkflowStartOptions' types.)
    ...(requestId === undefined ? {} : { [temporalClientInternals().InternalWorkflowStartOptionsSymbol]: { requestId } }),
    workflowId,
    taskQueue: ctx.taskQueue,
    args: [{ ...run.input, catalogId: ctx.catalog.id, lockWait: ctx.lockWait, startedBy: ctx.startedBy }],
    typedSearchAttributes: run.record.searchAttributes(run.target),
    memo: { [STARTED_BY_MEMO]: ctx.startedBy },
    staticSummary: run.summary,
    ...run.record.start,
    // A request's own run: a repeat joins it while it runs, and its id never gets a second one.
    ...(ownRun ? { workflowIdConflictPolicy: 'USE_EXISTING', workflowIdReusePolicy: 'REJECT_DUPLICATE' } : {}),
  };
  // (The run's own input and what is added to it make Parameters<W>: the compiler cannot follow that for a W unknown here.)
  return options as unknown as WorkflowStartOptions<W> & AnyOperation['start'];
}
