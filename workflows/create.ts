import { upsertSearchAttributes } from '@temporalio/workflow';
import { OPERATIONS, type CreateInput } from '../domain/operations';
import { formatTableName } from '../domain/names';
import { SEARCH_ATTRIBUTES } from '../domain/search-attributes';
import { definitionOf, toTableInfo, type TableInfo, type TableRecord } from '../domain/table';
import { operationCalls, type OperationCalls } from './activities';
import { untilFree, withLock, type Waiting } from './lock';
import { commit, everyShard, finished, runSteps, SHARDS, type Step } from './steps';

/**
 * Creates a table, idempotently: the id and placement are chosen once and kept in a prepare record, so
 * running the same create again after a failure lands on the same id and shards (CeresDB's proposal). An adopt runs
 * this workflow too: its definition (`adopt`) makes the shard step record the table that exists instead of making one,
 * and the undo forget it instead of dropping it (the storage driver reads the definition).
 */
export async function createTable(input: CreateInput): Promise<TableInfo> {
  const calls = operationCalls(input.catalogId);
  const waiting: Waiting = { policy: input.lockWait, input };
  const [nameLock] = OPERATIONS.create.locks(input);
  const table = await withLock(calls, nameLock!, waiting, () =>
    runSteps(
      prepare(calls, input, nameLock!, waiting),
      everyShard(calls, 'create shards', SHARDS.create, { undo: SHARDS.drop }),
      commit(calls, ['CREATING', 'READY']),
    ),
  );
  return toTableInfo(table);
}

/**
 * The prepare record: the table's id and placement, chosen once (a create found done or begun is the same table). It
 * also takes the table's own lock, which every later change of the table is checked against; that lock may be held
 * by an operation on the record an earlier attempt left (a trash of it), which the create waits for. Its undo keeps
 * the record, marked failed, so that a retry resumes it.
 */
function prepare(calls: OperationCalls, input: CreateInput, lock: string, waiting: Waiting): Step<void, TableRecord> {
  return {
    name: 'prepare',
    call: async () => {
      const result = await untilFree(
        `the lock of ${formatTableName(input)}'s table`,
        () =>
          calls.prepareCreate({
            namespace: input.namespace,
            name: input.name,
            // Only what was asked: the params of a create without a definition keep their old shape.
            params: { shards: input.shards, ...definitionOf(input) },
            lock,
            now: Date.now(),
          }),
        (r) => (r.outcome === 'busy' ? r.holder.workflowId : undefined),
        waiting,
      );
      if (result.outcome === 'busy') throw new Error('unreachable: a busy prepare is waited on above');
      upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.tableId, value: result.table.id }]);
      return result.outcome === 'exists' ? finished(result.table) : result.table;
    },
    undo: async (table) => {
      await calls.transition({ tableId: table.id, from: ['CREATING'], to: 'CREATE_FAILED', now: Date.now() });
    },
  };
}
