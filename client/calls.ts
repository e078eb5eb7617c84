import { callTimeout, type ClientContext } from './context';
import type { WriteOptions } from './options';

/**
 * A call of the SDK in two halves, as a contract call runs it (contract/): `plan` validates the request and reads what
 * the call needs from the catalog (names resolved, refusals made: reads only), and either answers at once (a read, a
 * change already made) or says what `execute` is to start; `execute` starts (or joins) that run and waits for its
 * answer. The SDK runs the two back to back. A contract call records the plan (a local activity) and executes it in an
 * activity that a worker's death repeats: given the request's id, a repeated execute finds the run its first attempt
 * started (Call.requestId), where a repeated plan would find the change already made and refuse it.
 *
 * A plan is data (it crosses a workflow's history): names, ids, a table as the catalog had it.
 */
export interface CallRecord<Request, Plan, Result, Options extends WriteOptions = WriteOptions> {
  plan(ctx: ClientContext, request: Request): Planned<Plan, Result> | Promise<Planned<Plan, Result>>;
  execute(ctx: ClientContext, plan: Plan, opts: Options & ExecuteOptions): Promise<Result>;
}

/** The first half's answer: the call's answer already, or the plan of the run that makes it. */
export type Planned<Plan, Result> = { done: Result } | { plan: Plan };

/** What a repeatable execute is given besides a write's options. */
export interface ExecuteOptions {
  /** The request's own id, for an execute that may be repeated (see Call in start.ts). */
  requestId?: string;
  /** Hears the workflow id of the operation's run as it is about to start or join it (a contract call, to cancel it). */
  onRun?: (workflowId: string) => void;
  /**
   * A run of the request's own, for a request that may be taken up again at any point (the SQL door's): its workflow id
   * is the operation's with this key (requestRunId), it joins no other request's run, and the server never gives that id
   * a second run; taken up again after it closed, the call answers what it ended with.
   */
  runKey?: string;
}

/** An execute's options as a Call takes them. */
export const repeatable = ({ requestId, onRun, runKey }: ExecuteOptions): ExecuteOptions => ({ requestId, onRun, runKey });

/** A read: all plan, answered at once. */
export function readCall<Request, Result>(
  read: (ctx: ClientContext, request: Request) => Promise<Result>,
): CallRecord<Request, never, Result> {
  return {
    plan: async (ctx, request) => ({ done: await read(ctx, request) }),
    execute: () => Promise.reject(new Error('a read has nothing to execute')),
  };
}

/** Both halves, back to back: the SDK's call. */
export async function perform<Request, Plan, Result, Options extends WriteOptions>(
  ctx: ClientContext,
  call: CallRecord<Request, Plan, Result, Options>,
  request: Request,
  opts: Options,
): Promise<Result> {
  callTimeout(ctx, opts); // (a timeout given wrong is refused before anything is read)
  const planned = await call.plan(ctx, request);
  return 'done' in planned ? planned.done : call.execute(ctx, planned.plan, opts);
}
