import { WrongStateError } from '../domain/errors';
import { tablesOf, type UndeleteInput } from '../domain/operation-inputs';
import { nameChanged, notTrashed, tableNotFound, unitChanged } from '../domain/refusals';
import { nameOf, SHARDS, transition, type Operation, type StepContext, type Verdict } from '../domain/steps';
import { setHandler } from '@temporalio/workflow';
import { recallProgressQuery } from '../domain/contracts';
import type { TableInfo, TableRecord } from '../domain/table';
import { operationRun } from './execute';

/**
 * Recalls a trashed table before it expires, under its old name or a new one, and ends its trash timer so that the
 * expiry never purges a restored table.
 */
export const undelete: Operation<UndeleteInput> = {
  name: 'undelete',
  lockTable: (input) => input.tableId,
  tables: tablesOf,
  steps: [
    { name: 'check', check: undeleteVerdict },
    {
      // The catalog refuses a name another table holds (NameTaken): then nothing has moved.
      name: 'claim name, move shards back',
      change: ({ input, checked, tableId }) => {
        const asked = tableId === input.tableId ? input.newName : input.together?.find((other) => other.tableId === tableId)?.newName;
        return transition('TRASHED', 'RESTORING', { rename: asked ?? nameOf(checked!) });
      },
      shards: SHARDS.backFromTrash,
      // (With cascade: a shard that came back with its family takes it back along, as its drop took it.)
      undo: {
        shards: { ...SHARDS.toTrash, cascade: true },
        change: ({ checked }) => transition('RESTORING', 'TRASHED', { rename: nameOf(checked!) }),
      },
    },
    {
      name: 'commit ready',
      change: transition('RESTORING', 'READY'),
      endsTrash: ({ checked }) => ({ reason: 'restored', droppedAt: checked!.droppedAt! }),
    },
  ],
};

/** The table is TRASHED and not expired (held past its expiry is fine), or RESTORING (a recall to finish). */
function undeleteVerdict({ checked: table, input, lockedAt, tableId }: StepContext<UndeleteInput>): Verdict {
  if (tableId !== undefined && tableId !== input.tableId) {
    const left = leftTheUnit(table, input.tableId);
    if (left) return { refuse: unitChanged(input.tableId, tableId, left) };
  }
  if (!table || table.state === 'PURGED') return { refuse: tableNotFound(tableId!, { orPurged: true }) };
  const expectedName = tableId === input.tableId ? input.expectedName : input.together?.find((o) => o.tableId === tableId)?.expectedName;
  if (expectedName && (table.namespace !== expectedName.namespace || table.name !== expectedName.name)) {
    return { refuse: nameChanged(table, expectedName) };
  }
  // RESTORING: an earlier undelete stopped half way; this one finishes it.
  if (table.state !== 'TRASHED' && table.state !== 'RESTORING') return { refuse: notTrashed(table, 'can be restored') };
  // (Past its expiry but held, it is not being purged: its data waits for the release, and may be recalled.)
  if (table.state === 'TRASHED' && table.expireAt !== null && table.expireAt <= lockedAt && !table.hold) {
    return { refuse: new WrongStateError(`table ${table.id} expired at ${new Date(table.expireAt).toISOString()} and is being purged`) };
  }
  return { proceed: true };
}

export function undeleteTable(input: UndeleteInput): Promise<TableInfo> {
  const run = operationRun(undelete, input);
  // How many shards are back, for the caller who watches (`recall --progress`).
  setHandler(recallProgressQuery, () => {
    const { done, total } = run.shardsOf('claim name, move shards back');
    return { shardsBack: done, shards: total };
  });
  return run.result();
}

/**
 * How a table the caller read as dropped with `asked` as one has left that drop's trash since (undefined: it has not):
 * purged, recalled, or recalled and dropped again on its own.
 */
function leftTheUnit(other: TableRecord | null, asked: number): string | undefined {
  if (!other || other.state === 'PURGED') return 'was purged';
  if (other.state !== 'TRASHED' && other.state !== 'RESTORING') return `was recalled (it is ${other.state})`;
  if (!(other.droppedWith ?? []).includes(asked)) return 'was recalled and dropped again on its own';
  return undefined;
}
