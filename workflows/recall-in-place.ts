import { ApplicationFailure, CancellationScope, ChildWorkflowFailure, executeChild } from '@temporalio/workflow';
import { formatTableName } from '../domain/names';
import { lockFor, OPERATIONS, type AnyOperation } from '../domain/operations';
import type { RecallInPlaceInput } from '../domain/operation-inputs';
import type { TableInfo } from '../domain/table';
import { catalogCalls } from './catalog-calls';
import { withNotes } from './trash';
import { untilFree } from './wait-turn';

/**
 * A truncate's entry back in its table's place. Under the lock of the table's name (which a create or a rename of that
 * name takes too: neither can come between), the table, with the rows written to it since the truncate, is dropped into
 * the trash as any drop (`drop:<id>`: its drain, its retention, its expiry), then the entry is recalled under the name
 * (`undelete:<id>`). Each is a run of its own, as a caller would start it, so that each keeps its guarantees and its
 * history; this run only orders them. The recall refused (the entry expired or purged meanwhile), the drop is taken
 * back: the table is recalled under its name. Nothing is lost either way: every row is live, or in the trash, recallable.
 */
export async function recallInPlace(input: RecallInPlaceInput): Promise<TableInfo> {
  const calls = catalogCalls(input.catalogId);
  const { entryId, tableId, name } = input;
  const label = formatTableName(name);
  await untilFree(
    `the name ${label}`,
    () => calls.tryLock(lockFor.name(name)),
    (attempt) => (attempt.acquired ? undefined : attempt.holder),
    { policy: input.lockWait, input },
  );
  try {
    await asRun(OPERATIONS.trash, tableId, name, `drop table ${tableId} (${label}), for its truncated rows to come back in its place`, {
      tableId,
      expectedName: name,
      ...(input.retentionSeconds !== undefined ? { retentionSeconds: input.retentionSeconds } : {}),
      ...(input.drainTimeoutSeconds !== undefined ? { drainTimeoutSeconds: input.drainTimeoutSeconds } : {}),
      ...(input.expiryRetry ? { expiryRetry: input.expiryRetry } : {}),
      ...(input.startedBy !== undefined ? { droppedBy: input.startedBy } : {}),
      catalogId: input.catalogId,
    });
    let recalled: TableInfo;
    try {
      recalled = await asRun(OPERATIONS.undelete, entryId, name, `recall table ${entryId} as ${label}, in its table's place`, {
        tableId: entryId,
        newName: name,
        catalogId: input.catalogId,
      });
    } catch (err) {
      // The table back under its name, whatever asked this run to stop: its rows are not left in the trash for it.
      await CancellationScope.nonCancellable(() =>
        asRun(OPERATIONS.undelete, tableId, name, `recall table ${tableId} as ${label}: its truncated rows did not come back`, {
          tableId,
          catalogId: input.catalogId,
        }),
      );
      throw err;
    }
    return withNotes(recalled, [
      ...(recalled.notes ?? []),
      `table ${tableId}, with the rows written to ${label} since its truncate, is in the trash: recall it under another name to read them`,
    ]);
  } finally {
    await CancellationScope.nonCancellable(() => calls.releaseLocks());
  }
}

/**
 * An operation's run, started as a caller would start it (its id, its search attributes), awaited for its answer; its
 * refusal is this run's, as its caller would have heard it (TableBusy, NameTaken, ...).
 */
async function asRun(record: AnyOperation, tableId: number, name: { namespace: string; name: string }, summary: string, input: unknown) {
  try {
    return await executeChild<(input: unknown) => Promise<TableInfo>>(record.workflowType, {
      workflowId: record.workflowId(tableId, (input as { catalogId?: string }).catalogId),
      args: [input],
      typedSearchAttributes: record.searchAttributes({ tableId, ...name }),
      staticSummary: summary,
    });
  } catch (err) {
    throw err instanceof ChildWorkflowFailure && err.cause instanceof ApplicationFailure ? err.cause : err;
  }
}
