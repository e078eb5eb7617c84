import type { Pool, PoolClient } from 'pg';
import { TableBusyError } from '../domain/errors';
import { DEFAULT_DRAIN_TIMEOUT_SECONDS } from '../domain/limits';
import { checkWatch, type Watch } from './driver';
import { pauseUnlessAborted } from './pause';
import { locate } from './postgres-audit';
import { inNodeTransaction } from './postgres-node';
import { describeShard, type ShardTableId } from './postgres-record';

/**
 * The drain before a move or a drop: the change waits until no other transaction holds the table, asking for it briefly
 * and trying again on a backoff (a request left queued would hold up every reader that comes after it), up to its
 * deadline; then TableBusy, naming who holds the table.
 */

export interface MoveOptions {
  /** How long a move may wait for the sessions that use the table to let it go. */
  drainTimeoutMs?: number;
  /** Hears every try (an activity heartbeats); aborted, the wait stops with its reason. */
  watch?: Watch;
  /** Out of the live area: with the table's family (postgres-family.ts), rather than refused while others depend on it. */
  cascade?: boolean;
  /** Into the trash: the tables' whole namespace, dropped with them (postgres-namespace.ts): the schema is set aside too. */
  namespace?: string;
}

/** A session that held the table while a move drained it. */
export interface TableHolder {
  pid: number;
  user: string | null;
  applicationName: string;
  /** When its transaction began (or its query, outside one); null when PostgreSQL does not say. */
  since: Date | null;
}

export const DEFAULT_DRAIN_TIMEOUT_MS = DEFAULT_DRAIN_TIMEOUT_SECONDS * 1000;
// Each try queues an ACCESS EXCLUSIVE request that every later reader of the table waits behind: keep it short.
const LOCK_TRY = '100ms';
const FIRST_PAUSE_MS = 50;
const LONGEST_PAUSE_MS = 1_000;
export const LOCK_NOT_AVAILABLE = '55P03';
const UNDEFINED_TABLE = '42P01';
const INVALID_SCHEMA_NAME = '3F000';

/**
 * Locks relations (qualified names) ACCESS EXCLUSIVE, by the names this transaction read a moment before: one that
 * another transaction renamed, moved or dropped since (another move taking it along, its schema set aside) is no longer
 * there. That try ends as a lock not had does, and the next one reads the names again.
 */
export async function lockNamed(c: PoolClient, names: readonly string[]): Promise<void> {
  if (names.length === 0) return;
  try {
    await c.query(`LOCK TABLE ${names.join(', ')} IN ACCESS EXCLUSIVE MODE`);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code !== UNDEFINED_TABLE && code !== INVALID_SCHEMA_NAME) throw err;
    throw Object.assign(new Error(`${(err as Error).message}, though read in this try: the move is tried again`), {
      code: LOCK_NOT_AVAILABLE,
    });
  }
}

/** Makes the transaction's next lock requests brief tries: refused (55P03) rather than queued for long. */
export async function tryLocksBriefly(c: PoolClient): Promise<void> {
  await c.query(`SET LOCAL lock_timeout = '${LOCK_TRY}'`);
}

/**
 * Runs statements of a move each of which may fail on its own (a key or policy put back on a table that changed while it
 * was detached): all of them in one savepoint, and only when one fails, each again in a savepoint of its own, so that
 * it alone is left out. A lock not had at once is the move's to wait for, whichever statement met it: it ends the try.
 * Answers each statement's error message, or null where it ran.
 */
export async function eachOnItsOwn(c: PoolClient, statements: readonly string[]): Promise<Array<string | null>> {
  if (statements.length === 0) return [];
  const lockRefused = (err: unknown) => (err as { code?: unknown }).code === LOCK_NOT_AVAILABLE;
  await c.query('SAVEPOINT tablefate_each');
  try {
    for (const sql of statements) await c.query(sql);
    await c.query('RELEASE SAVEPOINT tablefate_each');
    return statements.map(() => null);
  } catch (err) {
    if (lockRefused(err)) throw err;
    await c.query('ROLLBACK TO SAVEPOINT tablefate_each');
  }
  const errors: Array<string | null> = [];
  for (const sql of statements) {
    await c.query('SAVEPOINT tablefate_one');
    try {
      await c.query(sql);
      await c.query('RELEASE SAVEPOINT tablefate_one');
      errors.push(null);
    } catch (err) {
      if (lockRefused(err)) throw err;
      await c.query('ROLLBACK TO SAVEPOINT tablefate_one');
      errors.push((err as Error).message);
    }
  }
  return errors;
}

/**
 * Runs `change` in a transaction of its own until it is not refused a lock (`lock_timeout`, 55P03), pausing on a
 * backoff between tries, up to `drainTimeoutMs`: then TableBusy, naming who holds the table.
 */
export async function withBriefLocks<T>(
  pool: Pool,
  id: ShardTableId,
  options: MoveOptions,
  change: (c: PoolClient, attempt: number) => Promise<T>,
): Promise<T> {
  const drainTimeoutMs = options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS;
  const deadline = Date.now() + drainTimeoutMs;
  for (let pause = FIRST_PAUSE_MS, attempt = 0; ; pause = Math.min(pause * 2, LONGEST_PAUSE_MS), attempt++) {
    checkWatch(options.watch);
    try {
      return await inNodeTransaction(pool, (c) => change(c, attempt));
    } catch (err) {
      if ((err as { code?: unknown }).code !== LOCK_NOT_AVAILABLE) throw err;
    }
    const left = deadline - Date.now();
    if (left <= 0) throw await busy(pool, id, drainTimeoutMs);
    await pauseUnlessAborted(Math.min(pause, left), options.watch?.signal);
  }
}

/** The error of a drain that ran out of time, naming the sessions holding the table now (ours excluded). */
async function busy(pool: Pool, id: ShardTableId, drainTimeoutMs: number): Promise<TableBusyError> {
  const at = await locate(pool, id);
  if (!at) return tableBusy(describeShard(id), drainTimeoutMs, []);
  const { rows } = await pool.query<{ pid: number; user: string | null; application_name: string; since: Date | null }>(
    `SELECT DISTINCT ON (a.pid) a.pid, a.usename AS user, a.application_name, coalesce(a.xact_start, a.query_start) AS since
       FROM pg_catalog.pg_locks l
       JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
      WHERE l.locktype = 'relation' AND l.granted
        -- The table, and the parents its foreign keys lock (a drop removes their triggers).
        AND l.relation IN (SELECT $1::oid UNION SELECT confrelid FROM pg_catalog.pg_constraint WHERE conrelid = $1 AND contype = 'f')
        AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
        AND l.pid <> pg_catalog.pg_backend_pid()
      ORDER BY a.pid`,
    [at.oid],
  );
  const holders = rows.map((r) => ({ pid: r.pid, user: r.user, applicationName: r.application_name, since: r.since }));
  return tableBusy(`${at.schema}.${at.table}`, drainTimeoutMs, holders);
}

/** A move that could not have the table to itself before its drain deadline: other sessions kept it, each named. */
function tableBusy(table: string, drainTimeoutMs: number, holders: readonly TableHolder[]): TableBusyError {
  const named = holders.map(
    (h) => `pid ${h.pid} (user ${h.user ?? '?'}, application "${h.applicationName}", since ${h.since?.toISOString() ?? '?'})`,
  );
  return new TableBusyError(
    `${table} is still in use after ${drainTimeoutMs} ms of waiting: ` +
      (named.length > 0 ? `held by ${named.join(', ')}` : 'its holders had just let it go'),
  );
}
