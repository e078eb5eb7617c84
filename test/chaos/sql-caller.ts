import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import { ERROR_MEANINGS } from '../../domain/error-meanings';
import { isDomainErrorType } from '../../domain/errors';
import type { TableInfo, TableRecord } from '../../domain/table';
import type { Random } from './random';
import type { NodeDatabase } from './rows';
import type { DoorCallRecord, OpRequest, Outcome } from './ops';
import type { CallAnswer, Caller } from './callers';

/**
 * The SQL caller of a chaos run (`--caller sql`, postgres driver; issue 41): the drops, truncates (issue 43), recalls,
 * purges, holds, releases and retention changes go through the SQL door, `CALL tablefate_sql.<call>(...)` on the database of the node where
 * the table's shard lives, as a DBA's or an application's session would; what the door has no call for (create, leases)
 * and a table of several shards (the door takes a table of one shard: it refuses the others) go through the SDK. A drop
 * of a name no table of the catalog holds goes to a node where the user has no table of that name (the door would adopt
 * and drop it), and is refused there (42P01).
 *
 * It connects as a login role of the run's own, granted `tablefate_caller` (the door) and membership in the worker's
 * role (the tables' owner, which creates them: the throwaway server's `postgres`), so that it may drop, recall and
 * purge them as their owner's member may, and truncate them (the owner's TRUNCATE privilege, inherited); it is no
 * superuser. Each call is a session of its own, committed at once
 * (outside a transaction block): the procedure commits its request and waits for its answer.
 *
 * How a call's end maps onto what the scenario expects of an outcome, as CommandLineCaller maps exit codes:
 * - a row: the table as answered, read whole from the request's `answer` (TableInfo) in `tablefate_sql.requests`,
 *   after checking that the row says what the answer says;
 * - an ERROR whose DETAIL is `<type>; request N`: tablefate's answer, that type (a domain error: rejected; any other:
 *   failed), its SQLSTATE checked against the one said for the type;
 * - an ERROR without DETAIL among the procedure's own refusals (42P01, 55000, 42809, 42501, 22023, 22004): refused
 *   before any request, nothing asked: rejected with the type the SDK would give (TableNotFound for a table that is
 *   not there, or not tablefate's; InvalidInput), or NotAllowed / NotATable, which the run never deserves;
 * - TF001 (the wait ended), a lost connection, a call given up: no answer (the request, if committed, goes on).
 */

/** How long a call may take beyond its own wait before it is given up (its session closed): no answer. */
const GRACE_MS = 15_000;

/** The procedure's refusals before any request (docs/postgres.md, "What the door refuses"), as the SDK's types. */
const REFUSED_BEFORE_REQUEST: Readonly<Record<string, string>> = {
  // No such table; or (55000, a door before adopt and drop in one step) one that is not tablefate's: for tablefate there
  // is no table of that name either way.
  '42P01': 'TableNotFound',
  '55000': 'TableNotFound',
  '42809': 'NotATable',
  '42501': 'NotAllowed',
  '22023': 'InvalidInput',
  '22004': 'InvalidInput',
};

/** What a call through the door is: on which node, the statement, and how it reads in ops.json. */
interface DoorStatement {
  node: NodeDatabase;
  sql: string;
  values: unknown[];
  text: string;
}

/** The door's row: the table as the operation left it. */
interface DoorRow {
  request_id: string;
  table_id: string | null;
  table: string | null;
  state: string | null;
  expires_at: Date | null;
  held_since: Date | null;
  hold_reason: string | null;
  notes: string[] | null;
}

/** A PostgreSQL error as `pg` gives it. */
interface PgError {
  code?: unknown;
  detail?: unknown;
  message?: unknown;
}

const quote = (value: string) => `'${value.replace(/'/g, "''")}'`;

/**
 * The node of a table of one shard (undefined: several, which the door does not take). When the catalog has none, any
 * node where no table of the user's holds the name a drop gives: the door adopts and drops a table tablefate does not
 * keep yet, and the user's tables must stay untouched.
 */
function nodeFor(
  before: TableRecord | undefined,
  nodes: readonly NodeDatabase[],
  rng: Random,
  dropOf: string | undefined,
  userTables: ReadonlySet<string>,
): NodeDatabase | undefined {
  if (!before) {
    const free = nodes.filter((n) => dropOf === undefined || !userTables.has(`${n.node} ${dropOf}`));
    return free.length > 0 ? rng.pick(free) : undefined;
  }
  if (before.params.shards !== 1 || before.placement.length !== 1) return undefined;
  return nodes.find((n) => n.node === before.placement[0]!.node);
}

