import type { HoldInput } from '../domain/operation-inputs';
import type { Operation } from '../domain/steps';
import type { TableInfo } from '../domain/table';
import { catalogCalls } from './catalog-calls';
import { operationRun } from './execute';

/**
 * A legal hold placed on a table (READY or trashed), or released: one change of the catalog under the table's lock.
 * Released, a trashed table's trash run is woken: its expiry may have passed while it was held, and it purges the table
 * then.
 */
export const hold: Operation<HoldInput> = {
  name: 'hold',
  lockTable: (input) => input.tableId,
  steps: [
    {
      name: 'change hold',
      change: ({ input, now }) => ({
        kind: 'changeHold',
        tableId: input.tableId,
        hold: input.hold ? { reason: input.hold.reason, since: now } : null,
        ...(input.expectedName ? { expectName: input.expectedName } : {}),
      }),
    },
  ],
};

export async function holdTable(input: HoldInput): Promise<TableInfo> {
  const table = await operationRun(hold, input).result();
  if (!input.hold && table.state === 'TRASHED') await catalogCalls(input.catalogId).wakeTrash(table.id);
  return table;
}
