import { randomUUID } from 'node:crypto';
import os from 'node:os';
import {
  Client,
  Connection,
  isGrpcServiceError,
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  type Workflow,
  type WorkflowExecutionDescription,
  type WorkflowHandle,
} from '@temporalio/client';
import type { CatalogReader } from '../catalog/catalog';
import { catalogLocation, explainMissing, openCatalog } from '../catalog/open';
import { reservedSchemaReason, TASK_QUEUE, type StorageDriverName } from '../domain/deployment';
import {
  InvalidInputError,
  OnHoldError,
  OperationNotFoundError,
  TableExistsError,
  TableFateError,
  TableInTrashError,
  TableNotFoundError,
  WrongStateError,
} from '../domain/errors';
import { notRenamable, onHold } from '../domain/refusals';
import { toLeaseInfo, type LeaseInfo } from '../domain/leases';
import { DEFAULT_DRAIN_TIMEOUT_SECONDS } from '../domain/limits';
import { defaultSettings, effectiveSetting, SETTING_KEYS, type EffectiveSetting } from '../domain/settings';
import { formatTableName, type TableName, type TableRef } from '../domain/names';
import {
  OPERATIONS,
  STARTED_BY_MEMO,
  type AnyOperation,
  type Backoff,
  type LockWaitPolicy,
  type OperationInfo,
  type OperationTarget,
  type TableSize,
} from '../domain/operations';
import { SEARCH_ATTRIBUTES } from '../domain/search-attributes';
import {
  describeRequestSchema,
  cancelRequestSchema,
  historyRequestSchema,
  identitySchema,
  operationsRequestSchema,
  configGetRequestSchema,
  configSetRequestSchema,
  configUnsetRequestSchema,
  listLeasesRequestSchema,
  purgeAllRequestSchema,
  releaseLeaseRequestSchema,
  renewLeaseRequestSchema,
  retentionRequestSchema,
  OPERATION_REQUESTS,
  listRequestSchema,
  backoffSchema,
  parseRequest,
  type AdoptRequest,
  type CancelRequest,
  type HistoryRequest,
  type OperationsRequest,
  type ConfigGetRequest,
  type ConfigSetRequest,
  type ConfigUnsetRequest,
  type HoldRequest,
  type ListLeasesRequest,
  type PurgeAllRequest,
  type ReleaseRequest,
  type RetentionRequest,
  type CreateRequest,
  type DescribeRequest,
  type ListRequest,
  type PurgeRequest,
  type RenameRequest,
  type TrashRequest,
  type UndeleteRequest,
} from '../domain/requests';
import {
  canBeHeld,
  definitionOf,
  describeCreateParams,
  sameCreateParams,
  toTableInfo,
  type CreateParams,
  type TableInfo,
  type TableRecord,
} from '../domain/table';
import { recallProgressQuery, retentionUpdate, trashedUpdate, type RecallProgress } from '../domain/contracts';
import type {
  configureTrash,
  createTable,
  holdTable,
  leaseTable,
  measureTables,
  purgeTable,
  reconcileTables,
  renameTable,
  trashTable,
  undeleteTable,
} from '../workflows';
import type { SettingRow } from '../domain/settings';
import type { ReconcileReport } from '../domain/health';
import { loadClientConfig, type ClientConfig } from '../config/client';
import { applicationFailureOf } from './errors';
import { DEFAULT_TIMEOUT_MS, timeoutOf, WriteRunner } from './writes';
import { watchChanges } from './details';
import { listRuns, ofCatalog, operationsQuery, toOperationInfo, withCurrentSteps } from './operations';

export { DEFAULT_TIMEOUT_MS };

/** How long `describe` and `ls` wait for the nodes' sizes before they answer without them (a node down takes 5 s). */
const MEASURE_TIMEOUT_MS = 15_000;
/** At most this many tables in one measure run: their placements stay far below the server's payload limit. */
const MEASURED_PER_RUN = 500;
/** How long `operations` and `history` wait for the server's visibility before they fail (ServerUnreachable). */
const VISIBILITY_TIMEOUT_MS = 15_000;

/** `user@host` of this process: who the operations a client starts are started by, unless it says otherwise. */
export function defaultIdentity(): string {
  let user: string;
  try {
    user = os.userInfo().username;
  } catch {
    // (No entry for this uid: a container's, say.)
    user = process.env.USER ?? process.env.LOGNAME ?? `uid ${process.getuid?.() ?? '?'}`;
  }
  return `${user}@${os.hostname()}`;
}

export interface TableFateClientOptions {
  client: Client;
  /** Reads (list, describe, name resolution) go to the catalog directly; writes go through workflows. */
  catalog: CatalogReader;
  taskQueue?: string;
  /** How long a write waits for its answer when the call does not say; DEFAULT_TIMEOUT_MS (60 s) by default. */
  defaultTimeoutMs?: number;
  /** How the operations this client starts wait while another holds their table (DEFAULT_LOCK_WAIT when absent). */
  lockWait?: LockWaitPolicy;
  /** How the trashes this client starts try again when the purge at their expiry fails (DEFAULT_EXPIRY_RETRY when absent). */
  expiryRetry?: Backoff;
  /** The deployment's storage driver (TABLEFATE_STORAGE_DRIVER; `files` when absent): what a create may ask for. */
  storageDriver?: StorageDriverName;
  /**
   * Who starts the operations this client starts (a service's name, a person): recorded in each run's input and memo
   * (`startedBy`), and shown by `history` and `operations`. `user@host` of this process by default.
   */
  identity?: string;
}

export interface WriteOptions {
  /**
   * How long to wait for the answer, in ms (the client's default, 60 s, when absent). Past it the call throws
   * OperationTimeoutError; the operation itself is not stopped and goes on in the background.
   */
  timeoutMs?: number;
  /**
   * Hears what the operation's run says it is doing (its current details: `draining table 5 until ...: lease ...`,
   * `move shards to trash: 3/8`) each time that changes, from a second into the wait on: for a person watching.
   */
  onDetails?: (details: string) => void;
}

/** One table's life (`history`): the table as the catalog has it now, and every run of an operation on it, newest first. */
export interface TableHistory {
  table: TableInfo;
  operations: OperationInfo[];
}

/** What a `cancel` leaves: the run, closed, and its table as the catalog has it after (null: the run had no table yet). */
export interface CancelOutcome {
  operation: OperationInfo;
  table: TableInfo | null;
}

export interface LeaseOptions extends WriteOptions {
  /** How long the lease lasts before it must be renewed, in seconds (DEFAULT_LEASE_TTL_SECONDS, 60, when absent). */
  ttlSeconds?: number;
  /** Who holds it, named by a drop that waits for it: the client's identity (`user@host` of this process by default). */
  holder?: string;
}

/** How far a `purgeAll` is: tables done of all, and how each ended so far. */
export interface PurgeAllProgress {
  done: number;
  total: number;
  purged: number;
  held: number;
  failed: number;
}

