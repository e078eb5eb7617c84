import { CancellationScope, log } from '@temporalio/workflow';
import { TableBusyError } from '../domain/errors';
import { describeLease } from '../domain/leases';
import { DEFAULT_DRAIN_TIMEOUT_SECONDS } from '../domain/limits';
import type { TrashInput } from '../domain/operations';
import { trashChangedSignal } from '../domain/contracts';
import { SHARDS, transition, type Operation, type Readiness, type StepContext } from '../domain/steps';
import { toTableInfo, type TableInfo } from '../domain/table';
import type { TrashCommitted } from '../activities';
import { operationRun, wokenBy } from './execute';
import { purge } from './purge';

/**
 * Soft-deletes a table: new leases stopped (DRAINING while leases are live, waiting for them), TRASHING, shards to the
 * trash area, TRASHED with its expiry, and the expiry's run started. The table is unreachable from the first step on.
 */
export const trash: Operation<TrashInput> = {
  name: 'drop',
  steps: [
    {
      // Takes the table's lock (a table found DRAINING or TRASHING is a drop resumed); undone, the table is READY again.
      name: 'stop new leases',
      change: ({ input }) => ({
        kind: 'startDrain',
        tableId: input.tableId,
        ...(input.expectedName ? { expectName: input.expectedName } : {}),
      }),
      undo: { change: transition(['DRAINING', 'TRASHING'], 'READY') },
    },
    { name: 'wait for leases', waitsForLeases: drained },
    {
      name: 'move shards to trash',
      change: ({ table }) => (table!.state === 'DRAINING' ? transition('DRAINING', 'TRASHING') : undefined),
      // (PostgreSQL: the move waits for the sessions using the table as long as the drain's deadline leaves.)
      shards: (context) => ({ ...SHARDS.toTrash, drainTimeoutMs: Math.max(drainDeadline(context) - context.now, 1000) }),
      undo: { shards: SHARDS.backFromTrash },
    },
    {
      // Then the trash's expiry, a run of its own (trash-expiry.ts): what recalls, purges and retention changes address.
      // Who dropped the table is recorded with it: the drop's starter (a drop resumed by the reconciler carries it).
      name: 'commit trashed, start its expiry',
      change: ({ input: { tableId, retentionSeconds, lockWait, expiryRetry, droppedBy, startedBy } }) => ({
        kind: 'commitTrash',
        tableId,
        retentionSeconds,
        droppedBy: droppedBy ?? startedBy,
        startExpiry: { ...(lockWait ? { lockWait } : {}), ...(expiryRetry ? { expiryRetry } : {}) },
      }),
    },
  ],
};

/** One deadline for the whole drain, from when the table's lock was taken: the leases, then (PostgreSQL) the sessions. */
export const drainDeadline = ({ input, lockedAt }: StepContext<TrashInput>) =>
  lockedAt + (input.drainTimeoutSeconds ?? DEFAULT_DRAIN_TIMEOUT_SECONDS) * 1000;

/**
 * Qserv's drain: a DRAINING table waits until every lease is released (the release wakes the run) or has expired (it
 * looks again at the soonest expiry). Past the deadline the drop is TableBusy, naming the leases, and taken back.
 */
export function drained(context: StepContext<TrashInput>): Readiness {
  const { table, leases, now } = context;
  if (table!.state !== 'DRAINING' || leases.length === 0) return { ready: true };
  const deadline = drainDeadline(context);
  const until = new Date(deadline).toISOString();
  if (now >= deadline) {
    return {
      refuse: new TableBusyError(
        `table ${table!.id} is still leased at the drop's drain deadline, ${until}: ` +
          `${leases.map(describeLease).join('; ')}; the drop was taken back, the table is READY`,
      ),
    };
  }
  return {
    waitMs: Math.max(Math.min(leases[0]!.expiresAt - now, deadline - now), 1),
    why: `draining table ${table!.id} until ${until}: ${leases.map(describeLease).join('; ')}`,
  };
}

/**
 * A drop's run: the steps above. Its caller hears the table TRASHED; with the trash off where it was dropped
 * (trash.enabled false), the table is purged in the same run and its caller hears it PURGED, unless it is held or the
 * purge fails or outwaits its run's share of a lock wait (then it waits in the trash for its expiry).
 */
export async function trashTable(input: TrashInput): Promise<TableInfo> {
  const trashed: TrashCommitted = await operationRun(trash, input, { wake: wokenBy(trashChangedSignal) }).table();
  if (trashed.policy?.enabled !== false || trashed.hold) return toTableInfo(trashed);
  // The table is in the trash: a cancel request can no longer take the drop back.
  return CancellationScope.nonCancellable(async () => {
    const { catalogId, lockWait } = input;
    const what = { tableId: trashed.id, trigger: 'policy', droppedAt: trashed.droppedAt!, catalogId, lockWait } as const;
    try {
      const purged = await operationRun(purge, what).table();
      if (purged.state === 'PURGED') return toTableInfo(purged);
    } catch (err) {
      log.warn('the trash is disabled, but purging the table at once failed: it waits in the trash for its expiry', {
        tableId: trashed.id,
        error: String(err),
      });
    }
    return toTableInfo(trashed);
  });
}
