import type { TableName } from '../domain/names';
import { NAME_HOLDING_STATES, type TableState } from '../domain/states';
import type { TableRecord } from '../domain/table';
import type { Lease } from '../domain/leases';
import type { SettingKey, SettingRow } from '../domain/settings';
import type { ListOptions, LockHolder, LockOwner, Outcome, StepKey } from './catalog';
import { ident, type Queryable } from './pg-session';
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
import { RetryTransaction, type CatalogTx, type RowLock } from './tx';

/**
 * The PostgreSQL catalog's primitives (CatalogTx): the SQL of each, and the row locks it takes (postgres.ts says which
 * rows, in which order, and why READ COMMITTED with explicit row locks).
 */

/** Inlined (constants, not input) so that the planner can use the partial unique index. */
const NAME_HOLDING = sqlList(NAME_HOLDING_STATES);

export const pgCode = (err: unknown): unknown => (typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined);
const isUniqueViolation = (err: unknown) => pgCode(err) === '23505';

/** A table row's compare-and-set (rows.ts says which columns, in which order). */
const UPDATED_COUNT = UPDATED_TABLE_COLUMNS.length;
const updateTable = (t: CatalogTables) =>
  `UPDATE ${t.tables} SET ${UPDATED_TABLE_COLUMNS.map((c, k) => `${c} = $${k + 1}`).join(', ')} WHERE id = $${UPDATED_COUNT + 1} AND state = $${UPDATED_COUNT + 2}`;

/** The catalog's tables, each a name qualified by the catalog's schema: its sessions look nothing up outside pg_catalog. */
const CATALOG_TABLE_NAMES = ['tables', 'locks', 'journal', 'meta', 'settings', 'leases', 'counters', 'schema_migrations'] as const;
export type CatalogTables = Record<(typeof CATALOG_TABLE_NAMES)[number], string> & { schema: string };
export const tablesIn = (schema: string): CatalogTables =>
  Object.assign(
    { schema },
    Object.fromEntries(CATALOG_TABLE_NAMES.map((name) => [name, `${ident(schema)}.${ident(name)}`])) as Record<
      (typeof CATALOG_TABLE_NAMES)[number],
      string
    >,
  );

/** CatalogTx on a connection in a transaction (or on the pool, outside any): the SQL and row locks of each primitive. */
export class PgTx implements CatalogTx {
  constructor(
    private readonly db: Queryable,
    private readonly firstTableId: number,
    private readonly t: CatalogTables,
  ) {}

  async tableById(id: number, opts: RowLock = {}): Promise<TableRecord | undefined> {
    const { rows } = await this.db.query<TableRow>(`SELECT * FROM ${this.t.tables} WHERE id = $1${forUpdate(opts)}`, [id]);
    return rows[0] && toRecord(rows[0]);
  }

  async nameHolder(name: TableName, opts: RowLock = {}): Promise<TableRecord | undefined> {
    const { rows } = await this.db.query<TableRow>(
      `SELECT * FROM ${this.t.tables} WHERE namespace = $1 AND name = $2 AND state IN (${NAME_HOLDING})${forUpdate(opts)}`,
      [name.namespace, name.name],
    );
    return rows[0] && toRecord(rows[0]);
  }

  async newestTrashed(name: TableName): Promise<TableRecord | undefined> {
    const { rows } = await this.db.query<TableRow>(
      `SELECT * FROM ${this.t.tables} WHERE namespace = $1 AND name = $2 AND state = 'TRASHED'
       ORDER BY dropped_at DESC, id DESC LIMIT 1`,
      [name.namespace, name.name],
    );
    return rows[0] && toRecord(rows[0]);
  }

  async listTables(opts: ListOptions): Promise<TableRecord[]> {
    const { rows } = await this.db.query<TableRow>(
      `SELECT * FROM ${this.t.tables} WHERE state NOT IN (${sqlList(hiddenStates(opts.includeTrashed))}) AND id > $1 ORDER BY id LIMIT $2`,
      [opts.afterId ?? 0, opts.limit ?? null],
    );
    return rows.map(toRecord);
  }

  async countByState(): Promise<Partial<Record<TableState, number>>> {
    const { rows } = await this.db.query<{ state: TableState; n: string }>(
      `SELECT state, count(*) AS n FROM ${this.t.tables} GROUP BY state`,
    );
    return Object.fromEntries(rows.map((row) => [row.state, Number(row.n)]));
  }

