import type { ShardChange } from '../../domain/contracts';
import type { TrashInput } from '../../domain/operations';
import type { TableRecord } from '../../domain/table';
import type { OperationCalls } from '../activities';
import { changeState, everyShard, runSteps, SHARDS, type Step } from '../steps';

/*
 * Kept for runs started before drains-leases (v11), apart from today's trash (workflows/trash.ts), which reaches it only
 * through its patch. Retired with that patch (docs/changing-workflows.md).
 */

/**
 * A trash's steps as runs started before leases take them: READY to TRASHING at once, the move (waiting for a
 * PostgreSQL table's sessions as long as the drop asked, the driver's default otherwise), then `commit`.
 */
export function trashStepsBeforeLeases(calls: OperationCalls, input: TrashInput, commit: Step<TableRecord>): Promise<TableRecord> {
  const move: ShardChange =
    input.drainTimeoutSeconds === undefined ? SHARDS.toTrash : { ...SHARDS.toTrash, drainTimeoutMs: input.drainTimeoutSeconds * 1000 };
  return runSteps<TableRecord>(
    changeState(calls, input.tableId, ['READY', 'TRASHING'], input.expectedName),
    everyShard(calls, 'move shards to trash', move, { undo: SHARDS.backFromTrash }),
    commit,
  );
}
