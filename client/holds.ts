import { formatTableName, type TableName, type TableRef } from '../domain/names';
import { OPERATIONS } from '../domain/operations';
import { notOnHold } from '../domain/refusals';
import { OPERATION_REQUESTS, parseRequest, type HoldRequest, type ReleaseRequest } from '../domain/requests';
import { canBeHeld, toTableInfo, type TableInfo } from '../domain/table';
import type { holdTable } from '../workflows';
import { callTimeout, type ClientContext } from './context';
import { anyTable, expectedName } from './names';
import type { WriteOptions } from './options';
import { onTable, startAndWait } from './start';
import type { CallRecord, ExecuteOptions, Planned } from './calls';

/** Legal holds: placed on a table and released, each a run of the same workflow (hold null: a release). */

/** A hold's or a release's plan: the table found, and the hold it is to have (null: none). */
interface HoldPlan {
  op: 'hold' | 'release';
  tableId: number;
  label: string;
  target: TableName;
  hold: { reason: string | null } | null;
  expectedName?: TableName;
}

export const holdCall: CallRecord<HoldRequest, HoldPlan, TableInfo> = {
  async plan(ctx, request) {
    const { table: ref, reason } = parseRequest(OPERATION_REQUESTS.hold, request);
    return planHold(ctx, 'hold', ref, { reason: reason ?? null });
  },
  execute: (ctx, plan, opts) => changeHold(ctx, plan, opts),
};

export const releaseCall: CallRecord<ReleaseRequest, HoldPlan, TableInfo> = {
  async plan(ctx, request) {
    const { table: ref } = parseRequest(OPERATION_REQUESTS.release, request);
    return planHold(ctx, 'release', ref, null);
  },
  execute: (ctx, plan, opts) => changeHold(ctx, plan, opts),
};

async function planHold(
  ctx: ClientContext,
  op: HoldPlan['op'],
  ref: TableRef,
  hold: HoldPlan['hold'],
): Promise<Planned<HoldPlan, TableInfo>> {
  const table = await anyTable(ctx.catalog, ref);
  // (Checked again under the lock by the workflow; here, to answer at once.)
  if (!hold && !table.hold) throw notOnHold(table.id);
  // Held already for this reason answers the table as it is, as the workflow would: only where it could be held now
  // (a recall of a held table under way is waited for, then answered READY and held).
  if (hold && table.hold && table.hold.reason === hold.reason && canBeHeld(table)) return { done: toTableInfo(table) };
  const target = { namespace: table.namespace, name: table.name };
  return { plan: { op, tableId: table.id, label: formatTableName(table), target, hold, expectedName: expectedName(ref) } };
}

function changeHold(ctx: ClientContext, plan: HoldPlan, opts: WriteOptions & ExecuteOptions): Promise<TableInfo> {
  const record = OPERATIONS[plan.op];
  const { tableId, hold } = plan;
  return startAndWait<typeof holdTable>(ctx, {
    ...onTable(ctx, record, tableId, `${record.name} of table ${tableId}`, callTimeout(ctx, opts), opts),
    run: {
      record,
      input: { tableId, hold, expectedName: plan.expectedName },
      target: { tableId, ...plan.target },
      summary: `${record.name} table ${tableId} (${plan.label})${hold?.reason ? `: ${hold.reason}` : ''}`,
    },
  });
}
