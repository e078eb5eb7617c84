import { randomUUID } from 'node:crypto';
import { MEASURE_TIMEOUT_MS, OPERATIONS, type TableSize } from '../domain/operations';
import { toTableInfo, type TableInfo, type TableRecord } from '../domain/table';
import type { measureTables } from '../workflows';
import type { ClientContext } from './context';
import { startAndWait } from './start';

/** At most this many tables in one measure run: their placements stay far below the server's payload limit. */
const MEASURED_PER_RUN = 500;

/**
 * The tables with their sizes, asked of the nodes through a worker (measureTables), a run per MEASURED_PER_RUN tables
 * (a whole catalog's placements would pass the server's limit on a payload). A size that cannot be had (no worker, a
 * node that does not answer, no server) is null: a read never fails for want of a size.
 */
export async function withSizes(ctx: ClientContext, tables: TableRecord[]): Promise<TableInfo[]> {
  const measured = tables.filter((t) => t.state !== 'PURGED' && t.placement.length > 0);
  const sizes = new Map<number, number | null>(tables.map((t) => [t.id, 0]));
  for (let from = 0; from < measured.length; from += MEASURED_PER_RUN) {
    const chunk = measured.slice(from, from + MEASURED_PER_RUN);
    const answer = await measure(ctx, chunk).catch(() => chunk.map((t) => ({ id: t.id, bytes: null })));
    for (const { id, bytes } of answer) sizes.set(id, bytes);
  }
  return tables.map((t) => ({ ...toTableInfo(t), bytes: sizes.get(t.id) ?? null }));
}

/** One run of measureTables over `tables`, within MEASURE_TIMEOUT_MS. */
function measure(ctx: ClientContext, tables: TableRecord[]): Promise<TableSize[]> {
  const record = OPERATIONS.measure;
  const workflowId = record.workflowId(randomUUID(), ctx.catalog.id);
  return startAndWait<typeof measureTables>(ctx, {
    workflowId,
    what: 'measure of table sizes',
    check: `the workflow ${workflowId} in the web UI`,
    timeoutMs: MEASURE_TIMEOUT_MS,
    run: {
      record,
      input: { tables: tables.map((t) => ({ id: t.id, placement: t.placement })) },
      target: {},
      summary: `measure ${tables.length} table(s) (reads only)`,
    },
  });
}
