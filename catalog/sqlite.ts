import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { TableName } from '../domain/names';
import { formatTableName } from '../domain/names';
import { NAME_HOLDING_STATES } from '../domain/states';
import type { TableRecord } from '../domain/table';
import { CatalogNotFoundError, NameTakenError, TableFateError, TableNotFoundError } from '../domain/errors';
import { lockFor } from '../domain/operations';
import type {
  AcquireResult,
  Catalog,
  IsOwnerClosed,
  ListOptions,
  LockHolder,
  LockOwner,
  PrepareCreateRequest,
  PrepareResult,
  StepKey,
  TransitionRequest,
} from './catalog';
import { LockLostError } from './lock-lost';
import {
  busyHolder,
  planPrepare,
  planTransition,
  sameOwner,
  sqlList,
  toHolder,
  toRecord,
  unwrap,
  type LockRow,
  type Outcome,
  type TableRow,
} from './rows';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS tables (
  id          INTEGER PRIMARY KEY,
  namespace   TEXT    NOT NULL,
  name        TEXT    NOT NULL,
  state       TEXT    NOT NULL,
  params      TEXT    NOT NULL,
  placement   TEXT    NOT NULL,
  created_at  INTEGER NOT NULL,
  dropped_at  INTEGER,
  expire_at   INTEGER,
  purged_at   INTEGER,
  updated_at  INTEGER NOT NULL
);
-- A name belongs to at most one table that holds it; the database, not the code, keeps that true.
CREATE UNIQUE INDEX IF NOT EXISTS tables_name_holder ON tables (namespace, name)
  WHERE state IN (${sqlList(NAME_HOLDING_STATES)});
