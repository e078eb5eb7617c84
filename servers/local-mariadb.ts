import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { describeExit, freePorts, HOST, logTail, spawnServer, type ServerExit } from './local-host';

const run = promisify(execFile);

/**
 * A throwaway MariaDB server run from this host's own installation (Debian's `mariadb-server`): a data directory made
 * by mariadb-install-db in a new temp directory, and mariadbd on it, listening on a free port of 127.0.0.1 and on a
 * socket inside that directory. `--no-defaults` everywhere: Debian's /etc/mysql configuration (its socket in
 * /run/mysqld, its own port) must neither reach nor disturb these servers, nor the system's own server reach them.
 * For the tests (test/support/mariadb.ts); see docs/next/mariadb-facts.md §1 for the recipe as it was checked.
 */

/** How long each step may take. Seen on a loaded 2-core VM: install 0.8-2.8 s, start 0.2-1.2 s (2-5.6 s after a SIGKILL). */
export const MARIADB_TIMEOUTS = {
  /** mariadb-install-db: the system tables, written by a bootstrap mariadbd. */
  installMs: 60_000,
  /** From mariadbd's start until it greets a client (crash recovery after a SIGKILL included). */
  readyMs: 30_000,
  /** From SIGTERM (a clean shutdown) until SIGKILL. */
  stopGraceMs: 10_000,
} as const;

/** The server's memory and files, kept small: a test server holds little, and starts faster with less to set up. */
const INNODB_OPTIONS = ['--innodb-buffer-pool-size=64M', '--innodb-log-file-size=16M'];

/** Where mariadbd lives (/usr/sbin, which a non-root user's PATH often lacks) and the other programs (/usr/bin). */
const MARIADB_DIRS = ['/usr/sbin', '/usr/bin'];

/** A MariaDB program (`mariadbd`, `mariadb-install-db`, the `mariadb` client): on PATH, else in /usr/sbin or /usr/bin. */
export function findMariadbProgram(name: string): string {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), ...MARIADB_DIRS];
  for (const dir of dirs) {
    const file = path.join(dir, name);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      if (fs.statSync(file).isFile()) return file;
    } catch {
      // not here
    }
  }
  throw new Error(
    `MariaDB's ${name} is not installed (not on PATH nor in ${MARIADB_DIRS.join(', ')}): apt-get install mariadb-server (bin/test-prerequisites does it)`,
  );
}

/** A running server of startLocalMariadb's. */
export interface LocalMariadb {
  /** Its TCP port on 127.0.0.1 (HOST). User `root`, no password. */
  port: number;
  /** Its temp directory: the data directory (`data`), the socket (`sock`) and the log (`server.log`). */
  dir: string;
  socket: string;
  pid: number;
  /** As the server greets a client: `10.11.19-MariaDB-0+deb12u1`. */
  version: string;
  /** How long the start took: mariadb-install-db, then mariadbd until it greeted. */
  installMs: number;
  readyMs: number;
  /** A clean shutdown (SIGTERM; SIGKILL after MARIADB_TIMEOUTS.stopGraceMs), then the directory removed. Idempotent. */
  stop(): Promise<void>;
}

/** Root may run mariadbd only when it says so (it refuses otherwise); any other user runs it as themselves. */
const userOption = (): string[] => (process.getuid?.() === 0 ? ['--user=root'] : []);

/**
 * Starts a MariaDB server in a new directory under `parent` (default the temp directory, in memory under jest: see
 * jest.config.js), and resolves once it greets a client. Root is `root@127.0.0.1` (and `@localhost`) without a
 * password. Nothing is left behind when it fails.
 */
