import { TableBusyError } from '../domain/errors';
import { describeLease } from '../domain/leases';
import { DEFAULT_DRAIN_TIMEOUT_SECONDS } from '../domain/limits';
import type { TrashInput } from '../domain/operations';
import type { TrashTimerState } from '../domain/contracts';
import { SHARDS, transition, type Operation, type Readiness, type StepContext } from '../domain/steps';
import { catalogCalls } from './catalog-calls';
import { operationRun } from './execute';
import { purge } from './purge';
import { trashRun } from './trash-run';

/**
 * Soft-deletes a table: new leases stopped (DRAINING while leases are live, waiting for them), TRASHING, shards to the
 * trash area, TRASHED with its expiry. The table is unreachable from the first step on.
 */
export const trash: Operation<TrashInput> = {
  name: 'trash',
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
      name: 'commit trashed',
      change: ({ input }) => ({ kind: 'commitTrash', tableId: input.tableId, retentionSeconds: input.retentionSeconds }),
    },
  ],
};

/** One deadline for the whole drain, from when the table's lock was taken: the leases, then (PostgreSQL) the sessions. */
const drainDeadline = ({ input, lockedAt }: StepContext<TrashInput>) =>
  lockedAt + (input.drainTimeoutSeconds ?? DEFAULT_DRAIN_TIMEOUT_SECONDS) * 1000;

/**
 * Qserv's drain: a DRAINING table waits until every lease is released (the release wakes the run) or has expired (it
 * looks again at the soonest expiry). Past the deadline the drop is TableBusy, naming the leases, and taken back.
 */
function drained(context: StepContext<TrashInput>): Readiness {
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
 * The trash's run: the drop, then (trash-run.ts) the wait for the table's expiry and the purge then, unless a recall or a
 * purge by hand ends it first.
 */
export function trashTable(input: TrashInput): Promise<TrashTimerState> {
  const calls = catalogCalls(input.catalogId);
  const waiting = { policy: input.lockWait, input };
  return trashRun(input, {
    calls: {
      ...calls,
      purge: (what, waitingToPurge) => operationRun(purge, { ...what, fromTrashRun: true }, { waiting: waitingToPurge }).table(),
    },
    moveToTrash: (timer) => operationRun(trash, input, { waiting, wake: timer }).table(),
  });
}