CREATE INDEX IF NOT EXISTS tables_trash ON tables (namespace, name, dropped_at) WHERE state = 'TRASHED';
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS locks (
  resource          TEXT PRIMARY KEY,
  owner_workflow_id TEXT    NOT NULL,
  owner_run_id      TEXT    NOT NULL,
  since             INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS locks_owner ON locks (owner_run_id);
-- What each call of a workflow run answered, so that the call made again after a lost workflow task answers
-- the same without touching anything (see StepKey).
CREATE TABLE IF NOT EXISTS journal (
  run_id  TEXT    NOT NULL,
  step    TEXT    NOT NULL,
  outcome TEXT    NOT NULL,
  at      INTEGER NOT NULL,
  PRIMARY KEY (run_id, step)
);
CREATE INDEX IF NOT EXISTS journal_age ON journal (at);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
`;

// By its code, not its class: the driver's error class may come from another realm (jest's module sandboxes).
const isUniqueViolation = (err: unknown) =>
  typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'SQLITE_CONSTRAINT_UNIQUE';

/** The embedded catalog: one SQLite file in WAL mode, shared by the worker and the command line. */
export class SqliteCatalog implements Catalog {
  readonly id: string;
  private readonly db: Database.Database;
  private readonly firstTableId: number;

  /**
   * `firstTableId` seeds the id counter of a new catalog (default 1). `mustExist` is for readers (the SDK and
   * the command line): they never create a catalog, so a wrong path is an error rather than an empty catalog.
   */
  constructor(file: string, opts: { firstTableId?: number; mustExist?: boolean } = {}) {
    this.firstTableId = opts.firstTableId ?? 1;
    if (opts.mustExist && !fs.existsSync(file)) {
      throw new CatalogNotFoundError(`no tablefate catalog at ${file}; a worker creates it on its first start`, file);
    }
    fs.mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file);
    // The worker writes while the command line reads: WAL lets them, and the timeout waits out a writer.
    this.db.pragma('busy_timeout = 5000');
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.db.exec(SCHEMA);
    this.id = this.identity();
  }

  prepareCreate(req: PrepareCreateRequest, isOwnerClosed: IsOwnerClosed): Promise<PrepareResult> {
    return this.withTakeOver(isOwnerClosed, () =>
      this.journaled(
        req.step,
        (): PrepareResult => {
          this.assertHolds(req.nameLock, req.owner);
          const holder = this.nameHolder(req);
          if (!holder) {
            const id = this.nextId();
            const placement = req.place(id, req.params);
            this.db
              .prepare(
                `INSERT INTO tables (id, namespace, name, state, params, placement, created_at, updated_at)
               VALUES (?, ?, ?, 'CREATING', ?, ?, ?, ?)`,
              )
              .run(id, req.namespace, req.name, JSON.stringify(req.params), JSON.stringify(placement), req.now, req.now);
            // A new id: nobody can hold its lock yet.
            this.tryLock(lockFor.table(id), req.owner, req.now);
            return { outcome: 'prepared', table: this.mustGet(id), resumed: false };
          }
          if (planPrepare(holder, req) === 'exists') return { outcome: 'exists', table: holder };
          const lock = this.tryLock(lockFor.table(holder.id), req.owner, req.now);
          if (!lock.acquired) return { outcome: 'busy', holder: lock.holder };
          this.db.prepare(`UPDATE tables SET state = 'CREATING', updated_at = ? WHERE id = ?`).run(req.now, holder.id);
          return { outcome: 'prepared', table: this.mustGet(holder.id), resumed: true };
        },
        (result) => result.outcome !== 'busy',
      ),
    ).then(({ result }) => unwrap(result));
  }

  transition(req: TransitionRequest): Promise<TableRecord> {
    return this.run(() =>
      this.journaled(req.step, (): TableRecord => {
        const current = this.getRow(req.tableId);
        if (!current) throw new TableNotFoundError(`table ${req.tableId} does not exist`);
        this.assertHolds(lockFor.table(req.tableId), req.owner);
        const plan = planTransition(current, req);
        if (plan.made) return plan.table;
        const { name: wanted, columns: set } = plan;
        try {
          this.db
            .prepare(
              `UPDATE tables SET state = ?, namespace = ?, name = ?, dropped_at = ?, expire_at = ?, purged_at = ?,
                 updated_at = ? WHERE id = ? AND state = ?`,
            )
            .run(req.to, wanted.namespace, wanted.name, set.droppedAt, set.expireAt, set.purgedAt, req.now, req.tableId, current.state);
        } catch (err) {
          if (isUniqueViolation(err)) {
            const other = this.nameHolder(wanted);
            throw new NameTakenError(`the name ${formatTableName(wanted)} is taken by table ${other?.id ?? '?'}; give a new name`);
          }
          throw err;
        }
        return this.mustGet(req.tableId);
      }),
    ).then(unwrap);
  }

  getTable(tableId: number, step?: StepKey): Promise<TableRecord | undefined> {
    if (!step) return Promise.resolve(this.getRow(tableId));
    return this.run(() => this.journaled(step, () => this.getRow(tableId) ?? null)).then((o) => unwrap(o) ?? undefined);
  }

  findByName(name: TableName): Promise<TableRecord | undefined> {
    return Promise.resolve(this.nameHolder(name));
  }

  findTrashed(name: TableName): Promise<TableRecord | undefined> {
    const row = this.db
      .prepare(
        `SELECT * FROM tables WHERE namespace = ? AND name = ? AND state = 'TRASHED'
         ORDER BY dropped_at DESC, id DESC LIMIT 1`,
      )
      .get(name.namespace, name.name) as TableRow | undefined;
    return Promise.resolve(row && toRecord(row));
  }

  listTables(opts: ListOptions): Promise<TableRecord[]> {
    const hidden = opts.includeTrashed ? ['PURGED'] : ['TRASHED', 'PURGING', 'PURGED'];
    const rows = this.db
      .prepare(`SELECT * FROM tables WHERE state NOT IN (${sqlList(hidden)}) AND id > ? ORDER BY id LIMIT ?`)
      .all(opts.afterId ?? 0, opts.limit ?? -1) as TableRow[];
    return Promise.resolve(rows.map(toRecord));
  }

  acquireLock(resource: string, owner: LockOwner, now: number, isOwnerClosed: IsOwnerClosed, step?: StepKey): Promise<AcquireResult> {
    // A journaled acquire answers "acquired" even if the run has since released the lock (its later calls
    // are journaled too): re-taking it would let a run that already finished hold a table again.
    return this.withTakeOver(isOwnerClosed, () =>
      this.journaled(
        step,
        (): AcquireResult => this.tryLock(resource, owner, now),
        (r) => r.acquired,
      ),
    ).then(({ result, tookOverFrom }) => {
      const acquired = unwrap(result);
      return acquired.acquired ? { acquired: true, tookOverFrom } : acquired;
    });
  }

  holdsLock(resource: string, owner: LockOwner): Promise<boolean> {
    const row = this.lockRow(resource);
    return Promise.resolve(row !== undefined && sameOwner(toHolder(row), owner));
  }

  stepOutcome(step: StepKey): Promise<Outcome<unknown> | undefined> {
    return Promise.resolve(this.journalEntry(step));
  }

  recordStep(step: StepKey, outcome: Outcome<unknown>): Promise<void> {
    this.db
      .prepare(`INSERT INTO journal (run_id, step, outcome, at) VALUES (?, ?, ?, ?) ON CONFLICT (run_id, step) DO NOTHING`)
      .run(step.runId, step.step, JSON.stringify(outcome), Date.now());
    return Promise.resolve();
  }

  releaseLocks(owner: LockOwner): Promise<void> {
    this.db.prepare(`DELETE FROM locks WHERE owner_run_id = ? AND owner_workflow_id = ?`).run(owner.runId, owner.workflowId);
    return Promise.resolve();
  }

  listLocks(): Promise<LockHolder[]> {
    const rows = this.db.prepare(`SELECT * FROM locks ORDER BY resource`).all() as LockRow[];
    return Promise.resolve(rows.map(toHolder));
  }

  pruneJournal(before: number): Promise<number> {
    return Promise.resolve(this.db.prepare(`DELETE FROM journal WHERE at < ?`).run(before).changes);
  }

  close(): Promise<void> {
    this.db.close();
    return Promise.resolve();
  }

  /** Runs `fn` in a write transaction (taken at once, so two writers never deadlock on upgrade). */
  private run<T>(fn: () => T): Promise<T> {
    return Promise.resolve().then(() => this.db.transaction(fn).immediate());
  }

  /**
   * Runs `fn` once per step key: inside the caller's transaction, a key seen before returns its journaled
   * outcome (the value, or the same domain error) without running `fn`; otherwise `fn` runs and its outcome is
   * journaled with its changes, atomically. `keep` says which values are final (a busy lock is not). A domain
   * error comes back as an outcome, not thrown, so that the transaction keeps its journal entry: the caller
   * unwraps it once the transaction has committed.
   */
  private journaled<T>(step: StepKey | undefined, fn: () => T, keep: (value: T) => boolean = () => true): Outcome<T> {
    if (!step) return { value: fn() };
    const seen = this.journalEntry(step);
    if (seen) return seen as Outcome<T>;
    let outcome: Outcome<T>;
    try {
      // A savepoint: a domain error undoes what fn did, and is then journaled like a value.
      outcome = { value: this.db.transaction(fn)() };
    } catch (err) {
      if (!(err instanceof TableFateError)) throw err;
      outcome = { error: { type: err.type, message: err.message } };
    }
    if (!('value' in outcome) || keep(outcome.value)) {
      this.db
        .prepare(`INSERT INTO journal (run_id, step, outcome, at) VALUES (?, ?, ?, ?)`)
        .run(step.runId, step.step, JSON.stringify(outcome), Date.now());
    }
    return outcome;
  }

  private journalEntry(step: StepKey): Outcome<unknown> | undefined {
    const seen = this.db.prepare(`SELECT outcome FROM journal WHERE run_id = ? AND step = ?`).get(step.runId, step.step) as
      { outcome: string } | undefined;
    return seen && (JSON.parse(seen.outcome) as Outcome<unknown>);
  }

  /**
   * Runs `attempt` (a transaction that may find a lock busy) and, while the holder it reports has closed
   * without releasing (a terminated workflow, say), takes that lock over and tries again. The holder's status
   * is asked outside any transaction: it is a call to the Temporal server.
   */
  private async withTakeOver<T extends object>(
    isOwnerClosed: IsOwnerClosed,
    attempt: () => Outcome<T>,
  ): Promise<{ result: Outcome<T>; tookOverFrom: LockHolder | null }> {
    let tookOverFrom: LockHolder | null = null;
    for (;;) {
      const result = await this.run(attempt);
      const holder = busyHolder(result);
      if (!holder || !(await isOwnerClosed(holder))) return { result, tookOverFrom };
      // Unless it changed hands meanwhile: then the next attempt sees the new holder.
      const freed = this.db
        .prepare(`DELETE FROM locks WHERE resource = ? AND owner_workflow_id = ? AND owner_run_id = ?`)
        .run(holder.resource, holder.workflowId, holder.runId);
      if (freed.changes === 1) tookOverFrom = holder;
    }
  }

  /** Takes `resource` for `owner` if it is free or already theirs; inside the caller's transaction. */
  private tryLock(resource: string, owner: LockOwner, now: number): AcquireResult {
    const row = this.lockRow(resource);
    if (!row) {
      this.db
        .prepare(`INSERT INTO locks (resource, owner_workflow_id, owner_run_id, since) VALUES (?, ?, ?, ?)`)
        .run(resource, owner.workflowId, owner.runId, now);
      return { acquired: true, tookOverFrom: null };
    }
    const holder = toHolder(row);
    return sameOwner(holder, owner) ? { acquired: true, tookOverFrom: null } : { acquired: false, holder };
  }

  private assertHolds(resource: string, owner: LockOwner): void {
    const row = this.lockRow(resource);
    if (!row || !sameOwner(toHolder(row), owner)) {
      throw new LockLostError(
        `${owner.workflowId} does not hold the lock on ${resource}` + (row ? ` (held by ${row.owner_workflow_id})` : ''),
      );
    }
  }

  private lockRow(resource: string): LockRow | undefined {
    return this.db.prepare(`SELECT * FROM locks WHERE resource = ?`).get(resource) as LockRow | undefined;
  }

  /** The catalog's identity: made once, with the catalog, and kept. */
  private identity(): string {
    this.db.prepare(`INSERT OR IGNORE INTO meta (key, value) VALUES ('catalog_id', ?)`).run(randomBytes(4).toString('hex'));
    return (this.db.prepare(`SELECT value FROM meta WHERE key = 'catalog_id'`).get() as { value: string }).value;
  }

  private nextId(): number {
    const row = this.db
      .prepare(
        `INSERT INTO counters (name, value) VALUES ('table_id', ?)
         ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value`,
      )
      .get(this.firstTableId) as { value: number };
    return row.value;
  }

  private nameHolder(name: TableName): TableRecord | undefined {
    const row = this.db
      .prepare(`SELECT * FROM tables WHERE namespace = ? AND name = ? AND state IN (${sqlList(NAME_HOLDING_STATES)})`)
      .get(name.namespace, name.name) as TableRow | undefined;
    return row && toRecord(row);
  }

  private getRow(tableId: number): TableRecord | undefined {
    const row = this.db.prepare(`SELECT * FROM tables WHERE id = ?`).get(tableId) as TableRow | undefined;
    return row && toRecord(row);
  }

  private mustGet(tableId: number): TableRecord {
    const table = this.getRow(tableId);
    if (!table) throw new Error(`table ${tableId} vanished inside its own transaction`);
    return table;
  }
}
