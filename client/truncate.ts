import { formatTableName, type TableName } from '../domain/names';
import { OPERATIONS } from '../domain/operations';
import { notTruncatable, tableNotFound } from '../domain/refusals';
import { WrongStateError } from '../domain/errors';
import { OPERATION_REQUESTS, parseRequest, type TruncateRequest } from '../domain/requests';
import type { TableInfo } from '../domain/table';
import type { truncateTable } from '../workflows';
import type { CallRecord } from './calls';
import { expectedName as nameAsked, liveTable } from './names';
import { onTable, startAndWait } from './start';
import { drainingTimeout } from './trash';

/** What a truncate starts: the live table, by id, with the name it was asked by, and the truncate's own settings. */
interface TruncatePlan {
  tableId: number;
  label: string;
  expectedName?: TableName;
  retentionSeconds?: number;
  drainTimeoutSeconds?: number;
  /** When the table last changed as the plan read it: an entry committed by then is an earlier truncate's, not this one's. */
  readAt: number;
}

/**
 * A truncate into the trash (workflows/truncate.ts): answers the trash entry its rows became, TRASHED (`truncatedFrom`:
 * the table, live and empty under its name and id); with the trash off, that entry PURGED.
 */
export const truncateCall: CallRecord<TruncateRequest, TruncatePlan, TableInfo> = {
  async plan(ctx, request) {
    const { table: ref, retentionSeconds, drainTimeoutSeconds } = parseRequest(OPERATION_REQUESTS.truncate, request);
    const table = ref.kind === 'id' ? await ctx.catalog.getTable(ref.id) : await liveTable(ctx.catalog, ref);
    if (!table || table.state === 'PURGED') throw tableNotFound(ref.kind === 'id' ? ref.id : ref);
    // Checked again under the lock by the workflow; here, to refuse at once what cannot be truncated.
    if (table.state !== 'READY') throw notTruncatable(table);
    return {
      plan: {
        tableId: table.id,
        label: formatTableName(table),
        expectedName: nameAsked(ref),
        ...(retentionSeconds !== undefined ? { retentionSeconds } : {}),
        ...(drainTimeoutSeconds !== undefined ? { drainTimeoutSeconds } : {}),
        readAt: table.updatedAt,
      },
    };
  },
  async execute(ctx, plan, opts) {
    const { tableId, label, expectedName, retentionSeconds, drainTimeoutSeconds } = plan;
    const record = OPERATIONS.truncate;
    const entry = await startAndWait<typeof truncateTable>(ctx, {
      ...onTable(ctx, record, tableId, `truncate of ${label} (id ${tableId})`, drainingTimeout(ctx, plan, opts), opts),
      run: {
        record,
        input: {
          tableId,
          ...(expectedName ? { expectedName } : {}),
          ...(retentionSeconds !== undefined ? { retentionSeconds } : {}),
          ...(drainTimeoutSeconds !== undefined ? { drainTimeoutSeconds } : {}),
          expiryRetry: ctx.expiryRetry,
        },
        target: { tableId, ...(expectedName ?? {}) },
        summary: `truncate ${label} (id ${tableId}) into the trash`,
      },
      // Joined a truncate that had committed before this call read the table (READY again at the entry's drop time) and
      // was still ending: its entry is that truncate's rows, not this call's. Once that run has closed, start a fresh one.
      again: async (outcome) => {
        if (!('answer' in outcome) || outcome.answer.droppedAt === null || Date.parse(outcome.answer.droppedAt) > plan.readAt) return false;
        await new Promise((resolve) => setTimeout(resolve, 200));
        return true;
      },
    });
    // Joined a truncate of the table that was already running: its retention is the one that holds.
    const kept = (Date.parse(entry.expireAt!) - Date.parse(entry.droppedAt!)) / 1000;
    if (entry.state === 'TRASHED' && retentionSeconds !== undefined && kept !== retentionSeconds) {
      throw new WrongStateError(
        `table ${label} was truncated meanwhile by another request, with a retention of ${kept} s (entry ${entry.id})`,
      );
    }
    return entry;
  },
};
