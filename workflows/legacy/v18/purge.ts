import { log } from '@temporalio/workflow';
import { OPERATIONS } from '../../../domain/operations';
import { type PurgeInput } from '../../../domain/operation-inputs';
import { purgeVerdict } from '../../../domain/legacy-v18-checks';
import { toTableInfo, type TableInfo, type TableRecord } from '../../../domain/table';
import { operationCalls, type FirstChange, type OperationCalls } from './operation-calls';
import { checkedAt, tableUnderLock, withLock, type ReadUnderLock, type Waiting } from './lock';
import { takes } from './patches';
import { asFailure, changeState, commit, everyShard, finished, forwardOnly, runSteps, SHARDS, type Step } from './steps';

/**
 * Deletes a trashed table for good: its shards are first renamed to garbage, then deleted, and the table
 * stays in the catalog as a PURGED tombstone. Started by hand or by the trash timer.
 */
export async function purgeTable(input: PurgeInput): Promise<TableInfo> {
  const calls = operationCalls(input.catalogId);
  // (At expiry the trash run purges the table itself, and needs no telling: a purge run tells it, with its commit.)
  const purged = await purgeSteps(calls, input, { policy: input.lockWait, input }, input.trigger !== 'expiry');
  // (Before v14, or when the table was found purged already, with a call of its own.)
  if (input.trigger !== 'expiry' && purged.state === 'PURGED' && purged.droppedAt !== null && !calls.timerEnded()) {
    await endTrashTimer(calls, purged.id, 'purged', purged.droppedAt);
  }
  return toTableInfo(purged);
}

/**
 * The purge's steps under the table's lock, made with `calls`: a purge run's own, or the trash run's (at expiry, or
 * with the trash off), which purges in its own workflow task rather than through a purge run. A lock wait that
 * outgrows its run continues as new with `waiting.input`. With `endsTimer` (a purge run's), the commit tells the
 * table's trash run that its timer is over (since v14).
 */
export function purgeSteps(calls: OperationCalls, input: PurgeInput, waiting: Waiting, endsTimer = false): Promise<TableRecord> {
  const [tableLock] = OPERATIONS.purge.locks(input);
  const endTrashTimer = (table: TableRecord) =>
    endsTimer && table.droppedAt !== null && takes('fewerLocalActivities')
      ? { reason: 'purged' as const, droppedAt: table.droppedAt }
      : undefined;
  const purged = commit(calls, ['PURGING', 'PURGED'], endTrashTimer);
  // (Since v18 the lock attempt marks, deletes and commits too, where the check lets the purge go on.)
  const firstChange: FirstChange | undefined = takes('lockWithFirstChange')
    ? {
        for: {
          op: 'purge',
          tableId: input.tableId,
          trigger: input.trigger,
          ...(input.droppedAt !== undefined ? { droppedAt: input.droppedAt } : {}),
          endsTimer: endsTimer && takes('fewerLocalActivities'),
        },
        change: SHARDS.markGarbage,
        then: SHARDS.deleteGarbage,
      }
    : undefined;
  return withLock(
    calls,
    tableLock!,
    waiting,
    (read) => {
      // (Since v15 PURGING is marked by the call that marks the shards; before, by a step of its own.)
      const withShards = takes('changesWithShards');
      return runSteps(
        check(calls, input, read),
        ...(withShards ? [] : [changeState(calls, input.tableId, ['TRASHED', 'PURGING'])]),
        // (Since v14 the call that marks deletes too, once every shard is marked: the next step's work, done ahead.)
        everyShard(calls, withShards ? 'mark purging, mark shards garbage' : 'mark shards garbage', SHARDS.markGarbage, {
          undo: SHARDS.unmarkGarbage,
          then: () => (takes('fewerLocalActivities') ? SHARDS.deleteGarbage : undefined),
          commit: purged,
          ...(withShards ? { state: () => ({ from: 'TRASHED', to: 'PURGING' }) as const } : {}),
        }),
        { ...everyShard(calls, 'delete garbage', SHARDS.deleteGarbage, { commit: purged }), pointOfNoReturn: true },
        purged,
      );
    },
    input.tableId,
    firstChange,
  );
}

/** The table is in the trash this purge is for, and not held, or already on its way (domain/checks.ts's purgeVerdict). */
function check(calls: OperationCalls, input: PurgeInput, read: ReadUnderLock): Step<void, TableRecord> {
  return {
    name: 'check',
    call: async () => {
      const table = await tableUnderLock(calls, read, input.tableId);
      const verdict = purgeVerdict(table, input, checkedAt(read));
      if ('refuse' in verdict) throw asFailure(verdict.refuse);
      if ('finished' in verdict) {
        if (verdict.finished === 'not in that trash') {
          log.info('trash timer expired for a table no longer in that trash; nothing to purge', {
            tableId: table!.id,
            state: table!.state,
          });
        } else if (verdict.finished === 'held') {
          log.info('table is on hold: not purged', { tableId: table!.id, trigger: input.trigger });
        }
        return finished(table!);
      }
      return verdict.proceed === 'forward' ? forwardOnly(table!) : table!;
    },
  };
}

/**
 * Tells the trash workflow of the trash that happened at `droppedAt` that its timer has nothing left to do.
 * It may have ended already.
 */
export async function endTrashTimer(
  calls: OperationCalls,
  tableId: number,
  reason: 'restored' | 'purged',
  droppedAt: number,
): Promise<void> {
  try {
    if (!(await calls.endTrashTimer(tableId, reason, droppedAt))) log.info('no trash timer to end', { tableId });
  } catch (err) {
    log.info('no trash timer to end', { tableId, error: String(err) });
  }
}
