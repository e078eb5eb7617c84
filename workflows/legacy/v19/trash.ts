import type { TrashTimerState } from '../../../domain/contracts';
import { catalogCalls } from '../../catalog-calls';
import { operationRun } from '../../execute';
import { purge } from '../../purge';
import { trashV19 } from './trash-steps';
import type { TrashRunInput } from './input';
import { trashRun } from './trash-run';

/**
 * The trash's run as v19 made it: the drop, then the wait for the table's expiry and the purge then (trash-run.ts), in
 * one run that answers its caller through the `trashed` update. The drop's steps are v19's (trash-steps.ts).
 */
export function trashTable(input: TrashRunInput): Promise<TrashTimerState> {
  const calls = catalogCalls(input.catalogId);
  const waiting = { policy: input.lockWait, input };
  return trashRun(input, {
    calls: {
      ...calls,
      purge: (what, waitingToPurge) => operationRun(purge, { ...what, fromTrashRun: true }, { waiting: waitingToPurge }).table(),
    },
    moveToTrash: (timer) => operationRun(trashV19, input, { waiting, wake: timer }).table(),
  });
}
