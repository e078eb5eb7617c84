import { randomUUID } from 'node:crypto';
import {
  Client,
  Connection,
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  type WorkflowHandle,
} from '@temporalio/client';
import type { Catalog } from '../catalog/catalog';
import { SqliteCatalog } from '../catalog/sqlite';
import { TableExistsError, TableInTrashError, TableNotFoundError, WrongStateError } from '../domain/errors';
import { formatTableName, type TableName, type TableRef } from '../domain/names';
import { searchAttributesFor, workflowIdFor } from '../domain/operations';
import {
  createRequestSchema,
  describeRequestSchema,
  listRequestSchema,
  parseRequest,
  purgeRequestSchema,
  trashRequestSchema,
  undeleteRequestSchema,
  type CreateRequest,
  type DescribeRequest,
  type ListRequest,
  type PurgeRequest,
  type TrashRequest,
  type UndeleteRequest,
} from '../domain/requests';
import { sameCreateParams, toTableInfo, type TableInfo, type TableRecord } from '../domain/table';
import { loadConfig, statePaths, TASK_QUEUE, type Config } from '../worker/config';
import { recallProgressQuery, trashedUpdate, type RecallProgress } from '../workflows/definitions';
import type { createTable, purgeTable, trashTable, undeleteTable } from '../workflows';
import { applicationFailureOf, rethrowAsDomainError } from './errors';

export interface TableFateClientOptions {
  client: Client;
  /** Reads (list, describe, name resolution) go to the catalog directly; writes go through workflows. */
  catalog: Catalog;
  taskQueue?: string;
}

/** How long a trash waits for an earlier run of `trash:<id>` (ended by an undelete) to close. */
const TRASH_RUN_HANDOVER_MS = 10_000;

/**
 * The tablefate SDK. Every request is validated (zod) before anything starts, so bad input is an
 * InvalidInputError and changes nothing; domain failures come back as their typed error classes.
 */
export class TableFateClient {
  private readonly client: Client;
  private readonly catalog: Catalog;
  private readonly taskQueue: string;
  private readonly owned: Array<() => Promise<void>> = [];

  constructor(opts: TableFateClientOptions) {
    this.client = opts.client;
    this.catalog = opts.catalog;
    this.taskQueue = opts.taskQueue ?? TASK_QUEUE;
  }

  /** Connects to the Temporal server and opens the catalog named by the configuration (environment). */
  static connect(config: Config = loadConfig()): TableFateClient {
    // Lazy: requests are validated, and reads answered from the catalog, without waiting for the server.
    const connection = Connection.lazy({ address: config.temporalAddress, connectTimeout: '5s' });
    const catalog = new SqliteCatalog(statePaths(config.home).catalog);
    const client = new TableFateClient({
      client: new Client({ connection, namespace: config.temporalNamespace }),
      catalog,
    });
    client.owned.push(() => catalog.close(), () => connection.close());
    return client;
  }

  /** Creates a table, or returns it if the same create already happened; joins a create of it that is running. */
  async create(request: CreateRequest): Promise<TableInfo> {
    const { table, shards } = parseRequest(createRequestSchema, request);
    const created = await this.client.workflow
      .execute<typeof createTable>('createTable', {
        workflowId: workflowIdFor.create(table),
        taskQueue: this.taskQueue,
        args: [{ ...table, shards }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: searchAttributesFor('create', table),
        staticSummary: `create ${formatTableName(table)} with ${shards} shards`,
      })
      .catch(async (err: unknown) => {
        // A same-named create with other parameters was running and this call joined it: its TableExists is
        // not ours if the table that exists is the one we asked for.
        const existing = await this.catalog.findByName(table);
        if (existing?.state === 'READY' && sameCreateParams(existing.params, { shards })) return toTableInfo(existing);
        return rethrowAsDomainError(err);
      });
    // Joining a running create of the same name with other parameters must not pass for success.
    if (!sameCreateParams({ shards: created.shards }, { shards })) {
      throw new TableExistsError(
        `table ${formatTableName(table)} is being created with ${created.shards} shards, not ${shards}`,
      );
    }
    return created;
  }

  /** Moves a live table to the trash; answers once it is TRASHED, while its expiry timer runs on. */
  async trash(request: TrashRequest): Promise<TableInfo> {
    const { table: name, retentionSeconds } = parseRequest(trashRequestSchema, request);
    const requestId = randomUUID();
    const deadline = Date.now() + TRASH_RUN_HANDOVER_MS;
    for (;;) {
      const table = await this.liveTable(name);
      // TRASHING: an earlier trash stopped half way (its compensation could not finish); this one resumes it.
      if (table.state !== 'READY' && table.state !== 'TRASHING') {
        throw new WrongStateError(`table ${formatTableName(name)} (id ${table.id}) is ${table.state}`);
      }
      let trashed: TableInfo;
      try {
        trashed = await this.client.workflow.executeUpdateWithStart(trashedUpdate, {
          args: [requestId],
          startWorkflowOperation: new WithStartWorkflowOperation<typeof trashTable>('trashTable', {
            workflowId: workflowIdFor.trash(table.id),
            taskQueue: this.taskQueue,
            args: [{ tableId: table.id, retentionSeconds, requestId }],
            workflowIdConflictPolicy: 'USE_EXISTING',
            typedSearchAttributes: searchAttributesFor('trash', { tableId: table.id, ...name }),
            staticSummary: `trash ${formatTableName(name)} (id ${table.id})`,
          }),
        });
      } catch (err) {
        // An earlier trash run of this table has answered and is ending (the table was restored since):
        // wait for it to close, then start a fresh one.
        if (applicationFailureOf(err)?.type === 'TrashRunAnswered' && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          continue;
        }
        rethrowAsDomainError(err);
      }
      // Joined a trash of this table that was already running: its retention is the one that holds.
      const kept = (Date.parse(trashed.expireAt!) - Date.parse(trashed.droppedAt!)) / 1000;
      if (retentionSeconds !== undefined && kept !== retentionSeconds) {
        throw new WrongStateError(
          `table ${formatTableName(name)} was trashed meanwhile by another request, with a retention of ${kept} s`,
        );
      }
      return trashed;
    }
  }

  /**
   * Recalls a trashed table, by id or by name (the most recently trashed of that name), maybe renamed.
   * `onProgress` hears how many shards are back, each time that changes (Pegasus's recall progress).
   */
  async undelete(request: UndeleteRequest, opts: { onProgress?: (progress: RecallProgress) => void } = {}): Promise<TableInfo> {
    const { table: ref, newName } = parseRequest(undeleteRequestSchema, request);
    const trashed = await this.trashedTable(ref);
    const tableId = trashed.id;
    const target = newName ?? trashed;
    try {
      const handle = await this.client.workflow.start<typeof undeleteTable>('undeleteTable', {
        workflowId: workflowIdFor.undelete(tableId),
        taskQueue: this.taskQueue,
        args: [{ tableId, newName }],
        workflowIdConflictPolicy: 'FAIL',
        typedSearchAttributes: searchAttributesFor('undelete', { tableId, namespace: target.namespace, name: target.name }),
        staticSummary: `undelete table ${tableId}${newName ? ` as ${formatTableName(newName)}` : ''}`,
      });
      const result = handle.result();
      if (opts.onProgress) await reportProgress(handle, result, opts.onProgress);
      return await result;
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) {
        throw new WrongStateError(`an undelete of table ${tableId} is already running`);
      }
      rethrowAsDomainError(err);
    }
  }

