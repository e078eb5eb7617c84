import { setTimeout as sleep } from 'node:timers/promises';
import type { Connection } from '@temporalio/client';

/** Where an endpoint routes its Nexus operations: a namespace's task queue, polled by a tablefate worker. */
export interface NexusEndpointTarget {
  name: string;
  namespace: string;
  taskQueue: string;
}

/** gRPC codes that no retry mends: a bad spec, no right to it, or a server without Nexus. */
const GRPC_INVALID_ARGUMENT = 3;
const GRPC_PERMISSION_DENIED = 7;
const GRPC_UNIMPLEMENTED = 12;
const GRPC_UNAUTHENTICATED = 16;
const FINAL = [GRPC_INVALID_ARGUMENT, GRPC_PERMISSION_DENIED, GRPC_UNIMPLEMENTED, GRPC_UNAUTHENTICATED];

/**
 * Makes the Nexus endpoint `name` route to `namespace`/`taskQueue` (the Nexus service `tablefate` of the workers that
 * poll it): created if missing, its target corrected if it routes elsewhere, kept as it is otherwise. Endpoints are the
 * cluster's, not a namespace's: a caller in any namespace names the endpoint, never the task queue.
 *
 * The endpoints' table is served by the matching process that owns it in the membership ring, and a cluster just
 * started may not know its owner yet (`Aborted`: "matching node doesn't think it's the Nexus endpoints table owner");
 * so every refusal but a final one is tried again until `timeoutMs` has passed, and the last one is thrown.
 */
export async function ensureNexusEndpoint(
  connection: Connection,
  target: NexusEndpointTarget,
  opts: { timeoutMs: number },
): Promise<'created' | 'updated' | 'kept'> {
  const deadline = Date.now() + opts.timeoutMs;
  for (let pause = 100; ; pause = Math.min(pause * 2, 1000)) {
    try {
      return await connection.withDeadline(Math.min(deadline, Date.now() + 10_000), () => ensureOnce(connection, target));
    } catch (err) {
      const code = (err as { code?: number }).code;
      if ((code !== undefined && FINAL.includes(code)) || Date.now() + pause > deadline) {
        throw new Error(`making the Nexus endpoint ${target.name} failed: ${(err as Error).message}`, { cause: err });
      }
      await sleep(pause);
    }
  }
}

async function ensureOnce(connection: Connection, target: NexusEndpointTarget): Promise<'created' | 'updated' | 'kept'> {
  const spec = { name: target.name, target: { worker: { namespace: target.namespace, taskQueue: target.taskQueue } } };
  const { endpoints } = await connection.operatorService.listNexusEndpoints({ name: target.name, pageSize: 1 });
  const existing = endpoints?.find((e) => e.spec?.name === target.name);
  // (A create that raced another's, or whose answer was lost, is refused as AlreadyExists: the next try finds it.)
  if (!existing) {
    await connection.operatorService.createNexusEndpoint({ spec });
    return 'created';
  }
  const worker = existing.spec?.target?.worker;
  if (worker?.namespace === target.namespace && worker.taskQueue === target.taskQueue) return 'kept';
  await connection.operatorService.updateNexusEndpoint({ id: existing.id, version: existing.version, spec });
  return 'updated';
}