export async function startLocalMariadb(opts: { parent?: string } = {}): Promise<LocalMariadb> {
  const installDb = findMariadbProgram('mariadb-install-db');
  const mariadbd = findMariadbProgram('mariadbd');
  const dir = await fs.promises.mkdtemp(path.join(opts.parent ?? os.tmpdir(), 'tablefate-mariadb-'));
  const socket = path.join(dir, 'sock');
  try {
    // (A Unix socket's path is at most 107 bytes: a deep temp directory would fail late, and less plainly.)
    if (Buffer.byteLength(socket) > 100) throw new Error(`the temp directory ${dir} is too deep for a socket in it: set TMPDIR shorter`);
    const installStart = Date.now();
    await installDataDirectory(installDb, dir);
    const installMs = Date.now() - installStart;
    // A port found free may be taken before the server binds it: mariadbd then exits, and another port is tried.
    for (let attempt = 1; ; attempt++) {
      const [port] = await freePorts(1);
      try {
        const started = await startServer(mariadbd, dir, port!);
        return { ...started, port: port!, dir, socket, installMs };
      } catch (err) {
        if (attempt >= 3 || !(err instanceof PortTakenError)) throw err;
      }
    }
  } catch (err) {
    await fs.promises.rm(dir, { recursive: true, force: true });
    throw err;
  }
}

/** The system tables, root without a password (`normal`: no unix_socket login, which names an OS user), no `test` database. */
async function installDataDirectory(installDb: string, dir: string): Promise<void> {
  const args = [
    '--no-defaults', // (first, or it is ignored)
    ...userOption(),
    `--datadir=${path.join(dir, 'data')}`,
    '--auth-root-authentication-method=normal',
    '--skip-test-db',
    // (The redo log's size is fixed here: 16 MB instead of 96 keeps the directory at some 33 MB.)
    '--innodb-log-file-size=16M',
  ];
  try {
    await run(installDb, args, { timeout: MARIADB_TIMEOUTS.installMs, killSignal: 'SIGKILL' });
  } catch (err) {
    const { stdout = '', stderr = '', killed } = err as { stdout?: string; stderr?: string; killed?: boolean };
    const why = killed ? `did not finish within ${MARIADB_TIMEOUTS.installMs} ms` : (err as Error).message.split('\n')[0];
    throw new Error(`${installDb} ${why}:\n${`${stdout}\n${stderr}`.trim().split('\n').slice(-20).join('\n')}`);
  }
}

/**
 * Starts mariadbd again on the data directory of a server of startLocalMariadb's, on the same port, after that server
 * was killed (a crash, as a chaos run makes one): InnoDB recovers, and clients find it where it was. Its `stop` stops
 * this process and removes the directory.
 */
export function restartLocalMariadb(dir: string, port: number): Promise<Omit<LocalMariadb, 'port' | 'dir' | 'socket' | 'installMs'>> {
  return startServer(findMariadbProgram('mariadbd'), dir, port);
}

class PortTakenError extends Error {}

