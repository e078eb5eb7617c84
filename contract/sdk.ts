import type { Client } from '@temporalio/client';
import type { CatalogReader } from '../catalog/catalog';
import { TableFateClient } from '../client';
import type { StorageDriverName } from '../domain/deployment';

/** What the worker gives the contract's calls: its catalog, its task queue, its storage driver. */
export interface ContractDeps {
  catalog: CatalogReader;
  taskQueue: string;
  storageDriver: StorageDriverName;
}

/**
 * The SDK as a contract call runs it in the worker: on the worker's catalog and its connection to the server, in the
 * name of `identity` (the call's run or Nexus operation, as `history` and `ops` show who started what).
 */
export function contractClient(deps: ContractDeps, client: Client, identity: string): TableFateClient {
  return new TableFateClient({ client, catalog: deps.catalog, taskQueue: deps.taskQueue, storageDriver: deps.storageDriver, identity });
}
