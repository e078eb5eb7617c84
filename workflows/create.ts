import { patched, upsertSearchAttributes } from '@temporalio/workflow';
import type { CreateInput } from '../domain/operations';
import { lockFor } from '../domain/operations';
import { formatTableName } from '../domain/names';
import { SEARCH_ATTRIBUTES } from '../domain/search-attributes';
import { toTableInfo, type TableInfo } from '../domain/table';
import { operationCalls } from './activities';
import { LOCK_WAITS_IN_WORKFLOW, untilFree, withLock, type Waiting } from './lock';
import { finished, runSteps } from './steps';

/**
 * Creates a table, idempotently: the id and placement are chosen once and kept in a prepare record, so
 * running the same create again after a failure lands on the same id and shards (CeresDB's proposal).
 */
export async function createTable(input: CreateInput): Promise<TableInfo> {
  const calls = operationCalls(input.catalogId);
  const waiting: Waiting = { policy: input.lockWait, input };
  const table = await withLock(calls, lockFor.name(input), waiting, () =>
    runSteps(
      {
        name: 'prepare',
        // Also takes the table's own lock, which every later change of the table is checked against.
        call: async () => {
          const waitsInWorkflow = patched(LOCK_WAITS_IN_WORKFLOW);
          const prepare = () =>
            calls.prepareCreate({
              namespace: input.namespace,
              name: input.name,
              params: { shards: input.shards },
              lock: lockFor.name(input),
              now: Date.now(),
              busyIsAnswer: waitsInWorkflow,
            });
          // The table's lock may be held by an operation on the record an earlier attempt left (a trash of it).
          const result = waitsInWorkflow
            ? await untilFree(
                `the lock of ${formatTableName(input)}'s table`,
                prepare,
                (r) => (r.outcome === 'busy' ? r.holder.workflowId : undefined),
                waiting,
              )
            : await prepare();
          if (result.outcome === 'busy') throw new Error('unreachable: a busy prepare is waited on above');
          upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.tableId, value: result.table.id }]);
          return result.outcome === 'exists' ? finished(result.table) : result.table;
        },
        // The record stays, marked failed, so that a retry resumes it.
        undo: (table) =>
          calls.transition({ tableId: table.id, from: ['CREATING'], to: 'CREATE_FAILED', now: Date.now() }).then(() => undefined),
      },
      {
        name: 'create shards',
        call: async (table) => {
          await calls.changeShards(table, { method: 'createShard' });
          return table;
        },
        undo: (table) => calls.changeShards(table, { method: 'dropShard' }),
      },
      {
        name: 'commit',
        call: (table) => calls.commit({ tableId: table.id, from: ['CREATING'], to: 'READY', now: Date.now() }),
      },
    ),
  );
  return toTableInfo(table);
}
