import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { CatalogNotFoundError } from '../domain/errors';
import type { TableName } from '../domain/names';
import { NAME_HOLDING_STATES, type TableState } from '../domain/states';
import type { TableRecord } from '../domain/table';
import type { ListOptions, LockHolder, LockOwner, Outcome, StepKey } from './catalog';
import { TransactionalCatalog } from './rules';
import {
  hiddenStates,
  leaseRowValues,
  settingRowValues,
  sqlList,
  TABLE_COLUMNS,
  toLease,
  toSetting,
  type LeaseRow,
  type SettingDbRow,
  toHolder,
  toRecord,
  type LockRow,
  type TableRow,
  tableRowValues,
  tableUpdateValues,
  UPDATED_TABLE_COLUMNS,
} from './rows';
import { SerialQueue } from './serial-queue';
import { checkSchema, migrate } from './sqlite-schema';
import type { CatalogTx } from './tx';
import type { Lease } from '../domain/leases';
import type { SettingKey, SettingRow } from '../domain/settings';

/** Inlined (constants, not input), as the partial unique index has them. */
const NAME_HOLDING = sqlList(NAME_HOLDING_STATES);

// By its code, not its class: the driver's error class may come from another realm (jest's module sandboxes).
const isUniqueViolation = (err: unknown) =>
  typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'SQLITE_CONSTRAINT_UNIQUE';

/**
 * The queue of each database file open in this process, shared by every SqliteCatalog on it (see runTransaction),
 * with how many catalogs use it.
 */
const queues = new Map<string, { queue: SerialQueue; users: number }>();

/**
 * The embedded catalog: one SQLite file in WAL mode, shared by the worker and the command line.
 *
 * A transaction is an explicit BEGIN IMMEDIATE ... COMMIT around the catalog's rules (rules.ts), which are
 * asynchronous, written once for this store and PostgreSQL. better-sqlite3's own transactions cannot span an
 * await, and the rules cannot be synchronous for PostgreSQL; so while one is open no other call may run on a
 * connection to this file in this process, or it would join the open transaction (on this connection) or wait
 * on its write lock with the event loop blocked (on another connection to the same file). A queue per file in
 * the process runs every call, read or write, one at a time. Each primitive here is synchronous, so a transaction
 * holds the queue and the file's write lock for a few microtasks, never across I/O; other processes wait for it
 * (busy_timeout) as they did when transactions were synchronous. The queue costs nothing SQLite did not already
 * impose (one writer at a time); the other way, rules generic over synchronous and asynchronous stores, would
 * need them written as generators, a style nothing else here uses.
 */

/** A table row's compare-and-set (rows.ts says which columns, in which order). */
const UPDATE_TABLE = `UPDATE tables SET ${UPDATED_TABLE_COLUMNS.map((c) => `${c} = ?`).join(', ')} WHERE id = ? AND state = ?`;

export class SqliteCatalog extends TransactionalCatalog {
  readonly id: string;
  private readonly db: Database.Database;
  private readonly tx: SqliteTx;
  private readonly queueKey: string;
  private readonly queue: SerialQueue;

  /**
   * `firstTableId` seeds the id counter of a new catalog (default 1). `mustExist` is for readers (the SDK and
   * the command line): they never create nor migrate a catalog, so a wrong path is an error rather than an
   * empty catalog, and a catalog behind this code an error too.
   */
  constructor(file: string, opts: { firstTableId?: number; mustExist?: boolean } = {}) {
    super();
    if (opts.mustExist && !fs.existsSync(file)) throw notFound(file);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file);
    try {
      // The worker writes while the command line reads: WAL lets them, and the timeout waits out a writer.
      this.db.pragma('busy_timeout = 5000');
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = NORMAL');
      if (!opts.mustExist) migrate(this.db);
      else if (!checkSchema(this.db)) throw notFound(file);
      const id = identity(this.db, opts.mustExist ?? false);
      if (id === undefined) throw notFound(file);
      this.id = id;
    } catch (err) {
      this.db.close();
      throw err;
    }
    this.tx = new SqliteTx(this.db, opts.firstTableId ?? 1);
    this.queueKey = fs.realpathSync(file);
    const shared = queues.get(this.queueKey) ?? { queue: new SerialQueue(), users: 0 };
    shared.users++;
    queues.set(this.queueKey, shared);
    this.queue = shared.queue;
  }

  close(): Promise<void> {
    return this.queue.run(() => {
      if (this.db.open) {
        this.db.close();
        const shared = queues.get(this.queueKey);
        if (shared && --shared.users === 0) queues.delete(this.queueKey);
      }
      return Promise.resolve();
    });
  }

  /** A write transaction, taken at once (IMMEDIATE), so that two writers never deadlock on upgrade. */
  protected runTransaction<T>(fn: (tx: CatalogTx) => Promise<T>): Promise<T> {
    return this.queue.run(async () => {
      this.db.exec('BEGIN IMMEDIATE');
      try {
        const result = await fn(this.tx);
        this.db.exec('COMMIT');
        return result;
      } catch (err) {
        // Some errors (a full disk) end the transaction themselves.
        if (this.db.inTransaction) this.db.exec('ROLLBACK');
        throw err;
      }
    });
  }

  protected runOutside<T>(fn: (tx: CatalogTx) => Promise<T>): Promise<T> {
    return this.queue.run(() => fn(this.tx));
  }
}