/** The door's statement for `request`, or undefined when it goes through the SDK. */
function statementOf(
  request: OpRequest,
  before: TableRecord | undefined,
  nodes: readonly NodeDatabase[],
  rng: Random,
  waitSeconds: number,
  userTables: ReadonlySet<string>,
): DoorStatement | undefined {
  const wait = `wait_seconds => ${waitSeconds}`;
  const call = (name: string, args: Array<[string | null, string | number | boolean]>) => {
    const params = args.map(([param], i) => (param === null ? `$${i + 1}` : `${param} => $${i + 1}`));
    const shown = args.map(([param, value]) => {
      const literal = typeof value === 'string' ? quote(value) : String(value);
      return param === null ? literal : `${param} => ${literal}`;
    });
    return {
      sql: `CALL tablefate_sql.${name}(${[...params, wait].join(', ')})`,
      values: args.map(([, value]) => value),
      text: `CALL tablefate_sql.${name}(${[...shown, wait].join(', ')})`,
    };
  };
  const on = (statement: Omit<DoorStatement, 'node'>): DoorStatement | undefined => {
    const node = nodeFor(before, nodes, rng, request.kind === 'trash' ? request.table : undefined, userTables);
    return node ? { node, ...statement } : undefined;
  };
  // Several tables as one, or one of them alone: the SDK's (the door's calls name one table).
  // A whole namespace, or a recall into another one: the SDK's too.
  if (
    (request.kind === 'trash' && (request.together || request.namespace)) ||
    (request.kind === 'undelete' && (request.alone || request.newNamespace))
  )
    return undefined;
  switch (request.kind) {
    case 'trash':
      return on(
        call('drop', [
          [null, request.table],
          ['retention_seconds', request.retentionSeconds],
          ...(request.drainTimeoutSeconds === undefined
            ? []
            : [['drain_timeout_seconds', request.drainTimeoutSeconds] as [string, number]]),
          ...(request.cascade ? [['cascade', true] as [string, boolean]] : []),
        ]),
      );
    case 'truncate':
      // By the table's id or its name, as the door takes either.
      return on(
        call('truncate', [
          [null, 'tableId' in request ? String(request.tableId) : request.table],
          ['retention_seconds', request.retentionSeconds],
          ...(request.drainTimeoutSeconds === undefined
            ? []
            : [['drain_timeout_seconds', request.drainTimeoutSeconds] as [string, number]]),
        ]),
      );
    case 'undelete':
      return on(
        call('recall', [[null, String(request.tableId)], ...(request.newName ? [['new_name', request.newName] as [string, string]] : [])]),
      );
    case 'purge':
      return on(call('purge', [[null, String(request.tableId)]]));
    case 'hold':
      return on(
        call('hold', [
          [null, String(request.tableId)],
          ['reason', request.reason],
        ]),
      );
    case 'release':
      return on(call('release', [[null, String(request.tableId)]]));
    case 'retention':
      return on(
        call('retention', [
          [null, String(request.tableId)],
          ['retention_seconds', request.retentionSeconds],
        ]),
      );
    case 'create':
    case 'lease':
    case 'renewLease':
    case 'releaseLease':
      return undefined;
  }
}

const time = (value: Date | string | null | undefined): number | null =>
  value === null || value === undefined ? null : new Date(value).getTime();

/** What the door's row says that its answer does not (empty: they agree). */
function rowDisagreement(row: DoorRow, info: TableInfo): string[] {
  const wrong: string[] = [];
  const check = (what: string, row: unknown, answer: unknown) => {
    if (row !== answer) wrong.push(`${what} ${JSON.stringify(row)} where the answer says ${JSON.stringify(answer)}`);
  };
  check('table_id', row.table_id === null ? null : Number(row.table_id), info.id);
  check('table', row.table, `${info.namespace}.${info.name}`);
  check('state', row.state, info.state);
  check('expires_at', time(row.expires_at), time(info.expireAt));
  check('held_since', time(row.held_since), time(info.hold?.since));
  check('hold_reason', row.hold_reason, info.hold?.reason ?? null);
  check('notes', JSON.stringify(row.notes ?? []), JSON.stringify(info.notes ?? []));
  return wrong;
}

