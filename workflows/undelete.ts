import { setHandler } from '@temporalio/workflow';
import { lockFor, type UndeleteInput } from '../domain/operations';
import { recallProgressQuery, type RecallProgress } from './definitions';
import { TableNotFoundError, WrongStateError } from '../domain/errors';
import { toTableInfo, type TableInfo, type TableRecord } from '../domain/table';
import { catalog, forEachShard, shards } from './activities';
import { withLock } from './lock';
import { endTrashTimer } from './purge';
import { asFailure, runSteps } from './steps';

/**
 * Recalls a trashed table before it expires, under its old name or a new one, and ends its trash timer so
 * the expiry never purges a restored table.
 */
export async function undeleteTable(input: UndeleteInput): Promise<TableInfo> {
  const lock = lockFor.table(input.tableId);
  let table: TableRecord | undefined;
  const current = () => table!;
  // The name the table had in the trash, and when it was trashed (which trash timer to end).
  let trash: { namespace: string; name: string; droppedAt: number } | undefined;
  const progress: RecallProgress = { shardsBack: 0, shards: 0 };
  setHandler(recallProgressQuery, () => progress);

  await withLock(lock, () =>
    runSteps([
      {
        name: 'check',
        call: async () => {
          table = (await catalog.getTable(input.tableId)) ?? undefined;
          if (!table || table.state === 'PURGED') {
            throw asFailure(new TableNotFoundError(`table ${input.tableId} does not exist or was purged`));
          }
          // RESTORING: an earlier undelete stopped half way; this one finishes it.
          if (table.state !== 'TRASHED' && table.state !== 'RESTORING') {
            throw asFailure(new WrongStateError(`table ${table.id} is ${table.state}; only a trashed table can be restored`));
          }
          if (table.state === 'TRASHED' && table.expireAt !== null && table.expireAt <= Date.now()) {
            throw asFailure(
              new WrongStateError(`table ${table.id} expired at ${new Date(table.expireAt).toISOString()} and is being purged`),
            );
          }
          trash = { namespace: table.namespace, name: table.name, droppedAt: table.droppedAt! };
        },
      },
      {
        // Taking the name and changing state is one compare-and-set: the catalog refuses a taken name (NameTaken).
        name: 'claim name, mark restoring',
        call: async () => {
          const rename = input.newName ?? { namespace: trash!.namespace, name: trash!.name };
          table = await catalog.transition({ tableId: current().id, from: ['TRASHED'], to: 'RESTORING', lock, rename });
        },
        undo: async () => {
          const { namespace, name } = trash!;
          await catalog.transition({ tableId: current().id, from: ['RESTORING'], to: 'TRASHED', lock, rename: { namespace, name } });
        },
      },
      {
        name: 'move shards back',
        call: async () => {
          progress.shards = current().placement.length;
          await forEachShard(current(), async (shard) => {
            await shards.moveShard({ shard, from: 'trash', to: 'live' });
            progress.shardsBack++;
          });
        },
        undo: () => forEachShard(current(), (shard) => shards.moveShard({ shard, from: 'live', to: 'trash' })),
      },
      {
        name: 'commit ready',
        call: async () => {
          table = await catalog.transition({ tableId: current().id, from: ['RESTORING'], to: 'READY', lock });
        },
      },
      {
        name: 'end trash timer',
        call: () => endTrashTimer(current().id, 'restored', trash!.droppedAt),
      },
    ]),
  );
  return toTableInfo(current());
}

