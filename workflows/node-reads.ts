import { ActivityFailure, ApplicationFailure, proxyActivities, TimeoutFailure, workflowInfo } from '@temporalio/workflow';
import { storageQueue } from '../domain/operations';
import type { Activities } from '../activities';
import { domainFailure } from './failures';

/** The reads a workflow asks of one storage node, on its own queue: they change nothing. */
type NodeReads = Pick<Activities, 'dependentsOfShards' | 'referencingTables'>;

/** How long a node's worker has to pick a question up: one that is down fails the read rather than hold it. */
const PICK_UP = '5 seconds';

/**
 * Asks storage node `node` a read (`ask`, on the node's queue: the worker that serves it answers), briefly retried. A
 * refusal the node finds fails with its own type; a node whose worker did not pick the question up, or did not answer,
 * with a StorageFault naming it.
 */
export async function askNode<T>(node: string, ask: (reads: NodeReads) => Promise<T>): Promise<T> {
  const reads = proxyActivities<NodeReads>({
    taskQueue: storageQueue(workflowInfo().taskQueue, node),
    scheduleToStartTimeout: PICK_UP,
    startToCloseTimeout: '10 seconds',
    retry: { maximumAttempts: 2, initialInterval: '200ms' },
  });
  try {
    return await ask(reads);
  } catch (err) {
    throw unanswered(err, node);
  }
}

function unanswered(err: unknown, node: string): unknown {
  const failure = domainFailure(err);
  if (failure !== err) return failure;
  if (err instanceof ActivityFailure && err.cause instanceof TimeoutFailure) {
    return ApplicationFailure.create({
      message: `storage node ${node} did not answer (${err.cause.message}): is its worker running?`,
      type: 'StorageFault',
      nonRetryable: true,
      cause: err,
    });
  }
  return err;
}
