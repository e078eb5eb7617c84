import { workflowInfo, type WorkflowInterceptorsFactory } from '@temporalio/workflow';
import { LOSE_TASK } from './lost-task-mark';

/*
 * A workflow interceptor module of the engine tests' bundle only (test/engine/engine.ts): a workflow task lost right
 * after a local activity ran, as a worker killed at that point loses it. The worker marks the answer of the call whose
 * task is to be lost (the first time that call runs); here the mark is taken off, the workflow goes on with the answer
 * as it is, and the activation then fails with a plain Error (not a Temporal failure), which fails the workflow task:
 * the commands it made and the local activities' results are never recorded, and the server hands the task out again.
 * The next attempt replays the history and makes the same calls again, with the same keys. Module state is the run's
 * own (the SDK gives each workflow run its own copy of the bundle's modules).
 */

let loseThisTask = false;

export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      async scheduleLocalActivity(input, next) {
        const result: unknown = await next(input);
        if (typeof result !== 'object' || result === null || !(LOSE_TASK in result)) return result;
        const { [LOSE_TASK]: _mark, ...answer } = result as Record<string, unknown>;
        if (!workflowInfo().unsafe.isReplaying) loseThisTask = true;
        return answer;
      },
    },
  ],
  internals: [
    {
      concludeActivation(input, next) {
        if (loseThisTask) {
          loseThisTask = false;
          throw new Error('test/engine: this workflow task is lost after the local activity it ran');
        }
        return next(input);
      },
    },
  ],
});
