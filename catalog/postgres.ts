/**
 * The networked catalog: PostgreSQL, through a `pg` connection pool, for several workers, SDKs and command
 * lines on several hosts. It behaves exactly as the embedded SqliteCatalog (same journal, same locks, same
 * compare-and-set); test/catalog.test.ts runs one suite against both.
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
 * Temporal between two transactions (withTakeOver), as in SqliteCatalog.
 *
 * The url's password is never logged nor put in an error: errors name the url without it.
 */
import { randomBytes } from 'node:crypto';
import { Pool, types, type CustomTypesConfig, type PoolClient, type QueryResultRow } from 'pg';
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
import { MIGRATIONS, SCHEMA_VERSION } from './postgres-schema';

/** Inlined (constants, not input) so that the planner can use the partial unique index. */
const NAME_HOLDING = sqlList(NAME_HOLDING_STATES);

/** Serializes schema migrations across every process that opens the catalog ('tablefat' in ASCII). */
const MIGRATION_LOCK_KEY = '8386092198837772660';
/** How many times a transaction is tried when PostgreSQL aborts it for a deadlock or a serialization failure. */
const MAX_ATTEMPTS = 5;

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

/** A transaction met a race it cannot settle itself (a row vanished between two statements): run it again. */
class RetryTransaction extends Error {
  override readonly name = 'RetryTransaction';
}

const isRetryable = (err: unknown) => err instanceof RetryTransaction || pgCode(err) === '40001' || pgCode(err) === '40P01';

