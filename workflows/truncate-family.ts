import { ApplicationFailure, proxyActivities, workflowInfo } from '@temporalio/workflow';
import { formatTableName } from '../domain/names';
import { storageQueue } from '../domain/operations';
import type { TruncateInput } from '../domain/operation-inputs';
import type { ShardRef } from '../domain/contracts';
import type { TableRecord } from '../domain/table';
import type { Activities } from '../activities';
import type { ReferencingTable } from '../storage/driver';
import { catalogCalls } from './catalog-calls';
import { PICK_UP, unanswered } from './plan-drop';

/**
 * A cascade truncate's family (`truncate --cascade`, as `TRUNCATE ... CASCADE`): the tables whose foreign keys reference
 * the table, and theirs in turn, as the nodes holding their shards find them (each node asked on its own queue, all at
 * once; a table found on one node is asked of the nodes holding its other shards). Each one must be a live table
 * tablefate keeps, or the truncate is refused, naming it and its key, before anything changes. Read under no lock: the
 * truncate's move reads the keys again under its locks, and refuses one of a table it does not truncate (made since).
 * Answers the other tables' ids, ascending.
 */
export async function truncateFamily(input: TruncateInput): Promise<number[]> {
  const calls = catalogCalls(input.catalogId);
  const family = new Map<number, TableRecord>();
  for (let asking = [input.tableId]; asking.length > 0;) {
    const tables = await Promise.all(asking.map((id) => calls.getTable(id)));
    for (const [i, table] of tables.entries()) {
      if (!table || table.state !== 'READY') {
        throw ApplicationFailure.create({
          message: `table ${asking[i]} is ${table ? table.state : 'gone'}: a truncate of several tables (a cascade's) takes live, READY tables only`,
          type: 'WrongState',
          nonRetryable: true,
        });
      }
      family.set(table.id, table);
    }
    const found = await referencing(
      tables.flatMap((t) => t!.placement.map((p) => ({ tableId: t!.id, shard: p.shard, node: p.node }))),
      input.catalogId,
    );
    const strangers = found.filter((f) => f.tableId === undefined);
    if (strangers.length > 0) {
      const label = formatTableName(family.get(input.tableId)!);
      throw ApplicationFailure.create({
        message:
          `${label} cannot be truncated with --cascade: ${strangers.map((s) => `${s.name} (its key ${s.key})`).join(', ')} ` +
          'is not a table tablefate keeps, and its rows could not come back: adopt it, or drop its key, first',
        type: 'HasDependents',
        nonRetryable: true,
      });
    }
    asking = [...new Set(found.map((f) => f.tableId!))].filter((id) => !family.has(id)).sort((a, b) => a - b);
  }
  return [...family.keys()].filter((id) => id !== input.tableId).sort((a, b) => a - b);
}

/** What each node holding some of `shards` finds referencing them, all nodes at once. */
async function referencing(shards: readonly ShardRef[], catalogId: string | undefined): Promise<ReferencingTable[]> {
  const byNode = new Map<string, ShardRef[]>();
  for (const shard of shards) byNode.set(shard.node, [...(byNode.get(shard.node) ?? []), shard]);
  const answers = await Promise.all(
    [...byNode].map(async ([node, held]) => {
      const { referencingTables } = proxyActivities<Pick<Activities, 'referencingTables'>>({
        taskQueue: storageQueue(workflowInfo().taskQueue, node),
        scheduleToStartTimeout: PICK_UP,
        startToCloseTimeout: '10 seconds',
        retry: { maximumAttempts: 2, initialInterval: '200ms' },
      });
      try {
        return await referencingTables({ catalogId, shards: held });
      } catch (err) {
        throw unanswered(err, node);
      }
    }),
  );
  return answers.flat();
}
