import { isBusy, type AcquireResult, type LockHolder, type LockOwner, type Outcome } from './catalog';
import { LockLostError } from './lock-lost';
import { RetryTransaction, type CatalogTx } from './tx';

/**
 * The catalog's locks, inside a store's transaction (rules.ts): taken, checked, and told apart when an attempt found
 * one busy (its holder may have closed, and the lock be taken over).
 */

/**
 * Takes `resource` for `owner` if it is free or already theirs, inside the caller's transaction, and keeps its
 * row locked until that commits. Of two callers racing for a free resource, the second's insert finds the first
 * as the holder.
 */
export async function tryLock(tx: CatalogTx, resource: string, owner: LockOwner, now: number): Promise<AcquireResult> {
  for (let i = 0; i < 3; i++) {
    if (await tx.insertLock(resource, owner, now)) return { acquired: true, tookOverFrom: null };
    const holder = await tx.lockHolder(resource, { forUpdate: true });
    // Released between the two statements: try to insert again.
    if (!holder) continue;
    return sameOwner(holder, owner) ? { acquired: true, tookOverFrom: null } : { outcome: 'busy', holder };
  }
  throw new RetryTransaction(`the lock on ${resource} kept changing hands`);
}

/** Throws LockLost unless `owner` holds `resource`; keeps the lock row locked (a take-over waits for this transaction). */
export async function assertHolds(tx: CatalogTx, resource: string, owner: LockOwner): Promise<void> {
  const holder = await tx.lockHolder(resource, { forUpdate: true });
  if (!holder || !sameOwner(holder, owner)) {
    throw new LockLostError(
      `${owner.workflowId} does not hold the lock on ${resource}` + (holder ? ` (held by ${holder.workflowId})` : ''),
    );
  }
}

export const sameOwner = (a: LockOwner, b: LockOwner) => a.workflowId === b.workflowId && a.runId === b.runId;

/** The holder of a lock an attempt found busy, if it did. */
export function busyHolder(outcome: Outcome<object>): LockHolder | undefined {
  return 'value' in outcome ? busyHolderOf(outcome.value) : undefined;
}

/** The holder named by a busy answer (a prepare's, a drop's first change's, or a lock attempt's), if it is one. */
export function busyHolderOf(answer: object): LockHolder | undefined {
  return isBusy(answer) ? answer.holder : undefined;
}
