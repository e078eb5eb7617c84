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
export async function purgeTable(input: PurgeInput): Promise<TableInfo> {
  const lock = lockFor.table(input.tableId);
  let table: TableRecord | undefined;
  const current = () => table!;

  await withLock(lock, () =>
    runSteps([
      {
        name: 'check',
        call: async () => {
          table = (await catalog.getTable(input.tableId)) ?? undefined;
          if (!table) throw asFailure(new TableNotFoundError(`table ${input.tableId} does not exist`));
          if (table.state === 'PURGED') return FINISHED;
          const inThatTrash = (table.state === 'TRASHED' || table.state === 'PURGING') && table.droppedAt === input.droppedAt;
          if (input.trigger === 'expiry' && !inThatTrash) {
            // Restored (or trashed again) since this timer was set: this expiry no longer applies.
            log.info('trash timer expired for a table no longer in that trash; nothing to purge', {
              tableId: table.id,
              state: table.state,
            });
            return FINISHED;
          }
          // PURGING: an earlier purge stopped half way; this one finishes it.
          if (table.state !== 'TRASHED' && table.state !== 'PURGING') {
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
        call: () => forEachShard(current(), (shard) => shards.markGarbage(shard)),
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
  const purged = current();
  if (input.trigger === 'manual' && purged.state === 'PURGED' && purged.droppedAt !== null) {
    await endTrashTimer(purged.id, 'purged', purged.droppedAt);
  }
  return toTableInfo(purged);
}

/**
 * Tells the trash workflow of the trash that happened at `droppedAt` that its timer has nothing left to do.
 * It may have ended already.
 */
export async function endTrashTimer(tableId: number, reason: 'restored' | 'purged', droppedAt: number): Promise<void> {
  try {
    await getExternalWorkflowHandle(workflowIdFor.trash(tableId)).signal(endTimerSignal, reason, droppedAt);
  } catch (err) {
    log.info('no trash timer to end', { tableId, error: String(err) });
  }
}
