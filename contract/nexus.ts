import { getClient, startWorkflow, WorkflowRunOperationHandler } from '@temporalio/nexus';
import * as nexus from 'nexus-rpc';
import { CONTRACT_CALLS, CONTRACT_READS, contractWorkflowType, tablefateService, type ContractCallName } from '../domain/contract';
import { typed } from './activities';
import { contractClient, type ContractDeps } from './sdk';

const isRead = (name: ContractCallName): boolean => (CONTRACT_READS as readonly string[]).includes(name);

/**
 * The Nexus service `tablefate`: the contract's calls as operations of the same names, inputs and answers, for a
 * workflow in any language and any namespace that reaches this deployment through an endpoint. A write is an
 * asynchronous operation whose run is the call's own (`tablefate.v1.<call>`, as a service starts it by type name): the
 * caller's workflow waits for it durably, across a restart of either side, and its failure is the call's, by type name.
 * The run's id comes from the Nexus request id, so the server's retry of a start joins the run the first one started.
 * A read answers at once, in the handler.
 */
export function tablefateServiceHandler(deps: ContractDeps) {
  const operation = (name: ContractCallName): nexus.OperationHandler<unknown, unknown> | nexus.SyncOperationHandler<unknown, unknown> =>
    isRead(name)
      ? async (ctx, request) => {
          const sdk = contractClient(deps, getClient(), `nexus ${ctx.service}.${ctx.operation}`);
          const planned = await typed(() => sdk.planCall(name, request));
          return 'done' in planned ? planned.done : undefined;
        }
      : new WorkflowRunOperationHandler<unknown, unknown>((ctx, request) =>
          startWorkflow(ctx, contractWorkflowType(name), {
            workflowId: `nexus-${name}-${ctx.requestId}`,
            args: [request],
            workflowIdConflictPolicy: 'USE_EXISTING',
          }),
        );
  return nexus.serviceHandler(
    tablefateService,
    Object.fromEntries(CONTRACT_CALLS.map((name) => [name, operation(name)])) as Parameters<
      typeof nexus.serviceHandler<typeof tablefateService.operations>
    >[1],
  );
}
