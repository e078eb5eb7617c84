import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import type { TableName } from '../domain/names';
import { formatTableName } from '../domain/names';
import { NAME_HOLDING_STATES, canTransition, type TableState } from '../domain/states';
import { sameCreateParams, type TableRecord } from '../domain/table';
import { NameTakenError, TableExistsError, TableNotFoundError, WrongStateError } from '../domain/errors';
import type {
  AcquireResult,
  Catalog,
  LockGuard,
  LockHolder,
  LockOwner,
  PrepareCreateRequest,
  PrepareResult,
  TransitionRequest,
} from './catalog';
import { LockLostError } from './lock-lost';

const sqlList = (states: readonly string[]) => states.map((s) => `'${s}'`).join(', ');

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
`;

interface TableRow {
  id: number;
  namespace: string;
  name: string;
  state: TableState;
  params: string;
  placement: string;
  created_at: number;
  dropped_at: number | null;
  expire_at: number | null;
  purged_at: number | null;
  updated_at: number;
}

interface LockRow {
  resource: string;
  owner_workflow_id: string;
  owner_run_id: string;
  since: number;
}

function toRecord(row: TableRow): TableRecord {
  return {
    id: row.id,
    namespace: row.namespace,
    name: row.name,
    state: row.state,
    params: JSON.parse(row.params) as TableRecord['params'],
    placement: JSON.parse(row.placement) as TableRecord['placement'],
    createdAt: row.created_at,
    droppedAt: row.dropped_at,
    expireAt: row.expire_at,
    purgedAt: row.purged_at,
    updatedAt: row.updated_at,
  };
}

function toHolder(row: LockRow): LockHolder {
  return { resource: row.resource, workflowId: row.owner_workflow_id, runId: row.owner_run_id, since: row.since };
}

const sameOwner = (a: LockOwner, b: LockOwner) => a.workflowId === b.workflowId && a.runId === b.runId;

// By its code, not its class: the driver's error class may come from another realm (jest's module sandboxes).
const isUniqueViolation = (err: unknown) =>
  typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'SQLITE_CONSTRAINT_UNIQUE';

/** The embedded catalog: one SQLite file in WAL mode, shared by the worker and the command line. */
export class SqliteCatalog implements Catalog {
  private readonly db: Database.Database;
  private readonly firstTableId: number;

  /**
   * `firstTableId` seeds the id counter of a new catalog (default 1). Workflow ids derive from table ids, so
   * catalogs that share one Temporal namespace must not hand out the same ids; the tests use it for that.
   */
  constructor(file: string, opts: { firstTableId?: number } = {}) {
    this.firstTableId = opts.firstTableId ?? 1;
    fs.mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file);
    // The worker writes while the command line reads: WAL lets them, and the timeout waits out a writer.
    this.db.pragma('busy_timeout = 5000');
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.db.exec(SCHEMA);
  }

  prepareCreate(req: PrepareCreateRequest): Promise<PrepareResult> {
    return this.inTransaction(() => {
      this.assertHolds(req.guard);
      const holder = this.nameHolder(req);
      const label = formatTableName(req);
      if (!holder) {
        const id = this.nextId();
        const placement = req.place(id, req.params);
        this.db
          .prepare(
            `INSERT INTO tables (id, namespace, name, state, params, placement, created_at, updated_at)
             VALUES (?, ?, ?, 'CREATING', ?, ?, ?, ?)`,
          )
          .run(id, req.namespace, req.name, JSON.stringify(req.params), JSON.stringify(placement), req.now, req.now);
        return { outcome: 'prepared', table: this.mustGet(id), resumed: false };
      }
      const sameParams = sameCreateParams(holder.params, req.params);
      switch (holder.state) {
        case 'READY':
          if (sameParams) return { outcome: 'exists', table: holder };
          throw new TableExistsError(
            `table ${label} exists (id ${holder.id}) with ${holder.params.shards} shards, not ${req.params.shards}`,
          );
        case 'CREATING':
        case 'CREATE_FAILED':
          if (!sameParams) {
            throw new TableExistsError(
              `table ${label} has a prepared create (id ${holder.id}, ${holder.params.shards} shards, ${holder.state}); ` +
                `repeat that create to finish it`,
            );
          }
          this.db
            .prepare(`UPDATE tables SET state = 'CREATING', updated_at = ? WHERE id = ?`)
            .run(req.now, holder.id);
          return { outcome: 'prepared', table: this.mustGet(holder.id), resumed: true };
        default:
          throw new TableExistsError(`the name ${label} is held by table ${holder.id}, which is ${holder.state}`);
      }
    });
  }

  transition(req: TransitionRequest): Promise<TableRecord> {
    return this.inTransaction(() => {
      const current = this.getRow(req.tableId);
      if (!current) throw new TableNotFoundError(`table ${req.tableId} does not exist`);
      this.assertHolds(req.guard);
      // Already made: a retry of our own step, or an earlier run of this operation that stopped half way and
      // that this one resumes. Either way it must be the same move, under the same name.
      if (current.state === req.to) {
        const wanted = { namespace: req.set?.namespace ?? current.namespace, name: req.set?.name ?? current.name };
        if (wanted.namespace === current.namespace && wanted.name === current.name) return current;
        throw new WrongStateError(
          `table ${req.tableId} is already ${current.state} as ${formatTableName(current)}, not ${formatTableName(wanted)}`,
        );
      }
      if (!req.from.includes(current.state) || !canTransition(current.state, req.to)) {
        throw new WrongStateError(
          `table ${req.tableId} is ${current.state}; expected ${req.from.join(' or ')} to move it to ${req.to}`,
        );
      }
      const set = { ...req.set };
      try {
        this.db
          .prepare(
            `UPDATE tables SET state = ?, namespace = ?, name = ?, dropped_at = ?, expire_at = ?, purged_at = ?,
               updated_at = ? WHERE id = ? AND state = ?`,
          )
          .run(
            req.to,
            set.namespace ?? current.namespace,
            set.name ?? current.name,
            set.droppedAt !== undefined ? set.droppedAt : current.droppedAt,
            set.expireAt !== undefined ? set.expireAt : current.expireAt,
            set.purgedAt !== undefined ? set.purgedAt : current.purgedAt,
            req.now,
            req.tableId,
            current.state,
          );
      } catch (err) {
        if (isUniqueViolation(err)) {
          const wanted = { namespace: set.namespace ?? current.namespace, name: set.name ?? current.name };
          const other = this.nameHolder(wanted);
          throw new NameTakenError(
            `the name ${formatTableName(wanted)} is taken by table ${other?.id ?? '?'}; give a new name`,
          );
        }
        throw err;
      }
      return this.mustGet(req.tableId);
    });
  }

  getTable(tableId: number): Promise<TableRecord | undefined> {
    return Promise.resolve(this.getRow(tableId));
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

  listTables(opts: { includeTrashed: boolean }): Promise<TableRecord[]> {
    const hidden = opts.includeTrashed ? ['PURGED'] : ['TRASHED', 'PURGING', 'PURGED'];
    const rows = this.db
      .prepare(`SELECT * FROM tables WHERE state NOT IN (${sqlList(hidden)}) ORDER BY id`)
      .all() as TableRow[];
    return Promise.resolve(rows.map(toRecord));
  }

  async acquireLock(
    resource: string,
    owner: LockOwner,
    now: number,
    isOwnerClosed: (holder: LockHolder) => Promise<boolean>,
  ): Promise<AcquireResult> {
    const first = this.db.transaction((): AcquireResult => {
      const row = this.db.prepare(`SELECT * FROM locks WHERE resource = ?`).get(resource) as LockRow | undefined;
      if (!row) {
        this.db
          .prepare(`INSERT INTO locks (resource, owner_workflow_id, owner_run_id, since) VALUES (?, ?, ?, ?)`)
          .run(resource, owner.workflowId, owner.runId, now);
        return { acquired: true, tookOverFrom: null };
      }
      const holder = toHolder(row);
      return sameOwner(holder, owner) ? { acquired: true, tookOverFrom: null } : { acquired: false, holder };
    }).immediate();
    if (first.acquired || !(await isOwnerClosed(first.holder))) return first;
    // The holder's workflow has closed without releasing: take the lock over, unless it changed hands meanwhile.
    const { holder } = first;
    const taken = this.db
      .prepare(
        `UPDATE locks SET owner_workflow_id = ?, owner_run_id = ?, since = ?
         WHERE resource = ? AND owner_workflow_id = ? AND owner_run_id = ?`,
      )
      .run(owner.workflowId, owner.runId, now, resource, holder.workflowId, holder.runId);
    if (taken.changes === 1) return { acquired: true, tookOverFrom: holder };
    const row = this.db.prepare(`SELECT * FROM locks WHERE resource = ?`).get(resource) as LockRow | undefined;
    return row ? { acquired: false, holder: toHolder(row) } : this.acquireLock(resource, owner, now, isOwnerClosed);
  }

  releaseLock(resource: string, owner: LockOwner): Promise<void> {
    this.db
      .prepare(`DELETE FROM locks WHERE resource = ? AND owner_workflow_id = ? AND owner_run_id = ?`)
      .run(resource, owner.workflowId, owner.runId);
    return Promise.resolve();
  }

  listLocks(): Promise<LockHolder[]> {
    const rows = this.db.prepare(`SELECT * FROM locks ORDER BY resource`).all() as LockRow[];
    return Promise.resolve(rows.map(toHolder));
  }

  close(): Promise<void> {
    this.db.close();
    return Promise.resolve();
  }

  /** Runs `fn` in a write transaction (taken at once, so two writers never deadlock on upgrade). */
  private inTransaction<T>(fn: () => T): Promise<T> {
    return Promise.resolve().then(() => this.db.transaction(fn).immediate());
  }

  private assertHolds(guard: LockGuard): void {
    const row = this.db.prepare(`SELECT * FROM locks WHERE resource = ?`).get(guard.resource) as LockRow | undefined;
    if (!row || !sameOwner(toHolder(row), guard.owner)) {
      throw new LockLostError(
        `${guard.owner.workflowId} does not hold the lock on ${guard.resource}` +
          (row ? ` (held by ${row.owner_workflow_id})` : ''),
      );
    }
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