  async nextTableId(): Promise<number> {
    const { rows } = await this.db.query<{ value: number }>(
      `INSERT INTO ${this.t.counters} (name, value) VALUES ('table_id', $1)
       ON CONFLICT (name) DO UPDATE SET value = counters.value + 1 RETURNING value`,
      [this.firstTableId],
    );
    return rows[0]!.value;
  }

  async insertTable(t: TableRecord): Promise<boolean> {
    const inserted = await this.unlessNameTaken(
      `INSERT INTO ${this.t.tables} (${TABLE_COLUMNS.join(', ')}) VALUES (${TABLE_COLUMNS.map((_, k) => `$${k + 1}`).join(', ')})`,
      tableRowValues(t),
    );
    return inserted !== undefined;
  }

  async updateTable(expected: TableState, t: TableRecord): Promise<'updated' | 'missed' | 'nameTaken'> {
    const updated = await this.unlessNameTaken(updateTable(this.t), tableUpdateValues(t, expected));
    return updated === undefined ? 'nameTaken' : updated === 1 ? 'updated' : 'missed';
  }

  async lockHolder(resource: string, opts: RowLock = {}): Promise<LockHolder | undefined> {
    const { rows } = await this.db.query<LockRow>(`SELECT * FROM ${this.t.locks} WHERE resource = $1${forUpdate(opts)}`, [resource]);
    return rows[0] && toHolder(rows[0]);
  }

  /** Of two inserters of one resource, the second waits for the first to commit, then does nothing. */
  async insertLock(resource: string, owner: LockOwner, since: number): Promise<boolean> {
    const inserted = await this.db.query(
      `INSERT INTO ${this.t.locks} (resource, owner_workflow_id, owner_run_id, since) VALUES ($1, $2, $3, $4)
       ON CONFLICT (resource) DO NOTHING`,
      [resource, owner.workflowId, owner.runId, since],
    );
    return inserted.rowCount === 1;
  }

  async deleteLock(holder: LockHolder): Promise<boolean> {
    const freed = await this.db.query(`DELETE FROM ${this.t.locks} WHERE resource = $1 AND owner_workflow_id = $2 AND owner_run_id = $3`, [
      holder.resource,
      holder.workflowId,
      holder.runId,
    ]);
    return freed.rowCount === 1;
  }

  async deleteLocksOf(owner: LockOwner): Promise<void> {
    await this.db.query(`DELETE FROM ${this.t.locks} WHERE owner_run_id = $1 AND owner_workflow_id = $2`, [owner.runId, owner.workflowId]);
  }

  async listLocks(): Promise<LockHolder[]> {
    const { rows } = await this.db.query<LockRow>(`SELECT * FROM ${this.t.locks} ORDER BY resource`);
    return rows.map(toHolder);
  }

  /**
   * Claims the step first thing in the transaction (its journal row is inserted, with no outcome yet): a second
   * call under the same key, from another worker at the same moment, waits on that insert and then reads the
   * outcome the first one journaled, so a step never applies twice.
   */
  async claimStep(step: StepKey): Promise<Outcome<unknown> | undefined> {
    const claim = await this.db.query(
      `INSERT INTO ${this.t.journal} (run_id, step, outcome, at) VALUES ($1, $2, NULL, $3) ON CONFLICT (run_id, step) DO NOTHING`,
      [step.runId, step.step, Date.now()],
    );
    if (claim.rowCount === 1) return undefined;
    const seen = await this.stepOutcome(step);
    // Pruned between the two statements (or withdrawn by a busy call): claim it again.
    if (!seen) throw new RetryTransaction(`journal entry ${step.runId} ${step.step} vanished`);
    return seen;
  }

  async settleStep(step: StepKey, outcome: Outcome<unknown> | undefined): Promise<void> {
    if (outcome) {
      await this.db.query(`UPDATE ${this.t.journal} SET outcome = $3 WHERE run_id = $1 AND step = $2`, [
        step.runId,
        step.step,
        JSON.stringify(outcome),
      ]);
    } else {
      await this.db.query(`DELETE FROM ${this.t.journal} WHERE run_id = $1 AND step = $2`, [step.runId, step.step]);
    }
  }

  async stepOutcome(step: StepKey): Promise<Outcome<unknown> | undefined> {
    const { rows } = await this.db.query<{ outcome: string | null }>(
      `SELECT outcome FROM ${this.t.journal} WHERE run_id = $1 AND step = $2`,
      [step.runId, step.step],
    );
    const seen = rows[0]?.outcome;
    return seen === undefined || seen === null ? undefined : (JSON.parse(seen) as Outcome<unknown>);
  }

