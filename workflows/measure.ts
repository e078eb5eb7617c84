import { log, proxyActivities, workflowInfo } from '@temporalio/workflow';
import { storageQueue, type MeasureInput, type TableSize } from '../domain/operations';
import type { ShardRef } from '../domain/contracts';
import type { Activities } from '../activities';

/**
 * How big tables are, asked of the nodes that hold them (`describe`, `ls`): each node's worker measures its own shards,
 * all nodes at once. A node whose worker does not pick the question up within a few seconds (down, or quarantined
 * and its worker stopped) leaves the size of every table it holds a shard of unknown (null), rather than hold the
 * answer. Reads only: no lock, no journal.
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
  await Promise.all(
    [...byNode].map(async ([node, shards]) => {
      const { measureShards } = proxyActivities<Pick<Activities, 'measureShards'>>({
        taskQueue: storageQueue(workflowInfo().taskQueue, node),
        scheduleToStartTimeout: '5 seconds',
        startToCloseTimeout: '30 seconds',
        retry: { maximumAttempts: 2, initialInterval: '200ms' },
      });
      try {
        const sizes = await measureShards({ catalogId: input.catalogId, shards });
        shards.forEach((shard, i) => {
          const sum = bytes.get(shard.tableId);
          if (sum !== null && sum !== undefined) bytes.set(shard.tableId, sum + sizes[i]!);
        });
      } catch (err) {
        log.warn('a storage node was not measured', { node, error: String(err) });
        for (const shard of shards) bytes.set(shard.tableId, null);
      }
    }),
  );
  return input.tables.map((t) => ({ id: t.id, bytes: bytes.get(t.id) ?? null }));
}