/** What the caller learned from the door's ERROR, and what it knows of the request. */
function outcomeOfError(err: unknown, node: string): { outcome: Outcome; record: Partial<DoorCallRecord> } {
  const { code, detail, message: raw } = (err ?? {}) as PgError;
  const message = typeof raw === 'string' ? raw : String(err);
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) {
    // No SQLSTATE: the session was lost (or never made); the request, if it was committed, goes on.
    return { outcome: { kind: 'unknown', reason: `the door's session on ${node} failed: ${message.split('\n')[0]}` }, record: {} };
  }
  const requestOf = (text: string) => {
    const id = /request (\d+)/.exec(text)?.[1];
    return id === undefined ? {} : { requestId: Number(id) };
  };
  const said = `[${node}, SQLSTATE ${code}] ${message}`;
  if (code === 'TF001')
    return {
      outcome: { kind: 'unknown', reason: `TF001 (the wait ended): ${message}` },
      record: { sqlstate: code, ...requestOf(message) },
    };
  const answered = /^([A-Za-z]+); request (\d+)$/.exec(typeof detail === 'string' ? detail : '');
  if (answered) {
    const type = answered[1]!;
    const record = { sqlstate: code, requestId: Number(answered[2]), errorType: type };
    if (!isDomainErrorType(type)) return { outcome: { kind: 'failed', type, message: said }, record };
    if (ERROR_MEANINGS[type].sqlstate !== code) {
      const mismatch = `${type} came with SQLSTATE ${code}, not ${ERROR_MEANINGS[type].sqlstate}: ${message}`;
      return { outcome: { kind: 'failed', type: 'DoorSqlstateMismatch', message: mismatch }, record };
    }
    return { outcome: { kind: 'rejected', type: `${type}Error`, message: said }, record };
  }
  const refused = REFUSED_BEFORE_REQUEST[code];
  if (refused !== undefined && detail === undefined) {
    return {
      outcome: { kind: 'rejected', type: `${refused}Error`, message: `refused by the door before any request ${said}` },
      record: { sqlstate: code, refusedBeforeRequest: true, errorType: refused },
    };
  }
  // Class 08 (connection) and 57P (the server ended the session): no answer; the request may have been committed.
  if (code.startsWith('08') || code.startsWith('57P')) return { outcome: { kind: 'unknown', reason: said }, record: { sqlstate: code } };
  return { outcome: { kind: 'failed', type: `SQLSTATE ${code}`, message: said }, record: { sqlstate: code } };
}

/** A session of the caller's role on a node, closed after one call. */
async function callOnce(
  statement: DoorStatement,
  applicationName: string,
  timeoutMs: number,
  signal: AbortSignal,
  sessions: Set<Client>,
): Promise<{ outcome: Outcome; record: DoorCallRecord }> {
  const record: DoorCallRecord = { node: statement.node.node, call: statement.text };
  const client = new Client({ connectionString: statement.node.url, application_name: applicationName });
  client.on('error', () => undefined);
  sessions.add(client);
  const giveUp = new AbortController();
  const onAbort = () => giveUp.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  const givenUp = sleep(timeoutMs + GRACE_MS, undefined, { signal: giveUp.signal }).then(
    () => `no answer within ${(timeoutMs + GRACE_MS) / 1000} s: the session was closed`,
    () => (signal.aborted ? 'the run was interrupted' : ''),
  );
  const within = async <T>(work: Promise<T>): Promise<T> => {
    const outcome = await Promise.race([work.then((value) => ({ value })), givenUp.then((reason) => ({ reason }))]);
    if ('reason' in outcome) throw Object.assign(new Error(outcome.reason), { givenUp: true });
    return outcome.value;
  };
  try {
    await within(client.connect());
    const { rows } = await within(client.query<DoorRow>(statement.sql, statement.values));
    const row = rows[0];
    if (!row) return { outcome: { kind: 'failed', type: 'DoorNoRow', message: `${statement.text} answered no row` }, record };
    record.requestId = Number(row.request_id);
    if (row.state === 'queued') {
      // Outside a transaction block the call commits its request and waits: queued says it thought it was inside one.
      const message = `${statement.text} answered request ${row.request_id} queued, as inside a transaction block`;
      return { outcome: { kind: 'failed', type: 'DoorQueued', message }, record };
    }
    const { rows: requests } = await within(
      client.query<{ answer: TableInfo | null; sqlstate: string | null; state: string }>(
        'SELECT answer, sqlstate, state FROM tablefate_sql.requests WHERE id = $1',
        [record.requestId],
      ),
    );
    const info = requests[0]?.answer;
    if (!info || requests[0]?.state !== 'answered') {
      const message = `request ${row.request_id} answered a row, but tablefate_sql.requests has ${JSON.stringify(requests[0] ?? null)}`;
      return { outcome: { kind: 'failed', type: 'DoorAnswerMissing', message }, record };
    }
    const wrong = rowDisagreement(row, info);
    if (wrong.length > 0) {
      const message = `request ${row.request_id}'s row says ${wrong.join('; ')}`;
      return { outcome: { kind: 'failed', type: 'DoorRowMismatch', message }, record };
    }
    return { outcome: { kind: 'ok', table: info }, record };
  } catch (err) {
    if ((err as { givenUp?: boolean }).givenUp) return { outcome: { kind: 'unknown', reason: (err as Error).message }, record };
    const { outcome, record: learned } = outcomeOfError(err, statement.node.node);
    return { outcome, record: { ...record, ...learned, ...(record.requestId === undefined ? {} : { requestId: record.requestId }) } };
  } finally {
    signal.removeEventListener('abort', onAbort);
    giveUp.abort();
    sessions.delete(client);
    // (A session given up mid-call is closed under the procedure, which ends its wait on its own; the request goes on.)
    void client.end().catch(() => undefined);
  }
}

