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
  type ListLeasesRequest,
} from '../domain/requests';
import type { leaseTable } from '../workflows';
import { callTimeout, type ClientContext } from './context';
import { anyTable } from './names';
import type { LeaseOptions, WriteOptions } from './options';
import { startAndWait } from './start';

/** Leases: each change is a run of leaseTable, under an id of its own (a lease is not a table's one operation at a time). */

export async function acquireLease(ctx: ClientContext, table: string | number, opts: LeaseOptions): Promise<LeaseInfo> {
  const request = parseRequest(OPERATION_REQUESTS.lease, { table, ttlSeconds: opts.ttlSeconds, holder: opts.holder });
  const found = await anyTable(ctx.catalog, request.table);
  if (found.state !== 'READY') throw notLeasable(found);
  const leaseId = randomUUID();
  return runLease(
    ctx,
    { action: 'acquire', leaseId, tableId: found.id, holder: request.holder ?? ctx.startedBy, ttlSeconds: request.ttlSeconds },
    { tableId: found.id, namespace: found.namespace, name: found.name },
    `lease table ${found.id} (${formatTableName(found)}) for ${request.ttlSeconds} s`,
    opts,
  );
}

export async function renewLease(ctx: ClientContext, leaseId: string, opts: Omit<LeaseOptions, 'holder'>): Promise<LeaseInfo> {
  const request = parseRequest(renewLeaseRequestSchema, { leaseId, ttlSeconds: opts.ttlSeconds });
  return runLease(ctx, { action: 'renew', ...request }, {}, `renew lease ${request.leaseId}`, opts);
}

export async function releaseLease(ctx: ClientContext, leaseId: string, opts: WriteOptions): Promise<LeaseInfo> {
  const request = parseRequest(releaseLeaseRequestSchema, { leaseId });
  return runLease(ctx, { action: 'release', ...request }, {}, `release lease ${request.leaseId}`, opts);
}

export async function listLeases(ctx: ClientContext, request: ListLeasesRequest): Promise<LeaseInfo[]> {
  const { table } = parseRequest(listLeasesRequestSchema, request);
  const tableId = table === undefined ? undefined : (await anyTable(ctx.catalog, table)).id;
  return (await ctx.catalog.listLeases({ tableId, now: Date.now() })).map(toLeaseInfo);
}

/** One change of a lease, a run under an id of its own: an acquire's is its new lease's, a renew's or release's fresh. */
async function runLease(
  ctx: ClientContext,
  input: Parameters<typeof leaseTable>[0],
  target: OperationTarget,
  summary: string,
  opts: WriteOptions,
): Promise<LeaseInfo> {
  const timeoutMs = callTimeout(ctx, opts);
  const record = OPERATIONS.lease;
  const subject = input.action === 'acquire' ? `${input.leaseId}:acquire` : `${input.leaseId}:${input.action}:${randomUUID()}`;
  const lease = await startAndWait<typeof leaseTable>(ctx, {
    workflowId: record.workflowId(subject, ctx.catalog.id),
    what: summary,
    check: '`tablefate lease ls`',
    timeoutMs,
    run: { record, input, target, summary },
  });
  return toLeaseInfo(lease);
}
