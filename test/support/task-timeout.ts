import type { WorkflowClientInterceptor } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';

/**
 * A client interceptor that gives every workflow it starts a workflow task timeout of `timeoutMs()` (read at each
 * start; undefined leaves the server's default, 10 s). For tests that wait for a task to expire (a worker killed
 * while it held one), or for a long local activity to hand its task over (at 80 % of the timeout): the same
 * paths, seconds sooner. Product code never sets it.
 */
export function taskTimeoutInterceptor(timeoutMs: () => number | undefined): WorkflowClientInterceptor {
  const timeout = () => {
    const ms = timeoutMs();
    return ms === undefined ? {} : { workflowTaskTimeout: msToTs(ms) };
  };
  return {
    startWithDetails: (input, next) => next({ ...input, options: { ...input.options, ...timeout() } }),
    signalWithStart: (input, next) => next({ ...input, options: { ...input.options, ...timeout() } }),
    startUpdateWithStart: (input, next) => next({ ...input, workflowStartOptions: { ...input.workflowStartOptions, ...timeout() } }),
  };
}
