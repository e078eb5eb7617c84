import { LeaseNotFoundError, WrongStateError } from '../domain/errors';
import { describeLease, type Lease } from '../domain/leases';
import { notLeasable, tableNotFound } from '../domain/refusals';
import type { LeaseRequest } from './catalog';
import type { CatalogTx } from './tx';

/** A lease taken, renewed or released (see Catalog.changeLease). */
export async function changeLease(tx: CatalogTx, req: LeaseRequest): Promise<Lease> {
  if (req.action === 'acquire') {
    const table = await tx.tableById(req.lease.tableId, { forUpdate: true });
    if (!table || table.state === 'PURGED') throw tableNotFound(req.lease.tableId);
    if (table.state !== 'READY') throw notLeasable(table);
    if (await tx.leaseById(req.lease.id)) throw new WrongStateError(`a lease ${req.lease.id} exists already`);
    await tx.insertLease(req.lease);
    return req.lease;
  }
  const lease = await tx.leaseById(req.leaseId, { forUpdate: true });
  if (!lease) throw new LeaseNotFoundError(`there is no lease ${req.leaseId}: never taken, or released already`);
  if (req.action === 'release') {
    await tx.deleteLease(lease.id);
    return lease;
  }
  if (lease.expiresAt <= req.now) {
    throw new LeaseNotFoundError(`${describeLease(lease)} has expired; take a new one`);
  }
  const ttlSeconds = req.ttlSeconds ?? lease.ttlSeconds;
  const renewed = { ...lease, ttlSeconds, expiresAt: req.now + ttlSeconds * 1000 };
  await tx.renewLease(lease.id, renewed.ttlSeconds, renewed.expiresAt);
  return renewed;
}
