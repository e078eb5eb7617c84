import { formatTableName, type TableRef } from '../domain/names';
import { OPERATIONS } from '../domain/operations';
import { notOnHold } from '../domain/refusals';
import { OPERATION_REQUESTS, parseRequest, type HoldRequest, type ReleaseRequest } from '../domain/requests';
import { canBeHeld, toTableInfo, type TableInfo } from '../domain/table';
import type { holdTable } from '../workflows';
import { callTimeout, type ClientContext } from './context';
import { anyTable, expectedName } from './names';
import type { WriteOptions } from './options';
import { onTable, startAndWait } from './start';

/** Legal holds: placed on a table and released, each a run of the same workflow (hold null: a release). */

export async function hold(ctx: ClientContext, request: HoldRequest, opts: WriteOptions): Promise<TableInfo> {
  const { table: ref, reason } = parseRequest(OPERATION_REQUESTS.hold, request);
  return changeHold(ctx, OPERATIONS.hold, ref, { reason: reason ?? null }, opts);
}

export async function release(ctx: ClientContext, request: ReleaseRequest, opts: WriteOptions): Promise<TableInfo> {
  const { table: ref } = parseRequest(OPERATION_REQUESTS.release, request);
  return changeHold(ctx, OPERATIONS.release, ref, null, opts);
}

async function changeHold(
  ctx: ClientContext,
  record: typeof OPERATIONS.hold | typeof OPERATIONS.release,
  ref: TableRef,
  hold: { reason: string | null } | null,
  opts: WriteOptions,
): Promise<TableInfo> {
  const timeoutMs = callTimeout(ctx, opts);
  const table = await anyTable(ctx.catalog, ref);
  // (Checked again under the lock by the workflow; here, to answer at once.)
  if (!hold && !table.hold) throw notOnHold(table.id);
  // Held already for this reason answers the table as it is, as the workflow would: only where it could be held now
  // (a recall of a held table under way is waited for, then answered READY and held).
  if (hold && table.hold && table.hold.reason === hold.reason && canBeHeld(table)) return toTableInfo(table);
  return startAndWait<typeof holdTable>(ctx, {
    ...onTable(ctx, record, table.id, `${record.name} of table ${table.id}`, timeoutMs, opts),
    run: {
      record,
      input: { tableId: table.id, hold, expectedName: expectedName(ref) },
      target: { tableId: table.id, namespace: table.namespace, name: table.name },
      summary: `${record.name} table ${table.id} (${formatTableName(table)})${hold?.reason ? `: ${hold.reason}` : ''}`,
    },
  });
}
