import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { findPostgresBin, ownDirectoryForPostgres, runPostgresProgram } from '../../servers/local-postgres';

/** A throwaway PostgreSQL server: `url` names its `postgres` database (user `postgres`, no password: trust). */
export interface TestPostgres {
  url: string;
  /** A new, empty database on this server, and its url: each test (or test file) gets rows of its own. */
  freshDatabase(prefix?: string): Promise<string>;
  stop(): Promise<void>;
  /** A server of the test's own (startPostgres): restarted as an operator restarts it (fast: sessions ended), same port. */
  restart?(): Promise<void>;
}

/**
 * Where the server's files go: memory (/dev/shm) when it has room, since a disk makes CREATE DATABASE (a
 * database per test) some 15 times slower even with fsync off; the system's temp directory otherwise.
 */
async function scratchRoot(): Promise<string> {
  const shm = '/dev/shm';
  try {
    await fs.promises.access(shm, fs.constants.W_OK);
    const stats = await fs.promises.statfs(shm);
    if (stats.bavail * stats.bsize >= 2 * 1024 ** 3) return shm;
  } catch {
    // no /dev/shm here
  }
  return os.tmpdir();
}

/** A TCP port free on 127.0.0.1 now (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * Starts a PostgreSQL server of its own in a new temp directory (in memory if it can), on a free port of 127.0.0.1, with durability
 * off (fsync, synchronous commit: a test server need not survive a power cut), and waits until it accepts
 * connections. initdb refuses to run as root: as root, the server runs as the `postgres` OS user.
 */
export async function startPostgres(opts: { tls?: { cert: string; key: string } } = {}): Promise<TestPostgres> {
  const bin = findPostgresBin();
  const asRoot = process.getuid?.() === 0;
  const dir = await fs.promises.mkdtemp(path.join(await scratchRoot(), 'tablefate-pg-'));
  const data = path.join(dir, 'data');
  const as = (cmd: string, args: string[]) => runPostgresProgram(bin, cmd, args);
  let started = false;
  try {
    await ownDirectoryForPostgres(dir);
    await as('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions']);
    // TLS: the server's certificate and key, copied where the server's user owns them (it refuses a key others can read).
    const tlsOptions: string[] = [];
    if (opts.tls) {
      const cert = path.join(dir, 'server.crt');
      const key = path.join(dir, 'server.key');
      await fs.promises.copyFile(opts.tls.cert, cert);
      await fs.promises.copyFile(opts.tls.key, key);
      await fs.promises.chmod(key, 0o600);
      if (asRoot) {
        const owner = await fs.promises.stat(dir);
        for (const file of [cert, key]) await fs.promises.chown(file, owner.uid, owner.gid);
      }
      tlsOptions.push('-c ssl=on', `-c ssl_cert_file=${cert}`, `-c ssl_key_file=${key}`);
    }
    // A port found free may be taken before the server binds it: try another then.
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      const options = [
        '-c listen_addresses=127.0.0.1',
        `-p ${port}`,
        `-k ${dir}`,
        '-c fsync=off',
        '-c synchronous_commit=off',
        '-c full_page_writes=off',
        '-c max_connections=200',
        ...tlsOptions,
      ].join(' ');
      try {
        await as('pg_ctl', ['-D', data, '-o', options, '-l', path.join(dir, 'server.log'), '-w', '-t', '30', 'start']);
        started = true;
        const server = handle(`postgres://postgres@127.0.0.1:${port}/postgres`, async () => {
          await as('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
          await fs.promises.rm(dir, { recursive: true, force: true });
        });
        // (pg_ctl restart starts it with the options it was started with; its log, given again, keeps its output off our pipe.)
        const log = path.join(dir, 'server.log');
        const restart = () => as('pg_ctl', ['-D', data, '-l', log, '-m', 'fast', '-w', '-t', '30', 'restart']).then(() => undefined);
        return { ...server, restart };
      } catch (err) {
        if (attempt >= 3) throw err;
      }
    }
  } catch (err) {
    const log = await fs.promises.readFile(path.join(dir, 'server.log'), 'utf8').catch(() => '');
    if (started) await as('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
    await fs.promises.rm(dir, { recursive: true, force: true });
    throw new Error(`could not start PostgreSQL from ${bin}: ${(err as Error).message}\n${log}`);
  }
}

/** Where jest's global setup leaves the url of the run's PostgreSQL server (see global-setup.ts). */
export const SHARED_POSTGRES_ENV = 'TABLEFATE_TEST_POSTGRES_URL';

/**
 * The run's PostgreSQL server, which jest's global setup started: tests make databases of their own on it
 * (freshDatabase), and its `stop` leaves it running for the next file. Outside jest (npm run chaos), a server of
 * its own, which `stop` stops.
 */
export async function sharedPostgres(): Promise<TestPostgres> {
  const url = process.env[SHARED_POSTGRES_ENV];
  if (!url) return startPostgres();
  return handle(url, () => Promise.resolve());
}

function handle(url: string, stop: () => Promise<void>): TestPostgres {
  let stopped = false;
  return {
    url,
    freshDatabase: (prefix = 'tablefate') => createDatabase(url, `${prefix}_${randomBytes(6).toString('hex')}`),
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await stop();
    },
  };
}

/** Creates database `name` on the server `serverUrl` points to; returns the url of the new database. */
export async function createDatabase(serverUrl: string, name: string): Promise<string> {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a plain database name: ${name}`);
  const client = new Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Runs `fn` with a plain client connected to `url`, and closes it. */
export async function withClient<T>(url: string, fn: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
