import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { findPostgresBin } from '../../servers/local-postgres';

/**
 * pgbench, the real binary installed beside initdb, as the tests that load a table under tablefate's operations run it
 * (test/postgres-pgbench*.test.ts, test/postgres-truncate-load.test.ts).
 */

/**
 * pgbench, from the installation that holds initdb (Debian: /usr/lib/postgresql/<version>/bin), found beside initdb
 * or beside what initdb links to (a PATH directory with links to initdb and pg_ctl only).
 */
function pgbenchBin(): string {
  const bin = findPostgresBin();
  const dirs = [bin, path.dirname(fs.realpathSync(path.join(bin, 'initdb')))];
  const found = dirs.map((dir) => path.join(dir, 'pgbench')).find((file) => fs.existsSync(file));
  if (!found) throw new Error(`pgbench is not installed beside initdb (looked in ${dirs.join(', ')})`);
  return found;
}

export interface PgbenchResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface PgbenchRun {
  /** Its exit code, and everything it printed. */
  done: Promise<PgbenchResult>;
  /** Whether it has exited yet. */
  exited: () => boolean;
}

/**
 * Starts pgbench with `args` on the database at `url` (libpq's environment: host, port, user, database). It is in
 * `running` until it exits, so that a test file stops what a failed test left running.
 */
export function startPgbench(url: string, args: string[], running: Set<ChildProcess>): PgbenchRun {
  const at = new URL(url);
  const child = spawn(pgbenchBin(), args, {
    env: {
      ...process.env,
      PGHOST: at.hostname,
      PGPORT: at.port,
      PGUSER: decodeURIComponent(at.username),
      ...(at.password ? { PGPASSWORD: decodeURIComponent(at.password) } : {}),
      PGDATABASE: at.pathname.slice(1),
      PGAPPNAME: 'pgbench',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let exited = false;
  running.add(child);
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const done = new Promise<PgbenchResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      exited = true;
      running.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
  return { done, exited: () => exited };
}

/** pgbench's "number of transactions actually processed: N" (N/M with -t): the transactions it saw commit. */
export function processedOf(output: string): number | undefined {
  const found = /number of transactions actually processed: (\d+)/.exec(output);
  return found ? Number(found[1]) : undefined;
}

/** pgbench's "tps = X (without initial connection time)". */
export const tpsOf = (output: string) => Number(/tps = ([\d.]+)/.exec(output)?.[1] ?? NaN);
