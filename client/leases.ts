import { randomUUID } from 'node:crypto';
import { toLeaseInfo, type LeaseInfo } from '../domain/leases';
import { formatTableName } from '../domain/names';
import { OPERATIONS, type OperationTarget } from '../domain/operations';
import { notLeasable } from '../domain/refusals';
import {
  listLeasesRequestSchema,
  OPERATION_REQUESTS,
  parseRequest,
  releaseLeaseRequestSchema,
  renewLeaseRequestSchema,
  type LeaseRequest,
  type ListLeasesRequest,
  type ReleaseLeaseRequest,
  type RenewLeaseRequest,
} from '../domain/requests';
import type { leaseTable } from '../workflows';
import { callTimeout, type ClientContext } from './context';
import { anyTable } from './names';
import type { WriteOptions } from './options';
import { repeatable, type CallRecord, type ExecuteOptions } from './calls';
import { startAndWait } from './start';

/** Leases: each change is a run of leaseTable, under an id of its own (a lease is not a table's one operation at a time). */

/** A lease change's plan: its run's input (an acquire's new lease id drawn here), what it is on, and its run's subject. */
interface LeasePlan {
  input: Parameters<typeof leaseTable>[0];
  subject: string;
  target: OperationTarget;
  summary: string;
}

export const acquireLeaseCall: CallRecord<LeaseRequest, LeasePlan, LeaseInfo> = {
  async plan(ctx, asked) {
    const request = parseRequest(OPERATION_REQUESTS.lease, asked);
    const found = await anyTable(ctx.catalog, request.table);
    if (found.state !== 'READY') throw notLeasable(found);
    const leaseId = randomUUID();
    return {
      plan: {
        input: { action: 'acquire', leaseId, tableId: found.id, holder: request.holder ?? ctx.startedBy, ttlSeconds: request.ttlSeconds },
        subject: `${leaseId}:acquire`,
        target: { tableId: found.id, namespace: found.namespace, name: found.name },
        summary: `lease table ${found.id} (${formatTableName(found)}) for ${request.ttlSeconds} s`,
      },
    };
  },
  execute: (ctx, plan, opts) => runLease(ctx, plan, opts),
};

export const renewLeaseCall: CallRecord<RenewLeaseRequest, LeasePlan, LeaseInfo> = {
  plan(_ctx, asked) {
    const request = parseRequest(renewLeaseRequestSchema, asked);
    const summary = `renew lease ${request.leaseId}`;
    return { plan: { input: { action: 'renew', ...request }, subject: `${request.leaseId}:renew:${randomUUID()}`, target: {}, summary } };
  },
  execute: (ctx, plan, opts) => runLease(ctx, plan, opts),
};

export const releaseLeaseCall: CallRecord<ReleaseLeaseRequest, LeasePlan, LeaseInfo> = {
  plan(_ctx, asked) {
    const request = parseRequest(releaseLeaseRequestSchema, asked);
    const summary = `release lease ${request.leaseId}`;
    return {
      plan: { input: { action: 'release', ...request }, subject: `${request.leaseId}:release:${randomUUID()}`, target: {}, summary },
    };
  },
  execute: (ctx, plan, opts) => runLease(ctx, plan, opts),
};

export async function listLeases(ctx: ClientContext, request: ListLeasesRequest): Promise<LeaseInfo[]> {
  const { table } = parseRequest(listLeasesRequestSchema, request);
  const tableId = table === undefined ? undefined : (await anyTable(ctx.catalog, table)).id;
  return (await ctx.catalog.listLeases({ tableId, now: Date.now() })).map(toLeaseInfo);
}

/** One change of a lease, a run under an id of its own: an acquire's is its new lease's, a renew's or release's fresh. */
async function runLease(
  ctx: ClientContext,
  { input, subject, target, summary }: LeasePlan,
  opts: WriteOptions & ExecuteOptions,
): Promise<LeaseInfo> {
  const record = OPERATIONS.lease;
  const lease = await startAndWait<typeof leaseTable>(ctx, {
    workflowId: record.workflowId(subject, ctx.catalog.id),
    what: summary,
    check: '`tablefate lease ls`',
    timeoutMs: callTimeout(ctx, opts),
    ...repeatable(opts),
    run: { record, input, target, summary },
  });
  return toLeaseInfo(lease);
}
