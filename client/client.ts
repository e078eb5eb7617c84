import type { Client, Connection } from '@temporalio/client';
import type { CatalogReader } from '../catalog/catalog';
import { catalogLocation, explainMissing, openCatalog } from '../catalog/open';
import { TASK_QUEUE } from '../domain/deployment';
import type { LeaseInfo } from '../domain/leases';
import type { OperationInfo } from '../domain/operation-runs';
import type { EffectiveSetting } from '../domain/settings';
import type { ReconcileReport } from '../domain/health';
import { backoffSchema, identitySchema, parseRequest } from '../domain/requests';
import type {
  AdoptRequest,
  CancelRequest,
  ConfigGetRequest,
  ConfigSetRequest,
  ConfigUnsetRequest,
  CreateRequest,
  DescribeRequest,
  HistoryRequest,
  HoldRequest,
  ListLeasesRequest,
  ListRequest,
  OperationsRequest,
  PurgeAllRequest,
  PurgeRequest,
  ReleaseRequest,
  RenameRequest,
  RetentionRequest,
  TrashRequest,
  TruncateRequest,
  UndeleteRequest,
} from '../domain/requests';
import type { TableInfo } from '../domain/table';
import { loadClientConfig, type ClientConfig } from '../config/client';
import { cancel, type CancelOutcome } from './cancel';
import type { ClientContext } from './context';
import { health } from './health';
import { history, operations, type TableHistory } from './history';
import { listLeases } from './leases';
import { defaultIdentity, type LeaseOptions, type TableFateClientOptions, type UndeleteOptions, type WriteOptions } from './options';
import { planPurgeAll, purgeAll, type PurgeAllProgress, type PurgeAllSummary } from './purge-all';
import { getSettings } from './settings';
import { describe, list } from './tables';
import { temporalClient } from './temporal';
import { CALLS, type CallName } from './call-table';
import { perform, type CallRecord, type ExecuteOptions, type Planned } from './calls';
import { DEFAULT_TIMEOUT_MS, timeoutOf, WriteRunner } from './writes';

export { DEFAULT_TIMEOUT_MS, defaultIdentity };
export type {
  CancelOutcome,
  LeaseOptions,
  PurgeAllProgress,
  PurgeAllSummary,
  TableFateClientOptions,
  TableHistory,
  UndeleteOptions,
  WriteOptions,
};

/**
 * The tablefate SDK. Every request is validated (zod) before anything starts, so bad input is an
 * InvalidInputError and changes nothing. Every failure is a TableFateError: domain failures as their classes,
 * an operation that failed otherwise as OperationFailedError, and a write that did not answer in time as
 * OperationTimeoutError (the operation goes on). A write with no worker polling the task queue fails within
 * 2 s (NoWorkerError), before anything starts. The worker check, the deadline and the error mapping are
 * WriteRunner's (writes.ts); every write that starts a run starts it and waits for its answer through startAndWait
 * (start.ts). This class is the facade: each concern is a module of its own (tables, trash, holds, leases, settings,
 * cancel, history, sizes, purge-all, health), given the ClientContext this class settles from its options.
 */
export class TableFateClient {
  private readonly ctx: ClientContext;
  private readonly owned: Array<() => Promise<void>> = [];

  constructor(opts: TableFateClientOptions) {
    const taskQueue = opts.taskQueue ?? TASK_QUEUE;
    // The Temporal client (and the WriteRunner on it) is made at its first use: a call the catalog answers alone
    // (config get, a listing without sizes) never loads @temporalio/client and gRPC, some 130 to 250 ms of a command.
    const given = opts.client;
    let client: Client | undefined;
    let writes: WriteRunner | undefined;
    const temporal = (): Client => (client ??= typeof given === 'function' ? given() : given);
    this.ctx = {
      get client() {
        return temporal();
      },
      get writes() {
        return (writes ??= new WriteRunner(temporal(), taskQueue));
      },
      catalog: opts.catalog,
      taskQueue,
      defaultTimeoutMs: timeoutOf(opts.defaultTimeoutMs, DEFAULT_TIMEOUT_MS, 'defaultTimeoutMs'),
      defaultTimeoutGiven: opts.defaultTimeoutMs !== undefined,
      lockWait: opts.lockWait === undefined ? undefined : parseRequest(backoffSchema, opts.lockWait),
      expiryRetry: opts.expiryRetry === undefined ? undefined : parseRequest(backoffSchema, opts.expiryRetry),
      storageDriver: opts.storageDriver ?? 'files',
      startedBy: parseRequest(identitySchema, opts.identity ?? defaultIdentity()),
    };
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
    // Lazy: requests are validated, and reads answered from the catalog, without waiting for the server, nor loading
    // its client: the connection is made (and @temporalio/client loaded) by the first call that needs the server.
    let connection: Connection | undefined;
    const temporal = (): Client => {
      const { Client, Connection } = temporalClient();
      connection = Connection.lazy({ address: config.temporalAddress, connectTimeout: '5s', ...config.temporalSecurity });
      return new Client({ connection, namespace: config.temporalNamespace });
    };
    const client = new TableFateClient({
      client: temporal,
      catalog,
      defaultTimeoutMs: opts.defaultTimeoutMs,
      storageDriver: config.storageDriver,
      identity: opts.identity,
    });
    client.owned.push(
      () => catalog.close(),
      async () => connection?.close(),
    );
    return client;
  }

