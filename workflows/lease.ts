import type { LeaseInput } from '../domain/operation-inputs';
import type { Lease } from '../domain/leases';
import { catalogCalls } from './catalog-calls';

/**
 * A lease taken on a READY table, renewed, or released: one change of the catalog, ordered with a drop's move to
 * DRAINING by the table's row (no operation lock: a lease never waits for a drop). A release wakes a drop that drains
 * the table, so that it goes on at once rather than at the lease's expiry.
 */
export async function leaseTable(input: LeaseInput): Promise<Lease> {
  const calls = catalogCalls(input.catalogId);
  const now = Date.now();
  const lease = await calls.changeLease({
    request:
      input.action === 'acquire'
        ? {
            action: 'acquire',
            lease: {
              id: input.leaseId,
              tableId: input.tableId,
              holder: input.holder,
              ttlSeconds: input.ttlSeconds,
              acquiredAt: now,
              expiresAt: now + input.ttlSeconds * 1000,
            },
          }
        : input.action === 'renew'
          ? { action: 'renew', leaseId: input.leaseId, now, ...(input.ttlSeconds !== undefined ? { ttlSeconds: input.ttlSeconds } : {}) }
          : { action: 'release', leaseId: input.leaseId },
  });
  if (input.action === 'release') await calls.wakeTrash(lease.tableId, ['DRAINING', 'TRUNCATING']);
  return lease;
}
