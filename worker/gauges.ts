import { Runtime, type NativeConnection } from '@temporalio/worker';
import type { CatalogReader } from '../catalog/catalog';
import type { StorageDriver } from '../storage/driver';
import { METRICS } from '../domain/metrics';
import { trashTimersQuery } from '../domain/operation-runs';
import { TABLE_STATES } from '../domain/states';
import type { Logger } from './logger';

/** How often the gauges look again: cheap reads (a GROUP BY, a visibility count), often enough for a 1-minute alert. */
const CATALOG_EVERY_MS = 15_000;
/** Sizes are a look at every trashed shard's bytes on its node: less often. */
const TRASH_BYTES_EVERY_MS = 60_000;

/** Runs `look` now and every `everyMs` until the returned stop is called; a failed look is logged and tried next time. */
function every(everyMs: number, what: string, logger: Logger, look: () => Promise<void>): () => void {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const tick = async () => {
    try {
      await look();
    } catch (err) {
      logger.warn({ err, gauge: what }, 'reading a gauge failed; trying again later');
    }
    if (!stopped) timer = setTimeout(() => void tick(), everyMs).unref();
  };
  void tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/**
 * The gauges an orchestrating worker serves: tables by state and drains waiting (from its catalog), and the trash runs
 * waiting on their expiry timers (from the server's visibility, on the deployment's task queue). Every orchestrating
 * worker of a deployment serves the same values: a dashboard takes their max.
 */
export function startCatalogGauges(opts: {
  catalog: CatalogReader;
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  logger: Logger;
}): () => void {
  const meter = Runtime.instance().metricMeter;
  const tables = meter.createGauge(METRICS.tables.name, 'int', 'tables', METRICS.tables.help);
  const drains = meter.createGauge(METRICS.drainsWaiting.name, 'int', 'tables', METRICS.drainsWaiting.help);
  const timers = meter.createGauge(METRICS.trashTimersPending.name, 'int', 'runs', METRICS.trashTimersPending.help);
  const query = trashTimersQuery(opts.taskQueue);
  return every(CATALOG_EVERY_MS, 'catalog', opts.logger, async () => {
    const counts = await opts.catalog.countByState();
    for (const state of TABLE_STATES) tables.set(counts[state] ?? 0, { state });
    drains.set(counts.DRAINING ?? 0);
    const { count } = await opts.connection.workflowService.countWorkflowExecutions({ namespace: opts.namespace, query });
    timers.set(Number(count ?? 0));
  });
}

/**
 * The bytes the trashed tables hold on the nodes this process serves (`tablefate_trash_bytes{node}`): each storage
 * node's bytes are served by the process that holds them (a worker with local storage, or the node's own).
 */
export function startTrashBytesGauge(opts: { catalog: CatalogReader; storage: StorageDriver; logger: Logger }): () => void {
  const gauge = Runtime.instance().metricMeter.createGauge(METRICS.trashBytes.name, 'int', 'bytes', METRICS.trashBytes.help);
  return every(TRASH_BYTES_EVERY_MS, 'trash bytes', opts.logger, async () => {
    const bytes = new Map(opts.storage.nodes.map((node) => [node, 0]));
    for (let afterId = 0; ;) {
      const page = await opts.catalog.listTables({ includeTrashed: true, afterId, limit: 500 });
      const shards = page
        .filter((t) => t.state === 'TRASHED')
        .flatMap((table) => table.placement.map(({ shard, node }) => ({ tableId: table.id, shard, node })))
        .filter((ref) => bytes.has(ref.node));
      const sizes = shards.length === 0 ? [] : await opts.storage.sizesOf(shards);
      shards.forEach((ref, i) => bytes.set(ref.node, bytes.get(ref.node)! + sizes[i]!));
      if (page.length < 500) break;
      afterId = page.at(-1)!.id;
    }
    for (const [node, total] of bytes) gauge.set(total, { node });
  });
}