/** `url` without its password (and as it was if it is no url), for messages and errors. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (!parsed.password) return url;
    parsed.password = '';
    return parsed.toString();
  } catch {
    return url.replace(/^([a-z]+:\/\/[^:@/]*):[^@]*@/i, '$1@');
  }
}

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
export class PostgresCatalog implements Catalog {
  readonly id: string;
  /** The url without its password: what messages name. */
  readonly where: string;
  // A private field: the pool's options hold the url with its password, and must not show when this is logged.
  readonly #pool: Pool;
  readonly #firstTableId: number;

  private constructor(pool: Pool, id: string, where: string, firstTableId: number) {
    this.#pool = pool;
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
    const pool = new Pool({
      connectionString: url,
      max: opts.poolSize ?? 10,
      types: TYPE_PARSERS,
      connectionTimeoutMillis: 15_000,
      keepAlive: true,
      fallback_application_name: 'tablefate',
      // No transaction here waits on anything but the database: one idle this long belongs to a stuck process,
      // and holds row locks others wait for.
      idle_in_transaction_session_timeout: 60_000,
    });
    // An idle connection that breaks (a server restart) is dropped by the pool; the next query opens another.
    // Without a listener the error would end the process.
    pool.on('error', () => undefined);
    try {
      if (opts.mustExist) await checkSchema(pool, where);
      else await migrate(pool);
      const id = await identity(pool, where, opts.mustExist ?? false);
      return new PostgresCatalog(pool, id, where, opts.firstTableId ?? 1);
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw err instanceof TableFateError ? err : openError(err, url, where);
    }
  }

  prepareCreate(req: PrepareCreateRequest, isOwnerClosed: IsOwnerClosed): Promise<PrepareResult> {
    return this.withTakeOver(isOwnerClosed, (c) =>
      this.journaled(
        c,
        req.step,
        async (): Promise<PrepareResult> => {
          await this.assertHolds(c, req.nameLock, req.owner);
          const holder = await this.nameHolder(c, req, { forUpdate: true });
          if (!holder) {
            const id = await this.nextId(c);
            const placement = req.place(id, req.params);
            try {
              await c.query(
                `INSERT INTO tables (id, namespace, name, state, params, placement, created_at, updated_at)
                 VALUES ($1, $2, $3, 'CREATING', $4, $5, $6, $7)`,
                [id, req.namespace, req.name, JSON.stringify(req.params), JSON.stringify(placement), req.now, req.now],
              );
            } catch (err) {
              // Another table took the name after our read (we hold the name lock, so only a caller that does
              // not honour it could): read again, from the start.
              if (isUniqueViolation(err)) throw new RetryTransaction('the name was taken meanwhile');
              throw err;
            }
            // A new id: nobody can hold its lock yet.
            await this.tryLock(c, lockFor.table(id), req.owner, req.now);
            return { outcome: 'prepared', table: await this.mustGet(c, id), resumed: false };
          }
          if (planPrepare(holder, req) === 'exists') return { outcome: 'exists', table: holder };
          const lock = await this.tryLock(c, lockFor.table(holder.id), req.owner, req.now);
          if (!lock.acquired) return { outcome: 'busy', holder: lock.holder };
          await c.query(`UPDATE tables SET state = 'CREATING', updated_at = $1 WHERE id = $2`, [req.now, holder.id]);
          return { outcome: 'prepared', table: await this.mustGet(c, holder.id), resumed: true };
        },
        (result) => result.outcome !== 'busy',
      ),
    ).then(({ result }) => unwrap(result));
  }

  transition(req: TransitionRequest): Promise<TableRecord> {
    return this.tx((c) =>
      this.journaled(c, req.step, async (): Promise<TableRecord> => {
        const current = await this.getRow(c, req.tableId, { forUpdate: true });
        if (!current) throw new TableNotFoundError(`table ${req.tableId} does not exist`);
        await this.assertHolds(c, lockFor.table(req.tableId), req.owner);
        const plan = planTransition(current, req);
        if (plan.made) return plan.table;
        const { name: wanted, columns: set } = plan;
        // A failed statement spoils the whole transaction: the savepoint keeps it usable to name the holder.
        await c.query('SAVEPOINT set_state');
        let updated: number;
        try {
          const result = await c.query(
            `UPDATE tables SET state = $1, namespace = $2, name = $3, dropped_at = $4, expire_at = $5, purged_at = $6,
               updated_at = $7 WHERE id = $8 AND state = $9`,
            [req.to, wanted.namespace, wanted.name, set.droppedAt, set.expireAt, set.purgedAt, req.now, req.tableId, current.state],
          );
          updated = result.rowCount ?? 0;
          await c.query('RELEASE SAVEPOINT set_state');
        } catch (err) {
          if (!isUniqueViolation(err)) throw err;
          await c.query('ROLLBACK TO SAVEPOINT set_state');
          const other = await this.nameHolder(c, wanted);
          throw new NameTakenError(`the name ${formatTableName(wanted)} is taken by table ${other?.id ?? '?'}; give a new name`);
        }
        // The row is locked since it was read: the compare-and-set cannot miss. Were it to, start over.
        if (updated !== 1) throw new RetryTransaction(`table ${req.tableId} changed under its row lock`);
        return this.mustGet(c, req.tableId);
      }),
    ).then(unwrap);
  }

  async getTable(tableId: number, step?: StepKey): Promise<TableRecord | undefined> {
    if (!step) return this.getRow(this.#pool, tableId);
    const outcome = await this.tx((c) => this.journaled(c, step, async () => (await this.getRow(c, tableId)) ?? null));
    return unwrap(outcome) ?? undefined;
  }

  findByName(name: TableName): Promise<TableRecord | undefined> {
    return this.nameHolder(this.#pool, name);
  }

  async findTrashed(name: TableName): Promise<TableRecord | undefined> {
    const { rows } = await this.#pool.query<TableRow>(
      `SELECT * FROM tables WHERE namespace = $1 AND name = $2 AND state = 'TRASHED'
       ORDER BY dropped_at DESC, id DESC LIMIT 1`,
      [name.namespace, name.name],
    );
    return rows[0] && toRecord(rows[0]);
  }

  async listTables(opts: ListOptions): Promise<TableRecord[]> {
    const hidden = opts.includeTrashed ? ['PURGED'] : ['TRASHED', 'PURGING', 'PURGED'];
    const { rows } = await this.#pool.query<TableRow>(
      `SELECT * FROM tables WHERE state NOT IN (${sqlList(hidden)}) AND id > $1 ORDER BY id LIMIT $2`,
      [opts.afterId ?? 0, opts.limit ?? null],
    );
    return rows.map(toRecord);
  }

  acquireLock(resource: string, owner: LockOwner, now: number, isOwnerClosed: IsOwnerClosed, step?: StepKey): Promise<AcquireResult> {
    // A journaled acquire answers "acquired" even if the run has since released the lock (its later calls
    // are journaled too): re-taking it would let a run that already finished hold a table again.
    return this.withTakeOver(isOwnerClosed, (c) =>
      this.journaled(
        c,
        step,
        () => this.tryLock(c, resource, owner, now),
        (r) => r.acquired,
      ),
    ).then(({ result, tookOverFrom }) => {
      const acquired = unwrap(result);
      return acquired.acquired ? { acquired: true, tookOverFrom } : acquired;
    });
  }

  async holdsLock(resource: string, owner: LockOwner): Promise<boolean> {
    const row = await this.lockRow(this.#pool, resource);
    return row !== undefined && sameOwner(toHolder(row), owner);
  }

  async stepOutcome(step: StepKey): Promise<Outcome<unknown> | undefined> {
    const { rows } = await this.#pool.query<{ outcome: string | null }>(`SELECT outcome FROM journal WHERE run_id = $1 AND step = $2`, [
      step.runId,
      step.step,
    ]);
    const seen = rows[0]?.outcome;
    return seen === undefined || seen === null ? undefined : (JSON.parse(seen) as Outcome<unknown>);
  }

  async recordStep(step: StepKey, outcome: Outcome<unknown>): Promise<void> {
    await this.#pool.query(
      `INSERT INTO journal (run_id, step, outcome, at) VALUES ($1, $2, $3, $4) ON CONFLICT (run_id, step) DO NOTHING`,
      [step.runId, step.step, JSON.stringify(outcome), Date.now()],
    );
  }

  async releaseLocks(owner: LockOwner): Promise<void> {
    await this.tx((c) => c.query(`DELETE FROM locks WHERE owner_run_id = $1 AND owner_workflow_id = $2`, [owner.runId, owner.workflowId]));
  }

  async listLocks(): Promise<LockHolder[]> {
    const { rows } = await this.#pool.query<LockRow>(`SELECT * FROM locks ORDER BY resource`);
    return rows.map(toHolder);
  }

  async pruneJournal(before: number): Promise<number> {
    const result = await this.#pool.query(`DELETE FROM journal WHERE at < $1`, [before]);
    return result.rowCount ?? 0;
  }

  /** Ends the pool: waits for the connections in use to be given back, then closes them all. */
  async close(): Promise<void> {
    if (!this.#pool.ended) await this.#pool.end();
  }

  /**
   * Runs `fn` in a READ COMMITTED transaction on one connection of the pool, and again (a few times, after a
   * short random pause) when PostgreSQL aborted it for a deadlock or a serialization failure, or it met a
   * race it could not settle. Any other error rolls it back and is thrown.
   */
  private async tx<T>(fn: (c: PoolClient) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await inTransaction(this.#pool, fn);
      } catch (err) {
        if (attempt >= MAX_ATTEMPTS || !isRetryable(err)) throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));
    }
  }

  /**
   * Runs `fn` once per step key, inside the caller's transaction. The key is claimed first (its journal row is
   * inserted): a key seen before returns its journaled outcome (the value, or the same domain error) without
   * running `fn`, and a call under the same key running at the same moment waits for this one's transaction,
   * then does the same. Otherwise `fn` runs and its outcome is journaled with its changes, atomically; a domain
   * error undoes what `fn` did (a savepoint) and is journaled like a value. `keep` says which values are final
   * (a busy lock is not: its claim is withdrawn). The caller unwraps the outcome once the transaction committed.
   */
  private async journaled<T>(
    c: PoolClient,
    step: StepKey | undefined,
    fn: () => Promise<T>,
    keep: (value: T) => boolean = () => true,
  ): Promise<Outcome<T>> {
    if (!step) return { value: await fn() };
    const claim = await c.query(
      `INSERT INTO journal (run_id, step, outcome, at) VALUES ($1, $2, NULL, $3) ON CONFLICT (run_id, step) DO NOTHING`,
      [step.runId, step.step, Date.now()],
    );
    if (claim.rowCount === 0) {
      const { rows } = await c.query<{ outcome: string | null }>(`SELECT outcome FROM journal WHERE run_id = $1 AND step = $2`, [
        step.runId,
        step.step,
      ]);
      // Pruned between the two statements (or withdrawn by a busy call): claim it again.
      const seen = rows[0]?.outcome;
      if (seen === undefined || seen === null) throw new RetryTransaction(`journal entry ${step.runId} ${step.step} vanished`);
      return JSON.parse(seen) as Outcome<T>;
    }
    let outcome: Outcome<T>;
    await c.query('SAVEPOINT step_body');
    try {
      outcome = { value: await fn() };
      await c.query('RELEASE SAVEPOINT step_body');
    } catch (err) {
      if (!(err instanceof TableFateError)) throw err;
      await c.query('ROLLBACK TO SAVEPOINT step_body');
      outcome = { error: { type: err.type, message: err.message } };
    }
    if ('value' in outcome && !keep(outcome.value)) {
      await c.query(`DELETE FROM journal WHERE run_id = $1 AND step = $2`, [step.runId, step.step]);
    } else {
      await c.query(`UPDATE journal SET outcome = $3 WHERE run_id = $1 AND step = $2`, [step.runId, step.step, JSON.stringify(outcome)]);
    }
    return outcome;
  }

  /**
   * Runs `attempt` (a transaction that may find a lock busy) and, while the holder it reports has closed
   * without releasing (a terminated workflow, say), takes that lock over and tries again. The holder's status
   * is asked outside any transaction: it is a call to the Temporal server.
   */
  private async withTakeOver<T extends object>(
    isOwnerClosed: IsOwnerClosed,
    attempt: (c: PoolClient) => Promise<Outcome<T>>,
  ): Promise<{ result: Outcome<T>; tookOverFrom: LockHolder | null }> {
    let tookOverFrom: LockHolder | null = null;
    for (;;) {
      const result = await this.tx(attempt);
      const holder = busyHolder(result);
      if (!holder || !(await isOwnerClosed(holder))) return { result, tookOverFrom };
      // Unless it changed hands meanwhile: then the next attempt sees the new holder.
      const freed = await this.#pool.query(`DELETE FROM locks WHERE resource = $1 AND owner_workflow_id = $2 AND owner_run_id = $3`, [
        holder.resource,
        holder.workflowId,
        holder.runId,
      ]);
      if (freed.rowCount === 1) tookOverFrom = holder;
    }
  }

  /**
   * Takes `resource` for `owner` if it is free or already theirs, inside the caller's transaction, and keeps
   * its row locked until that commits. Of two callers racing for a free resource, the second's insert waits for
   * the first's transaction and then does nothing: it finds the first as the holder.
   */
  private async tryLock(c: PoolClient, resource: string, owner: LockOwner, now: number): Promise<AcquireResult> {
    for (let i = 0; i < 3; i++) {
      const inserted = await c.query(
        `INSERT INTO locks (resource, owner_workflow_id, owner_run_id, since) VALUES ($1, $2, $3, $4)
         ON CONFLICT (resource) DO NOTHING`,
        [resource, owner.workflowId, owner.runId, now],
      );
      if (inserted.rowCount === 1) return { acquired: true, tookOverFrom: null };
      const row = await this.lockRow(c, resource, { forUpdate: true });
      // Released between the two statements: try to insert again.
      if (!row) continue;
      const holder = toHolder(row);
      return sameOwner(holder, owner) ? { acquired: true, tookOverFrom: null } : { acquired: false, holder };
    }
    throw new RetryTransaction(`the lock on ${resource} kept changing hands`);
  }

  /** Throws LockLost unless `owner` holds `resource`; keeps the lock row locked (a take-over waits for this transaction). */
  private async assertHolds(c: PoolClient, resource: string, owner: LockOwner): Promise<void> {
    const row = await this.lockRow(c, resource, { forUpdate: true });
    if (!row || !sameOwner(toHolder(row), owner)) {
      throw new LockLostError(
        `${owner.workflowId} does not hold the lock on ${resource}` + (row ? ` (held by ${row.owner_workflow_id})` : ''),
      );
    }
  }

  private async lockRow(db: Queryable, resource: string, opts: { forUpdate?: boolean } = {}): Promise<LockRow | undefined> {
    const { rows } = await db.query<LockRow>(`SELECT * FROM locks WHERE resource = $1${opts.forUpdate ? ' FOR UPDATE' : ''}`, [resource]);
    return rows[0];
  }

  private async nextId(c: PoolClient): Promise<number> {
    const { rows } = await c.query<{ value: number }>(
      `INSERT INTO counters (name, value) VALUES ('table_id', $1)
       ON CONFLICT (name) DO UPDATE SET value = counters.value + 1 RETURNING value`,
      [this.#firstTableId],
    );
    return rows[0]!.value;
  }

  private async nameHolder(db: Queryable, name: TableName, opts: { forUpdate?: boolean } = {}): Promise<TableRecord | undefined> {
    const { rows } = await db.query<TableRow>(
      `SELECT * FROM tables WHERE namespace = $1 AND name = $2 AND state IN (${NAME_HOLDING})${opts.forUpdate ? ' FOR UPDATE' : ''}`,
      [name.namespace, name.name],
    );
    return rows[0] && toRecord(rows[0]);
  }

  private async getRow(db: Queryable, tableId: number, opts: { forUpdate?: boolean } = {}): Promise<TableRecord | undefined> {
    const { rows } = await db.query<TableRow>(`SELECT * FROM tables WHERE id = $1${opts.forUpdate ? ' FOR UPDATE' : ''}`, [tableId]);
    return rows[0] && toRecord(rows[0]);
  }

  private async mustGet(c: PoolClient, tableId: number): Promise<TableRecord> {
    const table = await this.getRow(c, tableId);
    if (!table) throw new Error(`table ${tableId} vanished inside its own transaction`);
    return table;
  }
}