/** What `purgeAll` did: the tables purged, those held (never purged), those skipped (recalled or purged meanwhile), and failures. */
export interface PurgeAllSummary {
  purged: number[];
  held: number[];
  skipped: Array<{ id: number; reason: string }>;
  failed: Array<{ id: number; error: string }>;
}

export interface UndeleteOptions extends WriteOptions {
  /** Hears how many shards are back, each time that changes (Pegasus's recall progress). */
  onProgress?: (progress: RecallProgress) => void;
}

/**
 * The tablefate SDK. Every request is validated (zod) before anything starts, so bad input is an
 * InvalidInputError and changes nothing. Every failure is a TableFateError: domain failures as their classes,
 * an operation that failed otherwise as OperationFailedError, and a write that did not answer in time as
 * OperationTimeoutError (the operation goes on). A write with no worker polling the task queue fails within
 * 2 s (NoWorkerError), before anything starts. The worker check, the deadline and the error mapping are
 * WriteRunner's (writes.ts); what is here is what each operation starts and how it reads its answer.
 */
export class TableFateClient {
  private readonly client: Client;
  private readonly catalog: CatalogReader;
  private readonly taskQueue: string;
  private readonly defaultTimeoutMs: number;
  /** Whether the client was given its default timeout (a drop's own default then gives way to it). */
  private readonly defaultTimeoutGiven: boolean;
  private readonly lockWait: LockWaitPolicy | undefined;
  private readonly expiryRetry: Backoff | undefined;
  private readonly storageDriver: StorageDriverName;
  /** Who starts the operations this client starts (TableFateClientOptions.identity). */
  private readonly startedBy: string;
  private readonly owned: Array<() => Promise<void>> = [];
  /** The worker check, the deadline and the typed errors around every write. */
  private readonly writes: WriteRunner;

  constructor(opts: TableFateClientOptions) {
    this.client = opts.client;
    this.catalog = opts.catalog;
    this.taskQueue = opts.taskQueue ?? TASK_QUEUE;
    this.defaultTimeoutMs = timeoutOf(opts.defaultTimeoutMs, DEFAULT_TIMEOUT_MS, 'defaultTimeoutMs');
    this.defaultTimeoutGiven = opts.defaultTimeoutMs !== undefined;
    this.lockWait = opts.lockWait === undefined ? undefined : parseRequest(backoffSchema, opts.lockWait);
    this.expiryRetry = opts.expiryRetry === undefined ? undefined : parseRequest(backoffSchema, opts.expiryRetry);
    this.storageDriver = opts.storageDriver ?? 'files';
    this.startedBy = parseRequest(identitySchema, opts.identity ?? defaultIdentity());
    this.writes = new WriteRunner(this.client, this.taskQueue);
  }

  /**
   * Opens the catalog (TABLEFATE_CATALOG_URL: a PostgreSQL database, from any host; by default the SQLite file
   * in `config.home`) and a connection to the Temporal server. A missing catalog is a CatalogNotFoundError, and
   * nothing is created in its place.
   */
  static async connect(
    config: ClientConfig = loadClientConfig(),
    opts: { defaultTimeoutMs?: number; identity?: string } = {},
  ): Promise<TableFateClient> {
    const location = catalogLocation(config.catalogUrl, config.home);
    let catalog: CatalogReader;
    try {
      catalog = await openCatalog(location, { mustExist: true });
    } catch (err) {
      throw explainMissing(err, location, config.home);
    }
    // Lazy: requests are validated, and reads answered from the catalog, without waiting for the server.
    const connection = Connection.lazy({ address: config.temporalAddress, connectTimeout: '5s', ...config.temporalSecurity });
    const client = new TableFateClient({
      client: new Client({ connection, namespace: config.temporalNamespace }),
      catalog,
      defaultTimeoutMs: opts.defaultTimeoutMs,
      storageDriver: config.storageDriver,
      identity: opts.identity,
    });
    client.owned.push(
      () => catalog.close(),
      () => connection.close(),
    );
    return client;
  }

  /** Creates a table, or returns it if the same create already happened; joins a create of it that is running. */
  async create(request: CreateRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    // A table of PostgreSQL is one real table unless more shards are asked for.
    const asked = this.storageDriver === 'postgres' ? { ...request, shards: request.shards ?? 1 } : request;
    const { table, shards, columns, like } = parseRequest(OPERATION_REQUESTS.create, asked);
    checkForDriver(this.storageDriver, { table, shards, columns, like });
    const params: CreateParams = { shards, ...definitionOf({ shards, columns, like }) };
    return this.startCreate(OPERATIONS.create, table, params, opts);
  }

  /**
   * PostgreSQL driver: registers the table that already exists as `<schema>.<table>` on `node` (node-0 by default) as a
   * READY tablefate table of one shard, so that drop, recall and purge protect it from then on; nothing of the table
   * changes. The same adopt again returns the table. A table tablefate manages already is TableExists; no such table
   * TableNotFound; a table a move could not carry (a view, a partitioned or temporary table, one the worker's role may
   * not alter) InvalidInput.
   */
  async adopt(request: AdoptRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    const { table, node } = parseRequest(OPERATION_REQUESTS.adopt, request);
    if (this.storageDriver !== 'postgres') {
      throw new InvalidInputError('adopt is for the postgres storage driver: it registers a PostgreSQL table that exists already');
    }
    checkForDriver(this.storageDriver, { table, shards: 1 });
    return this.startCreate(OPERATIONS.adopt, table, { shards: 1, adopt: { node } }, opts);
  }

  /** A create or an adopt (the same workflow, under each one's id): started or joined, and its answer checked against `params`. */
  private async startCreate(
    record: typeof OPERATIONS.create | typeof OPERATIONS.adopt,
    table: TableName,
    params: CreateParams,
    opts: WriteOptions,
  ): Promise<TableInfo> {
    const timeoutMs = this.timeoutOf(opts);
    const label = formatTableName(table);
    const workflowId = record.workflowId(table, this.catalog.id);
    const op = { workflowId, what: `${record.name} of ${label}`, check: `\`tablefate describe ${label}\``, onDetails: opts.onDetails };
    const created = await this.writes.run(op, timeoutMs, async (started) => {
      const handle = await this.client.workflow.start<typeof createTable>(
        record.workflowType,
        this.startOptions(record, workflowId, { ...table, ...params }, table, `${record.name} ${label}: ${describeCreateParams(params)}`),
      );
      started();
      try {
        return await handle.result();
      } catch (err) {
        // A same-named create with other parameters was running and this call joined it: its TableExists is
        // not ours if the table that exists is the one we asked for.
        const existing = await this.catalog.findByName(table);
        if (existing?.state === 'READY' && sameCreateParams(existing.params, params)) return toTableInfo(existing);
        throw err;
      }
    });
    // Joining a running create of the same name with other parameters must not pass for success.
    // (The definition is not in the answer: the catalog has it.)
    const made = (await this.catalog.getTable(created.id))?.params ?? { shards: created.shards };
    if (!sameCreateParams(made, params)) {
      throw new TableExistsError(`table ${label} is being created with ${describeCreateParams(made)}, not ${describeCreateParams(params)}`);
    }
    return created;
  }