  /** Creates a table, or returns it if the same create already happened; joins a create of it that is running. */
  create(request: CreateRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    return perform(this.ctx, CALLS.create, request, opts);
  }

  /**
   * PostgreSQL driver: registers the table that already exists as `<schema>.<table>` on `node` (node-0 by default) as a
   * READY tablefate table of one shard, so that drop, recall and purge protect it from then on; nothing of the table
   * changes. The same adopt again returns the table. A table tablefate manages already is TableExists; no such table
   * TableNotFound; a table a move could not carry (a view, a partitioned or temporary table, one the worker's role may
   * not alter) InvalidInput.
   */
  adopt(request: AdoptRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    return perform(this.ctx, CALLS.adopt, request, opts);
  }

  /**
   * Truncates a live table into the trash: its rows become a trash entry of their own (a new id, under the table's name:
   * recall it under a new name, hold it, purge it), and the table stays live and empty. Answers that entry, TRASHED.
   */
  truncate(request: TruncateRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    return perform(this.ctx, CALLS.truncate, request, opts);
  }

  /** Moves a live table to the trash; answers once it is TRASHED, while its expiry timer runs on. */
  trash(request: TrashRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    return perform(this.ctx, CALLS.trash, request, opts);
  }

  /**
   * Recalls a trashed table, by id or by name (the most recently trashed of that name), maybe renamed.
   * `onProgress` hears how many shards are back, each time that changes (Pegasus's recall progress).
   */
  undelete(request: UndeleteRequest, opts: UndeleteOptions = {}): Promise<TableInfo> {
    return perform(this.ctx, CALLS.undelete, request, opts);
  }

  /** Purges a trashed table now. Purging a table already purged returns its tombstone. */
  purge(request: PurgeRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    return perform(this.ctx, CALLS.purge, request, opts);
  }

  /**
   * Gives a READY table, named by id or by name, a new name or namespace; nothing else changes (not its id, not a
   * shard), and the old name is free at once. A table that already bears `newName` is answered as it is: nothing
   * is started (as a create of a table that exists returns it). NameTaken if another table holds the name.
   */
  rename(request: RenameRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    return perform(this.ctx, CALLS.rename, request, opts);
  }

  /**
   * Places a legal hold on a table (READY, or in the trash: by id, or by name the most recently trashed of that name
   * when no live table bears it): while held, nothing purges it, not its expiry, not the trash's space cap, not a purge
   * by hand (OnHold). Holding a table held for the same reason answers it as it is; for another reason is WrongState.
   */
  hold(request: HoldRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    return perform(this.ctx, CALLS.hold, request, opts);
  }

  /** Releases a table's legal hold; a trashed table whose expiry passed while it was held is purged right after. WrongState if not held. */
  release(request: ReleaseRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    return perform(this.ctx, CALLS.release, request, opts);
  }

  /**
   * Gives a trashed table (by id, or by name the most recently trashed of that name) a new retention, counted from its
   * drop time: its trash run moves the expiry in the catalog and re-arms its durable timer, so `describe` shows the new
   * expiry at once; an expiry already past purges the table now. 1 s to 10 years, as a drop's.
   */
  setRetention(request: RetentionRequest, opts: WriteOptions = {}): Promise<TableInfo> {
    return perform(this.ctx, CALLS.setRetention, request, opts);
  }

  /**
   * Takes a lease on a READY table (by id or name) for `ttlSeconds` (60 by default): while it lasts, a drop of the table
   * waits for it (DRAINING) until it is released or expires, up to the drop's drain timeout. A table that is not READY
   * (DRAINING: a drop waits already) is WrongState: schedule nothing on it.
   */
  acquireLease(table: string | number, opts: LeaseOptions = {}): Promise<LeaseInfo> {
    return perform(this.ctx, CALLS.acquireLease, { table, ttlSeconds: opts.ttlSeconds, holder: opts.holder }, opts);
  }

  /** Renews a lease for its ttl (or `ttlSeconds`) from now. An expired or released lease is LeaseNotFound: take a new one. */
  renewLease(leaseId: string, opts: Omit<LeaseOptions, 'holder'> = {}): Promise<LeaseInfo> {
    return perform(this.ctx, CALLS.renewLease, { leaseId, ttlSeconds: opts.ttlSeconds }, opts);
  }

