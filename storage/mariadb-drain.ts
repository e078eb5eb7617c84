import type { Pool, PoolConnection } from 'mariadb';
import { TableBusyError } from '../domain/errors';
import { DEFAULT_DRAIN_TIMEOUT_SECONDS } from '../domain/limits';
import { checkWatch, type Watch } from './driver';
import { errnoOf } from './mariadb-session';
import type { Place } from './mariadb-place';
import { pauseUnlessAborted } from './pause';

/**
 * The drain of a MariaDB move: each statement that needs a table to itself (a rename, a trigger or a key taken off or put
 * back) asks for it with `NOWAIT`, which the server refuses at once (1205) while another session holds the table or, for
 * a table in a foreign key pair, has written to the other one, and which never queues: a waiting exclusive request would
 * hold up every reader that comes after it (docs/next/mariadb-facts.md §7). Refused, it is tried again on a backoff up to
 * the move's deadline; then TableBusy, naming the sessions holding the table.
 */

export interface MoveOptions {
  /** How long a move may wait for the sessions that use the table to let it go. */
  drainTimeoutMs?: number;
  /** Hears every try (an activity heartbeats); aborted, the wait stops with its reason. */
  watch?: Watch;
  /** Out of the live area: other tables' foreign keys to it detached until its recall, rather than refused. */
  cascade?: boolean;
  /** Out of the live area: the live tables that leave with it (a drop of several as one), whose keys to it refuse nothing. */
  with?: readonly Place[];
  /** Hears each statement a move has made, once the server took it (the crash-point tests stop a worker there). */
  afterStatement?: (statement: string) => void;
}

const DEFAULT_DRAIN_TIMEOUT_MS = DEFAULT_DRAIN_TIMEOUT_SECONDS * 1000;
const FIRST_PAUSE_MS = 50;
const LONGEST_PAUSE_MS = 1_000;
const LOCK_WAIT_TIMEOUT = 1205;

/** The word that makes a statement refuse rather than wait, where its syntax takes it (after the first table's name). */
export const NOWAIT = 'NOWAIT';

/** A move's drain: its deadline (ms since the epoch), the wait it was given, and who hears each try. */
export interface Drain {
  deadline: number;
  timeoutMs: number;
  watch?: Watch;
  afterStatement?: (statement: string) => void;
}

/** The drain of a move that starts now. */
export function drainOf(options: MoveOptions): Drain {
  const timeoutMs = options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS;
  return { deadline: Date.now() + timeoutMs, timeoutMs, watch: options.watch, afterStatement: options.afterStatement };
}

/**
 * Runs `statement` (written with NOWAIT) until the server does not refuse it a lock, pausing on a backoff between tries,
 * up to the drain's deadline: then TableBusy, naming who holds `table`.
 */
export async function briefly(c: PoolConnection, statement: string, table: Place, drain: Drain): Promise<void> {
  const { deadline, watch } = drain;
  for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, LONGEST_PAUSE_MS)) {
    checkWatch(watch);
    try {
      await c.query(statement);
      drain.afterStatement?.(statement);
      return;
    } catch (err) {
      if (errnoOf(err) !== LOCK_WAIT_TIMEOUT) throw err;
    }
    const left = deadline - Date.now();
    if (left <= 0) throw await busy(c, table, drain.timeoutMs);
    await pauseUnlessAborted(Math.min(pause, left), watch?.signal);
  }
}

/** A session that held the table while a move drained it. */
interface Holder {
  id: number;
  user: string | null;
  host: string | null;
  seconds: number | null;
  what: string | null;
}

/**
 * The error of a drain that ran out of time, naming the sessions that hold the table's metadata lock now (the
 * metadata_lock_info plugin's view, which docs/mariadb.md asks a DBA to load); without the plugin, the sessions with a
 * transaction open, which is what a write to either table of a key pair holds.
 */
async function busy(c: PoolConnection | Pool, table: Place, timeoutMs: number): Promise<TableBusyError> {
  let holders: Holder[];
  try {
    holders = await c.execute<Holder[]>(
      `SELECT DISTINCT p.ID AS id, p.USER AS user, p.HOST AS host, p.TIME AS seconds, p.COMMAND AS what
         FROM information_schema.METADATA_LOCK_INFO m JOIN information_schema.PROCESSLIST p ON p.ID = m.THREAD_ID
        WHERE m.TABLE_SCHEMA = ? AND m.TABLE_NAME = ? AND m.THREAD_ID <> CONNECTION_ID() ORDER BY p.ID`,
      [table.database, table.table],
    );
  } catch {
    holders = await c.execute<Holder[]>(
      `SELECT p.ID AS id, p.USER AS user, p.HOST AS host, TIMESTAMPDIFF(SECOND, t.trx_started, NOW()) AS seconds, p.COMMAND AS what
         FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
        WHERE p.ID <> CONNECTION_ID() ORDER BY p.ID`,
    );
  }
  const named = holders.map((h) => `session ${h.id} (user ${h.user ?? '?'}@${h.host ?? '?'}, ${h.what ?? '?'} for ${h.seconds ?? '?'} s)`);
  return new TableBusyError(
    `${table.database}.${table.table} is still in use after ${timeoutMs} ms of waiting: ` +
      (named.length > 0 ? `held by ${named.join(', ')}` : 'its holders had just let it go'),
  );
}
