import type { WorkflowExecutionDescription } from '@temporalio/client';
import { InvalidInputError, OperationNotFoundError, WrongStateError } from '../domain/errors';
import { OPERATIONS } from '../domain/operations';
import { type OperationInfo } from '../domain/operation-runs';
import { cancelRequestSchema, parseRequest, type CancelRequest } from '../domain/requests';
import { SEARCH_ATTRIBUTES } from '../domain/search-attributes';
import { toTableInfo, type TableInfo } from '../domain/table';
import { callTimeout, type ClientContext } from './context';
import { isRunNotFound } from './errors';
import { ofCatalog, toOperationInfo } from './operations';
import type { WriteOptions } from './options';

/** What a `cancel` leaves: the run, closed, and its table as the catalog has it after (null: the run had no table yet). */
export interface CancelOutcome {
  operation: OperationInfo;
  table: TableInfo | null;
}

/**
 * A cancel starts no run: it asks one that runs to stop, and waits until it has closed, within a write's deadline and
 * with its typed errors (WriteRunner).
 */
export async function cancel(ctx: ClientContext, request: CancelRequest, opts: WriteOptions): Promise<CancelOutcome> {
  const { workflowId } = parseRequest(cancelRequestSchema, request);
  const timeoutMs = callTimeout(ctx, opts);
  const notFound = () =>
    new OperationNotFoundError(
      `no operation of this catalog runs or ran as ${workflowId} (this catalog's workflow ids end in @${ctx.catalog.id}; see \`tablefate ops\`)`,
      workflowId,
    );
  if (!ofCatalog(workflowId, ctx.catalog.id)) throw notFound();
  const op = { workflowId, what: `cancel of ${workflowId}`, check: `\`tablefate ops\``, onDetails: opts.onDetails };
  return ctx.writes.run(op, timeoutMs, async (started, signal) => {
    let run: WorkflowExecutionDescription;
    try {
      run = await ctx.client.workflow.getHandle(workflowId).describe();
    } catch (err) {
      if (isRunNotFound(err)) throw notFound();
      throw err;
    }
    const operation = run.typedSearchAttributes.get(SEARCH_ATTRIBUTES.tableOp);
    const expiryOf = run.type === OPERATIONS.expiry.workflowType ? run.typedSearchAttributes.get(SEARCH_ATTRIBUTES.tableId) : undefined;
    if (expiryOf !== undefined) await refuseTrashTimer(ctx, workflowId, expiryOf, true);
    if (operation === undefined) {
      throw new InvalidInputError(`${workflowId} is a ${run.type} run, not a table operation: cancel takes an id \`tablefate ops\` lists`);
    }
    const tableId = run.typedSearchAttributes.get(SEARCH_ATTRIBUTES.tableId);
    const what = `${operation}${tableId === undefined ? '' : ` of table ${tableId}`}`;
    if (run.status.name !== 'RUNNING') {
      throw new WrongStateError(
        `${workflowId} (${what}) is not running: it ended ${run.status.name} at ${run.closeTime?.toISOString() ?? '?'}; nothing to cancel`,
      );
    }
    // (A trash run as v19 made it, at its table's expiry id, is also that trash's expiry once the table is in the trash.)
    const v19TrashRun =
      operation === OPERATIONS.trash.name && tableId !== undefined && workflowId === OPERATIONS.expiry.workflowId(tableId, ctx.catalog.id);
    if (v19TrashRun) await refuseTrashTimer(ctx, workflowId, tableId);
    const handle = ctx.client.workflow.getHandle(workflowId, run.runId);
    await handle.cancel();
    started();
    let failure: Error | undefined;
    // The wait for the run to close ends with this call, whichever way it ends (it could otherwise outlive it by days).
    const waiting = new AbortController();
    const stopWaiting = () => waiting.abort();
    signal.addEventListener('abort', stopWaiting);
    try {
      const result = ctx.client.connection
        .withAbortSignal(waiting.signal, () => handle.result())
        .catch((err: unknown) => (failure = err instanceof Error ? err : new Error(String(err))));
      // A trash that committed between the look above and the cancel is done: the cancel came too late.
      if (operation === OPERATIONS.trash.name && tableId !== undefined)
        await untilClosedOrTrashed(ctx, result, workflowId, tableId, signal);
      await result;
    } finally {
      signal.removeEventListener('abort', stopWaiting);
      waiting.abort();
    }
    const closed = await ctx.client.workflow.getHandle(workflowId).describe();
    // (A create has its table's id from its prepare on: the run's search attributes have it once it is known.)
    const closedTableId = closed.typedSearchAttributes.get(SEARCH_ATTRIBUTES.tableId) ?? tableId;
    const table = closedTableId === undefined ? undefined : await ctx.catalog.getTable(closedTableId);
    if (closed.status.name === 'CANCELLED') return { operation: toOperationInfo(closed), table: table ? toTableInfo(table) : null };
    if (closed.status.name === 'COMPLETED') {
      throw new WrongStateError(
        `${workflowId} (${what}) finished before the cancel reached it${table ? `: table ${table.id} is ${table.state}` : ''}`,
      );
    }
    throw failure ?? new WrongStateError(`${workflowId} (${what}) ended ${closed.status.name}, not cancelled`);
  });
}

