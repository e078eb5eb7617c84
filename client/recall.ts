import type { WorkflowHandle } from '@temporalio/client';
import { InvalidInputError } from '../domain/errors';
import { recallProgressQuery, type RecallProgress } from '../domain/contracts';
import { formatTableName, type TableName } from '../domain/names';
import { OPERATIONS } from '../domain/operations';
import { isUnitChanged } from '../domain/refusals';
import { OPERATION_REQUESTS, parseRequest, type UndeleteRequest } from '../domain/requests';
import { toTableInfo, type TableInfo, type TableRecord } from '../domain/table';
import type { undeleteTable } from '../workflows';
import { callTimeout, type ClientContext } from './context';
import { watchChanges } from './details';
import { applicationFailureOf } from './errors';
import { checkForDriver, expectedName, trashedTable } from './names';
import type { UndeleteOptions } from './options';
import { onTable, startAndWait } from './start';
import type { CallRecord } from './calls';
import { inPlacePlan, recallInPlaceOf, type InPlacePlan } from './recall-in-place';

/** A trashed table brought back (undelete), with the tables dropped with it as one. */

/** How often an undelete asks its run how many shards are back. */
const PROGRESS_POLL_MS = 300;

/**
 * An undelete's plan: the trashed table found, the name it comes back under, and the tables dropped with it as one that
 * come back with it.
 */
interface UndeletePlan {
  tableId: number;
  newName?: TableName;
  /** The namespace the whole unit comes back into (its tables' newName), asked again on a later attempt. */
  newNamespace?: string;
  expectedName?: TableName;
  target: TableName;
  together?: Mates;
}
type Mates = Array<{ tableId: number; expectedName: TableName; newName?: TableName }>;

export const undeleteCall: CallRecord<UndeleteRequest, UndeletePlan | { inPlace: InPlacePlan }, TableInfo, UndeleteOptions> = {
  async plan(ctx, request) {
    const { table: ref, newName: asked, newNamespace, alone, inPlace } = parseRequest(OPERATION_REQUESTS.undelete, request);
    if (asked && newNamespace !== undefined) throw new InvalidInputError('give a new name, or a new namespace, not both');
    if (inPlace && (asked || newNamespace !== undefined || alone)) {
      throw new InvalidInputError("a recall in place comes back under its table's name: it takes no new name, namespace or alone");
    }
    const trashed = await trashedTable(ctx.catalog, ref);
    if (inPlace) return { plan: { inPlace: await inPlacePlan(ctx, trashed) } };
    const newName = asked ?? (newNamespace !== undefined ? { namespace: newNamespace, name: trashed.name } : undefined);
    if (newName) checkForDriver(ctx.storageDriver, { table: newName, shards: trashed.params.shards });
    const together = alone ? [] : await matesOf(ctx, trashed, newNamespace);
    if (asked && together.length > 0) {
      throw new InvalidInputError(
        `table ${trashed.id} was dropped with tables ${together.map((t) => t.tableId).join(', ')} as one, and comes back with them ` +
          `under the names they had: recall it alone to give it another name`,
      );
    }
    const target = newName ?? trashed;
    return {
      plan: {
        tableId: trashed.id,
        newName,
        ...(newNamespace !== undefined ? { newNamespace } : {}),
        expectedName: expectedName(ref),
        target: { namespace: target.namespace, name: target.name },
        ...(together.length > 0 ? { together } : {}),
      },
    };
  },
  execute(ctx, plan, opts) {
    if ('inPlace' in plan) return recallInPlaceOf(ctx, plan.inPlace, opts);
    const { tableId, newName, newNamespace, expectedName: expected, target, together: planned } = plan;
    const record = OPERATIONS.undelete;
    const { onProgress } = opts;
    const withThem = (mates: Mates) => (mates.length > 0 ? ` with tables ${mates.map((t) => t.tableId).join(', ')}` : '');
    return startAndWait<typeof undeleteTable>(ctx, {
      ...onTable(ctx, record, tableId, `undelete of table ${tableId}${withThem(planned ?? [])}`, callTimeout(ctx, opts), opts),
      run: async (attempt) => {
        // (Asked again: one of the others left the trash since it was read. Those still there come back.)
        const together =
          attempt === 0 ? planned : await matesOf(ctx, await trashedTable(ctx.catalog, { kind: 'id', id: tableId }), newNamespace);
        return {
          record,
          input: { tableId, newName, expectedName: expected, ...(together && together.length > 0 ? { together } : {}) },
          target: { tableId, ...target },
          summary: `undelete table ${tableId}${newName && newNamespace === undefined ? ` as ${formatTableName(newName)}` : ''}${withThem(together ?? [])}`,
          answer: async (handle, signal) => {
            const result = handle.result();
            if (onProgress) await reportProgress(handle, result, onProgress, signal);
            const recalled = await result;
            // (A run over several tables answers its lowest id's: the answer is of the table asked for.)
            if (recalled.id === tableId) return recalled;
            const asked = await ctx.catalog.getTable(tableId);
            return asked ? { ...toTableInfo(asked), ...(recalled.notes ? { notes: recalled.notes } : {}) } : recalled;
          },
        };
      },
      // (A repeatable execute's request id names its first run for good: its caller hears the refusal, and asks again.)
      again: (outcome) =>
        Promise.resolve(
          opts.requestId === undefined && 'error' in outcome && isUnitChanged(applicationFailureOf(outcome.error)?.message ?? ''),
        ),
    });
  },
};

/** The tables that come back with `trashed` (dropped with it as one, still in the trash), each into `newNamespace` if asked. */
async function matesOf(ctx: ClientContext, trashed: TableRecord, newNamespace: string | undefined): Promise<Mates> {
  return (await droppedWithIt(ctx, trashed)).map((other) => {
    if (newNamespace === undefined) return other;
    const moved = { namespace: newNamespace, name: other.expectedName.name };
    checkForDriver(ctx.storageDriver, { table: moved, shards: 1 });
    return { ...other, newName: moved };
  });
}

/** The tables dropped with `table` as one that are still in the trash from that drop: they come back with it. */
async function droppedWithIt(ctx: ClientContext, table: TableRecord): Promise<Array<{ tableId: number; expectedName: TableName }>> {
  const found: Array<{ tableId: number; expectedName: TableName }> = [];
  for (const id of table.droppedWith ?? []) {
    const other = await ctx.catalog.getTable(id);
    if (other?.state === 'TRASHED' && other.droppedAt === table.droppedAt)
      found.push({ tableId: id, expectedName: { namespace: other.namespace, name: other.name } });
  }
  return found;
}

/** Asks the running undelete how far it is until it ends (or the call gives up), reporting each change. */
function reportProgress(
  handle: WorkflowHandle<typeof undeleteTable>,
  result: Promise<unknown>,
  onProgress: (progress: RecallProgress) => void,
  signal: AbortSignal,
): Promise<void> {
  return watchChanges(
    async () => {
      const progress = await handle.query(recallProgressQuery).catch(() => undefined);
      return progress && progress.shards > 0 ? progress : null;
    },
    (progress) => JSON.stringify(progress),
    result,
    onProgress,
    signal,
    { afterMs: 0, everyMs: PROGRESS_POLL_MS },
  );
}
