import { lockFor, type RenameInput } from '../domain/operations';
import { notRenamable, tableNotFound } from '../domain/refusals';
import { transition, type Operation } from '../domain/steps';
import type { TableInfo } from '../domain/table';
import { operationWorkflow } from './execute';

/**
 * Gives a READY table a new name (or namespace): one compare-and-set from READY to READY under the new name, which the
 * catalog refuses if another table holds it (NameTaken). Nothing else changes: not the id, not a shard, and nothing is
 * left half way. The new name's lock is taken once the table is found READY, so that a create of that name waits
 * instead of racing it; and only then, so that a rename waits for a name only while it holds a READY table's lock, and a
 * create only for the lock of a table it is creating: no ring of renames and creates can wait on each other for ever.
 */
export const rename: Operation<RenameInput> = {
  name: 'rename',
  lockTable: (input) => input.tableId,
  steps: [
    {
      name: 'check',
      check: ({ checked: table, input }) => {
        if (!table) return { refuse: tableNotFound(input.tableId) };
        if (table.state !== 'READY') return { refuse: notRenamable(table) };
        return { proceed: true };
      },
    },
    { name: 'lock the new name', change: ({ input }) => ({ kind: 'lock', lock: lockFor.name(input.newName) }) },
    // (The same name again is a move already made.)
    { name: 'rename', change: ({ input }) => transition('READY', 'READY', { rename: input.newName, expectName: input.expectedName }) },
  ],
};

export const renameTable: (input: RenameInput) => Promise<TableInfo> = operationWorkflow(rename);
