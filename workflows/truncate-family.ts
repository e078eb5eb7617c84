import { ApplicationFailure } from '@temporalio/workflow';
import { formatTableName } from '../domain/names';
import type { TruncateInput } from '../domain/operation-inputs';
import type { ShardRef } from '../domain/contracts';
import type { TableRecord } from '../domain/table';
import type { ReferencingTable } from '../storage/driver';
import { catalogCalls } from './catalog-calls';
import { askNode } from './node-reads';

/**
 * A cascade truncate's family (`truncate --cascade`, as `TRUNCATE ... CASCADE`): the tables whose foreign keys reference
 * the table, and theirs in turn, as the nodes holding their shards find them (each node asked on its own queue, all at
 * once; its answer follows the keys as far as they go on it, and a table found is asked of the nodes holding its other
 * shards only). Each one must be a live table tablefate keeps, or the truncate is refused, naming it and its key, before
 * anything changes. Read under no lock: the truncate's move reads the keys again under its locks, and refuses one of a
 * table it does not truncate (made since). Answers the other tables' ids, ascending.
 */
export async function truncateFamily(input: TruncateInput): Promise<number[]> {
  const calls = catalogCalls(input.catalogId);
  const family = new Map<number, TableRecord>();
  const shardsOf = (table: TableRecord, except: ReadonlySet<string> = new Set()): ShardRef[] =>
    table.placement.filter((p) => !except.has(p.node)).map((p) => ({ tableId: table.id, shard: p.shard, node: p.node }));
  const lead = liveOrRefused(input.tableId, await calls.getTable(input.tableId));
  family.set(lead.id, lead);
  for (let asking = shardsOf(lead); asking.length > 0;) {
    const found = await referencing(asking, input.catalogId);
    const strangers = found.filter(({ table }) => table.tableId === undefined);
    if (strangers.length > 0) {
      throw ApplicationFailure.create({
        message:
          `${formatTableName(lead)} cannot be truncated with --cascade: ` +
          `${strangers.map(({ table }) => `${table.name} (its key ${table.key})`).join(', ')} ` +
          'is not a table tablefate keeps, and its rows could not come back: adopt it, or drop its key, first',
        type: 'HasDependents',
        nonRetryable: true,
      });
    }
    // (The nodes that found a table have followed its keys there already.)
    const foundOn = new Map<number, Set<string>>();
    for (const { node, table } of found) foundOn.set(table.tableId!, (foundOn.get(table.tableId!) ?? new Set()).add(node));
    const fresh = [...foundOn.keys()].filter((id) => !family.has(id)).sort((a, b) => a - b);
    const tables = await Promise.all(fresh.map(async (id) => liveOrRefused(id, await calls.getTable(id))));
    for (const table of tables) family.set(table.id, table);
    asking = tables.flatMap((table) => shardsOf(table, foundOn.get(table.id)));
  }
  return [...family.keys()].filter((id) => id !== input.tableId).sort((a, b) => a - b);
}

/** The table, READY: a truncate of several takes no other. */
function liveOrRefused(tableId: number, table: TableRecord | null | undefined): TableRecord {
  if (table && table.state === 'READY') return table;
  throw ApplicationFailure.create({
    message: `table ${tableId} is ${table ? table.state : 'gone'}: a truncate of several tables (a cascade's) takes live, READY tables only`,
    type: 'WrongState',
    nonRetryable: true,
  });
}

/** What each node holding some of `shards` finds referencing them, all nodes at once. */
async function referencing(
  shards: readonly ShardRef[],
  catalogId: string | undefined,
): Promise<Array<{ node: string; table: ReferencingTable }>> {
  const byNode = new Map<string, ShardRef[]>();
  for (const shard of shards) byNode.set(shard.node, [...(byNode.get(shard.node) ?? []), shard]);
  const answers = await Promise.all(
    [...byNode].map(async ([node, held]) => {
      const found = await askNode(node, (reads) => reads.referencingTables({ catalogId, shards: held }));
      return found.map((table) => ({ node, table }));
    }),
  );
  return answers.flat();
}
