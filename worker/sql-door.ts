import { formatTableName } from '../domain/names';
import os from 'node:os';
import { Client as PgClient, Pool } from 'pg';
import type { Logger } from './logger';
import { ERROR_MEANINGS } from '../domain/error-meanings';
import { isDomainErrorType, isOperationFailureType, TableFateError } from '../domain/errors';
import { POSTGRES_OWN_SCHEMAS } from '../domain/deployment';
import { DOOR_CALLER_ROLE, DOOR_CHANNEL, DOOR_SCHEMA, prepareDoor } from '../storage/postgres-door-sql';
import { STORAGE_SESSION } from '../storage/postgres';
import { REFERENCING } from '../storage/postgres-truncate';
import type { TableInfo, TableRecord } from '../domain/table';
import type { RecallInPlaceInput } from '../domain/operation-inputs';
import { TrashCopy } from './sql-door-trash';

/** The SDK's calls the door makes (client/call-table.ts), by the names the SDK gives them. */
type DoorCall = 'trash' | 'truncate' | 'undelete' | 'purge' | 'hold' | 'release' | 'setRetention';

/** What the door asks of the SDK (contract/sdk.ts's client): a call's two halves, in the name of who asked. */
export interface DoorCaller {
  planCall(name: DoorCall, request: unknown): Promise<{ done: unknown } | { plan: unknown }>;
  executeCall(
    name: DoorCall,
    plan: unknown,
    opts: { requestId: string; runKey: string; onRun?: (workflowId: string) => void },
  ): Promise<unknown>;
}

export interface SqlDoorOptions {
  node: string;
  url: string;
  catalogId: string;
  /** The SDK, in the name of `identity` (who asked, through which door: what `history` shows). */
  callerFor: (identity: string) => DoorCaller;
  logger: Logger;
  /** How often the door looks for requests no notification told it of (default 2 s). */
  sweepMs?: number;
  /** The catalog's table of that id (null: there is none). */
  tableOf: (tableId: number) => Promise<TableRecord | null>;
  /** Makes the node's record (its schemas, its migrations), before the door makes its procedures and first listens. */
  prepare: () => Promise<void>;
}

/** The SDK's call each procedure of the door makes (storage/postgres-door-sql.ts). */
const CALL_OF: Record<string, DoorCall> = {
  drop: 'trash',
  truncate: 'truncate',
  recall: 'undelete',
  purge: 'purge',
  hold: 'hold',
  release: 'release',
  retention: 'setRetention',
};

/** What a request of a table by its id or name asks the SDK (a drop's is made of its table: planDrop). */
type TableArgs = {
  table: string;
  newName?: string;
  inPlace?: boolean;
  reason?: string;
  retentionSeconds?: number;
  drainTimeoutSeconds?: number;
  cascade?: boolean;
};
const SDK_REQUEST: Record<Exclude<DoorCall, 'trash'>, (args: TableArgs) => unknown> = {
  truncate: ({ table, retentionSeconds, drainTimeoutSeconds, cascade }) => ({
    table,
    ...(retentionSeconds === undefined ? {} : { retentionSeconds }),
    ...(drainTimeoutSeconds === undefined ? {} : { drainTimeoutSeconds }),
    ...(cascade ? { cascade } : {}),
  }),
  undelete: ({ table, newName, inPlace }) => ({ table, ...(newName ? { newName } : {}), ...(inPlace ? { inPlace } : {}) }),
  purge: ({ table }) => ({ tableId: Number(table) }),
  hold: ({ table, reason }) => ({ table, ...(reason === undefined ? {} : { reason }) }),
  release: ({ table }) => ({ table }),
  setRetention: ({ table, retentionSeconds }) => ({ table, retentionSeconds }),
};

const OWN = POSTGRES_OWN_SCHEMAS.own;
/** A request's own columns as the door reads them: what it asks, and who asked (its `Taken` fields). */
const WHO_ASKED = `r.id, r.op, r.args, r.request_uuid, r.requester, r.requester_name, r.session_user_name, r.application_name,
  pg_catalog.host(r.client_addr) AS client_addr`;
