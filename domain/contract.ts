import * as nexus from 'nexus-rpc';

/**
 * The calls a service in any language may make (docs/contract): each is a workflow of its own on the deployment's task
 * queue, `tablefate.v1.<name>`, whose input is the SDK's request and whose result is the SDK's answer, and an operation
 * of the same name of the Nexus service `tablefate`. Pure: the workflows (workflows/contract.ts) are made from it.
 */

/** The contract's version: a change that breaks a caller is a new version, whose calls are new workflow types. */
export const CONTRACT_VERSION = 1;

/** The Nexus service that offers the calls (an endpoint routes it to the deployment's namespace and task queue). */
export const NEXUS_SERVICE = 'tablefate';

/** The endpoint `tablefate dev` and `tablefate cluster up` make for it, routed to the deployment's task queue. */
export const NEXUS_ENDPOINT = 'tablefate';

/** The writes: each starts (or joins) one operation's run and answers once it is done. */
export const CONTRACT_WRITES = [
  'create',
  'adopt',
  'trash',
  'truncate',
  'undelete',
  'purge',
  'rename',
  'hold',
  'release',
  'setRetention',
  'acquireLease',
  'renewLease',
  'releaseLease',
  'setSetting',
  'unsetSetting',
] as const;

/** The reads: answered from the catalog (and, for sizes, the nodes) at once. */
export const CONTRACT_READS = ['describe', 'list', 'listLeases', 'getSettings'] as const;

export const CONTRACT_CALLS = [...CONTRACT_WRITES, ...CONTRACT_READS] as const;
export type ContractCallName = (typeof CONTRACT_CALLS)[number];

/**
 * The Nexus service's definition: an operation per call, of the call's name, its input the call's request and its
 * output the call's answer (JSON, as docs/contract gives them). Pure, for a TypeScript caller's workflow too.
 */
export const tablefateService = nexus.service(
  NEXUS_SERVICE,
  Object.fromEntries(CONTRACT_CALLS.map((name) => [name, nexus.operation<unknown, unknown>()])) as Record<
    ContractCallName,
    nexus.OperationDefinition<unknown, unknown>
  >,
);

/** The workflow type of a call: `tablefate.v1.create`. */
export const contractWorkflowType = (name: ContractCallName): string => `tablefate.v${CONTRACT_VERSION}.${name}`;

/**
 * The failures a call's activity tries again rather than ends the call with: the server lost a moment, the call's own
 * day-long wait ran out (the next attempt joins the same run), no worker polled. Every other failure is the answer.
 */
export const RETRIED_FAILURE_TYPES: readonly string[] = ['ServerUnreachable', 'OperationTimeout', 'NoWorker'];

/** What the contract's workflows ask of the activities (contract/activities.ts). */
export interface ContractActivities {
  /** The call's first half: its answer already (a read, a change already made), or its plan. */
  planContractCall(input: { name: ContractCallName; request: unknown }): Promise<{ done: unknown } | { plan: unknown }>;
  /** The call's second half: starts or joins the planned run (the request's id: the same run, however often) and waits. */
  executeContractCall(input: { name: ContractCallName; plan: unknown; requestId: string }): Promise<unknown>;
}
