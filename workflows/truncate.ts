import type { TruncateInput } from '../domain/operation-inputs';
import { trashChangedSignal } from '../domain/contracts';
import { transition, type Operation, type StepContext } from '../domain/steps';
import type { ShardChange } from '../domain/contracts';
import type { TableInfo } from '../domain/table';
import { operationRun, wokenBy } from './execute';
import { commitTrashed, drainDeadline, drained, keptOrPurged, withNotes } from './trash';

/**
 * Truncates a table into the trash: its rows become a trash entry of their own (a new table id under the table's name,
 * recalled, held, purged and expiring as a dropped table is), and the table stays live and empty, with its id, name,
 * definition and leases to come. Like a drop, it takes no new lease and waits for those held (TRUNCATING), then each
 * shard's rows go to the entry and an empty shard takes their place (PostgreSQL: in one transaction, after the drop's
 * drain), then the entry is committed TRASHED and its expiry started.
 */
export const truncate: Operation<TruncateInput> = {
  name: 'truncate',
  steps: [
    {
      // Takes the table's lock, and the entry's (its id chosen now); a table found TRUNCATING is a truncate resumed.
      name: 'stop new leases, choose the trash entry',
      change: ({ input }) => ({
        kind: 'startDrain',
        tableId: input.tableId,
        truncate: true,
        ...(input.expectedName ? { expectName: input.expectedName } : {}),
      }),
      // (The entry's rows back in the table too: a truncate resumed may find some shards emptied by the run it resumes.)
      undo: { shards: rowsBack, change: transition('TRUNCATING', 'READY') },
    },
    { name: 'wait for leases', waitsForLeases: drained },
    {
      name: 'every shard can be emptied',
      checkShards: ({ table }) => ({ method: 'checkTruncateShard', into: table!.truncateInto! }),
    },
    {
      name: 'rows to the trash entry, empty shards in place',
      shards: rowsToTrash,
      undo: { shards: rowsBack },
    },
    commitTrashed({ truncated: true }),
  ],
};

/** Each shard's rows to the entry chosen when the truncate began, waiting (PostgreSQL) within the drain's deadline. */
function rowsToTrash(context: StepContext<TruncateInput>): ShardChange {
  return {
    method: 'truncateShard',
    into: context.table!.truncateInto!,
    drainTimeoutMs: Math.max(drainDeadline(context) - context.now, 1000),
  };
}

/**
 * Each shard's rows back from the entry, in place of the empty shard; refused once anything was written to that one (its
 * rows are never thrown away). A shard whose rows are not in the entry is left as it is.
 */
function rowsBack({ table }: StepContext<TruncateInput>): ShardChange {
  return { method: 'untruncateShard', into: table!.truncateInto! };
}

/**
 * A truncate's run: the steps above. Its caller hears the rows' trash entry TRASHED (the table it was truncated from is
 * `truncatedFrom`); with the trash off where the table lives, the entry is purged in the same run, as a drop's table is.
 */
export async function truncateTable(input: TruncateInput): Promise<TableInfo> {
  const run = operationRun(truncate, input, { wake: wokenBy(trashChangedSignal) });
  const entry = await run.table();
  return withNotes(await keptOrPurged(entry, input), run.said());
}
