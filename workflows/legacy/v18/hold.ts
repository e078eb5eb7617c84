import { OPERATIONS } from '../../../domain/operations';
import { type HoldInput } from '../../../domain/operation-inputs';
import { toTableInfo, type TableInfo } from '../../../domain/table';
import { operationCalls } from './operation-calls';
import { withLock } from './lock';
import { runSteps } from './steps';

/**
 * A legal hold placed on a table (READY or trashed), or released: one change of the catalog under the table's lock,
 * which is its last (the lock goes with it). Released, a trashed table's trash run is woken: its expiry may have passed
 * while it was held, and it purges the table then.
 */
export async function holdTable(input: HoldInput): Promise<TableInfo> {
  const calls = operationCalls(input.catalogId);
  const record = input.hold ? OPERATIONS.hold : OPERATIONS.release;
  const [tableLock] = record.locks(input);
  const table = await withLock(calls, tableLock!, { policy: input.lockWait, input }, () =>
    runSteps({
      name: input.hold ? 'place hold' : 'release hold',
      call: () =>
        calls.changeHold({
          tableId: input.tableId,
          hold: input.hold ? { reason: input.hold.reason, since: Date.now() } : null,
          ...(input.expectedName ? { expectName: input.expectedName } : {}),
        }),
    }),
  );
  if (!input.hold && table.state === 'TRASHED') await calls.wakeTrash(table.id);
  return toTableInfo(table);
}
