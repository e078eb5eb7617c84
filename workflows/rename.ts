import { lockFor } from '../domain/operations';
import { type RenameInput } from '../domain/operation-inputs';
import { notRenamable, tableNotFound } from '../domain/refusals';
import { nameOf, SHARDS, transition, type Operation } from '../domain/steps';
import type { TableInfo } from '../domain/table';
import { operationWorkflow } from './execute';
import { withinDrain } from './trash';

/**
 * Gives a READY table a new name (or namespace): one compare-and-set from READY to READY under the new name, which the
 * catalog refuses if another table holds it (NameTaken), then the shards' tables renamed where a driver names them so
 * (PostgreSQL: `ALTER TABLE ... RENAME`, `SET SCHEMA`; files: nothing, a set is named by its id). Nothing else changes:
 * not the id, not the data. The new name's lock is taken once the table is found READY, so that a create of that name waits
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
    {
      // (The same name again is a move already made.) PostgreSQL: each shard's table is renamed where its users query it,
      // drained as a drop is; taken back, the tables go back to the name the catalog gives them again.
      name: 'rename',
      change: ({ input }) => transition('READY', 'READY', { rename: input.newName, expectName: input.expectedName }),
      shards: withinDrain(SHARDS.renamed),
      undo: {
        shards: ({ checked }) => ({ ...SHARDS.renamed, liveAs: nameOf(checked!) }),
        change: ({ checked }) => transition('READY', 'READY', { rename: nameOf(checked!) }),
      },
    },
  ],
};

export const renameTable: (input: RenameInput) => Promise<TableInfo> = operationWorkflow(rename);
