import { upsertSearchAttributes } from '@temporalio/workflow';
import type { CreateInput } from '../domain/operations';
import { lockFor } from '../domain/operations';
import { SEARCH_ATTRIBUTES } from '../domain/search-attributes';
import { toTableInfo, type TableInfo, type TableRecord } from '../domain/table';
import { catalog, forEachShard, shards } from './activities';
import { withLock } from './lock';
import { FINISHED, runSteps } from './steps';

/**
 * Creates a table, idempotently: the id and placement are chosen once and kept in a prepare record, so
 * running the same create again after a failure lands on the same id and shards (CeresDB's proposal).
 */
export async function createTable(input: CreateInput): Promise<TableInfo> {
  const lock = lockFor.name(input);
  let table: TableRecord | undefined;
  const prepared = () => table!;

  await withLock(lock, () =>
    runSteps([
      {
        name: 'prepare',
        call: async () => {
          const result = await catalog.prepareCreate({
            namespace: input.namespace,
            name: input.name,
            params: { shards: input.shards },
            lock,
          });
          table = result.table;
          upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.tableId, value: table.id }]);
          if (result.outcome === 'exists') return FINISHED;
        },
        // The record stays, marked failed, so that a retry resumes it.
        undo: async () => {
          if (table) await catalog.transition({ tableId: table.id, from: ['CREATING'], to: 'CREATE_FAILED', lock });
        },
      },
      {
        name: 'create shards',
        call: () => forEachShard(prepared(), (shard) => shards.createShard(shard)),
        undo: () => forEachShard(prepared(), (shard) => shards.dropShard(shard)),
      },
      {
        name: 'commit',
        call: async () => {
          table = await catalog.transition({ tableId: prepared().id, from: ['CREATING'], to: 'READY', lock });
        },
      },
    ]),
  );
  return toTableInfo(prepared());
}
