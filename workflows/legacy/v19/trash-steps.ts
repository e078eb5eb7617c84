import type { TrashInput } from '../../../domain/operation-inputs';
import { SHARDS, transition, type Operation } from '../../../domain/steps';
import { drainDeadline, drained } from '../../trash';

/**
 * The drop's steps as v19 ran them, in its trash run, which waits out the expiry itself (trash-run.ts): no step starts
 * an expiry's run. Its runs' calls name it `trash`.
 */
export const trashV19: Operation<TrashInput> = {
  name: 'trash',
  steps: [
    {
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
      shards: (context) => ({ ...SHARDS.toTrash, drainTimeoutMs: Math.max(drainDeadline(context) - context.now, 1000) }),
      undo: { shards: SHARDS.backFromTrash },
    },
    {
      name: 'commit trashed',
      // (Who dropped it, since v20's catalog records it: data of the call alone, so v19's commands are what they were.)
      change: ({ input }) => {
        const droppedBy = input.droppedBy ?? input.startedBy;
        return {
          kind: 'commitTrash',
          tableId: input.tableId,
          retentionSeconds: input.retentionSeconds,
          ...(droppedBy !== undefined ? { droppedBy } : {}),
        };
      },
    },
  ],
};
