import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { findMariadbProgram, startLocalMariadb } from '../../servers/local-mariadb';
import { HOST } from '../../servers/local-host';

const run = promisify(execFile);

/** How long one statement of the `mariadb` client may take here (a test's statements are small). */
const CLIENT_TIMEOUT_MS = 30_000;

/** A throwaway MariaDB server: `url` names the server with no database (user `root`, no password). */
export interface TestMariadb {
  /** `mariadb://root@127.0.0.1:<port>/` */
  url: string;
  /** A new, empty database on this server, and its url (`.../<database>`): each test (or test file) gets rows of its own. */
  freshDatabase(prefix?: string): Promise<string>;
  /** Ends a server of the handle's own and removes its directory; leaves the run's shared server running. Idempotent. */
  stop(): Promise<void>;
  /** Where a server of the handle's own keeps its files (gone after stop); none for the run's shared server. */
  dir?: string;
}

/** Starts a MariaDB server of the test's own (servers/local-mariadb.ts): in a temp directory, on a free port. */
export async function startMariadb(): Promise<TestMariadb> {
  const server = await startLocalMariadb();
  return { ...handle(`mariadb://root@${HOST}:${server.port}/`, () => server.stop()), dir: server.dir };
}

/** Where a global setup that starts the run's MariaDB server leaves its url (none does yet: each file starts its own). */
export const SHARED_MARIADB_ENV = 'TABLEFATE_TEST_MARIADB_URL';

/**
 * The run's MariaDB server when one was started for it (SHARED_MARIADB_ENV): tests make databases of their own on it
 * (freshDatabase), and its `stop` leaves it running for the next file. Otherwise a server of its own (about a second
 * to start), which `stop` stops.
 */
export async function sharedMariadb(): Promise<TestMariadb> {
  const url = process.env[SHARED_MARIADB_ENV];
  if (!url) return startMariadb();
  return handle(url, () => Promise.resolve());
}

function handle(url: string, stop: () => Promise<void>): TestMariadb {
  let stopping: Promise<void> | null = null;
  return {
    url,
    freshDatabase: (prefix = 'tablefate') => createMariadbDatabase(url, `${prefix}_${randomBytes(6).toString('hex')}`),
    stop: () => (stopping ??= stop()),
  };
}

/** Creates database `name` on the server `serverUrl` points to; returns the url of the new database. */
export async function createMariadbDatabase(serverUrl: string, name: string): Promise<string> {
  // (A database is a directory: MariaDB allows 64 characters; plain ones need no quoting anywhere.)
  if (!/^[a-z_][a-z0-9_]{0,63}$/.test(name)) throw new Error(`not a plain database name: ${name}`);
  await mariadbQuery(serverUrl, `CREATE DATABASE ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * Runs `sql` (one or more statements) through the `mariadb` command-line client on the database `url` names (or
 * none), and returns the rows of its results, in order, each a list of its columns as text (NULL as `NULL`; a tab,
 * newline or backslash escaped, as the client's batch mode writes them). A client of the tests' own, so that a test
 * checks what the server holds by another way than the code it tests. `timeoutMs`: a longer wait than a test's
 * statements need (a bench's load of a gigabyte).
 */
export async function mariadbQuery(url: string, sql: string, opts: { timeoutMs?: number } = {}): Promise<string[][]> {
  const timeout = opts.timeoutMs ?? CLIENT_TIMEOUT_MS;
  const { hostname, port, username, password, pathname } = new URL(url);
  const database = decodeURIComponent(pathname.replace(/^\//, ''));
  const args = [
    '--no-defaults', // (first, or it is ignored: no ~/.my.cnf nor /etc/mysql)
    '--protocol=TCP',
    `--host=${hostname}`,
    `--port=${port || 3306}`,
    `--user=${decodeURIComponent(username) || 'root'}`,
    '--connect-timeout=10',
    '--batch',
    '--skip-column-names',
    ...(database ? [`--database=${database}`] : []),
    `--execute=${sql}`,
  ];
  try {
    // (The password in the environment, where another user's `ps` does not see it.)
    const env = password ? { ...process.env, MYSQL_PWD: decodeURIComponent(password) } : process.env;
    const { stdout } = await run(findMariadbProgram('mariadb'), args, { env, timeout, killSignal: 'SIGKILL' });
    return stdout
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => line.split('\t'));
  } catch (err) {
    const { stderr = '', killed } = err as { stderr?: string; killed?: boolean };
    throw new Error(`mariadb on ${url}: ${killed ? `no answer within ${timeout} ms` : stderr.trim() || (err as Error).message}\n${sql}`);
  }
}
