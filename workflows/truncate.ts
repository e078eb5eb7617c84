import { formatTableName } from '../domain/names';
import { tablesOf, TRUNCATED_WITH_IT, type TruncateInput } from '../domain/operation-inputs';
import { trashChangedSignal, type ShardChange, type TruncateEntries } from '../domain/contracts';
import { transition, type Operation, type StepContext } from '../domain/steps';
import type { TableInfo } from '../domain/table';
import { operationRun, wokenBy } from './execute';
import { commitTrashed, drainDeadline, drained, keptOrPurged, withNotes } from './trash';
import { truncateFamily } from './truncate-family';

/**
 * Truncates a table into the trash: its rows become a trash entry of their own (a new table id under the table's name,
 * recalled, held, purged and expiring as a dropped table is), and the table stays live and empty, with its id, name,
 * definition and leases to come. Like a drop, it takes no new lease and waits for those held (TRUNCATING), then each
 * shard's rows go to the entry and an empty shard takes their place (PostgreSQL: in one transaction, after the drop's
 * drain), then the entry is committed TRASHED and its expiry started. Several tables truncated as one (a cascade's:
 * `together`) go through the same steps side by side, each into an entry of its own, all of them or none.
 */
export const truncate: Operation<TruncateInput> = {
  name: 'truncate',
  tables: tablesOf,
  steps: [
    {
      // Takes the table's lock, and the entry's (its id chosen now); a table found TRUNCATING is a truncate resumed.
      name: 'stop new leases, choose the trash entry',
      change: ({ input, tableId }) => {
        const others = tablesOf(input).filter((id) => id !== tableId);
        return {
          kind: 'startDrain',
          tableId: tableId!,
          truncate: true,
          ...(input.expectedName && tableId === input.tableId ? { expectName: input.expectedName } : {}),
          ...(others.length > 0 ? { droppedWith: others } : {}),
        };
      },
      // (The entry's rows back in the table too: a truncate resumed may find some shards emptied by the run it resumes.)
      undo: { shards: rowsBack, change: transition('TRUNCATING', 'READY') },
    },
    { name: 'wait for leases', waitsForLeases: drained },
    {
      name: 'every shard can be emptied',
      checkShards: (context) => ({ method: 'checkTruncateShard', into: entries(context) }),
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
    into: entries(context),
    drainTimeoutMs: Math.max(drainDeadline(context) - context.now, 1000),
  };
}

/**
 * Each shard's rows back from the entry, in place of the empty shard; refused once anything was written to that one (its
 * rows are never thrown away). A shard whose rows are not in the entry is left as it is.
 */
function rowsBack(context: StepContext<TruncateInput>): ShardChange {
  return { method: 'untruncateShard', into: entries(context) };
}

/** The entries the rows go to, chosen when the truncate began: the table's, or each table's of a cascade. */
function entries({ table, group }: StepContext<TruncateInput>): TruncateEntries {
  return group ? Object.fromEntries(group.map((t) => [String(t!.id), t!.truncateInto!])) : table!.truncateInto!;
}

/**
 * A truncate's run: the steps above (with `cascade`, over the table and its family, found first: truncate-family.ts).
 * Its caller hears the rows' trash entry TRASHED (the table it was truncated from is `truncatedFrom`), with the entries
 * of a cascade's other tables in its notes; with the trash off where the table lives, each entry is purged in the same
 * run, as a drop's table is.
 */
export async function truncateTable(input: TruncateInput): Promise<TableInfo> {
  const family = input.cascade && !input.together ? await truncateFamily(input) : [];
  const asked = family.length > 0 ? { ...input, together: family.map((tableId) => ({ tableId })) } : input;
  const run = operationRun(truncate, asked, { wake: wokenBy(trashChangedSignal) });
  const first = await run.table();
  const all = [first, ...run.others()];
  const entry = all.find((e) => e.truncatedFrom === input.tableId) ?? first;
  const answer = await keptOrPurged(entry, input);
  const withIt: string[] = [];
  for (const other of all.filter((e) => e !== entry)) {
    const kept = await keptOrPurged(other, input);
    withIt.push(`${formatTableName(kept)} (table ${kept.truncatedFrom}): its rows are table ${kept.id}, ${kept.state}`);
  }
  const notes = withIt.length > 0 ? [`${TRUNCATED_WITH_IT}${withIt.join('; ')}`] : [];
  return withNotes(answer, [...run.said(), ...notes]);
}
