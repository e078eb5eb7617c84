import { OnHoldError, TableFateError, TableNotFoundError, WrongStateError } from '../domain/errors';
import { parseRequest, purgeAllRequestSchema, type PurgeAllRequest } from '../domain/requests';
import { toTableInfo, type TableInfo } from '../domain/table';
import type { ClientContext } from './context';
import type { WriteOptions } from './options';
import { purgeCall } from './trash';
import { perform } from './calls';

/** How far a `purgeAll` is: tables done of all, and how each ended so far. */
export interface PurgeAllProgress {
  done: number;
  total: number;
  purged: number;
  held: number;
  failed: number;
}

/** What `purgeAll` did: the tables purged, those held (never purged), those skipped (recalled or purged meanwhile), and failures. */
export interface PurgeAllSummary {
  purged: number[];
  held: number[];
  skipped: Array<{ id: number; reason: string }>;
  failed: Array<{ id: number; error: string }>;
}

export async function planPurgeAll(ctx: ClientContext, request: PurgeAllRequest): Promise<{ purge: TableInfo[]; held: TableInfo[] }> {
  const { namespace } = parseRequest(purgeAllRequestSchema, request);
  const trashed = (await ctx.catalog.listTables({ includeTrashed: true })).filter(
    (t) => t.state === 'TRASHED' && (namespace === undefined || t.namespace === namespace),
  );
  return { purge: trashed.filter((t) => !t.hold).map(toTableInfo), held: trashed.filter((t) => t.hold).map(toTableInfo) };
}

/** One purge operation per table, `concurrency` at a time: what one table's purge says does not stop the others. */
export async function purgeAll(
  ctx: ClientContext,
  request: PurgeAllRequest,
  opts: WriteOptions & { onProgress?: (progress: PurgeAllProgress) => void },
): Promise<PurgeAllSummary> {
  const { concurrency } = parseRequest(purgeAllRequestSchema, request);
  const plan = await planPurgeAll(ctx, request);
  const summary: PurgeAllSummary = { purged: [], held: plan.held.map((t) => t.id), skipped: [], failed: [] };
  const queue = [...plan.purge];
  const total = plan.purge.length;
  let done = 0;
  const report = () =>
    opts.onProgress?.({ done, total, purged: summary.purged.length, held: summary.held.length, failed: summary.failed.length });
  const purgeNext = async (): Promise<void> => {
    for (let table = queue.shift(); table; table = queue.shift()) {
      try {
        await perform(ctx, purgeCall, { tableId: table.id }, opts);
        summary.purged.push(table.id);
      } catch (err) {
        if (err instanceof OnHoldError) summary.held.push(table.id);
        else if (err instanceof WrongStateError || err instanceof TableNotFoundError)
          summary.skipped.push({ id: table.id, reason: err.message });
        else summary.failed.push({ id: table.id, error: err instanceof TableFateError ? `${err.type}: ${err.message}` : String(err) });
      }
      done++;
      report();
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, Math.max(total, 1)) }, purgeNext));
  for (const list of [summary.purged, summary.held]) list.sort((a, b) => a - b);
  return summary;
}
