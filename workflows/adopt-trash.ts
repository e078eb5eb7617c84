import { lockFor } from '../domain/operations';
import { type AdoptTrashInput } from '../domain/operation-inputs';
import { nameOf, SHARDS, transition, type Operation } from '../domain/steps';
import type { TableInfo } from '../domain/table';
import type { TrashCommitted } from '../activities';
import { operationRun } from './execute';
import { commitTrashed, keptOrPurged, toTrashWithinDrain, trashBegun, withNotes } from './trash';

/**
 * PostgreSQL driver: a table tablefate does not keep yet, adopted and dropped into the trash in one operation (the SQL
 * door's drop of such a table, the SDK's with its node named). The adopt's steps, then the drop's, with the table never
 * READY between them: no lease can be taken on it, and nothing of the table changes before the move. Refused or taken
 * back, the table is where it was, untouched, and its record is left CREATE_FAILED, as a failed adopt leaves it.
 */
export const adoptTrash: Operation<AdoptTrashInput> = {
  name: 'adoptTrash',
  steps: [
    {
      // As a create's prepare (create.ts): the name's lock and the table's, the id chosen once; undone, marked failed.
      name: 'prepare',
      change: ({ input }) => ({
        kind: 'prepareCreate',
        table: nameOf(input),
        params: { shards: 1, adopt: input.adopt },
        nameLock: lockFor.name(input),
      }),
      undo: { change: transition('CREATING', 'CREATE_FAILED') },
    },
    // The adopt's shard step: the table found is recorded (with adopt's refusals); undone, forgotten, not dropped.
    { name: 'record the table found', shards: SHARDS.create, undo: { shards: SHARDS.drop } },
    {
      // The drop's move; undone, the table is back where it was, and CREATING again for the adopt's undo.
      name: 'move shards to trash',
      change: transition('CREATING', 'TRASHING'),
      beginsTrash: trashBegun,
      shards: toTrashWithinDrain,
      undo: { shards: SHARDS.backFromTrash, change: transition('TRASHING', 'CREATING') },
    },
    commitTrashed(),
  ],
};

/** The run: its caller hears the table TRASHED (or, the trash off where it was dropped, PURGED), as a drop's does. */
export async function adoptTrashTable(input: AdoptTrashInput): Promise<TableInfo> {
  const run = operationRun(adoptTrash, input);
  const trashed: TrashCommitted = await run.table();
  return withNotes(await keptOrPurged(trashed, input), run.said());
}