/** Requests one pass takes at most. */
const BATCH = 50;
/** How long an answered request stays readable in `tablefate_sql.requests`. */
export const ANSWERS_KEPT_DAYS = 30;
const PRUNE_EVERY_MS = 3600_000;

/** A request as the door takes it. */
interface Taken {
  id: string;
  op: string;
  args: Record<string, unknown>;
  request_uuid: string;
  requester: string;
  requester_name: string;
  session_user_name: string;
  application_name: string | null;
  client_addr: string | null;
  table_id: string | null;
  shard: number | null;
  /** Where the request's table is now (its schema and name): a table tablefate does not keep yet is adopted by them. */
  schema_name: string | null;
  rel_name: string | null;
  table_there: boolean;
  may: boolean | null;
  plan: unknown;
}

/**
 * The worker's half of the SQL door on one PostgreSQL node: it takes the requests the door's procedures commit, runs
 * each as the SDK runs the call (the same workflows, the same guarantees), and writes its answer back for the caller who
 * waits (or reads it later).
 *
 * Each request runs once. The door claims requests in a transaction (`FOR UPDATE SKIP LOCKED`: two workers serving one
 * node share them), plans each one there and records the plan with it, so that a request is never planned twice (a
 * drop planned again after it ran would find its table trashed). While it executes a request it holds a session
 * advisory lock on it: a request left planned by a worker that died (its session, and the lock, gone with it) is taken
 * by the next sweep, and its execution joins the run the first one started (the start carries the request's uuid as its
 * request id), or reads its answer. The answer is written once (`WHERE state = 'planned'`).
 *
 * A notification on DOOR_CHANNEL wakes the door at once; anyone may notify, so it is only a hint, and the sweep every
 * `sweepMs` is what makes pick-up sure.
 */
export class SqlDoor {
  private session: PgClient | undefined;
  /** For the answers: apart from the session, whose claims are transactions an answer must not land in. */
  private readonly pool: Pool;
  private sweep: NodeJS.Timeout | undefined;
  private passing: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private readonly executing = new Map<string, Promise<void>>();
  private readonly me = `${os.hostname()}:${process.pid}`;
  private readonly trash: TrashCopy;
  private prunedAt = 0;
  private toldOfCallerRole = false;

  constructor(private readonly opts: SqlDoorOptions) {
    this.pool = new Pool({ connectionString: opts.url, max: 2, application_name: `tablefate door ${opts.node}`, ...STORAGE_SESSION });
    this.pool.on('error', () => undefined);
    this.trash = new TrashCopy(this.pool, opts.catalogId, opts.tableOf);
  }