  /** Moves a live table to the trash; answers once it is TRASHED, while its expiry timer runs on. */
  async trash(request: TrashRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    const { table: name, retentionSeconds, drainTimeoutSeconds } = parseRequest(OPERATION_REQUESTS.trash, request);
    // A drop may wait for its drain (leases, PostgreSQL sessions) up to its drain timeout: unless the call or the client
    // says otherwise,
    // it waits for its answer that long and a little more, so that a drain is not mistaken for a server that does not answer.
    const drainMs = (drainTimeoutSeconds ?? DEFAULT_DRAIN_TIMEOUT_SECONDS) * 1000;
    const timeoutMs =
      opts.timeoutMs === undefined && !this.defaultTimeoutGiven ? Math.max(this.defaultTimeoutMs, drainMs + 30_000) : this.timeoutOf(opts);
    const label = formatTableName(name);
    const requestId = randomUUID();
    let table = await this.liveTable(name);
    const record = OPERATIONS.trash;
    const workflowId = () => record.workflowId(table.id, this.catalog.id);
    const op = {
      workflowId: workflowId(),
      what: `trash of ${label} (id ${table.id})`,
      check: `\`tablefate describe ${table.id}\``,
      onDetails: opts.onDetails,
    };
    const trashed = await this.writes.run(op, timeoutMs, async (started, signal) => {
      for (let first = true; ; first = false) {
        if (!first) table = await this.liveTable(name);
        // DRAINING, TRASHING: an earlier trash stopped half way (its compensation could not finish); this one resumes it.
        if (table.state !== 'READY' && table.state !== 'DRAINING' && table.state !== 'TRASHING') {
          throw new WrongStateError(`table ${label} (id ${table.id}) is ${table.state}`);
        }
        const start = new WithStartWorkflowOperation<typeof trashTable>(
          record.workflowType,
          this.startOptions(
            record,
            workflowId(),
            { tableId: table.id, retentionSeconds, drainTimeoutSeconds, requestId, expectedName: name, expiryRetry: this.expiryRetry },
            { tableId: table.id, ...name },
            `trash ${label} (id ${table.id})`,
          ),
        );
        start.workflowHandle().then(started, () => undefined);
        try {
          const answer = await this.client.workflow.executeUpdateWithStart(trashedUpdate, {
            args: [requestId],
            startWorkflowOperation: start,
          });
          if (!isTrashSince(answer, table)) {
            // The run this call joined had trashed the table before the state this call read (it is READY again: a
            // recall came between), and told it only now: its workflow task that committed was lost, and its repeat
            // answered every caller waiting. That is the recalled trash's answer, not this call's: wait for its run
            // to close (the recall ended its timer), then start a fresh one, as for TrashRunAnswered below.
            await new Promise((resolve) => setTimeout(resolve, 200));
            continue;
          }
          return answer;
        } catch (err) {
          // The run closed before it accepted the update (terminated while its first workflow task ran, say):
          // the server answers NOT_FOUND, and how the run closed is the answer.
          if (isGrpcServiceError(err) && (err.code as number) === GRPC_NOT_FOUND && !(await this.isRunning(workflowId()))) {
            throw await closedRunError(this.client.workflow.getHandle(workflowId()), err);
          }
          if (applicationFailureOf(err)?.type === 'AcceptedUpdateCompletedWorkflow') {
            // The run continued as new while it waited for the table's lock: ask the run that goes on.
            if (!signal.aborted && (await this.isRunning(workflowId()))) continue;
            // The run closed before it answered: how it closed (terminated, failed...) is the answer.
            throw await closedRunError(this.client.workflow.getHandle(workflowId()), err);
          }
          // An earlier trash run of this table has answered and is ending (the table was restored since):
          // wait for it to close (a worker may have died meanwhile: that takes a workflow task timeout), then
          // start a fresh one. The call's deadline bounds the wait.
          if (applicationFailureOf(err)?.type !== 'TrashRunAnswered' || signal.aborted) throw err;
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      }
    });
    // Joined a trash of this table that was already running: its retention is the one that holds.
    const kept = (Date.parse(trashed.expireAt!) - Date.parse(trashed.droppedAt!)) / 1000;
    if (retentionSeconds !== undefined && kept !== retentionSeconds) {
      throw new WrongStateError(`table ${label} was trashed meanwhile by another request, with a retention of ${kept} s`);
    }
    return trashed;
  }

  /**
   * Recalls a trashed table, by id or by name (the most recently trashed of that name), maybe renamed.
   * `onProgress` hears how many shards are back, each time that changes (Pegasus's recall progress).
   */
  async undelete(request: UndeleteRequest, opts: UndeleteOptions = {}): Promise<TableInfo> {
    const { table: ref, newName } = parseRequest(OPERATION_REQUESTS.undelete, request);
    if (newName && this.storageDriver === 'postgres') checkSchemaFor(newName);
    const timeoutMs = this.timeoutOf(opts);
    const trashed = await this.trashedTable(ref);
    const tableId = trashed.id;
    const target = newName ?? trashed;
    const record = OPERATIONS.undelete;
    const workflowId = record.workflowId(tableId, this.catalog.id);
    const op = { workflowId, what: `undelete of table ${tableId}`, check: `\`tablefate describe ${tableId}\``, onDetails: opts.onDetails };
    return this.writes.run(op, timeoutMs, async (started, signal) => {
      const handle = await this.startAlone<typeof undeleteTable>(
        record,
        workflowId,
        { tableId, newName, expectedName: ref.kind === 'name' ? { namespace: ref.namespace, name: ref.name } : undefined },
        { tableId, namespace: target.namespace, name: target.name },
        `undelete table ${tableId}${newName ? ` as ${formatTableName(newName)}` : ''}`,
      );
      started();
      const result = handle.result();
      if (opts.onProgress) await reportProgress(handle, result, opts.onProgress, signal);
      return await result;
    });
  }

  /** Purges a trashed table now. Purging a table already purged returns its tombstone. */
  async purge(request: PurgeRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    const { tableId } = parseRequest(OPERATION_REQUESTS.purge, request);
    const timeoutMs = this.timeoutOf(opts);
    const table = await this.catalog.getTable(tableId);
    if (!table) throw new TableNotFoundError(`table ${tableId} does not exist`);
    // (Checked again under the lock by the workflow; here, to refuse at once what must not be purged.)
    if (table.state === 'TRASHED' && table.hold) throw onHold({ ...table, hold: table.hold });
    const record = OPERATIONS.purge;
    const workflowId = record.workflowId(tableId, this.catalog.id);
    const op = { workflowId, what: `purge of table ${tableId}`, check: `\`tablefate describe ${tableId}\``, onDetails: opts.onDetails };
    const purged = await this.writes.run(op, timeoutMs, async (started) => {
      const handle = await this.client.workflow.start<typeof purgeTable>(
        record.workflowType,
        this.startOptions(
          record,
          workflowId,
          { tableId, trigger: 'manual' as const },
          { tableId, namespace: table.namespace, name: table.name },
          `purge table ${tableId}`,
        ),
      );
      started();
      return handle.result();
    });
    // Joined a purge started by the trash timer that found the table restored: nothing was purged.
    if (purged.state !== 'PURGED') {
      throw new WrongStateError(`table ${tableId} is ${purged.state}; only a trashed table can be purged`);
    }
    return purged;
  }

  /**
   * Gives a READY table, named by id or by name, a new name or namespace; nothing else changes (not its id, not a
   * shard), and the old name is free at once. A table that already bears `newName` is answered as it is: nothing
   * is started (as a create of a table that exists returns it). NameTaken if another table holds the name.
   */
  async rename(request: RenameRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    const { table: ref, newName } = parseRequest(OPERATION_REQUESTS.rename, request);
    // A rename changes the catalog only; a PostgreSQL table would keep its old name where services query it.
    if (this.storageDriver === 'postgres') {
      throw new InvalidInputError('rename is not available with the postgres storage driver yet: drop and recall under the new name');
    }
    const timeoutMs = this.timeoutOf(opts);
    const table = ref.kind === 'id' ? await this.catalog.getTable(ref.id) : await this.liveTable(ref);
    if (!table) throw new TableNotFoundError(`table ${ref.kind === 'id' ? ref.id : formatTableName(ref)} does not exist`);
    // Checked again under the lock by the workflow; here, to refuse at once what cannot be renamed.
    if (table.state !== 'READY') throw notRenamable(table);
    if (table.namespace === newName.namespace && table.name === newName.name) return toTableInfo(table);
    const tableId = table.id;
    const record = OPERATIONS.rename;
    const workflowId = record.workflowId(tableId, this.catalog.id);
    const to = formatTableName(newName);
    const op = {
      workflowId,
      what: `rename of table ${tableId} to ${to}`,
      check: `\`tablefate describe ${tableId}\``,
      onDetails: opts.onDetails,
    };
    return this.writes.run(op, timeoutMs, async (started) => {
      const handle = await this.startAlone<typeof renameTable>(
        record,
        workflowId,
        { tableId, newName, expectedName: ref.kind === 'name' ? { namespace: ref.namespace, name: ref.name } : undefined },
        { tableId, ...newName },
        `rename table ${tableId} (${formatTableName(table)}) to ${to}`,
      );
      started();
      return handle.result();
    });
  }

  /**
   * Places a legal hold on a table (READY, or in the trash: by id, or by name the most recently trashed of that name
   * when no live table bears it): while held, nothing purges it, not its expiry, not the trash's space cap, not a purge
   * by hand (OnHold). Holding a table held for the same reason answers it as it is; for another reason is WrongState.
   */
  async hold(request: HoldRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    const { table: ref, reason } = parseRequest(OPERATION_REQUESTS.hold, request);
    return this.changeHold(OPERATIONS.hold, ref, { reason: reason ?? null }, opts);
  }

  /** Releases a table's legal hold; a trashed table whose expiry passed while it was held is purged right after. WrongState if not held. */
  async release(request: ReleaseRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    const { table: ref } = parseRequest(OPERATION_REQUESTS.release, request);
    return this.changeHold(OPERATIONS.release, ref, null, opts);
  }

  private async changeHold(
    record: typeof OPERATIONS.hold | typeof OPERATIONS.release,
    ref: TableRef,
    hold: { reason: string | null } | null,
    opts: WriteOptions,
  ): Promise<TableInfo> {
    const timeoutMs = this.timeoutOf(opts);
    const table = await this.anyTable(ref);
    // (Checked again under the lock by the workflow; here, to answer at once.)
    if (!hold && !table.hold) throw new WrongStateError(`table ${table.id} is not on hold; nothing to release`);
    // Held already for this reason answers the table as it is, as the workflow would: only where it could be held now
    // (a recall of a held table under way is waited for, then answered READY and held).
    if (hold && table.hold && table.hold.reason === hold.reason && canBeHeld(table)) return toTableInfo(table);
    const workflowId = record.workflowId(table.id, this.catalog.id);
    const op = {
      workflowId,
      what: `${record.name} of table ${table.id}`,
      check: `\`tablefate describe ${table.id}\``,
      onDetails: opts.onDetails,
    };
    return this.writes.run(op, timeoutMs, async (started) => {
      const handle = await this.startAlone<typeof holdTable>(
        record,
        workflowId,
        { tableId: table.id, hold, expectedName: ref.kind === 'name' ? { namespace: ref.namespace, name: ref.name } : undefined },
        { tableId: table.id, namespace: table.namespace, name: table.name },
        `${record.name} table ${table.id} (${formatTableName(table)})${hold?.reason ? `: ${hold.reason}` : ''}`,
      );
      started();
      return handle.result();
    });
  }

  /**
   * Gives a trashed table (by id, or by name the most recently trashed of that name) a new retention, counted from its
   * drop time: its trash run moves the expiry in the catalog and re-arms its durable timer, so `describe` shows the new
   * expiry at once; an expiry already past purges the table now. 1 s to 10 years, as a drop's.
   */
  async setRetention(request: RetentionRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    const { table: ref, retentionSeconds } = parseRequest(retentionRequestSchema, request);
    const timeoutMs = this.timeoutOf(opts);
    const table = await this.trashedTable(ref);
    if (table.state !== 'TRASHED')
      throw new WrongStateError(`table ${table.id} is ${table.state}; only a trashed table has a retention to change`);
    const workflowId = OPERATIONS.trash.workflowId(table.id, this.catalog.id);
    const op = { workflowId, what: `retention change of table ${table.id}`, check: `\`tablefate describe ${table.id}\`` };
    return this.writes.run(op, timeoutMs, async (started, signal) => {
      started();
      const run = this.client.workflow.getHandle<typeof trashTable>(workflowId);
      try {
        for (;;) {
          try {
            return await run.executeUpdate(retentionUpdate, { args: [retentionSeconds] });
          } catch (err) {
            // The catalog says TRASHED but the run does not know it yet (the task that committed was lost, and is being
            // repeated): ask again shortly; the call's deadline bounds it.
            if (!/not in the trash yet/.test(applicationFailureOf(err)?.message ?? '') || signal.aborted) throw err;
            await new Promise((resolve) => setTimeout(resolve, 500));
          }
        }
      } catch (err) {
        if (err instanceof WorkflowNotFoundError || (isGrpcServiceError(err) && (err.code as number) === GRPC_NOT_FOUND)) {
          throw new WrongStateError(
            `the trash run of table ${table.id} (${workflowId}) is not running; the reconciler re-arms it within a minute: try again then`,
          );
        }
        throw err;
      }
    });
  }

  /**
   * Takes a lease on a READY table (by id or name) for `ttlSeconds` (60 by default): while it lasts, a drop of the table
   * waits for it (DRAINING) until it is released or expires, up to the drop's drain timeout. A table that is not READY
   * (DRAINING: a drop waits already) is WrongState: schedule nothing on it.
   */
  async acquireLease(table: string | number, opts: LeaseOptions = {}): Promise<LeaseInfo> {
    const request = parseRequest(OPERATION_REQUESTS.lease, { table, ttlSeconds: opts.ttlSeconds, holder: opts.holder });
    const found = await this.anyTable(request.table);
    if (found.state !== 'READY') {
      throw new WrongStateError(
        `table ${found.id} is ${found.state}${found.state === 'DRAINING' ? ': a drop waits for its leases to end, and it takes no new one' : ''}; only a READY table can be leased`,
      );
    }
    const leaseId = randomUUID();
    return this.runLease(
      `${leaseId}:acquire`,
      {
        action: 'acquire',
        leaseId,
        tableId: found.id,
        holder: request.holder ?? this.startedBy,
        ttlSeconds: request.ttlSeconds,
      },
      { tableId: found.id, namespace: found.namespace, name: found.name },
      `lease table ${found.id} (${formatTableName(found)}) for ${request.ttlSeconds} s`,
      opts,
    );
  }

  /** Renews a lease for its ttl (or `ttlSeconds`) from now. An expired or released lease is LeaseNotFound: take a new one. */
  async renewLease(leaseId: string, opts: Omit<LeaseOptions, 'holder'> = {}): Promise<LeaseInfo> {
    const request = parseRequest(renewLeaseRequestSchema, { leaseId, ttlSeconds: opts.ttlSeconds });
    return this.runLease(
      `${request.leaseId}:renew:${randomUUID()}`,
      { action: 'renew', ...request },
      {},
      `renew lease ${request.leaseId}`,
      opts,
    );
  }

  /** Releases a lease: a drop waiting for it goes on at once. LeaseNotFound if there is none by that id. */
  async releaseLease(leaseId: string, opts: WriteOptions = {}): Promise<LeaseInfo> {
    const request = parseRequest(releaseLeaseRequestSchema, { leaseId });
    return this.runLease(
      `${request.leaseId}:release:${randomUUID()}`,
      { action: 'release', ...request },
      {},
      `release lease ${request.leaseId}`,
      opts,
    );
  }

  /** The leases that have not expired, of every table or of one (by id or name), soonest to expire first. */
  async listLeases(request: ListLeasesRequest = {}): Promise<LeaseInfo[]> {
    const { table } = parseRequest(listLeasesRequestSchema, request);
    const tableId = table === undefined ? undefined : (await this.anyTable(table)).id;
    return (await this.catalog.listLeases({ tableId, now: Date.now() })).map(toLeaseInfo);
  }

  private async runLease(
    subject: string,
    input: Parameters<typeof leaseTable>[0],
    target: OperationTarget,
    summary: string,
    opts: WriteOptions,
  ): Promise<LeaseInfo> {
    const timeoutMs = this.timeoutOf(opts);
    const record = OPERATIONS.lease;
    const workflowId = record.workflowId(subject, this.catalog.id);
    const op = { workflowId, what: summary, check: '`tablefate lease ls`' };
    const lease = await this.writes.run(op, timeoutMs, async (started) => {
      const handle = await this.client.workflow.start<typeof leaseTable>(
        record.workflowType,
        this.startOptions(record, workflowId, input, target, summary),
      );
      started();
      return handle.result();
    });
    return toLeaseInfo(lease);
  }

  /**
   * The runtime settings in force (every key, or one), globally or in a namespace, each with where its value comes
   * from: the namespace's own, the global one, or the default.
   */
  async getSettings(request: ConfigGetRequest = {}): Promise<EffectiveSetting[]> {
    const { key, namespace } = parseRequest(configGetRequestSchema, request);
    const rows = await this.catalog.listSettings();
    return (key ? [key] : SETTING_KEYS).map((k) => effectiveSetting(rows, k, namespace ?? null, defaultSettings()));
  }

  /** Sets a runtime setting (globally, or for a namespace), read by every worker from its next operation on. */
  async setSetting(request: ConfigSetRequest, opts: WriteOptions = {}): Promise<EffectiveSetting> {
    const { key, value, namespace } = parseRequest(configSetRequestSchema, request);
    return this.configure({ key, namespace: namespace ?? null, value }, opts);
  }

  /** Unsets a runtime setting: the global value (for a namespace) or the default applies again. */
  async unsetSetting(request: ConfigUnsetRequest, opts: WriteOptions = {}): Promise<EffectiveSetting> {
    const { key, namespace } = parseRequest(configUnsetRequestSchema, request);
    return this.configure({ key, namespace: namespace ?? null }, opts);
  }

  private async configure(change: Omit<Parameters<typeof configureTrash>[0], 'catalogId'>, opts: WriteOptions): Promise<EffectiveSetting> {
    const timeoutMs = this.timeoutOf(opts);
    const record = OPERATIONS.configure;
    const workflowId = record.workflowId(randomUUID(), this.catalog.id);
    const scope = change.namespace === null ? 'globally' : `for namespace ${change.namespace}`;
    const what = change.value === undefined ? `unset ${change.key} ${scope}` : `set ${change.key} ${scope}`;
    const rows: SettingRow[] = await this.writes.run({ workflowId, what, check: '`tablefate config get`' }, timeoutMs, async (started) => {
      const handle = await this.client.workflow.start<typeof configureTrash>(
        record.workflowType,
        this.startOptions(record, workflowId, change, {}, what),
      );
      started();
      return handle.result();
    });
    return effectiveSetting(rows, change.key, change.namespace, defaultSettings());
  }

  /** What `purgeAll` would purge now, changing nothing: the trashed tables (of `namespace`), those held apart. */
  async planPurgeAll(request: PurgeAllRequest = {}): Promise<{ purge: TableInfo[]; held: TableInfo[] }> {
    const { namespace } = parseRequest(purgeAllRequestSchema, request);
    const trashed = (await this.catalog.listTables({ includeTrashed: true })).filter(
      (t) => t.state === 'TRASHED' && (namespace === undefined || t.namespace === namespace),
    );
    return { purge: trashed.filter((t) => !t.hold).map(toTableInfo), held: trashed.filter((t) => t.hold).map(toTableInfo) };
  }

  /**
   * Purges every trashed table (of `namespace`) that is not held: one purge operation per table, `concurrency` (4) at a
   * time. A table held, recalled or purged meanwhile is counted apart; a failure does not stop the others.
   */
  async purgeAll(
    request: PurgeAllRequest = {},
    opts: WriteOptions & { onProgress?: (progress: PurgeAllProgress) => void } = {},
  ): Promise<PurgeAllSummary> {
    const { concurrency } = parseRequest(purgeAllRequestSchema, request);
    const plan = await this.planPurgeAll(request);
    const summary: PurgeAllSummary = { purged: [], held: plan.held.map((t) => t.id), skipped: [], failed: [] };
    const queue = [...plan.purge];
    const total = plan.purge.length;
    let done = 0;
    const report = () =>
      opts.onProgress?.({ done, total, purged: summary.purged.length, held: summary.held.length, failed: summary.failed.length });
    const purgeNext = async (): Promise<void> => {
      for (let table = queue.shift(); table; table = queue.shift()) {
        try {
          await this.purge({ tableId: table.id }, opts);
          summary.purged.push(table.id);
        } catch (err) {
          if (err instanceof OnHoldError) summary.held.push(table.id);
          else if (err instanceof WrongStateError || err instanceof TableNotFoundError)
            summary.skipped.push({ id: table.id, reason: err.message });
          else summary.failed.push({ id: table.id, error: err instanceof TableFateError ? `${err.type}: ${err.message}` : String(err) });
        }
        done++;
        report();
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, Math.max(total, 1)) }, purgeNext));
    for (const list of [summary.purged, summary.held]) list.sort((a, b) => a - b);
    return summary;
  }

  /**
   * What the reconciler would do now (stuck tables, trash timers to re-arm, stale locks, orphan files), asked of a
   * worker: it reads the catalog and every storage node. Changes nothing. Empty findings: healthy.
   */
  async health(opts: WriteOptions = {}): Promise<ReconcileReport> {
    const timeoutMs = this.timeoutOf(opts);
    const record = OPERATIONS.reconcile;
    const workflowId = record.workflowId({ mode: 'report', requestId: randomUUID() }, this.catalog.id);
    const op = { workflowId, what: 'health report', check: `the workflow ${workflowId} in the web UI` };
    return this.writes.run(op, timeoutMs, async (started) => {
      const handle = await this.client.workflow.start<typeof reconcileTables>(
        record.workflowType,
        this.startOptions(
          record,
          workflowId,
          { mode: 'report' as const },
          {},
          'doctor: what the reconciler would do now (changes nothing)',
        ),
      );
      started();
      return handle.result();
    });
  }

  /**
   * Live tables, by id; with `includeTrashed`, trashed ones too (with their expiry). Tombstones are not listed.
   * A page at a time: `limit` tables at most, those after id `after` (the last id of the page before).
   */
  async list(request: ListRequest = {}): Promise<TableInfo[]> {
    const { includeTrashed, after, limit, withSizes } = parseRequest(listRequestSchema, request);
    const tables = await this.catalog.listTables({ includeTrashed, afterId: after, limit });
    return withSizes ? this.withSizes(tables) : tables.map(toTableInfo);
  }

  /** By name, a live table (a trashed one is TableInTrash); by id, any table, tombstones included. */
  async describe(request: DescribeRequest): Promise<TableInfo> {
    const { table: ref, withSizes } = parseRequest(describeRequestSchema, request);
    let table: TableRecord;
    if (ref.kind === 'id') {
      const found = await this.catalog.getTable(ref.id);
      if (!found) throw new TableNotFoundError(`table ${ref.id} does not exist`);
      table = found;
    } else {
      table = await this.liveTable(ref);
    }
    return withSizes ? (await this.withSizes([table]))[0]! : toTableInfo(table);
  }

  /**
   * The operations of this catalog, newest first, from Temporal's visibility (the runs' search attributes): of one table
   * (`table`: by id any table, a purged one included; by name the live one, else the most recently trashed), only the
   * running ones (`running`), at most `limit` (50). A running one has its `currentStep`, as its workflow says it (asked of
   * a worker; null when none answers). Needs the server, not a worker.
   */
  async operations(request: OperationsRequest = {}): Promise<OperationInfo[]> {
    const { table, running, limit } = parseRequest(operationsRequestSchema, request);
    const tableId = table === undefined ? undefined : (await this.anyTable(table, { tombstones: true })).id;
    return this.runsOf({ tableId, running }, limit);
  }

  /**
   * One table's life: the table as the catalog has it now (its state, its name, a tombstone's purge), and every run of
   * an operation on it (by its TableId), newest first, with when it started and closed, how it ended and who started
   * it. By id any table, a purged one included; by name the live one, else the most recently trashed. The runs are
   * those the server still keeps (the namespace's retention).
   */
  async history(request: HistoryRequest): Promise<TableHistory> {
    const { table: ref } = parseRequest(historyRequestSchema, request);
    const table = await this.anyTable(ref, { tombstones: true });
    return { table: toTableInfo(table), operations: await this.runsOf({ tableId: table.id }) };
  }

  /** The runs of this catalog's table operations that visibility finds, with the running ones' current steps. */
  private async runsOf(filter: { tableId?: number; running?: boolean }, limit?: number): Promise<OperationInfo[]> {
    const query = operationsQuery(filter);
    return this.writes.read('listing of operations', VISIBILITY_TIMEOUT_MS, async () => {
      const runs = await listRuns(this.client, this.catalog.id, query, limit);
      const hasWorker = runs.some((run) => run.status.name === 'RUNNING') && (await this.writes.workerPolling());
      return withCurrentSteps(this.client, runs, hasWorker);
    });
  }

  /**
   * Cancels a running operation of this catalog, by its workflow id (as `operations` lists it), and waits until its run
   * has closed: the run takes back what it had done (its undos run where the cancel cannot reach them, and its lock is
   * released), and whoever waited for it hears it was cancelled. Answers the run, closed, and its table as it is after.
   *
   * Refused, changing nothing: an id that is not of a run of this catalog (OperationNotFound), a run that is not a table
   * operation (InvalidInput), one that has closed (WrongState), and a trash whose table is in the trash already
   * (WrongState): that run is the table's expiry timer, which ignores a cancel; recall or purge the table instead. A run
   * that finished before the cancel reached it is WrongState, naming the table's state; one that failed throws how.
   */
  async cancel(request: CancelRequest, opts: WriteOptions = {}): Promise<CancelOutcome> {
    const { workflowId } = parseRequest(cancelRequestSchema, request);
    const timeoutMs = this.timeoutOf(opts);
    const notFound = () =>
      new OperationNotFoundError(
        `no operation of this catalog runs or ran as ${workflowId} (this catalog's workflow ids end in @${this.catalog.id}; see \`tablefate ops\`)`,
        workflowId,
      );
    if (!ofCatalog(workflowId, this.catalog.id)) throw notFound();
    const op = { workflowId, what: `cancel of ${workflowId}`, check: `\`tablefate ops\``, onDetails: opts.onDetails };
    return this.writes.run(op, timeoutMs, async (started, signal) => {
      let run: WorkflowExecutionDescription;
      try {
        run = await this.client.workflow.getHandle(workflowId).describe();
      } catch (err) {
        if (err instanceof WorkflowNotFoundError || (isGrpcServiceError(err) && (err.code as number) === GRPC_NOT_FOUND)) throw notFound();
        throw err;
      }
      const operation = run.typedSearchAttributes.get(SEARCH_ATTRIBUTES.tableOp);
      if (operation === undefined) {
        throw new InvalidInputError(
          `${workflowId} is a ${run.type} run, not a table operation: cancel takes an id \`tablefate ops\` lists`,
        );
      }
      const tableId = run.typedSearchAttributes.get(SEARCH_ATTRIBUTES.tableId);
      const what = `${operation}${tableId === undefined ? '' : ` of table ${tableId}`}`;
      if (run.status.name !== 'RUNNING') {
        throw new WrongStateError(
          `${workflowId} (${what}) is not running: it ended ${run.status.name} at ${run.closeTime?.toISOString() ?? '?'}; nothing to cancel`,
        );
      }
      if (operation === OPERATIONS.trash.name && tableId !== undefined) await this.refuseTrashTimer(workflowId, tableId);
      const handle = this.client.workflow.getHandle(workflowId, run.runId);
      await handle.cancel();
      started();
      let failure: Error | undefined;
      // The wait for the run to close ends with this call, whichever way it ends (it could otherwise outlive it by days).
      const waiting = new AbortController();
      const stopWaiting = () => waiting.abort();
      signal.addEventListener('abort', stopWaiting);
      try {
        const result = this.client.connection
          .withAbortSignal(waiting.signal, () => handle.result())
          .catch((err: unknown) => (failure = err instanceof Error ? err : new Error(String(err))));
        // A trash that committed between the look above and the cancel is its table's expiry timer now, which ignores it.
        if (operation === OPERATIONS.trash.name && tableId !== undefined)
          await this.untilClosedOrTrashed(result, workflowId, tableId, signal);
        await result;
      } finally {
        signal.removeEventListener('abort', stopWaiting);
        waiting.abort();
      }
      const closed = await this.client.workflow.getHandle(workflowId).describe();
      // (A create has its table's id from its prepare on: the run's search attributes have it once it is known.)
      const closedTableId = closed.typedSearchAttributes.get(SEARCH_ATTRIBUTES.tableId) ?? tableId;
      const table = closedTableId === undefined ? undefined : await this.catalog.getTable(closedTableId);
      if (closed.status.name === 'CANCELLED') return { operation: toOperationInfo(closed), table: table ? toTableInfo(table) : null };
      if (closed.status.name === 'COMPLETED') {
        throw new WrongStateError(
          `${workflowId} (${what}) finished before the cancel reached it${table ? `: table ${table.id} is ${table.state}` : ''}`,
        );
      }
      throw failure ?? new WrongStateError(`${workflowId} (${what}) ended ${closed.status.name}, not cancelled`);
    });
  }

  /**
   * Waits for a cancelled trash's run to close, unless its table reaches the trash first: the trash committed before the
   * cancel reached it, and its run, the table's expiry timer now, ignores the cancel (WrongState, as for a refused one).
   */
  private async untilClosedOrTrashed(result: Promise<unknown>, workflowId: string, tableId: number, signal: AbortSignal): Promise<void> {
    let closed = false;
    const settled = result.then(() => (closed = true));
    while (!closed && !signal.aborted) {
      const table = await this.catalog.getTable(tableId);
      if (table && (table.state === 'TRASHED' || table.state === 'PURGING' || table.state === 'PURGED')) {
        throw new WrongStateError(
          `${workflowId} finished before the cancel reached it: table ${tableId} is ${table.state}, and its run, the timer ` +
            `that keeps its data until it expires, ignores the cancel. To bring the table back: \`tablefate recall ${tableId}\``,
        );
      }
      await Promise.race([settled, new Promise((resolve) => setTimeout(resolve, 500))]);
    }
  }

  /**
   * A trash whose table is in the trash (or being purged) is done: its run now only waits for the expiry, and is what
   * keeps the data until then (it ignores a cancel). Refused, pointing at what ends a trash: a recall, a purge.
   */
  private async refuseTrashTimer(workflowId: string, tableId: number): Promise<void> {
    const table = await this.catalog.getTable(tableId);
    if (!table) return;
    if (table.state === 'TRASHED') {
      const until = table.expireAt === null ? '' : ` until ${new Date(table.expireAt).toISOString()}`;
      const held = table.hold ? ` (it is on hold: \`tablefate release ${tableId}\` before a purge)` : '';
      throw new WrongStateError(
        `${workflowId} is the trash of table ${tableId}, done: the table is TRASHED${until}, and this run is the timer that keeps ` +
          `its data until it expires (a cancel would not bring it back, and the run ignores one). ` +
          `To bring the table back: \`tablefate recall ${tableId}\`; to delete it now: \`tablefate purge ${tableId}\`${held}`,
      );
    }
    if (table.state === 'PURGING' || table.state === 'PURGED') {
      throw new WrongStateError(
        `${workflowId} is the trash of table ${tableId}, which is ${table.state === 'PURGED' ? 'purged' : 'being purged'}: ` +
          'the trash is done, and a purge only goes forward; nothing to cancel',
      );
    }
  }

  /**
   * The tables with their sizes, asked of the nodes through a worker (measureTables), a run per MEASURED_PER_RUN tables
   * (a whole catalog's placements would pass the server's limit on a payload). A size that cannot be had (no worker, a
   * node that does not answer, no server) is null: a read never fails for want of a size.
   */
  private async withSizes(tables: TableRecord[]): Promise<TableInfo[]> {
    const measured = tables.filter((t) => t.state !== 'PURGED' && t.placement.length > 0);
    const sizes = new Map<number, number | null>(tables.map((t) => [t.id, 0]));
    for (let from = 0; from < measured.length; from += MEASURED_PER_RUN) {
      const chunk = measured.slice(from, from + MEASURED_PER_RUN);
      const answer = await this.measure(chunk).catch(() => chunk.map((t) => ({ id: t.id, bytes: null })));
      for (const { id, bytes } of answer) sizes.set(id, bytes);
    }
    return tables.map((t) => ({ ...toTableInfo(t), bytes: sizes.get(t.id) ?? null }));
  }

  /** One run of measureTables over `tables`, within MEASURE_TIMEOUT_MS. */
  private measure(tables: TableRecord[]): Promise<TableSize[]> {
    const record = OPERATIONS.measure;
    const workflowId = record.workflowId(randomUUID(), this.catalog.id);
    const op = { workflowId, what: 'measure of table sizes', check: `the workflow ${workflowId} in the web UI` };
    return this.writes.run(op, MEASURE_TIMEOUT_MS, async (started) => {
      const handle = await this.client.workflow.start<typeof measureTables>(
        record.workflowType,
        this.startOptions(
          record,
          workflowId,
          { tables: tables.map((t) => ({ id: t.id, placement: t.placement })) },
          {},
          `measure ${tables.length} table(s) (reads only)`,
        ),
      );
      started();
      return handle.result();
    });
  }

  async close(): Promise<void> {
    for (const release of this.owned.splice(0)) await release();
  }

  /** The call's timeout, validated with the request: before anything is read or started. */
  private timeoutOf(opts: WriteOptions): number {
    return timeoutOf(opts.timeoutMs, this.defaultTimeoutMs, 'timeoutMs');
  }

  /**
   * What every start shares, as its record says: its id, the task queue, the catalog it belongs to, who started it (in
   * its input and its memo, where `history` reads it), its search attributes and what the UI shows, and what a second
   * request for the same id does. Every run this client starts is started with these.
   */
  private startOptions<I extends object>(op: AnyOperation, workflowId: string, input: I, table: OperationTarget, summary: string) {
    return {
      workflowId,
      taskQueue: this.taskQueue,
      args: [{ ...input, catalogId: this.catalog.id, lockWait: this.lockWait, startedBy: this.startedBy }] as [
        I & { catalogId: string; startedBy: string },
      ],
      typedSearchAttributes: op.searchAttributes(table),
      memo: { [STARTED_BY_MEMO]: this.startedBy },
      staticSummary: summary,
      ...op.start,
    };
  }

  /**
   * Starts the one run of an operation whose second request must not join the first (its record's conflict policy is
   * FAIL): a run of that id going on is WrongState, "a rename of table 12 is already running".
   */
  private async startAlone<W extends Workflow>(
    op: AnyOperation,
    workflowId: string,
    input: object,
    table: OperationTarget & { tableId: number },
    summary: string,
  ): Promise<WorkflowHandle<W>> {
    try {
      return await this.client.workflow.start<W>(op.workflowType, this.startOptions(op, workflowId, input, table, summary) as never);
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      throw new WrongStateError(`${/^[aeiou]/.test(op.name) ? 'an' : 'a'} ${op.name} of table ${table.tableId} is already running`);
    }
  }

  /** Whether the latest run of `workflowId` is running (a later run, after a continue-as-new). */
  private async isRunning(workflowId: string): Promise<boolean> {
    try {
      return (await this.client.workflow.getHandle(workflowId).describe()).status.name === 'RUNNING';
    } catch {
      return false;
    }
  }

  /** The table holding this name, or the right error: in the trash (with its id) or not found. */
  private async liveTable(name: TableName): Promise<TableRecord> {
    const table = await this.catalog.findByName(name);
    if (table) return table;
    const trashed = await this.catalog.findTrashed(name);
    if (trashed) throw new TableInTrashError(`table ${formatTableName(name)} is in the trash, id ${trashed.id}`);
    throw new TableNotFoundError(`table ${formatTableName(name)} does not exist`);
  }

  /**
   * Any table by id (not purged; with `tombstones`, purged too: `history` and `operations`), or by name the live one,
   * else the most recently trashed of that name.
   */
  private async anyTable(ref: TableRef, { tombstones = false } = {}): Promise<TableRecord> {
    if (ref.kind === 'id') {
      const table = await this.catalog.getTable(ref.id);
      if (!table) throw new TableNotFoundError(`table ${ref.id} does not exist${tombstones ? '' : ' or was purged'}`);
      if (!tombstones && table.state === 'PURGED') throw new TableNotFoundError(`table ${ref.id} does not exist or was purged`);
      return table;
    }
    const table = (await this.catalog.findByName(ref)) ?? (await this.catalog.findTrashed(ref));
    if (!table) {
      const name = formatTableName(ref);
      throw new TableNotFoundError(
        tombstones ? `no live or trashed table is named ${name} (a purged table answers by its id)` : `table ${name} does not exist`,
      );
    }
    return table;
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

/**
 * What the deployment's storage driver cannot make, refused before anything starts: a definition of columns for files,
 * and for PostgreSQL a shard's table name (`<name>_<shard>`) past its 63 characters, which PostgreSQL would cut short.
 */
function checkForDriver(driver: StorageDriverName, create: { table: TableName; shards: number; columns?: string; like?: string }): void {
  if (driver === 'files' && (create.columns !== undefined || create.like !== undefined)) {
    throw new InvalidInputError('columns and like are for the postgres storage driver; this deployment keeps its tables as files');
  }
  if (driver === 'postgres') checkSchemaFor(create.table);
  const longest = create.shards === 1 ? create.table.name : `${create.table.name}_${create.shards - 1}`;
  if (driver === 'postgres' && longest.length > 63) {
    throw new InvalidInputError(
      `name "${create.table.name}" is too long for ${create.shards} PostgreSQL shard tables (${longest}: over 63 characters)`,
    );
  }
}

/** PostgreSQL driver: a live table's namespace is its schema, which must not be one tablefate or PostgreSQL keeps for itself. */
function checkSchemaFor(table: TableName): void {
  const reason = reservedSchemaReason(table.namespace);
  if (reason) throw new InvalidInputError(`${formatTableName(table)}: ${reason}; a table's namespace must be a schema of live tables`);
}

/**
 * Whether a trash's answer is of a trash made after `read`, the table as the call found it before it started or
 * joined the run: every state change is stamped with its workflow's time, and a trash commits after the READY (or
 * TRASHING) it starts from. An answer dropped before that READY was stamped is of an earlier trash, which a recall
 * has undone since.
 */
function isTrashSince(answer: TableInfo, read: TableRecord): boolean {
  return answer.droppedAt === null || Date.parse(answer.droppedAt) >= read.updatedAt;
}

/** The error a closed run's result throws (how it ended), or `fallback` if it completed after all. */
/** The gRPC status (@grpc/grpc-js's `status.NOT_FOUND`) of an update-with-start whose run closed before accepting it. */
const GRPC_NOT_FOUND = 5;

async function closedRunError(run: WorkflowHandle, fallback: unknown): Promise<unknown> {
  try {
    await run.result();
    return fallback;
  } catch (err) {
    return err;
  }
}

const PROGRESS_POLL_MS = 300;

/** Asks the running undelete how far it is until it ends (or the call gives up), reporting each change. */
function reportProgress(
  handle: WorkflowHandle<typeof undeleteTable>,
  result: Promise<unknown>,
  onProgress: (progress: RecallProgress) => void,
  signal: AbortSignal,
): Promise<void> {
  return watchChanges(
    async () => {
      const progress = await handle.query(recallProgressQuery).catch(() => undefined);
      return progress && progress.shards > 0 ? progress : null;
    },
    (progress) => JSON.stringify(progress),
    result,
    onProgress,
    signal,
    { afterMs: 0, everyMs: PROGRESS_POLL_MS },
  );
}
