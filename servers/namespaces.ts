import { setTimeout as sleep } from 'node:timers/promises';
import type { Connection } from '@temporalio/client';
// The SDK's own Duration encoder (a protobuf Duration's seconds are a Long).
import { msToTs } from '@temporalio/common/lib/time';

/**
 * Registers Temporal namespace `namespace` if it is missing, and resolves once the frontend serves it. A new namespace
 * is in the database at once but reaches a server's namespace cache (which every workflow start reads) only at its next
 * refresh, some 10 s later on a cluster; so the wait is on a call served from that cache.
 */
export async function ensureNamespace(
  connection: Connection,
  namespace: string,
  opts: { retentionMs: number; timeoutMs: number },
): Promise<{ registered: boolean }> {
  const deadline = Date.now() + opts.timeoutMs;
  let exists = false;
  let registered = false;
  for (;;) {
    try {
      if (!exists) {
        try {
          await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs(opts.retentionMs) });
          registered = true;
        } catch (err) {
          if (!/already exists|AlreadyExists/i.test((err as Error).message)) throw err;
        }
        exists = true;
      }
      await connection.workflowService.listWorkflowExecutions({ namespace, pageSize: 1 });
      return { registered };
    } catch (err) {
      // The server may still be starting, or not serve the new namespace yet.
      if (Date.now() > deadline) {
        throw new Error(
          `the Temporal frontend did not serve namespace ${namespace} within ${opts.timeoutMs} ms: ${(err as Error).message}`,
        );
      }
      await sleep(250);
    }
  }
}
