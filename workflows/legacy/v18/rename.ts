import { OPERATIONS } from '../../../domain/operations';
import { type RenameInput } from '../../../domain/operation-inputs';
import { notRenamable, tableNotFound } from '../../../domain/refusals';
import { toTableInfo, type TableInfo } from '../../../domain/table';
import { operationCalls } from './operation-calls';
import { tableUnderLock, withLock, type Waiting } from './lock';
import { asFailure, runSteps } from './steps';

/**
 * Gives a READY table a new name (or namespace). Under the table's lock, once the table is found READY, it takes the
 * new name's lock too (so that a create of that name waits instead of racing it), and one compare-and-set moves
 * the table from READY to READY under the new name: the catalog refuses a name another table holds (NameTaken).
 * Nothing else changes: not the id, not a shard. A single catalog change has nothing to undo and leaves no table
 * half way (no transitional state to resume).
 *
 * The name's lock only after the check: a rename then waits for a name only while it holds a READY table's lock,
 * and a create waits only for the lock of a table it is creating (CREATING, CREATE_FAILED), so no ring of renames
 * and creates can wait on each other for ever.
 */
export async function renameTable(input: RenameInput): Promise<TableInfo> {
  const calls = operationCalls(input.catalogId);
  const waiting: Waiting = { policy: input.lockWait, input };
  const [tableLock, nameLock] = OPERATIONS.rename.locks(input);
  const table = await withLock(
    calls,
    tableLock!,
    waiting,
    (read) =>
      runSteps(
        {
          name: 'check',
          call: async () => {
            const table = await tableUnderLock(calls, read, input.tableId);
            if (!table) throw asFailure(tableNotFound(input.tableId));
            if (table.state !== 'READY') throw asFailure(notRenamable(table));
            return table;
          },
        },
        {
          // The operation's last change: the locks go with it. The same name again is a move already made.
          name: 'lock the new name, rename',
          call: (table) =>
            withLock(calls, nameLock!, waiting, () =>
              calls.commit({
                tableId: table.id,
                from: ['READY'],
                to: 'READY',
                now: Date.now(),
                rename: input.newName,
                expectName: input.expectedName,
              }),
            ),
        },
      ),
    input.tableId,
  );
  return toTableInfo(table);
}