/**
 * One client of the run through the SQL door: the door's calls on a table of one shard go to its node's door, the
 * rest to `sdk`.
 */
export class SqlCaller implements Caller {
  private readonly sessions = new Set<Client>();
  private readonly userTables: ReadonlySet<string>;

  /** `userTables`: the user's own tables (`<node> <schema>.<table>`), which the door must never be asked to drop. */
  constructor(
    private readonly sdk: Caller,
    private readonly nodes: readonly NodeDatabase[],
    private readonly rng: Random,
    private readonly applicationName: string,
    userTables: readonly string[],
  ) {
    this.userTables = new Set(userTables);
  }

  async answer(request: OpRequest, before: TableRecord | undefined, timeoutMs: number, signal: AbortSignal): Promise<CallAnswer> {
    const waitSeconds = Math.max(1, Math.floor(timeoutMs / 1000));
    const statement = statementOf(request, before, this.nodes, this.rng, waitSeconds, this.userTables);
    if (!statement) return this.sdk.answer(request, before, timeoutMs, signal);
    const { outcome, record } = await callOnce(statement, this.applicationName, timeoutMs, signal, this.sessions);
    return { outcome, door: record };
  }

  async close(): Promise<void> {
    await Promise.all([...this.sessions].map((client) => client.end().catch(() => undefined)));
    await this.sdk.close();
  }
}

/** The door's own schema of the run on each node: the answers the door writes, counted as they are written. */
export const DOOR_COUNT_SCHEMA = 'chaos_door';

/**
 * The DBA's part, before any worker prepares a node (it grants the door to `tablefate_caller` when it installs it): the
 * role `tablefate_caller` (if not there), and a login role of the run's own granted it and membership in `owner` (the
 * worker's role, which owns the tables). Answers the role's name.
 */
export async function makeDoorCallerRole(serverUrl: string, owner: string): Promise<string> {
  const role = `chaos_sql_${randomBytes(3).toString('hex')}`;
  const admin = new Client({ connectionString: serverUrl, application_name: 'chaos dba' });
  await admin.connect();
  try {
    await admin.query(`DO $$ BEGIN CREATE ROLE tablefate_caller NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
    await admin.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`);
    await admin.query(`GRANT tablefate_caller TO ${role}`);
    await admin.query(`GRANT "${owner.replace(/"/g, '""')}" TO ${role}`);
  } finally {
    await admin.end();
  }
  return role;
}

/** `url` as `role` (no password: the run's server trusts its local connections). */
export function urlAs(url: string, role: string): string {
  const as = new URL(url);
  as.username = role;
  as.password = '';
  return as.toString();
}

/**
 * Once the first worker has prepared each node (its record, with tablefate.sql_requests, and the door): a trigger that
 * counts each request's transitions to 'answered' into the run's own table, `chaos_door.answers`, so that the end of
 * the run sees whether any request was answered twice. Waits for the door on each node (at most `timeoutMs`).
 */
export async function countDoorAnswers(nodes: readonly NodeDatabase[], timeoutMs = 60_000): Promise<void> {
  for (const { node, url } of nodes) {
    const admin = new Client({ connectionString: url, application_name: 'chaos dba' });
    await admin.connect();
    try {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const { rows } = await admin.query<{ there: boolean }>(
          `SELECT to_regclass('tablefate.sql_requests') IS NOT NULL
              AND to_regprocedure('tablefate_sql._request(text, text, jsonb, uuid)') IS NOT NULL AS there`,
        );
        if (rows[0]?.there) break;
        if (Date.now() > until) throw new Error(`no SQL door on ${node} within ${timeoutMs / 1000} s after the first worker started`);
        await sleep(250);
      }
      await admin.query(`CREATE SCHEMA ${DOOR_COUNT_SCHEMA};
        CREATE TABLE ${DOOR_COUNT_SCHEMA}.answers (
          id bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp(),
          by_application text DEFAULT current_setting('application_name'), sqlstate text);
        CREATE FUNCTION ${DOOR_COUNT_SCHEMA}.count_answer() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN INSERT INTO ${DOOR_COUNT_SCHEMA}.answers (id, sqlstate) VALUES (NEW.id, NEW.sqlstate); RETURN NEW; END $$;
        CREATE TRIGGER chaos_counted AFTER UPDATE ON tablefate.sql_requests FOR EACH ROW
          WHEN (NEW.state = 'answered' AND OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION ${DOOR_COUNT_SCHEMA}.count_answer()`);
    } finally {
      await admin.end();
    }
  }
}