/**
 * CatalogTx on one better-sqlite3 connection: each primitive one synchronous statement or two. They are async
 * only so that their result, or their error, comes back as a promise, as CatalogTx has it.
 */
/* eslint-disable @typescript-eslint/require-await */
class SqliteTx implements CatalogTx {
  private readonly statements = new Map<string, Database.Statement>();

  constructor(
    private readonly db: Database.Database,
    private readonly firstTableId: number,
  ) {}

  async tableById(id: number): Promise<TableRecord | undefined> {
    return this.table(`SELECT * FROM tables WHERE id = ?`, id);
  }

  async nameHolder(name: TableName): Promise<TableRecord | undefined> {
    return this.table(`SELECT * FROM tables WHERE namespace = ? AND name = ? AND state IN (${NAME_HOLDING})`, name.namespace, name.name);
  }

  async newestTrashed(name: TableName): Promise<TableRecord | undefined> {
    return this.table(
      `SELECT * FROM tables WHERE namespace = ? AND name = ? AND state = 'TRASHED' ORDER BY dropped_at DESC, id DESC LIMIT 1`,
      name.namespace,
      name.name,
    );
  }

  async listTables(opts: ListOptions): Promise<TableRecord[]> {
    const hidden = sqlList(hiddenStates(opts.includeTrashed));
    const rows = this.statement(`SELECT * FROM tables WHERE state NOT IN (${hidden}) AND id > ? ORDER BY id LIMIT ?`).all(
      opts.afterId ?? 0,
      opts.limit ?? -1,
    ) as TableRow[];
    return rows.map(toRecord);
  }

  async countByState(): Promise<Partial<Record<TableState, number>>> {
    const rows = this.statement(`SELECT state, count(*) AS n FROM tables GROUP BY state`).all() as Array<{ state: TableState; n: number }>;
    return Object.fromEntries(rows.map((row) => [row.state, row.n]));
  }

  async nextTableId(): Promise<number> {
    const row = this.statement(
      `INSERT INTO counters (name, value) VALUES ('table_id', ?) ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value`,
    ).get(this.firstTableId) as { value: number };
    return row.value;
  }

  async insertTable(t: TableRecord): Promise<boolean> {
    const inserted = this.unlessNameTaken(
      `INSERT INTO tables (${TABLE_COLUMNS.join(', ')}) VALUES (${TABLE_COLUMNS.map(() => '?').join(', ')})`,
      tableRowValues(t),
    );
    return inserted !== undefined;
  }

  async updateTable(expected: TableState, t: TableRecord): Promise<'updated' | 'missed' | 'nameTaken'> {
    const updated = this.unlessNameTaken(UPDATE_TABLE, tableUpdateValues(t, expected));
    return updated === undefined ? 'nameTaken' : updated === 1 ? 'updated' : 'missed';
  }

  async lockHolder(resource: string): Promise<LockHolder | undefined> {
    const row = this.statement(`SELECT * FROM locks WHERE resource = ?`).get(resource) as LockRow | undefined;
    return row && toHolder(row);
  }

  async insertLock(resource: string, owner: LockOwner, since: number): Promise<boolean> {
    return (
      this.run(
        `INSERT INTO locks (resource, owner_workflow_id, owner_run_id, since) VALUES (?, ?, ?, ?) ON CONFLICT (resource) DO NOTHING`,
        resource,
        owner.workflowId,
        owner.runId,
        since,
      ) === 1
    );
  }

  async deleteLock(holder: LockHolder): Promise<boolean> {
    const sql = `DELETE FROM locks WHERE resource = ? AND owner_workflow_id = ? AND owner_run_id = ?`;
    return this.run(sql, holder.resource, holder.workflowId, holder.runId) === 1;
  }

  async deleteLocksOf(owner: LockOwner): Promise<void> {
    this.run(`DELETE FROM locks WHERE owner_run_id = ? AND owner_workflow_id = ?`, owner.runId, owner.workflowId);
  }

  async listLocks(): Promise<LockHolder[]> {
    return (this.statement(`SELECT * FROM locks ORDER BY resource`).all() as LockRow[]).map(toHolder);
  }

  /** Writers run one at a time (BEGIN IMMEDIATE): reading the journal is claim enough. */
  async claimStep(step: StepKey): Promise<Outcome<unknown> | undefined> {
    return this.stepOutcome(step);
  }

  async settleStep(step: StepKey, outcome: Outcome<unknown> | undefined): Promise<void> {
    if (outcome)
      this.run(
        `INSERT INTO journal (run_id, step, outcome, at) VALUES (?, ?, ?, ?)`,
        step.runId,
        step.step,
        JSON.stringify(outcome),
        Date.now(),
      );
  }