  /** Starts taking requests; a node that cannot be reached yet is tried again at each sweep. */
  async start(): Promise<void> {
    this.sweep = setInterval(() => this.wake(), this.opts.sweepMs ?? 2000);
    this.wake();
    await this.passing;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.sweep);
    await this.passing?.catch(() => undefined);
    await this.session?.end().catch(() => undefined);
    await this.pool.end().catch(() => undefined);
  }

  /** Runs a pass now, or once more after the one under way. */
  wake(): void {
    if (this.stopped) return;
    if (this.passing) {
      this.again = true;
      return;
    }
    this.passing = this.pass()
      .catch((err: unknown) =>
        this.opts.logger.warn({ err, node: this.opts.node }, 'the SQL door could not take its requests; it tries again'),
      )
      .finally(() => {
        this.passing = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  /** The door's own session: it listens, claims, and holds the advisory lock of each request it executes. */
  private async connect(): Promise<PgClient> {
    if (this.session) return this.session;
    await this.opts.prepare();
    const { callerRole } = await prepareDoor(this.pool);
    if (!callerRole && !this.toldOfCallerRole) {
      this.toldOfCallerRole = true;
      this.opts.logger.warn(
        { node: this.opts.node },
        `the SQL door is shut on ${this.opts.node} but to superusers and tablefate's role: there is no role ${DOOR_CALLER_ROLE}. ` +
          `A DBA opens it with CREATE ROLE ${DOOR_CALLER_ROLE} NOLOGIN; GRANT ${DOOR_CALLER_ROLE} TO <role>; then restart the worker`,
      );
    }
    const session = new PgClient({
      connectionString: this.opts.url,
      application_name: `tablefate door ${this.opts.node}`,
      ...STORAGE_SESSION,
    });
    session.on('notification', () => this.wake());
    session.on('error', (err) => {
      this.opts.logger.warn({ err, node: this.opts.node }, "the SQL door's session failed; it connects again");
      if (this.session === session) this.session = undefined;
    });
    await session.connect();
    await session.query(`LISTEN ${DOOR_CHANNEL}`);
    this.session = session;
    return session;
  }

  private async pass(): Promise<void> {
    const session = await this.connect();
    const taken = await this.claim(session);
    for (const request of taken) this.execute(session, request);
    await this.trash.refresh();
    if (Date.now() - this.prunedAt > PRUNE_EVERY_MS) await this.prune();
  }

  /**
   * Forgets what nobody needs any more: answers older than ANSWERS_KEPT_DAYS, and caller marks no call took (a mark is
   * taken in the transaction that made it: one left an hour proves nothing).
   */
  private async prune(): Promise<void> {
    await this.pool.query(
      `DELETE FROM ${OWN}.sql_requests WHERE state = 'answered' AND answered_at < pg_catalog.now() - pg_catalog.make_interval(days => $1)`,
      [ANSWERS_KEPT_DAYS],
    );
    await this.pool.query(`DELETE FROM ${DOOR_SCHEMA}.caller_marks WHERE xact_start < pg_catalog.now() - interval '1 hour'`);
    this.prunedAt = Date.now();
  }

  /**
   * Takes the queued requests of this catalog's tables, plans each (or answers it: a refusal, an answer the plan already
   * has), and records it planned; then the planned requests nobody executes (their advisory lock is free). Each one
   * answered is its lock released; each one to execute keeps its lock until it is answered.
   */
  private async claim(session: PgClient): Promise<Taken[]> {
    const { catalogId } = this.opts;
    const toExecute: Taken[] = [];
    await session.query('BEGIN');
    try {
      const { rows } = await session.query<Taken>(
        `SELECT ${WHO_ASKED}, r.plan, s.table_id, s.shard, c.oid IS NOT NULL AS table_there, n.nspname AS schema_name,
                c.relname AS rel_name, pg_catalog.pg_has_role(r.requester, c.relowner, 'MEMBER') AS may
           FROM ${OWN}.sql_requests r
           LEFT JOIN ${OWN}.shards s ON s.table_oid = r.table_oid
           LEFT JOIN pg_catalog.pg_class c ON c.oid = r.table_oid
           LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
          WHERE r.state = 'queued' AND (s.catalog_id = $1 OR s.catalog_id IS NULL)
          ORDER BY r.id LIMIT ${BATCH} FOR UPDATE OF r SKIP LOCKED`,
        [catalogId],
      );
      // A full batch: more may be waiting, for the next pass at once rather than at the sweep.
      if (rows.length === BATCH) this.again = true;
      for (const request of rows) {
        const planned = await this.plan(request, session);
        if ('answer' in planned) await this.answer(request.id, planned.answer, session);
        else {
          await session.query(
            `UPDATE ${OWN}.sql_requests SET state = 'planned', plan = $2, catalog_id = $3, claimed_by = $4,
                    picked_at = pg_catalog.clock_timestamp()
              WHERE id = $1`,
            [request.id, JSON.stringify(planned.plan), catalogId, this.me],
          );
          await session.query('SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtextextended($1, 0))', [lockKey(request.id)]);
          toExecute.push({ ...request, plan: planned.plan });
        }
      }
      await session.query('COMMIT');
    } catch (err) {
      await session.query('ROLLBACK').catch(() => undefined);
      for (const request of toExecute) await this.unlock(session, request.id);
      throw err;
    }
    return [...toExecute, ...(await this.orphans(session, new Set(toExecute.map((request) => request.id))))];
  }

  /**
   * Planned requests of this catalog that no session executes (their worker is gone), each taken with its lock: found by
   * the catalog that planned them, not by their table (a purge's is gone from the node once its run has ended).
   */
  private async orphans(session: PgClient, justTaken: ReadonlySet<string>): Promise<Taken[]> {
    const { rows } = await session.query<Taken>(
      `SELECT ${WHO_ASKED}, r.plan, NULL AS table_id, NULL AS shard, true AS table_there, NULL AS schema_name, NULL AS rel_name,
              true AS may
         FROM ${OWN}.sql_requests r
        WHERE r.state = 'planned' AND r.catalog_id = $1 ORDER BY r.id LIMIT ${BATCH}`,
      [this.opts.catalogId],
    );
    const taken: Taken[] = [];
    for (const request of rows) {
      // (A session's advisory locks are counted, not exclusive to it: the ones this door holds are skipped here.)
      if (this.executing.has(request.id) || justTaken.has(request.id)) continue;
      const { rows: locked } = await session.query<{ got: boolean }>(
        'SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtextextended($1, 0)) AS got',
        [lockKey(request.id)],
      );
      if (locked[0]?.got) taken.push(request);
    }
    return taken;
  }

  /** The call's plan, or the answer the request gets without a run (a refusal, or an answer the plan already has). */
  private async plan(request: Taken, session: PgClient): Promise<{ plan: unknown } | { answer: Answer }> {
    const call = CALL_OF[request.op];
    if (!call) return { answer: refusal('InvalidInput', `the SQL door takes no request "${request.op}"`) };
    try {
      return call === 'trash' ? await this.planDrop(request) : await this.planOfTable(request, call, session);
    } catch (err) {
      if (isAnswer(err)) return { answer: refusal(err.type, err.message) };
      throw err;
    }
  }

  /**
   * A drop: of the live table the request found, if the role asking may still drop it; a table tablefate does not keep
   * yet is adopted and dropped in one operation (the SDK's drop with this node named).
   */
  private async planDrop(request: Taken): Promise<{ plan: unknown } | { answer: Answer }> {
    if (!request.table_there) return { answer: refusal('TableNotFound', `the table of request ${request.id} is no longer there`) };
    if (!request.may) return { answer: notAllowed(`role ${request.requester_name} may no longer drop that table`) };
    if (request.table_id === null) {
      const table = formatTableName({ namespace: request.schema_name ?? '', name: request.rel_name ?? '' });
      const planned = await this.callerOf(request).planCall('trash', { ...request.args, table, node: this.opts.node });
      return 'done' in planned ? { answer: { result: planned.done } } : { plan: planned.plan };
    }
    const table = await this.opts.tableOf(Number(request.table_id));
    if (!table) return { answer: refusal('TableNotFound', `table ${request.table_id} is not in this worker's catalog`) };
    if (table.params.shards > 1) {
      const message = `that table is shard ${request.shard} of ${formatTableName(table)}, a table of ${table.params.shards} shards: drop it whole with tablefate drop`;
      return { answer: refusal('InvalidInput', message) };
    }
    const planned = await this.callerOf(request).planCall('trash', { ...request.args, table: formatTableName(table) });
    return 'done' in planned ? { answer: { result: planned.done } } : { plan: planned.plan };
  }

  /**
   * A call on a table by its id or name (a truncate, recall, purge, hold, release or retention change), found by the
   * SDK's plan, if its shard is on this node and the role asking may: for a truncate, one PostgreSQL lets TRUNCATE the
   * table; else a member of the table's owner (for a table in the trash, the owner at the drop, which the trash keeps),
   * and for a recall CREATE where it goes (on its schema, or on the database for a schema to make).
   */
  private async planOfTable(
    request: Taken,
    call: Exclude<DoorCall, 'trash'>,
    session: PgClient,
  ): Promise<{ plan: unknown } | { answer: Answer }> {
    const planned = await this.callerOf(request).planCall(call, SDK_REQUEST[call](request.args as TableArgs));
    if ('done' in planned) return { answer: { result: planned.done } };
    // (A recall in place's plan names the entry and the table it comes back in place of, under that table's name.)
    const asked = planned.plan as
      { tableId: number; target?: { namespace: string } } | { inPlace: Pick<RecallInPlaceInput, 'entryId' | 'name'> };
    const plan = 'inPlace' in asked ? { tableId: asked.inPlace.entryId, target: asked.inPlace.name } : asked;
    const into = call === 'undelete' ? plan.target!.namespace : null;
    const { rows } = await session.query<{ oid: string; may: boolean; may_create: boolean }>(
      `SELECT c.oid, CASE WHEN $5 THEN pg_catalog.has_table_privilege($2::oid, c.oid, 'TRUNCATE')
                          ELSE pg_catalog.pg_has_role($2::oid, c.relowner, 'MEMBER') END AS may,
              CASE WHEN $4::text IS NULL THEN true
                   WHEN n.oid IS NULL THEN pg_catalog.has_database_privilege($2::oid, pg_catalog.current_database(), 'CREATE')
                   ELSE pg_catalog.has_schema_privilege($2::oid, n.oid, 'CREATE') END AS may_create
         FROM ${OWN}.shards s JOIN pg_catalog.pg_class c ON c.oid = s.table_oid
         LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = $4::text
        WHERE s.catalog_id = $1 AND s.table_id = $3`,
      [this.opts.catalogId, request.requester, plan.tableId, into, call === 'truncate'],
    );
    if (rows.length === 0) return { answer: await this.noTableHere(plan.tableId, request.op) };
    if (rows.length > 1) {
      return {
        answer: refusal(
          'InvalidInput',
          `table ${plan.tableId} has ${rows.length} shards: ${request.op} it whole with tablefate ${request.op}`,
        ),
      };
    }
    const [shard] = rows;
    if (!shard!.may) {
      const who = call === 'truncate' ? 'a role with the TRUNCATE privilege on it' : 'a member of its owner';
      return { answer: notAllowed(`role ${request.requester_name} may not ${request.op} table ${plan.tableId}: only ${who} may`) };
    }
    if (!shard!.may_create) return { answer: notAllowed(`role ${request.requester_name} may not create tables in schema ${into}`) };
    if (call === 'truncate' && (request.args as TableArgs).cascade) {
      // As PostgreSQL's TRUNCATE ... CASCADE: the TRUNCATE privilege on every table it reaches.
      const { rows: barred } = await session.query<{ name: string }>(
        `WITH RECURSIVE asked(table_oid) AS (SELECT $1::pg_catalog.oid), ${REFERENCING}
         SELECT DISTINCT pg_catalog.format('%I.%I', n.nspname, c.relname) AS name
           FROM family f JOIN pg_catalog.pg_class c ON c.oid = f.child JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
          WHERE NOT pg_catalog.has_table_privilege($2::oid, f.child, 'TRUNCATE') ORDER BY 1`,
        [shard!.oid, request.requester],
      );
      if (barred.length > 0) {
        const names = barred.map((row) => row.name).join(', ');
        return { answer: notAllowed(`role ${request.requester_name} may not truncate ${names}, which --cascade would truncate too`) };
      }
    }
    await session.query(`UPDATE ${OWN}.sql_requests SET table_oid = $2 WHERE id = $1`, [request.id, shard!.oid]);
    return { plan: asked };
  }

  /**
   * Why a call on table `tableId` finds no table of it on this node to check who may: the table is another node's, or
   * has none (a create that failed, a purged table), or its table went behind tablefate's back. Refused each way, before
   * anything is done: with no table there, no role can be shown to own it.
   */
  private async noTableHere(tableId: number, op: string): Promise<Answer> {
    const { node } = this.opts;
    const table = await this.opts.tableOf(tableId);
    if (!table || !table.placement.some((shard) => shard.node === node)) {
      return refusal('TableNotFound', `table ${tableId} has no shard on ${node}: call its node's door`);
    }
    if (table.state === 'CREATING' || table.state === 'CREATE_FAILED' || table.state === 'PURGED') {
      return refusal('WrongState', `table ${tableId} is ${table.state}: it has no table on ${node} to ${op}`);
    }
    return refusal('ShardMissing', `table ${tableId} has no table on ${node} where tablefate put it: see tablefate doctor`);
  }

  /** Runs a planned request's call and writes its answer; one that fails for a reason of the moment stays for a sweep. */
  private execute(session: PgClient, request: Taken): void {
    const running = (async () => {
      try {
        const result = await this.callerOf(request).executeCall(CALL_OF[request.op]!, request.plan, {
          requestId: request.request_uuid,
          // The request's own run: taken up again at any point, it makes no second operation.
          runKey: `sql.${this.opts.node}.${request.id}.${request.request_uuid.slice(0, 8)}`,
          onRun: (workflowId) => {
            void this.pool
              .query(`UPDATE ${OWN}.sql_requests SET workflow_id = $2 WHERE id = $1 AND workflow_id IS NULL`, [request.id, workflowId])
              .catch(() => undefined);
          },
        });
        // The trash view first, so that the caller reads there what its call changed.
        await this.trash
          .answered(result as TableInfo)
          .catch((err: unknown) =>
            this.opts.logger.warn({ err, node: this.opts.node }, "the SQL door's trash view is behind; a sweep catches up"),
          );
        await this.answer(request.id, { result });
      } catch (err) {
        if (isAnswer(err)) await this.answer(request.id, refusal(err.type, err.message));
        // (Stopping, the door lets its runs go on without it: the next worker's door takes their requests up.)
        else if (!this.stopped)
          this.opts.logger.warn(
            { err, request: request.id, node: this.opts.node },
            'a request of the SQL door failed for now; a sweep takes it again',
          );
      } finally {
        this.executing.delete(request.id);
        await this.unlock(session, request.id);
      }
    })();
    this.executing.set(request.id, running);
  }

  /** Writes a request's answer, once: in the claim's transaction (`within`), or on its own. */
  private async answer(id: string, answer: Answer, within?: PgClient): Promise<void> {
    const failed = 'sqlstate' in answer;
    await (within ?? this.pool).query(
      `UPDATE ${OWN}.sql_requests SET state = 'answered', answered_at = pg_catalog.clock_timestamp(),
              answer = $2, error_type = $3, sqlstate = $4, message = $5
        WHERE id = $1 AND state <> 'answered'`,
      [
        id,
        failed ? null : JSON.stringify(answer.result),
        failed ? answer.errorType : null,
        failed ? answer.sqlstate : null,
        failed ? answer.message : null,
      ],
    );
  }

  private async unlock(session: PgClient, id: string): Promise<void> {
    await session.query('SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtextextended($1, 0))', [lockKey(id)]).catch(() => undefined);
  }

  /** The SDK in the name of who asked: the role, its session's user, the client's application and address, the node. */
  private callerOf(request: Taken): DoorCaller {
    const from = [request.application_name || undefined, request.client_addr ?? 'local socket'].filter(Boolean).join(' at ');
    const as = request.session_user_name === request.requester_name ? '' : ` (session of ${request.session_user_name})`;
    return this.opts.callerFor(`sql:${request.requester_name}${as} from ${from} on ${this.opts.node}`);
  }
}

type Answer = { result: unknown } | { sqlstate: string; errorType: string; message: string };

/**
 * Whether a call's failure is the request's answer: a refusal, or how its run ended (terminated, cancelled, failed),
 * which a take-up would only read again. The others (no worker, no server, the call's deadline) are of the moment: the
 * request waits for a sweep, which joins its run or reads how it ended.
 */
function isAnswer(err: unknown): err is TableFateError {
  return err instanceof TableFateError && (isDomainErrorType(err.type) || isOperationFailureType(err.type));
}

/** What PostgreSQL's roles do not allow: as `must be owner of table` is, 42501. */
const notAllowed = (message: string): Answer => ({ sqlstate: '42501', errorType: 'NotAllowed', message });

function refusal(type: keyof typeof ERROR_MEANINGS, message: string): Answer {
  return { sqlstate: ERROR_MEANINGS[type].sqlstate, errorType: type, message };
}

const lockKey = (id: string) => `tablefate.door:${id}`;
