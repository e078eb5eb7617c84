import type { Connection } from '@temporalio/client';

/** Where an endpoint routes its Nexus operations: a namespace's task queue, polled by a tablefate worker. */
export interface NexusEndpointTarget {
  name: string;
  namespace: string;
  taskQueue: string;
}

/**
 * Makes the Nexus endpoint `name` route to `namespace`/`taskQueue` (the Nexus service `tablefate` of the workers that
 * poll it): created if missing, its target corrected if it routes elsewhere, kept as it is otherwise. Endpoints are the
 * cluster's, not a namespace's: a caller in any namespace names the endpoint, never the task queue.
 */
export async function ensureNexusEndpoint(connection: Connection, target: NexusEndpointTarget): Promise<'created' | 'updated' | 'kept'> {
  const spec = { name: target.name, target: { worker: { namespace: target.namespace, taskQueue: target.taskQueue } } };
  const { endpoints } = await connection.operatorService.listNexusEndpoints({ name: target.name, pageSize: 1 });
  const existing = endpoints?.find((e) => e.spec?.name === target.name);
  if (!existing) {
    await connection.operatorService.createNexusEndpoint({ spec });
    return 'created';
  }
  const worker = existing.spec?.target?.worker;
  if (worker?.namespace === target.namespace && worker.taskQueue === target.taskQueue) return 'kept';
  await connection.operatorService.updateNexusEndpoint({ id: existing.id, version: existing.version, spec });
  return 'updated';
}