  async stepOutcome(step: StepKey): Promise<Outcome<unknown> | undefined> {
    const seen = this.statement(`SELECT outcome FROM journal WHERE run_id = ? AND step = ?`).get(step.runId, step.step) as
      { outcome: string } | undefined;
    return seen && (JSON.parse(seen.outcome) as Outcome<unknown>);
  }

  async recordStep(step: StepKey, outcome: Outcome<unknown>): Promise<void> {
    const sql = `INSERT INTO journal (run_id, step, outcome, at) VALUES (?, ?, ?, ?) ON CONFLICT (run_id, step) DO NOTHING`;
    this.run(sql, step.runId, step.step, JSON.stringify(outcome), Date.now());
  }

  async pruneJournal(before: number): Promise<number> {
    return this.run(`DELETE FROM journal WHERE at < ?`, before);
  }

  async settingRows(): Promise<SettingRow[]> {
    return (this.statement(`SELECT * FROM settings ORDER BY key, namespace`).all() as SettingDbRow[]).map(toSetting);
  }

  async upsertSetting(row: SettingRow): Promise<void> {
    this.run(
      `INSERT INTO settings (key, namespace, value, updated_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (key, namespace) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
      ...settingRowValues(row),
    );
  }

  async deleteSetting(key: SettingKey, namespace: string | null): Promise<boolean> {
    return this.run(`DELETE FROM settings WHERE key = ? AND namespace = ?`, key, namespace ?? '') === 1;
  }

  async liveLeases(opts: { tableId?: number; now: number }): Promise<Lease[]> {
    const rows = (
      opts.tableId === undefined
        ? this.statement(`SELECT * FROM leases WHERE expires_at > ? ORDER BY expires_at, id`).all(opts.now)
        : this.statement(`SELECT * FROM leases WHERE table_id = ? AND expires_at > ? ORDER BY expires_at, id`).all(opts.tableId, opts.now)
    ) as LeaseRow[];
    return rows.map(toLease);
  }

  async leaseById(id: string): Promise<Lease | undefined> {
    const row = this.statement(`SELECT * FROM leases WHERE id = ?`).get(id) as LeaseRow | undefined;
    return row && toLease(row);
  }

  async insertLease(lease: Lease): Promise<void> {
    this.run(
      `INSERT INTO leases (id, table_id, holder, ttl_seconds, acquired_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
      ...leaseRowValues(lease),
    );
  }

  async renewLease(id: string, ttlSeconds: number, expiresAt: number): Promise<void> {
    this.run(`UPDATE leases SET ttl_seconds = ?, expires_at = ? WHERE id = ?`, ttlSeconds, expiresAt, id);
  }

  async deleteLease(id: string): Promise<boolean> {
    return this.run(`DELETE FROM leases WHERE id = ?`, id) === 1;
  }

  async pruneLeases(before: number): Promise<number> {
    return this.run(`DELETE FROM leases WHERE expires_at < ?`, before);
  }

  async savepoint(name: string): Promise<void> {
    this.db.exec(`SAVEPOINT ${name}`);
  }

  async releaseSavepoint(name: string): Promise<void> {
    this.db.exec(`RELEASE SAVEPOINT ${name}`);
  }

  async rollbackToSavepoint(name: string): Promise<void> {
    this.db.exec(`ROLLBACK TO SAVEPOINT ${name}`);
  }

  /** A statement, prepared once per connection. */
  private statement(sql: string): Database.Statement {
    let prepared = this.statements.get(sql);
    if (!prepared) {
      prepared = this.db.prepare(sql);
      this.statements.set(sql, prepared);
    }
    return prepared;
  }

  private table(sql: string, ...params: unknown[]): TableRecord | undefined {
    const row = this.statement(sql).get(...params) as TableRow | undefined;
    return row && toRecord(row);
  }

  /** How many rows the statement changed. */
  private run(sql: string, ...params: unknown[]): number {
    return this.statement(sql).run(...params).changes;
  }

  /** How many rows the statement changed, or undefined if it would have given a name to two tables (SQLite undoes just the statement). */
  private unlessNameTaken(sql: string, params: unknown[]): number | undefined {
    try {
      return this.run(sql, ...params);
    } catch (err) {
      if (isUniqueViolation(err)) return undefined;
      throw err;
    }
  }
}
/* eslint-enable @typescript-eslint/require-await */

/**
 * The catalog's identity: made once, with the catalog, and kept; undefined if a reader finds none. Read first,
 * so that opening a catalog that has one writes nothing.
 */
function identity(db: Database.Database, mustExist: boolean): string | undefined {
  const read = () => (db.prepare(`SELECT value FROM meta WHERE key = 'catalog_id'`).get() as { value: string } | undefined)?.value;
  const found = read();
  if (found !== undefined || mustExist) return found;
  db.prepare(`INSERT OR IGNORE INTO meta (key, value) VALUES ('catalog_id', ?)`).run(randomBytes(4).toString('hex'));
  return read();
}

function notFound(file: string): CatalogNotFoundError {
  return new CatalogNotFoundError(`no tablefate catalog at ${file}; a worker creates it on its first start`, file);
}
