import { log, proxyActivities, proxyLocalActivities, workflowInfo } from '@temporalio/workflow';
import { storageQueue, type MeasureInput, type TableSize } from '../domain/operations';
import type { ShardRef } from '../domain/contracts';
import type { Activities } from '../activities';
import { passed } from './patches';

/** The shards of the nodes this worker serves, measured in the workflow task (every node with `--storage local`). */
const here = proxyLocalActivities<Pick<Activities, 'measureShardsHere'>>({
  startToCloseTimeout: '30 seconds',
  retry: { maximumAttempts: 2, initialInterval: '200ms' },
});

/**
 * How big tables are, asked of the nodes that hold them (`describe`, `ls`): each node's worker measures its own shards,
 * all nodes at once. A node whose worker does not pick the question up within a few seconds (down, or quarantined
 * and its worker stopped) leaves the size of every table it holds a shard of unknown (null), rather than hold the
 * answer. The nodes this worker serves itself are measured in the workflow task, without a round trip through their
 * queues (since v14). Reads only: no lock, no journal.
 */
export function measureTables(input: MeasureInput): Promise<TableSize[]> {
  return measureSizes(input.catalogId, input.tables);
}

/** The sizes of `tables`, each node asked for its shards (see measureTables); the trash's space cap asks it too. */
export async function measureSizes(catalogId: string | undefined, tables: MeasureInput['tables']): Promise<TableSize[]> {
  const input = { catalogId, tables };
  const byNode = new Map<string, ShardRef[]>();
  for (const table of input.tables) {
    for (const p of table.placement) {
      const shards = byNode.get(p.node) ?? [];
      shards.push({ tableId: table.id, shard: p.shard, node: p.node });
      byNode.set(p.node, shards);
    }
  }
  const bytes = new Map<number, number | null>(input.tables.map((t) => [t.id, 0]));
  const add = (shard: ShardRef, size: number) => {
    const sum = bytes.get(shard.tableId);
    if (sum !== null && sum !== undefined) bytes.set(shard.tableId, sum + size);
  };
  let elsewhere = [...byNode];
  if (elsewhere.length > 0) {
    passed('measures-here');
    const all = elsewhere.flatMap(([, shards]) => shards);
    try {
      const measured = await here.measureShardsHere({ catalogId: input.catalogId, shards: all });
      all.forEach((shard, i) => {
        const size = measured.sizes[i];
        if (size !== null && size !== undefined) add(shard, size);
      });
      elsewhere = elsewhere.filter(([node]) => measured.elsewhere.includes(node));
    } catch (err) {
      // (The nodes' own workers may still answer: each is asked on its queue, as where this worker serves none.)
      log.warn('the nodes served here were not measured here', { error: String(err) });
    }
  }
  await Promise.all(
    elsewhere.map(async ([node, shards]) => {
      const { measureShards } = proxyActivities<Pick<Activities, 'measureShards'>>({
        taskQueue: storageQueue(workflowInfo().taskQueue, node),
        scheduleToStartTimeout: '5 seconds',
        startToCloseTimeout: '30 seconds',
        retry: { maximumAttempts: 2, initialInterval: '200ms' },
      });
      try {
        const sizes = await measureShards({ catalogId: input.catalogId, shards });
        shards.forEach((shard, i) => add(shard, sizes[i]!));
      } catch (err) {
        log.warn('a storage node was not measured', { node, error: String(err) });
        for (const shard of shards) bytes.set(shard.tableId, null);
      }
    }),
  );
  return input.tables.map((t) => ({ id: t.id, bytes: bytes.get(t.id) ?? null }));
}
