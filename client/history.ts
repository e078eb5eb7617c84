import type { OperationInfo } from '../domain/operation-runs';
import {
  historyRequestSchema,
  operationsRequestSchema,
  parseRequest,
  type HistoryRequest,
  type OperationsRequest,
} from '../domain/requests';
import { toTableInfo, type TableInfo } from '../domain/table';
import type { ClientContext } from './context';
import { anyTable } from './names';
import { listRuns, operationsQuery, withCurrentSteps } from './operations';

/** How long `operations` and `history` wait for the server's visibility before they fail (ServerUnreachable). */
const VISIBILITY_TIMEOUT_MS = 15_000;

/** One table's life (`history`): the table as the catalog has it now, and every run of an operation on it, newest first. */
export interface TableHistory {
  table: TableInfo;
  operations: OperationInfo[];
}

export async function operations(ctx: ClientContext, request: OperationsRequest): Promise<OperationInfo[]> {
  const { table, running, limit } = parseRequest(operationsRequestSchema, request);
  const tableId = table === undefined ? undefined : (await anyTable(ctx.catalog, table, { tombstones: true })).id;
  return runsOf(ctx, { tableId, running }, limit);
}

export async function history(ctx: ClientContext, request: HistoryRequest): Promise<TableHistory> {
  const { table: ref } = parseRequest(historyRequestSchema, request);
  const table = await anyTable(ctx.catalog, ref, { tombstones: true });
  return { table: toTableInfo(table), operations: await runsOf(ctx, { tableId: table.id }) };
}

/** The runs of this catalog's table operations that visibility finds, with the running ones' current steps. */
async function runsOf(ctx: ClientContext, filter: { tableId?: number; running?: boolean }, limit?: number): Promise<OperationInfo[]> {
  const query = operationsQuery(filter);
  return ctx.writes.read('listing of operations', VISIBILITY_TIMEOUT_MS, async () => {
    const runs = await listRuns(ctx.client, ctx.catalog.id, query, limit);
    const hasWorker = runs.some((run) => run.status.name === 'RUNNING') && (await ctx.writes.workerPolling());
    return withCurrentSteps(ctx.client, runs, hasWorker);
  });
}
