import { createNexusServiceClient } from '@temporalio/workflow';
import { NEXUS_ENDPOINT, tablefateService } from '../domain/contract';

/**
 * A caller's workflow that creates a table through the Nexus service `tablefate` (endpoint `tablefate`, routed to the
 * bench's worker): the Nexus row of the lifecycle bench, against the floor.
 */
export async function createThroughNexus(request: unknown): Promise<unknown> {
  const tablefate = createNexusServiceClient({ service: tablefateService, endpoint: NEXUS_ENDPOINT });
  return tablefate.executeOperation('create', request, { scheduleToCloseTimeout: '1 minute' });
}
