import type { PurgeInput } from '../domain/operation-inputs';
import { notTrashed, onHold, tableNotFound } from '../domain/refusals';
import { SHARDS, transition, type Operation, type StepContext, type Verdict } from '../domain/steps';
import type { TableInfo } from '../domain/table';
import { operationWorkflow } from './execute';

/**
 * Deletes a trashed table for good: its shards are first renamed to garbage, then deleted, and the table stays in the
 * catalog as a PURGED tombstone. Started by hand, by the trash's space cap, or by the trash run at its expiry.
 */
export const purge: Operation<PurgeInput> = {
  name: 'purge',
  lockTable: (input) => input.tableId,
  steps: [
    { name: 'check', check: purgeVerdict },
    {
      name: 'mark garbage',
      change: transition('TRASHED', 'PURGING'),
      shards: SHARDS.markGarbage,
      undo: { shards: SHARDS.unmarkGarbage, change: transition('PURGING', 'TRASHED') },
    },
    {
      name: 'delete garbage',
      shards: SHARDS.deleteGarbage,
      pointOfNoReturn: true,
      // The purge is bound to end here: the trash's expiry is over (but for the purge that run makes itself).
      endsTrash: ({ input, checked }) =>
        !input.fromTrashRun && checked?.droppedAt != null ? { reason: 'purged', droppedAt: checked.droppedAt } : undefined,
    },
    { name: 'commit purged', change: transition('PURGING', 'PURGED') },
  ],
};

/**
 * The table is in the trash this purge is for (an expiry's or a policy's is the one at its drop time), or already on its
 * way: PURGING (an earlier purge stopped after it began deleting; this one finishes it and never goes back) or PURGED
 * (nothing left to do). A held table is never purged: a purge by hand is OnHold, naming the reason; an expiry or a policy
 * finds nothing to do yet, as it does for an expiry moved later (a new retention) since its timer fired.
 */
function purgeVerdict({ checked: table, input, lockedAt }: StepContext<PurgeInput>): Verdict {
  if (!table) return { refuse: tableNotFound(input.tableId) };
  if (table.state === 'PURGED') return { finish: 'purged already' };
  const inThatTrash = (table.state === 'TRASHED' || table.state === 'PURGING') && table.droppedAt === input.droppedAt;
  // Restored (or trashed again) since this timer was set: this expiry no longer applies.
  if (input.trigger !== 'manual' && !inThatTrash) return { finish: 'no longer in the trash this purge is for' };
  if (table.state === 'PURGING') return { forward: true };
  if (table.state !== 'TRASHED') return { refuse: notTrashed(table, 'can be purged') };
  if (table.hold) return input.trigger === 'manual' ? { refuse: onHold({ ...table, hold: table.hold }) } : { finish: 'held' };
  if (input.trigger === 'expiry' && table.expireAt! > lockedAt) return { finish: 'not expired yet' };
  return { proceed: true };
}

export const purgeTable: (input: PurgeInput) => Promise<TableInfo> = operationWorkflow(purge);
