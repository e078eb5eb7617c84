import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { RETRIED_FAILURE_TYPES, type ContractActivities } from '../domain/contract';
import { TableFateError } from '../domain/errors';
import { contractClient, type ContractDeps } from './sdk';

/** What a contract call's execute waits for at most: a lock wait or a drain may be long; the caller's own deadline is theirs. */
const EXECUTE_TIMEOUT_MS = 24 * 3600 * 1000;
/** How often the waiting activity tells the server it is alive (its heartbeat timeout is 5 s: workflows/contract.ts). */
const HEARTBEAT_MS = 1_000;

/**
 * The activities of the contract's calls (workflows/contract.ts): the SDK's call in its two halves, run by the worker
 * with its own catalog and its own Temporal client, in the name of the contract run that asks.
 */
export function createContractActivities(deps: ContractDeps): ContractActivities {
  const sdk = () => {
    const { workflowExecution, workflowType } = Context.current().info;
    return contractClient(deps, Context.current().client, `${workflowType} ${workflowExecution?.workflowId ?? '?'}`);
  };
  return {
    async planContractCall({ name, request }) {
      return typed(() => sdk().planCall(name, request));
    },
    async executeContractCall({ name, plan, requestId }) {
      const activity = Context.current();
      const client = sdk();
      let operation: string | undefined;
      // A cancel of the call (of its run, or of its Nexus operation) is a cancel of the operation, as the SDK's `cancel`
      // makes it: the operation takes back what it did, and the call ends cancelled once it has. A worker that stops is
      // not a cancel: the next attempt joins the operation, which goes on.
      const cancelled = activity.cancelled.catch(async (err: unknown) => {
        if (operation && activity.cancellationDetails?.cancelRequested) {
          await client.cancel({ workflowId: operation }).catch(() => undefined); // (finished meanwhile: its answer stands)
        }
        throw err;
      });
      cancelled.catch(() => undefined); // (heard below only if the call is cancelled while it waits)
      const beat = setInterval(() => activity.heartbeat(), HEARTBEAT_MS);
      try {
        activity.heartbeat();
        const answer = typed(() =>
          client.executeCall(name, plan, { requestId, timeoutMs: EXECUTE_TIMEOUT_MS, onRun: (workflowId) => (operation = workflowId) }),
        );
        try {
          // (An answer that comes first is the call's: the cancel came too late to take the operation back.)
          return await Promise.race([answer, cancelled]);
        } catch (err) {
          // Cancelled: the call ends so once the operation has been taken back, not with the operation's own failure.
          if (activity.cancellationDetails?.cancelRequested) await cancelled;
          throw err;
        }
      } finally {
        clearInterval(beat);
      }
    },
  };
}

/** A TableFateError as the failure a caller in another language reads: its type name, its message, what it carries. */
export async function typed<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (!(err instanceof TableFateError)) throw err;
    const { type, message } = err;
    const carried = Object.fromEntries(Object.entries(err).filter(([key]) => key !== 'type' && key !== 'name' && key !== 'cause'));
    throw ApplicationFailure.create({
      type,
      message,
      nonRetryable: !RETRIED_FAILURE_TYPES.includes(type),
      details: Object.keys(carried).length > 0 ? [carried] : [],
    });
  }
}
