/**
 * The networked catalog: PostgreSQL, through a `pg` connection pool, for several workers, SDKs and command
 * lines on several hosts. It behaves exactly as the embedded SqliteCatalog (same journal, same locks, same
 * compare-and-set); test/catalog-{tables,journal,policies}.test.ts run one suite against both.
 *
 * Isolation and locking: READ COMMITTED with explicit row locks, not SERIALIZABLE.
 * - SQLite serializes every writer (BEGIN IMMEDIATE). Here the contention is narrow and known in advance: a
 *   change touches one table row, one or two lock rows, the counter row and one journal row. Locking exactly
 *   those (`SELECT ... FOR UPDATE`) makes two transactions on the same table wait for each other, and lets
 *   transactions on different tables run side by side. Each statement of a READ COMMITTED transaction sees
 *   what committed before it started, so after waiting for a row lock the next read sees the winner's
 *   change, which is what every check here needs (is the lock still mine, is the table still in that state).
 * - SERIALIZABLE would give the same safety without naming the rows, but it aborts rather than waits: two
 *   prepares of different names both bump the counter row, two calls on one table both read and write its
 *   row, and one of each pair fails with 40001 and must run again (its read-only calls too, when their
 *   predicate locks overlap). Under the contention this catalog has by design (several workers queueing on
 *   one table's lock) that is wasted work and retry loops, where a row lock simply queues the second.
 * - The database still enforces what must never break, whatever the code does: the partial unique index on
 *   live names, the primary key of the locks (one holder per resource), the journal's primary key (a step
 *   is applied once), the counter as one row incremented in place (ids never given twice).
 * - A lock is taken with `INSERT ... ON CONFLICT DO NOTHING` (two inserters of one resource: the second waits
 *   for the first to commit, then does nothing) and then read `FOR UPDATE`: of two racing owners, one wins.
 * - Row locks are taken in one order: the call's journal row, the name lock, the table row, the counter, the
 *   table's lock row (each call takes the ones it needs), so changes do not deadlock one another. `releaseLocks` deletes several lock rows at once
 *   and could still meet a prepare in a deadlock; PostgreSQL then aborts one of them, and every transaction
 *   is retried a few times on deadlock (40P01) and serialization failure (40001) as a matter of course.
 * - A step key is claimed first thing in its transaction (insert of the journal row): a second call under the
 *   same key, from another worker at the same moment, waits on that insert and then reads the outcome the
 *   first one journaled, so a step never applies twice.
 * Nothing waits for the outside world inside a transaction: whether a lock's holder has closed is asked of
 * Temporal between two transactions (withTakeOver in rules.ts, for both stores).
 *
 * The rules themselves (rules.ts) are shared with SqliteCatalog; this module holds the SQL of each primitive
 * (PgTx), the row locks each takes, the transactions and their retries, and the connection handling.
 *
 * The url's password is never logged nor put in an error: errors name the url without it.
 */
import { randomBytes } from 'node:crypto';
import { Client, Pool, types, type CustomTypesConfig, type QueryResultRow } from 'pg';
import { CatalogNotFoundError, TableFateError } from '../domain/errors';
import { redactUrl } from '../domain/deployment';
import type { TableName } from '../domain/names';
import { NAME_HOLDING_STATES, type TableState } from '../domain/states';
import type { TableRecord } from '../domain/table';
import type { ListOptions, LockHolder, LockOwner, Outcome, StepKey } from './catalog';
import { assertCurrent, mustApply } from './migrations';
import { MIGRATIONS } from './postgres-schema';
import { ident, inPgTransaction, newPool } from './pg-session';
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
import { TransactionalCatalog } from './rules';
import { RetryTransaction, type CatalogTx, type RowLock } from './tx';
import type { Lease } from '../domain/leases';
import type { SettingKey, SettingRow } from '../domain/settings';

/** Inlined (constants, not input) so that the planner can use the partial unique index. */
const NAME_HOLDING = sqlList(NAME_HOLDING_STATES);

/** Serializes schema migrations across every process that opens the catalog ('tablefat' in ASCII). */
const MIGRATION_LOCK_KEY = '8386092198837772660';

// BIGINT (ids, epoch milliseconds, counts) as JS numbers, for this pool only: all of them are far below 2^53.
const INT8_OID = 20;
const parseInt8 = (value: string) => Number(value);
type TypeParserOf = (oid: number, format?: 'text' | 'binary') => (value: string) => unknown;
const TYPE_PARSERS = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? parseInt8
      : (types.getTypeParser as TypeParserOf)(oid, format)) as CustomTypesConfig['getTypeParser'],
} satisfies CustomTypesConfig;

const pgCode = (err: unknown): unknown => (typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined);
const isUniqueViolation = (err: unknown) => pgCode(err) === '23505';
/** A deadlock or a serialization failure: PostgreSQL aborted the transaction, which may simply run again. */
const isTransient = (err: unknown) => pgCode(err) === '40001' || pgCode(err) === '40P01';

