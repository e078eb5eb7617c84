import { setHandler } from '@temporalio/workflow';
import { OPERATIONS } from '../../../domain/operations';
import { type UndeleteInput } from '../../../domain/operation-inputs';
import { recallProgressQuery, type RecallProgress } from '../../../domain/contracts';
import { undeleteVerdict } from '../../../domain/legacy-v18-checks';
import { toTableInfo, type TableInfo, type TableRecord } from '../../../domain/table';
import { operationCalls, type FirstChange, type OperationCalls } from './operation-calls';
import type { TableName } from '../../../domain/names';
import { checkedAt, tableUnderLock, withLock, type ReadUnderLock } from './lock';
import { takes } from './patches';
import { endTrashTimer } from './purge';
import { asFailure, commit, everyShard, runSteps, SHARDS, type Step } from './steps';

/**
 * Recalls a trashed table before it expires, under its old name or a new one, and ends its trash timer so
 * the expiry never purges a restored table.
 */
export async function undeleteTable(input: UndeleteInput): Promise<TableInfo> {
  const calls = operationCalls(input.catalogId);
  const progress: RecallProgress = { shardsBack: 0, shards: 0 };
  setHandler(recallProgressQuery, () => progress);

  const [tableLock] = OPERATIONS.undelete.locks(input);
  // (Since v14 the commit ends the trash timer too; before, the step after it.)
  const ready = commit<Recall>(calls, ['RESTORING', 'READY'], (recall) =>
    takes('fewerLocalActivities') ? { reason: 'restored', droppedAt: recall.droppedAt } : undefined,
  );
  // (Since v18 the lock attempt makes the claim's first call too, where the check lets the recall go on.)
  const firstChange: FirstChange | undefined = takes('lockWithFirstChange')
    ? {
        for: {
          op: 'undelete',
          tableId: input.tableId,
          ...(input.expectedName ? { expectedName: input.expectedName } : {}),
          ...(input.newName ? { newName: input.newName } : {}),
        },
        change: SHARDS.backFromTrash,
      }
    : undefined;
  const { table } = await withLock(
    calls,
    tableLock!,
    { policy: input.lockWait, input },
    (read) =>
      runSteps<Recall>(
        check(calls, input, read),
        ...(takes('changesWithShards')
          ? [claimNameMoveShardsBack(calls, input, progress)]
          : [
              claimNameMarkRestoring(calls, input, progress),
              everyShard<Recall>(calls, 'move shards back', SHARDS.backFromTrash, {
                undo: SHARDS.toTrash,
                onShard: () => progress.shardsBack++,
              }),
            ]),
        ready,
        {
          name: 'end trash timer',
          call: async (recall) => {
            if (!calls.timerEnded()) await endTrashTimer(calls, input.tableId, 'restored', recall.droppedAt);
            return recall;
          },
        },
      ),
    input.tableId,
    firstChange,
  );
  const notes = calls.notes();
  return notes.length > 0 ? { ...toTableInfo(table), notes: [...notes] } : toTableInfo(table);
}

/** What a recall carries from step to step: the table, and the trash it is being recalled from. */
interface Recall {
  table: TableRecord;
  trashedAs: TableName;
  droppedAt: number;
}

/** The table is TRASHED and not expired, still under the name the caller resolved; or RESTORING (a recall to finish). */
function check(calls: OperationCalls, input: UndeleteInput, read: ReadUnderLock): Step<void, Recall> {
  return {
    name: 'check',
    call: async () => {
      const table = await tableUnderLock(calls, read, input.tableId);
      const verdict = undeleteVerdict(table, input, checkedAt(read));
      if ('refuse' in verdict) throw asFailure(verdict.refuse);
      return { table: table!, trashedAs: { namespace: table!.namespace, name: table!.name }, droppedAt: table!.droppedAt! };
    },
  };
}

/**
 * Takes the name (its own, or the new one asked for) and moves TRASHED to RESTORING in one compare-and-set (the catalog
 * refuses a name another table holds: NameTaken), then brings the shards back from the trash. Undone by the shards'
 * move to the trash, then the move back to TRASHED under the name it had there.
 */
function claimNameMoveShardsBack(calls: OperationCalls, input: UndeleteInput, progress: RecallProgress): Step<Recall> {
  return everyShard<Recall>(calls, 'claim name, move shards back', SHARDS.backFromTrash, {
    undo: SHARDS.toTrash,
    onShard: () => progress.shardsBack++,
    state: (recall) => {
      progress.shards = recall.table.placement.length;
      return { from: 'TRASHED', to: 'RESTORING', rename: input.newName ?? recall.trashedAs, backAs: recall.trashedAs };
    },
  });
}

/**
 * (Before v15.) Takes the name (its own, or the new one asked for) and moves TRASHED to RESTORING in one compare-and-set: the catalog
 * refuses a name another table holds (NameTaken). Undone by the move back under the name it had in the trash.
 */
function claimNameMarkRestoring(calls: OperationCalls, input: UndeleteInput, progress: RecallProgress): Step<Recall> {
  return {
    name: 'claim name, mark restoring',
    call: async (recall) => {
      const rename = input.newName ?? recall.trashedAs;
      const table = await calls.transition({ tableId: input.tableId, from: ['TRASHED'], to: 'RESTORING', now: Date.now(), rename });
      progress.shards = table.placement.length;
      return { ...recall, table };
    },
    undo: async (recall) => {
      await calls.transition({ tableId: input.tableId, from: ['RESTORING'], to: 'TRASHED', now: Date.now(), rename: recall.trashedAs });
    },
  };
}
