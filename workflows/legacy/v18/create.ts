import { upsertSearchAttributes } from '@temporalio/workflow';
import { OPERATIONS } from '../../../domain/operations';
import { type CreateInput } from '../../../domain/operation-inputs';
import { formatTableName } from '../../../domain/names';
import { SEARCH_ATTRIBUTES } from '../../../domain/search-attributes';
import { definitionOf, toTableInfo, type TableInfo, type TableRecord } from '../../../domain/table';
import { operationCalls, type OperationCalls } from './operation-calls';
import { holdingLocks, untilFree, withLock, type Waiting } from './lock';
import { takes } from './patches';
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
  // (Since v18 the prepare makes the first shard call too.)
  const firstShards = takes('prepareCreatesShards');
  const steps = (takeLock: boolean) => () =>
    runSteps(
      prepare(calls, input, nameLock!, waiting, takeLock, firstShards),
      everyShard(calls, 'create shards', SHARDS.create, { undo: SHARDS.drop }),
      commit(calls, ['CREATING', 'READY']),
    );
  // (Since v17 the prepare takes the name lock; before, a lock attempt of its own did, first.)
  const table = takes('prepareTakesNameLock')
    ? await holdingLocks(calls, steps(true))
    : await withLock(calls, nameLock!, waiting, steps(false));
  return toTableInfo(table);
}

/**
 * The prepare record: the table's id and placement, chosen once (a create found done or begun is the same table). It
 * takes the name lock (`takeLock`, since v17) and the table's own lock, which every later change of the table is
 * checked against; either may be held by another operation (a create of the same name, or a trash of the record an
 * earlier attempt left), which the create waits for. Since v18 the same call makes the first shards of a table it
 * prepared (`firstShards`), which the shard step then finds made. Its undo keeps the record, marked failed, so that a
 * retry resumes it.
 */
function prepare(
  calls: OperationCalls,
  input: CreateInput,
  lock: string,
  waiting: Waiting,
  takeLock: boolean,
  firstShards: boolean,
): Step<void, TableRecord> {
  return {
    name: 'prepare',
    call: async () => {
      const result = await untilFree(
        takeLock ? `${lock} and the lock of its table` : `the lock of ${formatTableName(input)}'s table`,
        () =>
          calls.prepareCreate(
            {
              namespace: input.namespace,
              name: input.name,
              // Only what was asked: the params of a create without a definition keep their old shape.
              params: { shards: input.shards, ...definitionOf(input) },
              lock,
              ...(takeLock ? { takeLock } : {}),
              now: Date.now(),
            },
            firstShards ? SHARDS.create : undefined,
          ),
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
