import { getExternalWorkflowHandle, log } from '@temporalio/workflow';
import { lockFor, workflowIdFor, type PurgeInput } from '../domain/operations';
import { TableNotFoundError, WrongStateError } from '../domain/errors';
import { toTableInfo, type TableInfo, type TableRecord } from '../domain/table';
import { catalog, forEachShard, shards } from './activities';
import { endTimerSignal } from './definitions';
import { withLock } from './lock';
import { asFailure, FINISHED, runSteps } from './steps';

/**
 * Deletes a trashed table for good: its shards are first renamed to garbage, then deleted, and the table
 * stays in the catalog as a PURGED tombstone. Started by hand or by the trash timer.
 */
export async function purgeTable(input: PurgeInput): Promise<TableInfo | null> {
  const lock = lockFor.table(input.tableId);
  let table: TableRecord | undefined;
  const current = () => table!;
  // Found PURGING: an earlier purge got past marking its shards garbage and stopped while deleting them.
  let resuming = false;

  await withLock(lock, () =>
    runSteps([
      {
        name: 'check',
        call: async () => {
          table = (await catalog.getTable(input.tableId)) ?? undefined;
          if (!table) throw asFailure(new TableNotFoundError(`table ${input.tableId} does not exist`));
          if (table.state === 'PURGED') return FINISHED;
          if (input.trigger === 'expiry' && (table.state !== 'TRASHED' || table.droppedAt !== input.droppedAt)) {
            // Restored (or trashed again) since this timer was set: this expiry no longer applies.
            log.info('trash timer expired for a table no longer in that trash; nothing to purge', {
              tableId: table.id,
              state: table.state,
            });
            return FINISHED;
          }
          resuming = table.state === 'PURGING';
          if (table.state !== 'TRASHED' && !resuming) {
            throw asFailure(
              new WrongStateError(`table ${table.id} is ${table.state}; only a trashed table can be purged`),
            );
          }
        },
      },
      {
        name: 'mark purging',
        call: async () => {
          table = await catalog.transition({ tableId: current().id, from: ['TRASHED'], to: 'PURGING', lock });
        },
        undo: async () => {
          await catalog.transition({ tableId: current().id, from: ['PURGING'], to: 'TRASHED', lock });
        },
      },
      {
        name: 'mark shards garbage',
        call: async () => {
          if (!resuming) await forEachShard(current(), (shard) => shards.markGarbage(shard));
        },
        undo: () => forEachShard(current(), (shard) => shards.unmarkGarbage(shard)),
      },
      {
        name: 'delete garbage',
        pointOfNoReturn: true,
        call: () => forEachShard(current(), (shard) => shards.deleteGarbage(shard)),
      },
      {
        name: 'commit purged',
        call: async () => {
          table = await catalog.transition({ tableId: current().id, from: ['PURGING'], to: 'PURGED', lock });
        },
      },
    ]),
  );
  if (!table) return null;
  if (input.trigger === 'manual') await endTrashTimer(table.id, 'purged');
  return toTableInfo(table);
}

/** Tells the table's trash workflow that its timer has nothing left to do. It may have ended already. */
export async function endTrashTimer(tableId: number, reason: 'restored' | 'purged'): Promise<void> {
  try {
    await getExternalWorkflowHandle(workflowIdFor.trash(tableId)).signal(endTimerSignal, reason);
  } catch (err) {
    log.info('no trash timer to end', { tableId, error: String(err) });
  }
}