/** Starts mariadbd on the data directory in `dir`, and waits until it greets a client on its socket. */
async function startServer(
  mariadbd: string,
  dir: string,
  port: number,
): Promise<Omit<LocalMariadb, 'port' | 'dir' | 'socket' | 'installMs'>> {
  const socket = path.join(dir, 'sock');
  const logFile = path.join(dir, 'server.log');
  await fs.promises.mkdir(path.join(dir, 'tmp'), { recursive: true });
  const args = [
    '--no-defaults',
    ...userOption(),
    `--datadir=${path.join(dir, 'data')}`,
    `--bind-address=${HOST}`,
    `--port=${port}`,
    `--socket=${socket}`,
    `--pid-file=${path.join(dir, 'pid')}`,
    `--log-error=${logFile}`,
    // Its temporary tables' files in its own directory, not the temp directory it shares with every process of the run
    // (TMPDIR): there, some 1 run in 7 of the MariaDB test files saw a server fail to make an information_schema
    // query's on-disk temporary table and crash on it (signal 11 in Aria's drop of the table it could not make).
    `--tmpdir=${path.join(dir, 'tmp')}`,
    // No binary log (nothing replicates from a test server), no DNS lookups of clients.
    '--skip-log-bin',
    '--skip-name-resolve',
    ...INNODB_OPTIONS,
    // Nothing to gain from warming the buffer pool of a throwaway server from its last run, or saving it for the next.
    '--innodb-buffer-pool-dump-at-shutdown=0',
    '--innodb-buffer-pool-load-at-startup=0',
    // information_schema.METADATA_LOCK_INFO: who holds a table's metadata lock (a drop names them).
    '--plugin-load-add=metadata_lock_info',
  ];
  const started = Date.now();
  // This attempt's lines only, in an error: the log keeps an earlier attempt's (a port taken meanwhile).
  const logStart = await fs.promises.stat(logFile).then(
    (s) => s.size,
    () => 0,
  );
  // (Its output before --log-error takes over, a refused option, goes to the same log.)
  const { child, exited, killOnExit } = spawnServer(mariadbd, args, logFile);
  const state: { exit: ServerExit | null } = { exit: null };
  void exited.then((e) => (state.exit = e));

  const fail = async (reason: string): Promise<never> => {
    if (!state.exit) {
      child.kill('SIGKILL');
      await exited;
    }
    const log = await logTail(logFile, logStart);
    const message = `MariaDB (${mariadbd}, ${HOST}:${port}) ${reason}.\nLast lines of its log (removed with its directory):\n${log}`;
    throw /Address already in use/.test(log) ? new PortTakenError(message) : new Error(message);
  };

  // Asked on its socket, not its port: a server that could not bind the port makes no socket (it exits first), so
  // a greeting there is from ours, never from another server that holds the port.
  let version: string | null = null;
  let lastError = 'no answer';
  while (version === null) {
    if (state.exit) return fail(describeExit(state.exit));
    if (Date.now() - started > MARIADB_TIMEOUTS.readyMs)
      return fail(`did not greet a client within ${MARIADB_TIMEOUTS.readyMs} ms (${lastError})`);
    const greeting = await greetingOn(socket);
    if (typeof greeting === 'string') version = greeting;
    else {
      lastError = greeting.error;
      await Promise.race([sleep(50), exited]);
    }
  }

  let stopping: Promise<void> | null = null;
  const stop = () =>
    (stopping ??= (async () => {
      // Keep this process alive until the server is gone, or the 'exit' handler would SIGKILL it mid-shutdown.
      child.ref();
      if (!state.exit) {
        child.kill('SIGTERM');
        const abort = new AbortController();
        const late = sleep(MARIADB_TIMEOUTS.stopGraceMs, 'late' as const, { signal: abort.signal }).catch(() => 'aborted' as const);
        const first = await Promise.race([exited, late]);
        abort.abort();
        if (first === 'late' && !state.exit) child.kill('SIGKILL');
      }
      await exited;
      process.off('exit', killOnExit);
      await fs.promises.rm(dir, { recursive: true, force: true });
    })());
  return { pid: child.pid!, version, readyMs: Date.now() - started, stop };
}

/**
 * What the server at `socket` says first to a client: the handshake packet's server version when it is ready (it
 * writes the packet once it accepts sessions), else why not. Read with no client library and no process per try.
 */
function greetingOn(socket: string): Promise<string | { error: string }> {
  return new Promise((resolve) => {
    const connection = net.connect({ path: socket });
    let received = Buffer.alloc(0);
    const done = (answer: string | { error: string }) => {
      connection.destroy();
      resolve(answer);
    };
    connection.setTimeout(1000, () => done({ error: 'no greeting within 1 s' }));
    connection.on('error', (err: NodeJS.ErrnoException) => done({ error: err.code ?? err.message }));
    connection.on('close', () => done({ error: 'closed before a whole greeting' }));
    connection.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      // A packet: a 3-byte length and a sequence byte, then its payload.
      if (received.length < 4 || received.length < 4 + received.readUIntLE(0, 3)) return;
      const payload = received.subarray(4, 4 + received.readUIntLE(0, 3));
      // Protocol 10's handshake: the version byte, then the server's version, NUL-terminated. Anything else is an
      // error packet (0xff, a 2-byte code, its text), as a server too busy for another client sends.
      if (payload[0] !== 10) return done({ error: `refused: ${payload.subarray(3).toString('utf8')}` });
      const version = payload.subarray(1, payload.indexOf(0, 1)).toString('utf8');
      // (MariaDB puts `5.5.5-` before its version, for MySQL clients that would read 10 as older than 5.)
      done(version.replace(/^5\.5\.5-/, ''));
    });
  });
}