  /** Purges a trashed table now. Purging a table already purged returns its tombstone. */
  async purge(request: PurgeRequest): Promise<TableInfo> {
    const { tableId } = parseRequest(purgeRequestSchema, request);
    const table = await this.catalog.getTable(tableId);
    if (!table) throw new TableNotFoundError(`table ${tableId} does not exist`);
    const purged = await this.client.workflow
      .execute<typeof purgeTable>('purgeTable', {
        workflowId: workflowIdFor.purge(tableId),
        taskQueue: this.taskQueue,
        args: [{ tableId, trigger: 'manual' }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: searchAttributesFor('purge', { tableId, namespace: table.namespace, name: table.name }),
        staticSummary: `purge table ${tableId}`,
      })
      .catch(rethrowAsDomainError);
    // Joined a purge started by the trash timer that found the table restored: nothing was purged.
    if (purged.state !== 'PURGED') {
      throw new WrongStateError(`table ${tableId} is ${purged.state}; only a trashed table can be purged`);
    }
    return purged;
  }

  /** Live tables; with `includeTrashed`, trashed ones too (with their expiry). Tombstones are not listed. */
  async list(request: ListRequest = {}): Promise<TableInfo[]> {
    const { includeTrashed } = parseRequest(listRequestSchema, request);
    return (await this.catalog.listTables({ includeTrashed })).map(toTableInfo);
  }

  /** By name, a live table (a trashed one is TableInTrash); by id, any table, tombstones included. */
  async describe(request: DescribeRequest): Promise<TableInfo> {
    const { table: ref } = parseRequest(describeRequestSchema, request);
    if (ref.kind === 'id') {
      const table = await this.catalog.getTable(ref.id);
      if (!table) throw new TableNotFoundError(`table ${ref.id} does not exist`);
      return toTableInfo(table);
    }
    return toTableInfo(await this.liveTable(ref));
  }

  async close(): Promise<void> {
    for (const release of this.owned.splice(0)) await release();
  }

  /** The table holding this name, or the right error: in the trash (with its id) or not found. */
  private async liveTable(name: TableName): Promise<TableRecord> {
    const table = await this.catalog.findByName(name);
    if (table) return table;
    const trashed = await this.catalog.findTrashed(name);
    if (trashed) throw new TableInTrashError(`table ${formatTableName(name)} is in the trash, id ${trashed.id}`);
    throw new TableNotFoundError(`table ${formatTableName(name)} does not exist`);
  }

  /** The table an undelete names; its state is checked again, under the lock, by the workflow. */
  private async trashedTable(ref: TableRef): Promise<TableRecord> {
    const table = ref.kind === 'id' ? await this.catalog.getTable(ref.id) : await this.catalog.findTrashed(ref);
    if (!table || table.state === 'PURGED') {
      throw new TableNotFoundError(
        ref.kind === 'id' ? `table ${ref.id} does not exist or was purged` : `no table named ${formatTableName(ref)} is in the trash`,
      );
    }
    return table;
  }
}

const PROGRESS_POLL_MS = 300;

/** Asks the running undelete how far it is until it ends, reporting each change. */
async function reportProgress(
  handle: WorkflowHandle<typeof undeleteTable>,
  result: Promise<unknown>,
  onProgress: (progress: RecallProgress) => void,
): Promise<void> {
  let ended = false;
  const settled = result.then(
    () => (ended = true),
    () => (ended = true),
  );
  let last = '';
  while (!ended) {
    const progress = await handle.query(recallProgressQuery).catch(() => undefined);
    if (progress && progress.shards > 0 && JSON.stringify(progress) !== last) {
      last = JSON.stringify(progress);
      onProgress(progress);
    }
    await Promise.race([settled, new Promise((resolve) => setTimeout(resolve, PROGRESS_POLL_MS))]);
  }
}