/** A pool or one of its connections. */
interface Queryable {
  query<R extends QueryResultRow>(text: string, values?: unknown[]): Promise<{ rows: R[]; rowCount: number | null }>;
}

/**
 * Runs `fn` in a transaction of its own on a connection of `pool`; any error rolls it back and is thrown. A
 * connection that cannot even roll back is closed rather than given back to the pool.
 */
async function inTransaction<T>(pool: Pool, fn: (c: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch((rollbackError: Error) => (broken = rollbackError));
    throw err;
  } finally {
    client.release(broken);
  }
}

const CREATE_MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS schema_migrations (version INT PRIMARY KEY, applied_at BIGINT NOT NULL)`;

async function appliedVersions(c: Queryable): Promise<number[]> {
  const { rows } = await c.query<{ version: number }>(`SELECT version FROM schema_migrations ORDER BY version`);
  return rows.map((r) => r.version);
}

function tooNew(versions: number[]): Error | undefined {
  const newest = Math.max(0, ...versions);
  return newest > SCHEMA_VERSION
    ? new Error(`the catalog's schema is at version ${newest}, newer than this tablefate knows (${SCHEMA_VERSION}): upgrade tablefate`)
    : undefined;
}

/**
 * Applies the migrations this database has not had, each in a transaction of its own, in order. Each takes a
 * transaction-level advisory lock first: of two processes starting together, the second waits for the first's
 * migration to commit, then finds it applied.
 */