export interface PostgresCatalogOptions {
  /** Seeds the id counter of a new catalog (default 1). */
  firstTableId?: number;
  /**
   * For readers (the SDK and the command line): never create nor migrate a catalog. A database without
   * tablefate's schema is a CatalogNotFoundError, one whose schema is behind this code an error.
   */
  mustExist?: boolean;
  /** Connections in the pool (default 10). */
  poolSize?: number;
}

/** The catalog on a PostgreSQL database, shared by every worker, SDK and command line that names its url. */

/** A table row's compare-and-set (rows.ts says which columns, in which order). */
const UPDATED_COUNT = UPDATED_TABLE_COLUMNS.length;
const updateTable = (t: CatalogTables) =>
  `UPDATE ${t.tables} SET ${UPDATED_TABLE_COLUMNS.map((c, k) => `${c} = $${k + 1}`).join(', ')} WHERE id = $${UPDATED_COUNT + 1} AND state = $${UPDATED_COUNT + 2}`;

/** The catalog's tables, each a name qualified by the catalog's schema: its sessions look nothing up outside pg_catalog. */
const CATALOG_TABLE_NAMES = ['tables', 'locks', 'journal', 'meta', 'settings', 'leases', 'counters', 'schema_migrations'] as const;
type CatalogTables = Record<(typeof CATALOG_TABLE_NAMES)[number], string> & { schema: string };
const tablesIn = (schema: string): CatalogTables =>
  Object.assign(
    { schema },
    Object.fromEntries(CATALOG_TABLE_NAMES.map((name) => [name, `${ident(schema)}.${ident(name)}`])) as Record<
      (typeof CATALOG_TABLE_NAMES)[number],
      string
    >,
  );

/**
 * The schema the catalog is in: where its tables are, or, for a catalog not made yet, where the role's own search_path
 * would make them (as every catalog was made before its sessions were pinned). Asked on a connection of its own, the
 * one that sees the role's search_path; every name qualified, so that nothing of a user's answers for a built-in.
 */
