import { formatTableName, type TableName } from '../domain/names';
import { OPERATIONS } from '../domain/operations';
import { TRUNCATED_WITH_IT } from '../domain/operation-inputs';
import { notTruncatable, tableNotFound } from '../domain/refusals';
import { InvalidInputError, WrongStateError } from '../domain/errors';
import { OPERATION_REQUESTS, parseRequest, type TruncateRequest } from '../domain/requests';
import type { TableInfo } from '../domain/table';
import type { truncateTable } from '../workflows';
import type { CallRecord } from './calls';
import { expectedName as nameAsked, liveTable } from './names';
import { onTable, startAndWait } from './start';
import { askedCascade, drainingTimeout, isHasDependents, MAX_PLAIN_JOINED } from './trash';

/** What a truncate starts: the live table, by id, with the name it was asked by, and the truncate's own settings. */
interface TruncatePlan {
  tableId: number;
  label: string;
  expectedName?: TableName;
  retentionSeconds?: number;
  drainTimeoutSeconds?: number;
  /** As `TRUNCATE ... CASCADE`: the tables whose foreign keys reference it are truncated with it. */
  cascade?: true;
  /** When the table last changed as the plan read it: an entry committed by then is an earlier truncate's, not this one's. */
  readAt: number;
}

/**
 * A truncate into the trash (workflows/truncate.ts): answers the trash entry its rows became, TRASHED (`truncatedFrom`:
 * the table, live and empty under its name and id); with the trash off, that entry PURGED.
 */
export const truncateCall: CallRecord<TruncateRequest, TruncatePlan, TableInfo> = {
  async plan(ctx, request) {
    const { table: ref, retentionSeconds, drainTimeoutSeconds, cascade } = parseRequest(OPERATION_REQUESTS.truncate, request);
    if (ctx.storageDriver === 'mariadb') {
      throw new InvalidInputError('truncate is not available with the mariadb storage driver yet: nothing was changed');
    }
    if (cascade && ctx.storageDriver !== 'postgres') {
      throw new InvalidInputError('cascade is for the postgres storage driver: no foreign key references a table kept as files');
    }
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
        ...(cascade ? { cascade: true as const } : {}),
        readAt: table.updatedAt,
      },
    };
  },
  async execute(ctx, plan, opts) {
    const { tableId, label, expectedName, retentionSeconds, drainTimeoutSeconds, cascade } = plan;
    const record = OPERATIONS.truncate;
    const workflowId = record.workflowId(tableId, ctx.catalog.id);
    let joinedPlain = 0;
    // The run whose answer this call takes (started, or joined), where the server said which.
    let answeredBy: string | undefined;
    const entry = await startAndWait<typeof truncateTable>(ctx, {
      ...onTable(ctx, record, tableId, `truncate of ${label} (id ${tableId})`, drainingTimeout(ctx, plan, opts), opts),
      run: {
        record,
        input: {
          tableId,
          ...(expectedName ? { expectedName } : {}),
          ...(retentionSeconds !== undefined ? { retentionSeconds } : {}),
          ...(drainTimeoutSeconds !== undefined ? { drainTimeoutSeconds } : {}),
          // (Only when asked: a truncate without it starts with the input it always had.)
          ...(cascade ? { cascade } : {}),
          expiryRetry: ctx.expiryRetry,
        },
        target: { tableId, ...(expectedName ?? {}) },
        summary: `truncate ${label} (id ${tableId}) into the trash`,
      },
      again: async (outcome) => {
        answeredBy = outcome.runId;
        // Joined a truncate of the table without cascade, refused for a table cascade would take: once it has closed, this
        // one starts again, and runs, or joins the truncate running then.
        if ('error' in outcome && cascade && isHasDependents(outcome.error)) {
          if (joinedPlain >= MAX_PLAIN_JOINED || (await askedCascade(ctx, workflowId, outcome.runId))) return false;
          joinedPlain++;
          return true;
        }
        // Joined a truncate that had committed before this call read the table (READY again at the entry's drop time) and
        // was still ending: its entry is that truncate's rows, not this call's. Once that run has closed, start a fresh one.
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
    // And its cascade: a truncate asked without it must not pass for one that emptied other tables too.
    if (
      !cascade &&
      (entry.notes ?? []).some((note) => note.startsWith(TRUNCATED_WITH_IT)) &&
      (await askedCascade(ctx, workflowId, answeredBy))
    ) {
      throw new WrongStateError(`table ${label} was truncated meanwhile by another request, with cascade: ${entry.notes!.join('; ')}`);
    }
    return entry;
  },
};
