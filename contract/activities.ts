import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { RETRIED_FAILURE_TYPES, type ContractActivities } from '../domain/contract';
import { TableFateError } from '../domain/errors';
import { contractClient, type ContractDeps } from './sdk';

/** What a contract call's execute waits for at most: a lock wait or a drain may be long; the caller's own deadline is theirs. */
const EXECUTE_TIMEOUT_MS = 24 * 3600 * 1000;
/** How often the waiting activity tells the server it is alive (its heartbeat timeout is 10 s: workflows/contract.ts). */
const HEARTBEAT_MS = 3_000;

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
      const beat = setInterval(() => Context.current().heartbeat(), HEARTBEAT_MS);
      try {
        Context.current().heartbeat();
        // (The call stops waiting, and the operation goes on, when the contract's run is cancelled or the worker stops.)
        return await typed(() => sdk().executeCall(name, plan, { requestId, timeoutMs: EXECUTE_TIMEOUT_MS }));
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
