import fs from 'node:fs';
import path from 'node:path';
import type { Client as PgClient } from 'pg';

/*
 * The SQL statements a storage node's PostgreSQL completed while an operation ran, read from the server's own log, as a
 * bench counts them (bench/family.ts): every statement with its session, application, server time and text.
 */

/** After each counted operation, how long its statements are waited for (and any the operation leaves running behind it). */
export const SETTLE_MS = 1_500;

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The statements the node's server completed from one operation's call until SETTLE_MS after its answer. */
export interface OpStatements {
  /** When the operation was called and answered (this process's clock, ms since the epoch). */
  start: number;
  end: number;
  statements: LoggedStatement[];
}

export interface LoggedStatement {
  /** When the server completed it (ms since the epoch). */
  at: number;
  pid: number;
  app: string;
  /** Server time: its parse, bind and execute (extended protocol), or the whole statement (simple protocol). */
  ms: number;
  text: string;
}

/**
 * The operation's own: sent by the storage driver's sessions (application `tablefate storage <node>`) between its call
 * and its answer. The rest are other sessions' (the SQL door's sync of its trash view, begun by the operation's change
 * but run beside it, after the answer): counted apart.
 */
export const onPath = (op: OpStatements) =>
  op.statements.filter((s) => s.app.startsWith('tablefate storage') && s.at >= op.start && s.at <= op.end);
export const offPath = (op: OpStatements) => op.statements.filter((s) => !onPath(op).includes(s));

/**
 * The server's log as the bench reads it: every statement completed (`log_min_duration_statement = 0`) with its
 * session's pid, application and database. The bench's PostgreSQL (test/support/postgres.ts) logs to `server.log` beside
 * its data directory.
 */
export class StatementLog {
  private constructor(
    private readonly db: PgClient,
    private readonly file: string,
    private readonly database: string,
  ) {}

  static async open(db: PgClient): Promise<StatementLog> {
    const dataDir = (await db.query<{ data_directory: string }>('SHOW data_directory')).rows[0]!.data_directory;
    const file = path.join(path.dirname(dataDir), 'server.log');
    if (!fs.existsSync(file)) throw new Error(`the bench's PostgreSQL log is not at ${file}: cannot count statements`);
    const database = (await db.query<{ db: string }>('SELECT current_database() AS db')).rows[0]!.db;
    return new StatementLog(db, file, database);
  }

  /** Turns the logging of every statement on (or back off), for every session at its next statement. */
  async enable(on: boolean): Promise<void> {
    if (on) {
      await this.db.query(`ALTER SYSTEM SET log_line_prefix = '@@%n|%p|%a|%d| '`);
      await this.db.query(`ALTER SYSTEM SET log_min_duration_statement = 0`);
      // Parameters would be logged as DETAIL entries of their own: not needed to count.
      await this.db.query(`ALTER SYSTEM SET log_parameter_max_length = 0`);
    } else {
      await this.db.query('ALTER SYSTEM RESET log_line_prefix');
      await this.db.query('ALTER SYSTEM RESET log_min_duration_statement');
      await this.db.query('ALTER SYSTEM RESET log_parameter_max_length');
    }
    await this.db.query('SELECT pg_reload_conf()');
    await sleep(300);
  }

  size(): number {
    return fs.statSync(this.file).size;
  }

  /** The statements completed on the bench's database since byte `from` of the log, the bench's own session's left out. */
  statementsSince(from: number, ownPid: number): LoggedStatement[] {
    const fd = fs.openSync(this.file, 'r');
    let text: string;
    try {
      const length = fs.fstatSync(fd).size - from;
      const buffer = Buffer.alloc(Math.max(0, length));
      fs.readSync(fd, buffer, 0, buffer.length, from);
      text = buffer.toString('utf8');
    } finally {
      fs.closeSync(fd);
    }
    // One entry a prefixed line; a statement of several lines goes on in lines that are not prefixed.
    const entries: string[] = [];
    for (const line of text.split('\n')) {
      if (line.startsWith('@@')) entries.push(line);
      else if (entries.length > 0) entries[entries.length - 1] += `\n${line}`;
    }
    const statements: LoggedStatement[] = [];
    // The extended protocol's parse and bind are logged apart, before their execute: added to it.
    const pending = new Map<number, number>();
    for (const entry of entries) {
      const m =
        /^@@([0-9.]+)\|(\d+)\|([^|]*)\|([^|]*)\| LOG: {2}duration: ([0-9.]+) ms {2}(statement|execute|parse|bind)[^:]*: ([\s\S]*)$/.exec(
          entry,
        );
      if (!m || m[4] !== this.database || Number(m[2]) === ownPid) continue;
      const pid = Number(m[2]);
      const ms = Number(m[5]);
      if (m[6] === 'parse' || m[6] === 'bind') {
        pending.set(pid, (pending.get(pid) ?? 0) + ms);
        continue;
      }
      statements.push({ at: Number(m[1]) * 1000, pid, app: m[3]!, ms: ms + (pending.get(pid) ?? 0), text: m[7]!.trim() });
      pending.delete(pid);
    }
    return statements;
  }
}

/** Runs `op` and answers the statements the node completed meanwhile, and after it within SETTLE_MS. */
export async function countStatements(log: StatementLog, ownPid: number, op: () => Promise<unknown>): Promise<OpStatements> {
  const from = log.size();
  // (The log's times are the server's clock at millisecond precision, this process's the same machine's.)
  const start = Date.now() - 1;
  await op();
  const end = Date.now() + 1;
  await sleep(SETTLE_MS);
  return { start, end, statements: log.statementsSince(from, ownPid) };
}

/** A statement's shape: its identifiers, literals and numbers blanked, so that the same statement on two tables reads alike. */
export function shape(text: string): string {
  return text
    .replace(/\s+/g, ' ')
    .replace(/"[^"]*"/g, '"…"')
    .replace(/'[^']*'/g, "'…'")
    .replace(/\b\d+\b/g, 'N')
    .slice(0, 90);
}

/** What a kind of statement is, by its first word: transaction control, a read, a lock, a change of the schema, a write. */
export function kindOf(text: string): string {
  const word = /^\s*(\w+)/.exec(text)?.[1]?.toUpperCase() ?? '?';
  if (['BEGIN', 'COMMIT', 'ROLLBACK', 'SAVEPOINT', 'RELEASE', 'SET'].includes(word)) return 'transaction/session';
  if (word === 'SELECT' || word === 'WITH') return 'read (SELECT)';
  if (word === 'LOCK') return 'LOCK';
  if (['ALTER', 'CREATE', 'DROP'].includes(word)) return 'DDL (ALTER/CREATE/DROP)';
  if (['UPDATE', 'INSERT', 'DELETE'].includes(word)) return 'write (UPDATE/INSERT/DELETE)';
  return word;
}