/**
 * Waits for a cancelled trash's run to close, unless its table reaches the trash first: the trash committed before the
 * cancel reached it, and its run, the table's expiry timer now, ignores the cancel (WrongState, as for a refused one).
 */
async function untilClosedOrTrashed(
  ctx: ClientContext,
  result: Promise<unknown>,
  workflowId: string,
  tableId: number,
  signal: AbortSignal,
): Promise<void> {
  let closed = false;
  const settled = result.then(() => (closed = true));
  while (!closed && !signal.aborted) {
    const table = await ctx.catalog.getTable(tableId);
    if (table && (table.state === 'TRASHED' || table.state === 'PURGING' || table.state === 'PURGED')) {
      throw new WrongStateError(
        `${workflowId} finished before the cancel reached it: table ${tableId} is ${table.state}, and its expiry keeps its ` +
          `data until then. To bring the table back: \`tablefate recall ${tableId}\``,
      );
    }
    await Promise.race([settled, new Promise((resolve) => setTimeout(resolve, 500))]);
  }
}

/**
 * A trash's expiry run (or a trash run as v19 made it, whose table is in the trash or being purged) only waits for the
 * expiry, and is what keeps the data until then (it ignores a cancel). Refused, pointing at what ends a trash: a
 * recall, a purge. `always`: the run is an expiry's, refused whatever its table's state.
 */
async function refuseTrashTimer(ctx: ClientContext, workflowId: string, tableId: number, always = false): Promise<void> {
  const table = await ctx.catalog.getTable(tableId);
  if (!table) {
    if (always)
      throw new WrongStateError(`${workflowId} is the expiry of table ${tableId}, which is no longer in the catalog; nothing to cancel`);
    return;
  }
  if (table.state === 'TRASHED') {
    const until = table.expireAt === null ? '' : ` until ${new Date(table.expireAt).toISOString()}`;
    const held = table.hold ? ` (it is on hold: \`tablefate release ${tableId}\` before a purge)` : '';
    throw new WrongStateError(
      `${workflowId} is the trash of table ${tableId}, done: the table is TRASHED${until}, and this run is the timer that keeps ` +
        `its data until it expires (a cancel would not bring it back, and the run ignores one). ` +
        `To bring the table back: \`tablefate recall ${tableId}\`; to delete it now: \`tablefate purge ${tableId}\`${held}`,
    );
  }
  if (table.state === 'PURGING' || table.state === 'PURGED') {
    throw new WrongStateError(
      `${workflowId} is the trash of table ${tableId}, which is ${table.state === 'PURGED' ? 'purged' : 'being purged'}: ` +
        'the trash is done, and a purge only goes forward; nothing to cancel',
    );
  }
  if (always) {
    throw new WrongStateError(
      `${workflowId} is the expiry of a trash of table ${tableId} that has ended (the table is ${table.state}): it is closing; nothing to cancel`,
    );
  }
}
