import { InvalidInputError, TableExistsError } from '../domain/errors';
import { keepsRealTables } from '../domain/deployment';
import { formatTableName, type TableName } from '../domain/names';
import { notRenamable, tableNotFound } from '../domain/refusals';
import { OPERATIONS } from '../domain/operations';
import {
  describeRequestSchema,
  listRequestSchema,
  OPERATION_REQUESTS,
  parseRequest,
  type AdoptRequest,
  type CreateRequest,
  type DescribeRequest,
  type ListRequest,
  type RenameRequest,
} from '../domain/requests';
import {
  definitionOf,
  describeCreateParams,
  sameCreateParams,
  toTableInfo,
  type CreateParams,
  type TableInfo,
  type TableRecord,
} from '../domain/table';
import type { createTable, renameTable } from '../workflows';
import { callTimeout, describeCheck, type ClientContext } from './context';
import { checkForDriver, expectedName, liveTable } from './names';
import { drainingTimeout } from './trash';
import type { WriteOptions } from './options';
import { withSizes } from './sizes';
import { onTable, startAndWait } from './start';
import { repeatable, type CallRecord, type ExecuteOptions } from './calls';

/** The tables themselves: made (create, adopt), renamed, and read (describe, list). */

/** A create's or an adopt's plan: the table's name and what it is made with. */
interface CreatePlan {
  op: 'create' | 'adopt';
  table: TableName;
  params: CreateParams;
}

export const createCall: CallRecord<CreateRequest, CreatePlan, TableInfo> = {
  plan(ctx, request) {
    // A table of PostgreSQL or MariaDB is one real table unless more shards are asked for.
    const asked = keepsRealTables(ctx.storageDriver) ? { ...request, shards: request.shards ?? 1 } : request;
    const { table, shards, columns, like } = parseRequest(OPERATION_REQUESTS.create, asked);
    checkForDriver(ctx.storageDriver, { table, shards, columns, like });
    return { plan: { op: 'create', table, params: { shards, ...definitionOf({ shards, columns, like }) } } };
  },
  execute: (ctx, plan, opts) => startCreate(ctx, plan, opts),
};

export const adoptCall: CallRecord<AdoptRequest, CreatePlan, TableInfo> = {
  plan(ctx, request) {
    const { table, node } = parseRequest(OPERATION_REQUESTS.adopt, request);
    if (!keepsRealTables(ctx.storageDriver)) {
      throw new InvalidInputError('adopt is for the postgres and mariadb storage drivers: it registers a table that exists already');
    }
    checkForDriver(ctx.storageDriver, { table, shards: 1 });
    return { plan: { op: 'adopt', table, params: { shards: 1, adopt: { node } } } };
  },
  execute: (ctx, plan, opts) => startCreate(ctx, plan, opts),
};

/** A create or an adopt (the same workflow, under each one's id): started or joined, and its answer checked against its params. */
async function startCreate(ctx: ClientContext, { op, table, params }: CreatePlan, opts: WriteOptions & ExecuteOptions): Promise<TableInfo> {
  const record = OPERATIONS[op];
  const timeoutMs = callTimeout(ctx, opts);
  const label = formatTableName(table);
  const created = await startAndWait<typeof createTable>(ctx, {
    workflowId: record.workflowId(table, ctx.catalog.id),
    what: `${record.name} of ${label}`,
    check: describeCheck(label),
    timeoutMs,
    ...repeatable(opts),
    onDetails: opts.onDetails,
    run: {
      record,
      input: { ...table, ...params },
      target: table,
      summary: `${record.name} ${label}: ${describeCreateParams(params)}`,
      answer: async (handle) => {
        try {
          return await handle.result();
        } catch (err) {
          // A same-named create with other parameters was running and this call joined it: its TableExists is
          // not ours if the table that exists is the one we asked for.
          const existing = await ctx.catalog.findByName(table);
          if (existing?.state === 'READY' && sameCreateParams(existing.params, params)) return toTableInfo(existing);
          throw err;
        }
      },
    },
  });
  // Joining a running create of the same name with other parameters must not pass for success.
  // (The definition is not in the answer: the catalog has it.)
  const made = (await ctx.catalog.getTable(created.id))?.params ?? { shards: created.shards };
  if (!sameCreateParams(made, params)) {
    throw new TableExistsError(`table ${label} is being created with ${describeCreateParams(made)}, not ${describeCreateParams(params)}`);
  }
  return created;
}

/** A rename's plan: the table, as it was found under the name or id given, and its new name. */
interface RenamePlan {
  tableId: number;
  from: string;
  newName: TableName;
  expectedName?: TableName;
  drainTimeoutSeconds?: number;
}

export const renameCall: CallRecord<RenameRequest, RenamePlan, TableInfo> = {
  async plan(ctx, request) {
    const { table: ref, newName, drainTimeoutSeconds } = parseRequest(OPERATION_REQUESTS.rename, request);
    const table = ref.kind === 'id' ? await ctx.catalog.getTable(ref.id) : await liveTable(ctx.catalog, ref);
    if (!table) throw tableNotFound(ref.kind === 'id' ? ref.id : ref);
    // Checked again under the lock by the workflow; here, to refuse at once what cannot be renamed.
    if (table.state !== 'READY') throw notRenamable(table);
    checkForDriver(ctx.storageDriver, { table: newName, shards: table.params.shards });
    if (table.namespace === newName.namespace && table.name === newName.name) return { done: toTableInfo(table) };
    return { plan: { tableId: table.id, from: formatTableName(table), newName, expectedName: expectedName(ref), drainTimeoutSeconds } };
  },
  execute(ctx, plan, opts) {
    const { tableId, from, newName, expectedName: expected, drainTimeoutSeconds } = plan;
    const record = OPERATIONS.rename;
    const to = formatTableName(newName);
    return startAndWait<typeof renameTable>(ctx, {
      ...onTable(ctx, record, tableId, `rename of table ${tableId} to ${to}`, drainingTimeout(ctx, plan, opts), opts),
      run: {
        record,
        input: { tableId, newName, expectedName: expected, ...(drainTimeoutSeconds ? { drainTimeoutSeconds } : {}) },
        target: { tableId, ...newName },
        summary: `rename table ${tableId} (${from}) to ${to}`,
      },
    });
  },
};

export async function list(ctx: ClientContext, request: ListRequest): Promise<TableInfo[]> {
  const { includeTrashed, after, limit, withSizes: sized } = parseRequest(listRequestSchema, request);
  const tables = await ctx.catalog.listTables({ includeTrashed, afterId: after, limit });
  return sized ? withSizes(ctx, tables) : tables.map(toTableInfo);
}

export async function describe(ctx: ClientContext, request: DescribeRequest): Promise<TableInfo> {
  const { table: ref, withSizes: sized } = parseRequest(describeRequestSchema, request);
  let table: TableRecord;
  if (ref.kind === 'id') {
    const found = await ctx.catalog.getTable(ref.id);
    if (!found) throw tableNotFound(ref.id);
    table = found;
  } else {
    table = await liveTable(ctx.catalog, ref);
  }
  return sized ? (await withSizes(ctx, [table]))[0]! : toTableInfo(table);
}