async function catalogSchema(url: string): Promise<string> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 15_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const { rows } = await client.query<{ schema: string | null }>(
      `SELECT coalesce((SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                         WHERE c.oid = pg_catalog.to_regclass('schema_migrations')), pg_catalog.current_schema()) AS schema`,
    );
    const schema = rows[0]?.schema;
    if (!schema) throw new Error("the role's search_path names no schema that exists, to hold the catalog's tables");
    return schema;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export class PostgresCatalog extends TransactionalCatalog {
  readonly id: string;
  /** The url without its password: what messages name. */
  readonly where: string;
  // A private field: the pool's options hold the url with its password, and must not show when this is logged.
  readonly #pool: Pool;
  readonly #firstTableId: number;
  readonly #tables: CatalogTables;

  private constructor(pool: Pool, id: string, where: string, firstTableId: number, tables: CatalogTables) {
    super();
    this.#pool = pool;
    this.#tables = tables;
    this.id = id;
    this.where = where;
    this.#firstTableId = firstTableId;
  }

  /**
   * Connects a pool to `url` (`postgres://user:pass@host:port/db`, with query parameters such as `sslmode`),
   * applies the migrations not applied yet (unless `mustExist`), and reads the catalog's id, making it if the
   * catalog is new.
   */
  static async open(url: string, opts: PostgresCatalogOptions = {}): Promise<PostgresCatalog> {
    const where = redactUrl(url);
    let tables: CatalogTables;
    try {
      tables = tablesIn(await catalogSchema(url));
    } catch (err) {
      throw openError(err, url, where);
    }
    const pool = newPool({
      connectionString: url,
      max: opts.poolSize ?? 10,
      types: TYPE_PARSERS,
      connectionTimeoutMillis: 15_000,
      keepAlive: true,
      fallback_application_name: 'tablefate',
      // No transaction here waits on anything but the database: one idle this long belongs to a stuck process,
      // and holds row locks others wait for.
      idle_in_transaction_session_timeout: 60_000,
      // A catalog statement is short; one running this long is stuck, and holds row locks others wait for.
      statement_timeout: 5 * 60_000,
      // Nothing of a user's can stand in for a built-in name: the catalog's own names are all qualified. The server's
      // keepalives find a client that is gone mid-transaction as the client's find a server that is.
      options: '-c search_path=pg_catalog,pg_temp -c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3',
    });
    try {
      if (opts.mustExist) await checkSchema(pool, where, tables);
      else await migrate(pool, tables);
      const id = await identity(pool, where, opts.mustExist ?? false, tables);
      return new PostgresCatalog(pool, id, where, opts.firstTableId ?? 1, tables);
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw err instanceof TableFateError ? err : openError(err, url, where);
    }
  }

  /** Ends the pool: waits for the connections in use to be given back, then closes them all. */
  async close(): Promise<void> {
    if (!this.#pool.ended) await this.#pool.end();
  }

  /** A READ COMMITTED transaction on one connection of the pool (rows are locked as the rules read them). */
  protected runTransaction<T>(fn: (tx: CatalogTx) => Promise<T>): Promise<T> {
    return inPgTransaction(this.#pool, (c) => fn(new PgTx(c, this.#firstTableId, this.#tables)));
  }

  /** Statements on the pool, each on whichever connection is free, each its own transaction. */
  protected runOutside<T>(fn: (tx: CatalogTx) => Promise<T>): Promise<T> {
    return fn(new PgTx(this.#pool, this.#firstTableId, this.#tables));
  }

  protected override isTransient(err: unknown): boolean {
    return isTransient(err);
  }
}

/** CatalogTx on a connection in a transaction (or on the pool, outside any): the SQL and row locks of each primitive. */
class PgTx implements CatalogTx {
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

/** A pool or one of its connections. */
interface Queryable {
  query<R extends QueryResultRow>(text: string, values?: unknown[]): Promise<{ rows: R[]; rowCount: number | null }>;
}

const createMigrationsTable = (t: CatalogTables) =>
  `CREATE TABLE IF NOT EXISTS ${t.schema_migrations} (version INT PRIMARY KEY, applied_at BIGINT NOT NULL)`;

/** The last migration applied (0: none). */
async function schemaVersion(c: Queryable, t: CatalogTables): Promise<number> {
  const { rows } = await c.query<{ version: number | null }>(`SELECT pg_catalog.max(version) AS version FROM ${t.schema_migrations}`);
  return rows[0]?.version ?? 0;
}

/**
 * Applies the migrations this database has not had, each in a transaction of its own, in order. Each takes a
 * transaction-level advisory lock first: of two processes starting together, the second waits for the first's
 * migration to commit, then finds it applied. A migration's SQL, written once and never edited, names the catalog's
 * tables bare: it runs with the catalog's schema first in its transaction's search_path.
 */
async function migrate(pool: Pool, t: CatalogTables): Promise<void> {
  for (const migration of MIGRATIONS) {
    await inPgTransaction(pool, async (c) => {
      await c.query(`SELECT pg_catalog.pg_advisory_xact_lock($1)`, [MIGRATION_LOCK_KEY]);
      await c.query(createMigrationsTable(t));
      if (!mustApply(migration, await schemaVersion(c, t), MIGRATIONS)) return;
      await c.query(`SELECT pg_catalog.set_config('search_path', $1, true)`, [`${ident(t.schema)}, pg_catalog, pg_temp`]);
      await c.query(migration.sql);
      await c.query(`INSERT INTO ${t.schema_migrations} (version, applied_at) VALUES ($1, $2)`, [migration.version, Date.now()]);
    });
  }
}

/** For readers: the schema must be there, at this code's version; nothing is created or changed. */
async function checkSchema(pool: Pool, where: string, t: CatalogTables): Promise<void> {
  const { rows } = await pool.query<{ found: boolean }>(
    `SELECT pg_catalog.to_regclass($1) IS NOT NULL AND pg_catalog.to_regclass($2) IS NOT NULL AS found`,
    [t.schema_migrations, t.meta],
  );
  if (!rows[0]?.found) throw notFound(where);
  const version = await schemaVersion(pool, t);
  if (version === 0) throw notFound(where);
  assertCurrent(version, MIGRATIONS);
}

/** The catalog's identity: made once, with the catalog, and kept (8 hex digits, as SqliteCatalog's). */
async function identity(pool: Pool, where: string, mustExist: boolean, t: CatalogTables): Promise<string> {
  if (!mustExist) {
    await pool.query(`INSERT INTO ${t.meta} (key, value) VALUES ('catalog_id', $1) ON CONFLICT (key) DO NOTHING`, [
      randomBytes(4).toString('hex'),
    ]);
  }
  const { rows } = await pool.query<{ value: string }>(`SELECT value FROM ${t.meta} WHERE key = 'catalog_id'`);
  if (!rows[0]) throw notFound(where);
  return rows[0].value;
}

function notFound(where: string): CatalogNotFoundError {
  return new CatalogNotFoundError(`no tablefate catalog at ${where}; a worker creates it on its first start`, where);
}

/**
 * An error met while opening, as an error that names the catalog without the password: the driver's own
 * error is not kept as the cause (a url parse error carries the whole url), only its code.
 */
function openError(err: unknown, url: string, where: string): Error {
  let message = describe(err);
  for (const secret of passwordsOf(url)) message = message.split(secret).join('***');
  const code = pgCode(err);
  return Object.assign(new Error(`cannot open the catalog at ${where}: ${message}`), typeof code === 'string' ? { code } : {});
}

/** An error's message; a failed connection to every address of a host is an AggregateError with none. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  if (err.message) return err.message;
  if (err instanceof AggregateError) return err.errors.map(describe).join('; ');
  const code = pgCode(err);
  return typeof code === 'string' ? code : err.name;
}

/** The url's password as written and decoded (either may show in a message). */
function passwordsOf(url: string): string[] {
  let raw: string | undefined;
  try {
    raw = new URL(url).password;
  } catch {
    raw = /^[a-z]+:\/\/[^:@/]*:([^@]*)@/i.exec(url)?.[1];
  }
  if (!raw) return [];
  let decoded = raw;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    // not percent-encoded after all
  }
  return [...new Set([raw, decoded])];
}