async function migrate(pool: Pool): Promise<void> {
  for (const migration of MIGRATIONS) {
    await inTransaction(pool, async (c) => {
      await c.query(`SELECT pg_advisory_xact_lock($1)`, [MIGRATION_LOCK_KEY]);
      await c.query(CREATE_MIGRATIONS_TABLE);
      const applied = await appliedVersions(c);
      const newer = tooNew(applied);
      if (newer) throw newer;
      if (applied.includes(migration.version)) return;
      await c.query(migration.sql);
      await c.query(`INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, [migration.version, Date.now()]);
    });
  }
}

/** For readers: the schema must be there, at this code's version; nothing is created or changed. */
async function checkSchema(pool: Pool, where: string): Promise<void> {
  const { rows } = await pool.query<{ found: boolean }>(
    `SELECT to_regclass('schema_migrations') IS NOT NULL AND to_regclass('meta') IS NOT NULL AS found`,
  );
  if (!rows[0]?.found) throw notFound(where);
  const applied = await appliedVersions(pool);
  if (applied.length === 0) throw notFound(where);
  const newer = tooNew(applied);
  if (newer) throw newer;
  const missing = MIGRATIONS.filter((m) => !applied.includes(m.version)).map((m) => m.version);
  if (missing.length > 0) {
    throw new Error(`its schema lacks migrations ${missing.join(', ')}: start a worker of this tablefate version to apply them`);
  }
}

/** The catalog's identity: made once, with the catalog, and kept (8 hex digits, as SqliteCatalog's). */
async function identity(pool: Pool, where: string, mustExist: boolean): Promise<string> {
  if (!mustExist) {
    await pool.query(`INSERT INTO meta (key, value) VALUES ('catalog_id', $1) ON CONFLICT (key) DO NOTHING`, [
      randomBytes(4).toString('hex'),
    ]);
  }
  const { rows } = await pool.query<{ value: string }>(`SELECT value FROM meta WHERE key = 'catalog_id'`);
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