  /** Releases a lease: a drop waiting for it goes on at once. LeaseNotFound if there is none by that id. */
  releaseLease(leaseId: string, opts: WriteOptions = {}): Promise<LeaseInfo> {
    return perform(this.ctx, CALLS.releaseLease, { leaseId }, opts);
  }

  /** The leases that have not expired, of every table or of one (by id or name), soonest to expire first. */
  listLeases(request: ListLeasesRequest = {}): Promise<LeaseInfo[]> {
    return listLeases(this.ctx, request);
  }

  /**
   * The runtime settings in force (every key, or one), globally or in a namespace, each with where its value comes
   * from: the namespace's own, the global one, or the default.
   */
  getSettings(request: ConfigGetRequest = {}): Promise<EffectiveSetting[]> {
    return getSettings(this.ctx, request);
  }

  /** Sets a runtime setting (globally, or for a namespace), read by every worker from its next operation on. */
  setSetting(request: ConfigSetRequest, opts: WriteOptions = {}): Promise<EffectiveSetting> {
    return perform(this.ctx, CALLS.setSetting, request, opts);
  }

  /** Unsets a runtime setting: the global value (for a namespace) or the default applies again. */
  unsetSetting(request: ConfigUnsetRequest, opts: WriteOptions = {}): Promise<EffectiveSetting> {
    return perform(this.ctx, CALLS.unsetSetting, request, opts);
  }

  /** What `purgeAll` would purge now, changing nothing: the trashed tables (of `namespace`), those held apart. */
  planPurgeAll(request: PurgeAllRequest = {}): Promise<{ purge: TableInfo[]; held: TableInfo[] }> {
    return planPurgeAll(this.ctx, request);
  }

  /**
   * Purges every trashed table (of `namespace`) that is not held: one purge operation per table, `concurrency` (4) at a
   * time. A table held, recalled or purged meanwhile is counted apart; a failure does not stop the others.
   */
  purgeAll(
    request: PurgeAllRequest = {},
    opts: WriteOptions & { onProgress?: (progress: PurgeAllProgress) => void } = {},
  ): Promise<PurgeAllSummary> {
    return purgeAll(this.ctx, request, opts);
  }

  /**
   * What the reconciler would do now (stuck tables, trash timers to re-arm, stale locks, orphan files), asked of a
   * worker: it reads the catalog and every storage node. Changes nothing. Empty findings: healthy.
   */
  health(opts: WriteOptions = {}): Promise<ReconcileReport> {
    return health(this.ctx, opts);
  }

  /**
   * Live tables, by id; with `includeTrashed`, trashed ones too (with their expiry). Tombstones are not listed.
   * A page at a time: `limit` tables at most, those after id `after` (the last id of the page before).
   */
  list(request: ListRequest = {}): Promise<TableInfo[]> {
    return list(this.ctx, request);
  }

  /** By name, a live table (a trashed one is TableInTrash); by id, any table, tombstones included. */
  describe(request: DescribeRequest): Promise<TableInfo> {
    return describe(this.ctx, request);
  }

  /**
   * The operations of this catalog, newest first, from Temporal's visibility (the runs' search attributes): of one table
   * (`table`: by id any table, a purged one included; by name the live one, else the most recently trashed), only the
   * running ones (`running`), at most `limit` (50). A running one has its `currentStep`, as its workflow says it (asked of
   * a worker; null when none answers). Needs the server, not a worker.
   */
  operations(request: OperationsRequest = {}): Promise<OperationInfo[]> {
    return operations(this.ctx, request);
  }

  /**
   * One table's life: the table as the catalog has it now (its state, its name, a tombstone's purge), and every run of
   * an operation on it (by its TableId), newest first, with when it started and closed, how it ended and who started
   * it. By id any table, a purged one included; by name the live one, else the most recently trashed. The runs are
   * those the server still keeps (the namespace's retention).
   */
  history(request: HistoryRequest): Promise<TableHistory> {
    return history(this.ctx, request);
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
  cancel(request: CancelRequest, opts: WriteOptions = {}): Promise<CancelOutcome> {
    return cancel(this.ctx, request, opts);
  }

  /**
   * A call's first half by its name (client/call-table.ts): its answer already, or the plan of the run that makes it.
   * For the contract's calls (contract/), which record the plan before they execute it; a service calls the methods above.
   * @internal
   */
  planCall(name: CallName, request: unknown): Promise<Planned<unknown, unknown>> {
    const call = CALLS[name] as CallRecord<unknown, unknown, unknown>;
    return Promise.resolve(call.plan(this.ctx, request));
  }

  /** A call's second half by its name: starts or joins the planned run and waits for its answer. @internal */
  executeCall(name: CallName, plan: unknown, opts: WriteOptions & ExecuteOptions): Promise<unknown> {
    const call = CALLS[name] as CallRecord<unknown, unknown, unknown>;
    return call.execute(this.ctx, plan, opts);
  }

  async close(): Promise<void> {
    for (const release of this.owned.splice(0)) await release();
  }
}
