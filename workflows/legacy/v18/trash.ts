import { condition, setCurrentDetails } from '@temporalio/workflow';
import { OPERATIONS } from '../../../domain/operations';
import type { TrashTimerState } from '../../../domain/contracts';
import type { TableRecord } from '../../../domain/table';
import { describeLease, type Lease } from '../../../domain/leases';
import { TableBusyError } from '../../../domain/errors';
import { DEFAULT_DRAIN_TIMEOUT_SECONDS } from '../../../domain/limits';
import type { TrashCommitted } from '../../../activities';
import { operationCalls, type OperationCalls } from './operation-calls';
import { holdingLocks, untilFree, withLock, type Waiting } from './lock';
import { takes } from './patches';
import { purgeSteps } from './purge';
import { asFailure, everyShard, runSteps, SHARDS, type Step } from './steps';
import type { TrashTimer } from '../v19/trash-expiry';
import type { TrashRunInput } from '../v19/input';
import { trashRun } from '../v19/trash-run';

/**
 * Soft-deletes a table: it becomes unreachable at once and its shards move to the trash. The caller is answered (through
 * the `trashed` update) as soon as the table is TRASHED; the workflow then sleeps on a durable timer until the retention
 * runs out and purges the table, unless an undelete or a manual purge ends the timer first (trash-expiry.ts).
 */
export function trashTable(input: TrashRunInput): Promise<TrashTimerState> {
  const calls = operationCalls(input.catalogId);
  return trashRun(input, {
    calls: { ...calls, purge: (purge, waiting) => purgeSteps(calls, purge, waiting) },
    moveToTrash: (timer) => moveToTrash(calls, input, timer),
  });
}

/**
 * The steps of a trash, under the table's lock: new leases stopped (DRAINING while leases are live, waiting for them),
 * TRASHING, shards to the trash area, TRASHED with its expiry. Runs started before leases skip the drain.
 */
function moveToTrash(calls: OperationCalls, input: TrashRunInput, timer: TrashTimer): Promise<TrashCommitted> {
  const [tableLock] = OPERATIONS.trash.locks(input);
  const commitTrashed: Step<Drop, TrashCommitted> = {
    name: 'commit trashed',
    call: async (drop) => {
      // (Who dropped it, since v20's catalog records it: an argument of the same call, so v18's commands are what they were.)
      const droppedBy = input.droppedBy ?? input.startedBy;
      const trashed = await calls.commitTrash({
        tableId: tableIn(drop).id,
        now: Date.now(),
        retentionSeconds: input.retentionSeconds,
        ...(droppedBy !== undefined ? { droppedBy } : {}),
      });
      timer.arm(trashed);
      return trashed;
    },
  };
  const waiting: Waiting = { policy: input.lockWait, input };
  // One deadline for the whole drain, from when the table's lock is taken: the leases, then (PostgreSQL) the sessions
  // using the table.
  let deadline = 0;
  const startDeadline = () => (deadline = Date.now() + (input.drainTimeoutSeconds ?? DEFAULT_DRAIN_TIMEOUT_SECONDS) * 1000);
  const steps = (takeLock: boolean) =>
    runSteps<Drop>(
      stopNewLeases(calls, input, takeLock ? { lock: tableLock!, waiting, taken: startDeadline } : undefined),
      waitForLeases(calls, input.tableId, () => deadline, timer),
      everyShard(calls, 'move shards to trash', () => ({ ...SHARDS.toTrash, drainTimeoutMs: Math.max(deadline - Date.now(), 1000) }), {
        undo: SHARDS.backFromTrash,
      }),
      commitTrashed as Step<Drop>,
    ) as Promise<TrashCommitted>;
  // (Since v17 the drop's first change takes the table's lock; before, a lock attempt of its own did, first.)
  if (takes('drainTakesTableLock')) return holdingLocks(calls, () => steps(true));
  return withLock(calls, tableLock!, waiting, () => {
    startDeadline();
    return steps(false);
  });
}

/** What a drop carries from step to step: the table, and the leases it waits for while DRAINING. */
type Drop = TableRecord | { table: TableRecord; leases: Lease[] };
const tableIn = (drop: Drop): TableRecord => ('table' in drop ? drop.table : drop);

/**
 * A drop's first change, which stops new leases: READY to DRAINING while the table has live leases, else straight to
 * TRASHING (a table found DRAINING or TRASHING is a drop resumed). Undone by the move back to READY. With `locking`
 * (since v17) the same call takes the table's lock, waiting its turn while another operation holds it.
 */
function stopNewLeases(
  calls: OperationCalls,
  input: TrashRunInput,
  locking?: { lock: string; waiting: Waiting; taken: () => void },
): Step<void, Drop> {
  return {
    name: 'stop new leases',
    call: async () => {
      if (!locking) return calls.startDrain(input.tableId, input.expectedName) as Promise<Drop>;
      const drop = await untilFree(
        `lock ${locking.lock}`,
        () => calls.startDrain(input.tableId, input.expectedName, true),
        (answer) => ('busy' in answer ? answer.busy : undefined),
        locking.waiting,
      );
      if ('busy' in drop) throw new Error('unreachable: a busy lock is waited on above');
      locking.taken();
      return drop;
    },
    undo: async () => {
      await calls.transition({ tableId: input.tableId, from: ['DRAINING', 'TRASHING'], to: 'READY', now: Date.now() });
    },
  };
}

/**
 * Qserv's drain: a DRAINING table waits until every lease is released (the release wakes the run) or has expired (it
 * wakes at the soonest expiry), then moves on to TRASHING. Past the deadline the drop is TableBusy, naming the leases,
 * and taken back (the first step's undo: READY again).
 */
function waitForLeases(calls: OperationCalls, tableId: number, deadlineOf: () => number, timer: TrashTimer): Step<Drop> {
  return {
    name: 'wait for leases',
    call: async (drop) => {
      if (!('leases' in drop) || drop.table.state !== 'DRAINING') return drop;
      const deadline = deadlineOf();
      let leases = drop.leases;
      while (leases.length > 0) {
        const left = deadline - Date.now();
        if (left <= 0) {
          throw asFailure(
            new TableBusyError(
              `table ${tableId} is still leased at the drop's drain deadline, ${new Date(deadline).toISOString()}: ` +
                `${leases.map(describeLease).join('; ')}; the drop was taken back, the table is READY`,
            ),
          );
        }
        setCurrentDetails(`draining table ${tableId} until ${new Date(deadline).toISOString()}: ${leases.map(describeLease).join('; ')}`);
        await condition(timer.isWoken, Math.max(Math.min(leases[0]!.expiresAt - Date.now(), left), 1), {
          summary: `wait for the leases on table ${tableId} (a release wakes it; gives up at ${new Date(deadline).toISOString()})`,
        });
        timer.takeWake();
        leases = await calls.liveLeases(tableId);
      }
      setCurrentDetails('');
      const table = await calls.transition({ tableId, from: ['DRAINING'], to: 'TRASHING', now: Date.now() });
      return { table, leases };
    },
  };
}
