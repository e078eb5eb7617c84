import type { TrashInput } from '../../../domain/operation-inputs';

/** A trash run's input: the drop's, the request it answers, and (re-armed) the trash it waits out without moving anything. */
export interface TrashRunInput extends TrashInput {
  requestId: string;
  rearm?: { droppedAt: number };
}
