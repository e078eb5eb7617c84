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
 * The rules themselves (rules.ts) are shared with SqliteCatalog; this module holds the transactions and the connection
 * handling, postgres-tx.ts the SQL of each primitive (PgTx) and the row locks each takes, and pg-migrations.ts how the
 * schema (postgres-schema.ts) is brought to this code's version.
 *
 * The url's password is never logged nor put in an error: errors name the url without it.
 */
import { randomBytes } from 'node:crypto';
import { Client, Pool, types, type CustomTypesConfig } from 'pg';
import { CatalogNotFoundError, TableFateError } from '../domain/errors';
import { redactUrl } from '../domain/deployment';
import { assertCurrent, CatalogBehindError } from './migrations';
import { MIGRATIONS, SCHEMA_VERSION } from './postgres-schema';
import { pgCode, PgTx, tablesIn, type CatalogTables } from './postgres-tx';
import { appliedVersion, migrate, type PgMigrations } from './pg-migrations';
import { inPgTransaction, newPool } from './pg-session';
import { TransactionalCatalog } from './rules';
import type { CatalogTx } from './tx';

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

/** A deadlock or a serialization failure: PostgreSQL aborted the transaction, which may simply run again. */
const isTransient = (err: unknown) => pgCode(err) === '40001' || pgCode(err) === '40P01';

export interface PostgresCatalogOptions {
  /** Seeds the id counter of a new catalog (default 1). */
  firstTableId?: number;
  /**
   * For readers (the SDK, the command line, a storage node's worker): never create nor migrate a catalog. A database
   * without tablefate's catalog, or with one a worker is still making, is a CatalogNotFoundError; one whose schema is
   * behind this code a CatalogBehindError (both time cures: a worker makes it, or migrates it).
   */
  mustExist?: boolean;
  /** Connections in the pool (default 10). */
  poolSize?: number;
}

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

/** The catalog on a PostgreSQL database, shared by every worker, SDK and command line that names its url. */
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
      let id: string;
      if (opts.mustExist) {
        id = await madeCatalog(pool, where, tables);
      } else {
        await migrate(pool, catalogMigrations(tables));
        id = await identity(pool, where, tables);
      }
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

/**
 * The catalog's schema as pg-migrations.ts migrates it. A migration's SQL, written once and never edited, names the
 * catalog's tables bare: it runs with the catalog's schema first in its transaction's search_path.
 */
const catalogMigrations = (t: CatalogTables): PgMigrations => ({
  schema: t.schema,
  versions: t.schema_migrations,
  migrations: MIGRATIONS,
  lock: (c) => c.query(`SELECT pg_catalog.pg_advisory_xact_lock($1)`, [MIGRATION_LOCK_KEY]),
});

/**
 * For readers: the catalog must be there, made, and at this code's version; nothing is created or changed. Returns its
 * identity. A worker makes a catalog one migration per transaction, then writes its identity: a reader that meets it
 * in between (some versions applied, no identity yet) finds a catalog not made yet, one to wait for, not one behind.
 */
async function madeCatalog(pool: Pool, where: string, t: CatalogTables): Promise<string> {
  const { rows } = await pool.query<{ found: boolean }>(
    `SELECT pg_catalog.to_regclass($1) IS NOT NULL AND pg_catalog.to_regclass($2) IS NOT NULL AS found`,
    [t.schema_migrations, t.meta],
  );
  if (!rows[0]?.found) throw notFound(where);
  const version = await appliedVersion(pool, t.schema_migrations);
  const id = version === 0 ? undefined : await storedIdentity(pool, t);
  // A version newer than this code is refused all the same: no worker of this code will make it one to read.
  if (id === undefined && version <= SCHEMA_VERSION) throw notFound(where);
  assertCurrent(version, MIGRATIONS);
  return id!;
}

/** The catalog's identity: made once, with the catalog, and kept (8 hex digits, as SqliteCatalog's). */
async function identity(pool: Pool, where: string, t: CatalogTables): Promise<string> {
  await pool.query(`INSERT INTO ${t.meta} (key, value) VALUES ('catalog_id', $1) ON CONFLICT (key) DO NOTHING`, [
    randomBytes(4).toString('hex'),
  ]);
  const id = await storedIdentity(pool, t);
  if (id === undefined) throw notFound(where);
  return id;
}

async function storedIdentity(pool: Pool, t: CatalogTables): Promise<string | undefined> {
  const { rows } = await pool.query<{ value: string }>(`SELECT value FROM ${t.meta} WHERE key = 'catalog_id'`);
  return rows[0]?.value;
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
  // A catalog behind this code stays one: a worker of this version is migrating it, or will, and a reader waits for it.
  if (err instanceof CatalogBehindError) return new CatalogBehindError(`cannot open the catalog at ${where}: ${message}`);
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
