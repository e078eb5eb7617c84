/**
 * Leases (Qserv's "no query on a table that is not READY, and a drop waits for the queries running"): a service that
 * uses a table takes a lease on it, for a time it renews; a drop stops new leases (the table is DRAINING) and waits
 * until every lease is released or has expired, up to its drain deadline. Pure: the trash's drain reads these.
 */

/** A lease as the catalog keeps it. Times are epoch milliseconds (workflow time, the one clock). */
export interface Lease {
  id: string;
  tableId: number;
  /** Who took it (`user@host` by default): what a drop that times out names. */
  holder: string;
  ttlSeconds: number;
  acquiredAt: number;
  /** Past it the lease no longer holds anything: an expired lease never blocks a drop. */
  expiresAt: number;
}

/** A lease as the SDK and the command line show it (`--json`). */
export interface LeaseInfo {
  id: string;
  tableId: number;
  holder: string;
  ttlSeconds: number;
  acquiredAt: string;
  expiresAt: string;
}

export const toLeaseInfo = (lease: Lease): LeaseInfo => ({
  id: lease.id,
  tableId: lease.tableId,
  holder: lease.holder,
  ttlSeconds: lease.ttlSeconds,
  acquiredAt: new Date(lease.acquiredAt).toISOString(),
  expiresAt: new Date(lease.expiresAt).toISOString(),
});

/** A lease for a message: `lease 5f1c... held by svc@host until 2026-12-02T10:00:00.000Z`. */
export const describeLease = (lease: Lease): string =>
  `lease ${lease.id} held by ${lease.holder} until ${new Date(lease.expiresAt).toISOString()}`;

/** Lease lifetimes: 60 s unless asked, from 1 s to a day (a longer use renews). */
export const DEFAULT_LEASE_TTL_SECONDS = 60;
export const MAX_LEASE_TTL_SECONDS = 24 * 3600;
