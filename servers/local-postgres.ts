import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * A PostgreSQL server run from this host's own installation (initdb, pg_ctl), for `tablefate cluster up` without a
 * `--postgres` and for the tests. initdb refuses to run as root: as root, its commands run as the `postgres` OS user,
 * who must then own the data directory and be able to reach it.
 */

/** The directory that holds initdb and pg_ctl: on PATH, or Debian's /usr/lib/postgresql/<version>/bin. */
export function findPostgresBin(): string {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir && fs.existsSync(path.join(dir, 'initdb')) && fs.existsSync(path.join(dir, 'pg_ctl'))) return dir;
  }
  const root = '/usr/lib/postgresql';
  const versions = fs.existsSync(root)
    ? fs
        .readdirSync(root)
        .filter((v) => fs.existsSync(path.join(root, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions[0] === undefined) {
    throw new Error('PostgreSQL is not installed (no initdb on PATH nor in /usr/lib/postgresql/*/bin): apt-get install postgresql');
  }
  return path.join(root, versions[0], 'bin');
}

/** A program of the PostgreSQL findPostgresBin finds (psql, pg_dump): beside its initdb, or beside what that links to. */
export function postgresProgram(name: string): string {
  const bin = findPostgresBin();
  const beside = path.join(bin, name);
  return fs.existsSync(beside) ? beside : path.join(path.dirname(fs.realpathSync(path.join(bin, 'initdb'))), name);
}

/** util-linux's runuser, which PATH may lack (/usr/sbin is not on every user's PATH). */
function runuser(): string {
  const found = ['/usr/sbin/runuser', '/sbin/runuser', '/usr/bin/runuser'].find((file) => fs.existsSync(file));
  return found ?? 'runuser';
}

const asRoot = () => process.getuid?.() === 0;

/** Runs one of PostgreSQL's programs (initdb, pg_ctl) from `bin`: as the `postgres` OS user when we are root. */
export function runPostgresProgram(bin: string, program: string, args: readonly string[]): Promise<{ stdout: string; stderr: string }> {
  const file = path.join(bin, program);
  return asRoot() ? run(runuser(), ['-u', 'postgres', '--', file, ...args]) : run(file, [...args]);
}

/** Gives `file` to the `postgres` OS user when we are root (initdb reads its password file as that user). */
export async function giveToPostgres(file: string): Promise<void> {
  if (!asRoot()) return;
  const { stdout: uid } = await run('id', ['-u', 'postgres']);
  const { stdout: gid } = await run('id', ['-g', 'postgres']);
  await fs.promises.chown(file, Number(uid.trim()), Number(gid.trim()));
}

/** Makes `dir` (created if missing) the `postgres` OS user's when we are root, so that its programs may write there. */
export async function ownDirectoryForPostgres(dir: string): Promise<void> {
  await fs.promises.mkdir(dir, { recursive: true });
  if (!asRoot()) return;
  await giveToPostgres(dir);
  // Every directory above must let the postgres user through (a home directory under /root does not).
  try {
    await run(runuser(), ['-u', 'postgres', '--', 'test', '-w', dir]);
  } catch {
    throw new Error(
      `the postgres OS user cannot write to ${dir} (a directory above it is closed to other users): ` +
        'use a state directory it can reach (TABLEFATE_HOME), or give a PostgreSQL server of your own',
    );
  }
}

/** The server's settings on the command line: `-c name=value` each, as pg_ctl's `-o` takes them. */
export function serverOptions(settings: Readonly<Record<string, string | number>>): string {
  return Object.entries(settings)
    .map(([name, value]) => `-c ${name}=${value}`)
    .join(' ');
}

/** Whether a server runs on data directory `data` now (pg_ctl status). */
export async function postgresRunning(bin: string, data: string): Promise<boolean> {
  try {
    await runPostgresProgram(bin, 'pg_ctl', ['-D', data, 'status']);
    return true;
  } catch {
    return false;
  }
}
