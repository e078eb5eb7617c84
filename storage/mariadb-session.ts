import { createPool, type Pool, type SqlError } from 'mariadb';
import { TableFateError } from '../domain/errors';
import type { ShardRef } from './driver';
import { PermanentStorageError, StorageIoError } from './errors';

/**
 * The MariaDB driver's sessions: the worker's own, on a server its users share. Every one starts with the same settings,
 * whatever the server's or the user's defaults say:
 * - `sql_mode` pinned to MariaDB's default, without ANSI_QUOTES or NO_BACKSLASH_ESCAPES: domain/mariadb-columns.ts reads a
 *   table's definition as a server in this mode does ("..." a string, a backslash an escape);
 * - the time zone UTC, for the record's times;
 * - no default database: every name in our statements is qualified, so none resolves anywhere by chance;
 * - a metadata-lock wait of 10 s at most (the server's default is a day) and an InnoDB row-lock wait of 10 s: a brief
 *   try of a move takes no wait at all (`NOWAIT`, mariadb-drain.ts), and any other statement of ours that meets a lock
 *   fails and is tried again rather than hold a queue;
 * - a statement runs 5 minutes at most, and a transaction left idle by a stalled worker is ended after a minute;
 * - one statement per call (the client's default, kept): a definition can never carry a second one.
 */
export const MARIADB_SESSION_SQL = [
  "SET SESSION sql_mode = 'STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION'",
  "SET SESSION time_zone = '+00:00'",
  'SET SESSION lock_wait_timeout = 10, innodb_lock_wait_timeout = 10',
  'SET SESSION max_statement_time = 300, idle_transaction_timeout = 60',
];

/** A pool of the worker's sessions on one node, from its url (`mariadb://user:password@host:port/`; a database in it is ignored). */
export function mariadbPool(url: string, node: string): Pool {
  const { hostname, port, username, password } = new URL(url);
  return createPool({
    host: hostname,
    port: port ? Number(port) : 3306,
    user: decodeURIComponent(username) || 'root',
    password: decodeURIComponent(password),
    connectionLimit: 4,
    connectTimeout: 15_000,
    acquireTimeout: 20_000,
    keepAliveDelay: 30_000,
    initSql: MARIADB_SESSION_SQL,
    bigIntAsNumber: true,
    insertIdAsNumber: true,
    decimalAsNumber: true,
    connectAttributes: { program_name: `tablefate storage ${node}` },
  });
}

/** A name quoted as MariaDB reads it: in backticks, a backtick inside doubled. */
export const ident = (name: string) => `\`${name.replace(/`/g, '``')}\``;
export const qualified = (db: string, table: string) => `${ident(db)}.${ident(table)}`;

/**
 * A server error number, if `err` is one the server (or the client, 45xxx) answered. Not a socket's error that the client
 * passes on as Node raised it (`write EPIPE`, `read ECONNRESET`: a connection lost), whose errno is the system's, negative.
 */
export const errnoOf = (err: unknown): number | undefined => {
  const errno = (err as Partial<SqlError> | null)?.errno;
  return typeof errno === 'number' && errno > 0 ? errno : undefined;
};

/** Server errors another attempt can fix: a lock not had, a deadlock, a statement interrupted, the server going away. */
const TRANSIENT = new Set([
  1040, // too many connections
  1053, // server shutdown in progress
  1205, // lock wait timeout (NOWAIT's answer too)
  1213, // deadlock
  1927, // connection was killed
  1969, // max_statement_time exceeded
  2002, // cannot connect
  2006, // server has gone away
  2013, // lost connection during query
]);

/** Whether a server error (not the client's own 45xxx) is one another attempt cannot fix. */
export const isPermanentMariadbErrno = (errno: number) => !TRANSIENT.has(errno);

/** Server errors that refuse the worker a privilege: its own configuration's fault, never a request's. */
export const PRIVILEGE_ERRNOS = new Set([1044, 1045, 1142, 1143, 1227, 1370]);

/**
 * A MariaDB error as storage/errors.ts classifies storage's: a server error that is not one of TRANSIENT (a privilege
 * refused, a table not there, a syntax error, a key's refusal) ends the operation, compensated; a transient one or a
 * client's own (a connection refused or cut: no errno, or the client's 45xxx) is tried again. Errors that already say
 * what they are pass as they are.
 */
export function classifiedMariadb(err: unknown, op: string, ref: ShardRef): unknown {
  if (err instanceof TableFateError) return err;
  const errno = errnoOf(err);
  if (errno !== undefined && errno < 45000 && isPermanentMariadbErrno(errno)) {
    return new PermanentStorageError(`${op} of ${describeRef(ref)} failed: ${(err as Error).message}`, { cause: err });
  }
  return new StorageIoError(op, `shard ${ref.shard} of table ${ref.tableId}`, ref.node, err);
}

export const describeRef = (ref: ShardRef) => `shard ${ref.shard} of table ${ref.tableId} on ${ref.node}`;