  async recordStep(step: StepKey, outcome: Outcome<unknown>): Promise<void> {
    await this.db.query(
      `INSERT INTO ${this.t.journal} (run_id, step, outcome, at) VALUES ($1, $2, $3, $4) ON CONFLICT (run_id, step) DO NOTHING`,
      [step.runId, step.step, JSON.stringify(outcome), Date.now()],
    );
  }

  async pruneJournal(before: number): Promise<number> {
    const result = await this.db.query(`DELETE FROM ${this.t.journal} WHERE at < $1`, [before]);
    return result.rowCount ?? 0;
  }

  async settingRows(): Promise<SettingRow[]> {
    const { rows } = await this.db.query<SettingDbRow>(`SELECT * FROM ${this.t.settings} ORDER BY key, namespace`);
    return rows.map(toSetting);
  }

  async upsertSetting(row: SettingRow): Promise<void> {
    await this.db.query(
      `INSERT INTO ${this.t.settings} (key, namespace, value, updated_at) VALUES ($1, $2, $3, $4)
       ON CONFLICT (key, namespace) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
      settingRowValues(row),
    );
  }

  async deleteSetting(key: SettingKey, namespace: string | null): Promise<boolean> {
    const deleted = await this.db.query(`DELETE FROM ${this.t.settings} WHERE key = $1 AND namespace = $2`, [key, namespace ?? '']);
    return deleted.rowCount === 1;
  }

  async liveLeases(opts: { tableId?: number; now: number }): Promise<Lease[]> {
    const { rows } =
      opts.tableId === undefined
        ? await this.db.query<LeaseRow>(`SELECT * FROM ${this.t.leases} WHERE expires_at > $1 ORDER BY expires_at, id`, [opts.now])
        : await this.db.query<LeaseRow>(`SELECT * FROM ${this.t.leases} WHERE table_id = $1 AND expires_at > $2 ORDER BY expires_at, id`, [
            opts.tableId,
            opts.now,
          ]);
    return rows.map(toLease);
  }

  async leaseById(id: string, opts: RowLock = {}): Promise<Lease | undefined> {
    const { rows } = await this.db.query<LeaseRow>(`SELECT * FROM ${this.t.leases} WHERE id = $1${forUpdate(opts)}`, [id]);
    return rows[0] && toLease(rows[0]);
  }

  async insertLease(lease: Lease): Promise<void> {
    await this.db.query(
      `INSERT INTO ${this.t.leases} (id, table_id, holder, ttl_seconds, acquired_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`,
      leaseRowValues(lease),
    );
  }

  async renewLease(id: string, ttlSeconds: number, expiresAt: number): Promise<void> {
    await this.db.query(`UPDATE ${this.t.leases} SET ttl_seconds = $2, expires_at = $3 WHERE id = $1`, [id, ttlSeconds, expiresAt]);
  }

  async deleteLease(id: string): Promise<boolean> {
    return (await this.db.query(`DELETE FROM ${this.t.leases} WHERE id = $1`, [id])).rowCount === 1;
  }

  async pruneLeases(before: number): Promise<number> {
    return (await this.db.query(`DELETE FROM ${this.t.leases} WHERE expires_at < $1`, [before])).rowCount ?? 0;
  }

  async savepoint(name: string): Promise<void> {
    await this.db.query(`SAVEPOINT ${name}`);
  }

  async releaseSavepoint(name: string): Promise<void> {
    await this.db.query(`RELEASE SAVEPOINT ${name}`);
  }

  async rollbackToSavepoint(name: string): Promise<void> {
    await this.db.query(`ROLLBACK TO SAVEPOINT ${name}`);
  }

  /**
   * The rows the statement changed, or undefined if it would have given a name to two tables. A failed statement
   * spoils the whole transaction: a savepoint keeps it usable (to name the holder, say).
   */
  private async unlessNameTaken(sql: string, values: unknown[]): Promise<number | undefined> {
    await this.savepoint('name_write');
    try {
      const result = await this.db.query(sql, values);
      await this.releaseSavepoint('name_write');
      return result.rowCount ?? 0;
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      await this.rollbackToSavepoint('name_write');
      return undefined;
    }
  }
}

const forUpdate = (opts: RowLock) => (opts.forUpdate ? ' FOR UPDATE' : '');
