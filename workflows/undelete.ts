import { setHandler } from '@temporalio/workflow';
import { lockFor, type UndeleteInput } from '../domain/operations';
import { recallProgressQuery, type RecallProgress } from '../domain/contracts';
import { TableNotFoundError, WrongStateError } from '../domain/errors';
import { toTableInfo, type TableInfo, type TableRecord } from '../domain/table';
import { operationCalls } from './activities';
import { formatTableName, type TableName } from '../domain/names';
import { withLock } from './lock';
import { endTrashTimer } from './purge';
import { asFailure, runSteps } from './steps';

/**
 * Recalls a trashed table before it expires, under its old name or a new one, and ends its trash timer so
 * the expiry never purges a restored table.
 */
export async function undeleteTable(input: UndeleteInput): Promise<TableInfo> {
  const calls = operationCalls(input.catalogId);
  const progress: RecallProgress = { shardsBack: 0, shards: 0 };
  setHandler(recallProgressQuery, () => progress);

  const { table } = await withLock(calls, lockFor.table(input.tableId), { policy: input.lockWait, input }, () =>
    runSteps<Restore>(
      {
        name: 'check',
        call: async () => {
          const table = await calls.getTable(input.tableId);
          if (!table || table.state === 'PURGED') {
            throw asFailure(new TableNotFoundError(`table ${input.tableId} does not exist or was purged`));
          }
          if (input.expectedName && (table.namespace !== input.expectedName.namespace || table.name !== input.expectedName.name)) {
            throw asFailure(
              new WrongStateError(
                `table ${table.id} is named ${formatTableName(table)}, not ${formatTableName(input.expectedName)}: ` +
                  `the name was resolved from a catalog that has changed since; nothing was done`,
              ),
            );
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
          return { table, trashedAs: { namespace: table.namespace, name: table.name }, droppedAt: table.droppedAt! };
        },
      },
      {
        // Taking the name and changing state is one compare-and-set: the catalog refuses a taken name (NameTaken).
        name: 'claim name, mark restoring',
        call: async (restore) => {
          const rename = input.newName ?? restore.trashedAs;
          const table = await calls.transition({ tableId: input.tableId, from: ['TRASHED'], to: 'RESTORING', now: Date.now(), rename });
          return { ...restore, table };
        },
        undo: async (restore) => {
          await calls.transition({
            tableId: input.tableId,
            from: ['RESTORING'],
            to: 'TRASHED',
            now: Date.now(),
            rename: restore.trashedAs,
          });
        },
      },
      {
        name: 'move shards back',
        call: async (restore) => {
          progress.shards = restore.table.placement.length;
          await calls.changeShards(restore.table, { method: 'moveShard', from: 'trash', to: 'live' }, () => progress.shardsBack++);
          return restore;
        },
        undo: (restore) => calls.changeShards(restore.table, { method: 'moveShard', from: 'live', to: 'trash' }),
      },
      {
        name: 'commit ready',
        call: async (restore) => {
          const table = await calls.commit({ tableId: input.tableId, from: ['RESTORING'], to: 'READY', now: Date.now() });
          return { ...restore, table };
        },
      },
      {
        name: 'end trash timer',
        call: async (restore) => {
          await endTrashTimer(calls, input.tableId, 'restored', restore.droppedAt, input.catalogId);
          return restore;
        },
      },
    ),
  );
  return toTableInfo(table);
}

/** What a recall carries from step to step: the table, and the trash it is being recalled from. */
interface Restore {
  table: TableRecord;
  trashedAs: TableName;
  droppedAt: number;
}
