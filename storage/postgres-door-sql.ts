import type { Pool, PoolClient } from 'pg';
import { inNodeTransaction, lockPrepare } from './postgres-node';
import { POSTGRES_OWN_SCHEMAS } from '../domain/deployment';

/**
 * The SQL door on a PostgreSQL node (issue 41): procedures any PostgreSQL client calls to ask tablefate for an operation,
 * with PostgreSQL's own roles as the authority. A call writes a request (tablefate.sql_requests, record migration 3);
 * the worker that serves the node takes it, runs the operation as the SDK does, and writes the answer back
 * (storage/postgres-door.ts). Called outside a transaction block, the procedure commits its request and waits for the
 * answer; inside one, the request takes effect if and only if that transaction commits, and the call says so (a NOTICE)
 * without waiting.
 *
 * Who asks is proved, not told: the procedure (SECURITY INVOKER, so that it may COMMIT) inserts a caller mark whose role
 * column defaults to CURRENT_USER, evaluated as the acting role (even inside another role's SECURITY DEFINER function),
 * and which a caller cannot set (it is granted INSERT on the mark's nonce alone). `_request`, SECURITY DEFINER with its
 * search_path pinned, takes the mark of this backend and transaction, checks that role may DROP the table (its owner, a
 * member of the owning role, or a superuser), and writes the request. Nothing is open to PUBLIC: a DBA grants the role
 * `tablefate_caller` (DOOR_CALLER_ROLE) to whoever may call.
 */

export const DOOR_SCHEMA = POSTGRES_OWN_SCHEMAS.door;
/** The role a DBA grants to those who may call the door; the worker grants it the door's routines when it exists. */
export const DOOR_CALLER_ROLE = 'tablefate_caller';
/** The channel a request's commit notifies: a hint that wakes the worker, whose sweep is what makes pick-up sure. */
export const DOOR_CHANNEL = 'tablefate_sql_requests';

const D = DOOR_SCHEMA;
const OWN = POSTGRES_OWN_SCHEMAS.own;

/** Makes a request after checking who asks and for what; the door's procedures call it, nobody else can use it. */
const REQUEST = `
CREATE OR REPLACE FUNCTION ${D}._request(op text, tbl text, args jsonb, mark uuid) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  who name;
  parts text[];
  rel record;
  rel_oid oid;
  request bigint;
BEGIN
  DELETE FROM ${D}.caller_marks m
   WHERE m.nonce = mark AND m.pid = pg_backend_pid() AND m.xact_start = transaction_timestamp()
  RETURNING m.role_name INTO who;
  IF who IS NULL THEN
    RAISE EXCEPTION 'tablefate: call the procedures of ${D}, not their parts' USING ERRCODE = '42501';
  END IF;
  IF tbl IS NULL THEN
    RAISE EXCEPTION 'tablefate: the table is NULL: name it as schema.table' USING ERRCODE = '22004';
  END IF;
  IF op = 'retention' AND (args ->> 'retentionSeconds') IS NULL THEN
    RAISE EXCEPTION 'tablefate: the retention is NULL: give it in seconds' USING ERRCODE = '22004';
  END IF;
  IF op NOT IN ('drop', 'truncate', 'recall', 'purge', 'hold', 'release', 'retention') THEN
    RAISE EXCEPTION 'tablefate: the SQL door takes no request "%"', op USING ERRCODE = '22023';
  END IF;
  IF op <> 'drop' THEN
    -- A table by its id, or by its name (a live one, else the one most recently dropped under it): the worker finds
    -- it in its catalog, and checks who may then, before anything is done.
    IF tbl !~ '^[0-9]{1,15}$' THEN
      IF op = 'purge' THEN
        RAISE EXCEPTION 'tablefate: a purge names the table by its id (table_id), not "%"', tbl USING ERRCODE = '22023';
      END IF;
      IF cardinality(parse_ident(tbl)) <> 2 THEN
        RAISE EXCEPTION 'tablefate: "%" is not a table id, nor a name as schema.table', tbl USING ERRCODE = '22023';
      END IF;
    END IF;
    IF args ? 'newName' AND cardinality(parse_ident(args ->> 'newName')) <> 2 THEN
      RAISE EXCEPTION 'tablefate: "%" is not a name as schema.table', args ->> 'newName' USING ERRCODE = '22023';
    END IF;
  ELSE
    parts := parse_ident(tbl);
    IF cardinality(parts) <> 2 THEN
      RAISE EXCEPTION 'tablefate: "%" is not a table name as schema.table', tbl USING ERRCODE = '22023';
    END IF;
    SELECT c.oid, c.relkind, c.relowner, c.relpersistence INTO rel
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = parts[1] AND c.relname = parts[2];
    IF NOT FOUND THEN
      RAISE EXCEPTION 'tablefate: table %.% does not exist', quote_ident(parts[1]), quote_ident(parts[2]) USING ERRCODE = '42P01';
    END IF;
    IF rel.relkind NOT IN ('r', 'p') OR rel.relpersistence = 't' THEN
      RAISE EXCEPTION 'tablefate: %.% is not a table tablefate can keep (a plain or partitioned table is)', quote_ident(parts[1]), quote_ident(parts[2])
        USING ERRCODE = '42809';
    END IF;
    IF NOT pg_has_role(who, rel.relowner, 'MEMBER') THEN
      RAISE EXCEPTION 'tablefate: role % may not % %.%: only its owner (%), a member of it, or a superuser may',
        quote_ident(who), op, quote_ident(parts[1]), quote_ident(parts[2]), quote_ident(pg_get_userbyid(rel.relowner))
        USING ERRCODE = '42501';
    END IF;
    -- (A table tablefate does not keep yet is adopted and dropped in one operation, with the adopt's refusals.)
    rel_oid := rel.oid;
  END IF;
  INSERT INTO ${OWN}.sql_requests (op, args, table_oid, requester, requester_name, session_user_name, application_name, client_addr)
  VALUES (op, args, rel_oid, (SELECT r.oid FROM pg_roles r WHERE r.rolname = who), who, session_user,
          current_setting('application_name'), inet_client_addr())
  RETURNING id INTO request;
  PERFORM pg_notify('${DOOR_CHANNEL}', request::text);
  RETURN request;
END $fn$;`;

/** A COMMIT that is always refused (a function is atomic): what a refused COMMIT says, in the server's language. */
const COMMIT_PROBE = `
CREATE OR REPLACE FUNCTION ${D}._commit_probe() RETURNS void LANGUAGE plpgsql AS $fn$ BEGIN COMMIT; END $fn$;`;

/** The requests a role may read: its own, and those of the roles it is a member of (a superuser: all). */
const REQUESTS_VIEW = `
CREATE OR REPLACE VIEW ${D}.requests WITH (security_barrier) AS
SELECT r.id, r.op, r.args, r.requester_name AS requester, r.session_user_name, r.application_name, r.client_addr,
       r.requested_at, r.state, r.workflow_id, r.answer, r.error_type, r.sqlstate, r.message, r.answered_at
  FROM ${OWN}.sql_requests r
 WHERE pg_catalog.pg_has_role(CURRENT_USER, r.requester, 'MEMBER');`;

/** The answer's columns as a procedure's INOUT arguments, each NULL unless given (so that psql need not give them). */
function answerArguments(): string {
  return TABLE_OUTS.map((out) => `INOUT ${out} DEFAULT NULL`).join(', ');
}

/** What every call answers: the table as its operation left it. */
const TABLE_OUTS = [
  'table_id bigint',
  '"table" text',
  'state text',
  'expires_at timestamptz',
  'held_since timestamptz',
  'hold_reason text',
  'notes text[]',
];

/**
 * Waits for request `id`'s answer (polling its row: a procedure hears no notification) and gives it, or raises the
 * refusal it got with its SQLSTATE; past `wait_seconds`, TF001 (the operation goes on).
 */
const AWAIT = `
CREATE OR REPLACE PROCEDURE ${D}._await(id bigint, wait_seconds double precision, INOUT answer jsonb)
LANGUAGE plpgsql AS $fn$
DECLARE
  began timestamptz := pg_catalog.clock_timestamp();
  timeout_ms bigint := (SELECT s.setting::bigint FROM pg_catalog.pg_settings s WHERE s.name OPERATOR(pg_catalog.=) 'statement_timeout');
  waits double precision := wait_seconds;
  got record;
BEGIN
  -- The session's statement_timeout counts the whole CALL: the wait ends before it, with TF001 rather than a cancel.
  IF timeout_ms OPERATOR(pg_catalog.>) 0 THEN
    waits := LEAST(waits, timeout_ms OPERATOR(pg_catalog./) 1000.0 OPERATOR(pg_catalog.-) 0.1
      OPERATOR(pg_catalog.-) pg_catalog.date_part('epoch', began OPERATOR(pg_catalog.-) pg_catalog.statement_timestamp()));
  END IF;
  BEGIN
    LOOP
      SELECT r.state, r.answer, r.error_type, r.sqlstate, r.message, r.workflow_id INTO got
        FROM ${D}.requests r WHERE r.id OPERATOR(pg_catalog.=) _await.id;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'tablefate: there is no request % that role % may read', id, CURRENT_USER USING ERRCODE = '42704';
      END IF;
      EXIT WHEN got.state OPERATOR(pg_catalog.=) 'answered';
      IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>) (began OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => waits)) THEN
        RAISE EXCEPTION 'tablefate: request % did not end within % s; it goes on%', id, pg_catalog.round(waits::numeric, 1),
          CASE WHEN got.workflow_id IS NULL THEN ' once a worker takes it' ELSE (' as workflow ' OPERATOR(pg_catalog.||) got.workflow_id) END
          USING ERRCODE = 'TF001', HINT = ('CALL ${D}.wait(' OPERATOR(pg_catalog.||) id) OPERATOR(pg_catalog.||) ')';
      END IF;
      PERFORM pg_catalog.pg_sleep(CASE WHEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.<) (began OPERATOR(pg_catalog.+) interval '2 s')
                                       THEN 0.005 ELSE 0.05 END);
    END LOOP;
  EXCEPTION WHEN query_canceled THEN
    -- A cancel (or a statement_timeout the wait could not keep under) ends the wait, not the request.
    RAISE EXCEPTION 'tablefate: the wait for request % was cancelled; the request goes on', id
      USING ERRCODE = '57014', HINT = ('CALL ${D}.wait(' OPERATOR(pg_catalog.||) id) OPERATOR(pg_catalog.||) ')';
  END;
  IF got.sqlstate IS NOT NULL THEN
    RAISE EXCEPTION 'tablefate: %', got.message
      USING ERRCODE = got.sqlstate, DETAIL = ((got.error_type OPERATOR(pg_catalog.||) '; request ') OPERATOR(pg_catalog.||) id);
  END IF;
  answer := got.answer;
END $fn$;`;

/** A name part as psql writes it, in SQL (domain/names.ts's quotePart): bare when plain, else quoted, a quote doubled. */
const quotedPart = (part: string) =>
  `CASE WHEN ${part} OPERATOR(pg_catalog.~) '^[a-z][a-z0-9_]*$' THEN ${part} ` +
  `ELSE ('"' OPERATOR(pg_catalog.||) pg_catalog.replace(${part}, '"', '""')) OPERATOR(pg_catalog.||) '"' END`;
/** `<ns>.<name>` as formatTableName writes it, in SQL. */
const tableNameSql = (namespace: string, name: string) => `pg_catalog.format('%s.%s', ${quotedPart(namespace)}, ${quotedPart(name)})`;

/** The table as the operation left it, as the SDK answers it (TableInfo), into the procedure's row; its notes, NOTICEs. */
const ANSWER_ROW = `table_id := (answer OPERATOR(pg_catalog.->>) 'id')::bigint;
  "table" := ${tableNameSql(`(answer OPERATOR(pg_catalog.->>) 'namespace')`, `(answer OPERATOR(pg_catalog.->>) 'name')`)};
  state := answer OPERATOR(pg_catalog.->>) 'state';
  expires_at := (answer OPERATOR(pg_catalog.->>) 'expireAt')::timestamptz;
  held_since := (answer OPERATOR(pg_catalog.#>>) '{hold,since}')::timestamptz;
  hold_reason := answer OPERATOR(pg_catalog.#>>) '{hold,reason}';
  notes := ARRAY(SELECT pg_catalog.jsonb_array_elements_text(COALESCE(answer OPERATOR(pg_catalog.->) 'notes', '[]')));
  IF pg_catalog.cardinality(notes) OPERATOR(pg_catalog.>) 0 THEN
    RAISE NOTICE 'tablefate: %', pg_catalog.array_to_string(notes, '; ');
  END IF;`;

/** Waits for a request made earlier (in a transaction, or whose call's wait ended) and answers it as its call would. */
const WAIT = `
CREATE OR REPLACE PROCEDURE ${D}.wait(request_id bigint, wait_seconds double precision DEFAULT 60,
  ${answerArguments()})
LANGUAGE plpgsql AS $fn$
DECLARE
  answer jsonb;
BEGIN
  IF request_id IS NULL THEN
    RAISE EXCEPTION 'tablefate: the request is NULL' USING ERRCODE = '22004';
  END IF;
  CALL ${D}._await(request_id, wait_seconds, answer);
  ${ANSWER_ROW}
END $fn$;`;

/**
 * One procedure per call the door takes: it makes the request (proving who asks), then commits it and waits for the
 * answer where it may commit, or says the request waits for the caller's transaction where it may not.
 */
function callProcedure(name: string, params: string, args: string, wait: string): string {
  return `
CREATE OR REPLACE PROCEDURE ${D}.${name}(tbl text, ${params}wait_seconds double precision DEFAULT NULL,
  INOUT request_id bigint DEFAULT NULL, ${answerArguments()})
LANGUAGE plpgsql AS $fn$
DECLARE
  mark uuid := pg_catalog.gen_random_uuid();
  here text;
  refused text;
  answer jsonb;
BEGIN
  INSERT INTO ${D}.caller_marks (nonce) VALUES (mark);
  request_id := ${D}._request('${name}', tbl, ${args}, mark);
  -- Inside an exception block a COMMIT always fails: with the message of a refused one where the call may not commit.
  BEGIN COMMIT; EXCEPTION WHEN invalid_transaction_termination THEN here := SQLERRM; END;
  BEGIN PERFORM ${D}._commit_probe(); EXCEPTION WHEN invalid_transaction_termination THEN refused := SQLERRM; END;
  IF here IS NOT DISTINCT FROM refused THEN
    state := 'queued';
    RAISE NOTICE 'tablefate: request % (% of %) runs once this transaction commits; its outcome: CALL ${D}.wait(%), or SELECT * FROM ${D}.requests WHERE id = %',
      request_id, '${name}', tbl, request_id, request_id;
    RETURN;
  END IF;
  COMMIT;
  CALL ${D}._await(request_id, COALESCE(wait_seconds, ${wait}), answer);
  ${ANSWER_ROW}
END $fn$;`;
}

/** The door's calls: each procedure's own arguments, how they reach the request, and how long it waits by default. */
const CALLS = {
  /** `cascade`: with its views, and what live tables have on it detached, as the SDK's drop with `cascade`. */
  drop: {
    params: 'retention_seconds integer DEFAULT NULL, drain_timeout_seconds integer DEFAULT NULL, "cascade" boolean DEFAULT NULL, ',
    types: 'integer, integer, boolean, ',
    args: `pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object('retentionSeconds', retention_seconds, 'drainTimeoutSeconds', drain_timeout_seconds, 'cascade', "cascade"))`,
    wait: `(COALESCE(drain_timeout_seconds, 60) OPERATOR(pg_catalog.+) 30)`,
  },
  /**
   * A live table by its id or name: its rows into the trash as an entry of their own, the table left empty; `cascade`:
   * with the tables whose foreign keys reference it, as the SDK's truncate with `cascade`.
   */
  truncate: {
    params: 'retention_seconds integer DEFAULT NULL, drain_timeout_seconds integer DEFAULT NULL, "cascade" boolean DEFAULT NULL, ',
    types: 'integer, integer, boolean, ',
    args: `pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object('table', tbl, 'retentionSeconds', retention_seconds, 'drainTimeoutSeconds', drain_timeout_seconds, 'cascade', "cascade"))`,
    wait: `(COALESCE(drain_timeout_seconds, 60) OPERATOR(pg_catalog.+) 30)`,
  },
  /**
   * By the table's id or the name it was dropped under, back under that name or `new_name`; `in_place`, a truncate's
   * entry back in its table's place (that table into the trash).
   */
  recall: {
    params: 'new_name text DEFAULT NULL, in_place boolean DEFAULT NULL, ',
    types: 'text, boolean, ',
    args: `pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object('table', tbl, 'newName', new_name, 'inPlace', in_place))`,
    wait: '60',
  },
  /** By the table's id. */
  purge: { params: '', types: '', args: `pg_catalog.jsonb_build_object('table', tbl)`, wait: '60' },
  /** A live table by its id or name, or one in the trash by its id or the name it was dropped under. */
  hold: {
    params: 'reason text DEFAULT NULL, ',
    types: 'text, ',
    args: `pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object('table', tbl, 'reason', reason))`,
    wait: '60',
  },
  release: { params: '', types: '', args: `pg_catalog.jsonb_build_object('table', tbl)`, wait: '60' },
  /** A table in the trash: kept `retention_seconds` from its drop. */
  retention: {
    params: 'retention_seconds integer, ',
    types: 'integer, ',
    args: `pg_catalog.jsonb_build_object('table', tbl, 'retentionSeconds', retention_seconds)`,
    wait: '60',
  },
} as const;

/** The door's procedures as SQL. */
const PROCEDURE_SQL = Object.entries(CALLS).map(([name, call]) => callProcedure(name, call.params, call.args, call.wait));

/**
 * The tables in this node's trash that a role may recall: those whose owner (the owner at the drop, which the trash
 * keeps) it is a member of (a superuser: all). A table is here as soon as it is in the trash; what the catalog says of it
 * (its name, expiry, hold, who dropped it) is the door's copy (worker/sql-door-trash.ts), as fresh as `synced_at`.
 */
const TRASH_VIEW = `
CREATE OR REPLACE VIEW ${D}.trash WITH (security_barrier) AS
SELECT s.table_id, CASE WHEN t.name IS NOT NULL THEN ${tableNameSql('t.namespace', 't.name')} END AS "table", COALESCE(t.state, 'TRASHED') AS state,
       pg_catalog.count(*)::integer AS shards_here, pg_catalog.pg_get_userbyid(c.relowner) AS owner,
       -- (A partitioned table's bytes are its partitions'.)
       pg_catalog.sum(pg_catalog.pg_total_relation_size(c.oid) OPERATOR(pg_catalog.+) coalesce((
         SELECT pg_catalog.sum(pg_catalog.pg_total_relation_size(p.relid)) FROM pg_catalog.pg_partition_tree(c.oid) p
          WHERE p.relid OPERATOR(pg_catalog.<>) c.oid), 0))::bigint AS bytes,
       -- (New columns go last: CREATE OR REPLACE VIEW only appends to an older door's.)
       t.dropped_at, t.expires_at, t.held_since, t.hold_reason, t.dropped_by, t.synced_at, t.family
  FROM ${OWN}.shards s
  JOIN pg_catalog.pg_class c ON c.oid = s.table_oid
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace AND n.nspname = '${POSTGRES_OWN_SCHEMAS.trash}'
  LEFT JOIN ${OWN}.sql_trash t ON t.catalog_id = s.catalog_id AND t.table_id = s.table_id
 WHERE pg_catalog.pg_has_role(CURRENT_USER, c.relowner, 'MEMBER')
 GROUP BY s.catalog_id, s.table_id, c.relowner, t.namespace, t.name, t.state, t.dropped_at, t.expires_at, t.held_since,
          t.hold_reason, t.dropped_by, t.family, t.synced_at;`;

/** The door's routines, and what a caller is granted of them. */
const FUNCTIONS = ['_request(text, text, jsonb, uuid)', '_commit_probe()'];
const OUTS = ['bigint', ...TABLE_OUTS.map((out) => out.slice(out.lastIndexOf(' ') + 1))].join(', ');
const PROCEDURES = [
  '_await(bigint, double precision, jsonb)',
  `wait(bigint, double precision, ${TABLE_OUTS.map((out) => out.slice(out.lastIndexOf(' ') + 1)).join(', ')})`,
  ...Object.entries(CALLS).map(([name, call]) => `${name}(text, ${call.types}double precision, ${OUTS})`),
];
const VIEWS = ['requests', 'trash'];

/** This code's door: a node whose door is newer (a worker of a later release installed it) keeps that one. */
export const DOOR_VERSION = 6;

/** How long the door's install waits for a lock on its routines and views: a call waiting for its answer reads them. */
const INSTALL_LOCK_TIMEOUT_MS = 500;

/**
 * Makes the door's routines and views on the node, or brings them to this code's version, in a transaction of its own
 * under the node's prepare lock, each closed to PUBLIC; and grants `tablefate_caller` what it calls, if that role is
 * there and has not been granted it yet (a DBA makes the role: making one needs CREATEROLE, which tablefate's role must
 * not have). A door of this version, whole, is left as it is, and one of a later version too (a rolling deploy never
 * takes it back). A replacement waits for no caller: past a brief lock wait it fails (55P03), changing nothing, and the
 * door tries again at its next look.
 */
export function prepareDoor(pool: Pool): Promise<{ callerRole: boolean; version: number }> {
  return inNodeTransaction(pool, async (c) => {
    await lockPrepare(c);
    await c.query(`SET LOCAL lock_timeout = ${INSTALL_LOCK_TIMEOUT_MS}`);
    const { rows: made } = await c.query<{ note: string | null }>(
      `SELECT pg_catalog.obj_description(pg_catalog.to_regnamespace($1)::oid, 'pg_namespace') AS note`,
      [D],
    );
    const installed = Number(/^tablefate SQL door ([0-9]+)$/.exec(made[0]?.note ?? '')?.[1] ?? 0);
    if (installed > DOOR_VERSION) return { callerRole: await grantCaller(c, 'none'), version: installed };
    const replaced = installed < DOOR_VERSION || !(await whole(c));
    if (replaced) await install(c);
    return { callerRole: await grantCaller(c, replaced ? 'all' : 'unless granted'), version: DOOR_VERSION };
  });
}

/** Whether every routine and view of this door is there. */
async function whole(c: PoolClient): Promise<boolean> {
  const { rows } = await c.query<{ whole: boolean }>(
    `SELECT bool_and(pg_catalog.to_regprocedure(r) IS NOT NULL) AND bool_and(pg_catalog.to_regclass(v) IS NOT NULL) AS whole
       FROM pg_catalog.unnest($1::text[]) r, pg_catalog.unnest($2::text[]) v`,
    [[...FUNCTIONS, ...PROCEDURES].map((routine) => `${D}.${routine}`), VIEWS.map((view) => `${D}.${view}`)],
  );
  return rows[0]?.whole === true;
}

/** The door's routines and views made or replaced, those of an earlier door it no longer has dropped. */
async function install(c: PoolClient): Promise<void> {
  await c.query(`REVOKE ALL ON SCHEMA ${D} FROM PUBLIC`);
  for (const sql of [REQUEST, COMMIT_PROBE, REQUESTS_VIEW, TRASH_VIEW, AWAIT, WAIT, ...PROCEDURE_SQL]) await c.query(sql);
  // (A procedure whose arguments changed is another routine.)
  const current = [...FUNCTIONS, ...PROCEDURES].map((routine) => `${D}.${routine}`);
  const { rows: stale } = await c.query<{ routine: string; kind: string }>(
    `SELECT p.oid::regprocedure::text AS routine, p.prokind AS kind FROM pg_catalog.pg_proc p
      WHERE p.pronamespace = pg_catalog.to_regnamespace($1)::oid
        AND p.oid <> ALL (SELECT pg_catalog.to_regprocedure(r)::oid FROM pg_catalog.unnest($2::text[]) r)`,
    [D, current],
  );
  for (const { routine, kind } of stale) await c.query(`DROP ${kind === 'p' ? 'PROCEDURE' : 'FUNCTION'} ${routine}`);
  for (const fn of FUNCTIONS) await c.query(`REVOKE ALL ON FUNCTION ${D}.${fn} FROM PUBLIC`);
  for (const proc of PROCEDURES) await c.query(`REVOKE ALL ON PROCEDURE ${D}.${proc} FROM PUBLIC`);
  for (const view of VIEWS) await c.query(`REVOKE ALL ON ${D}.${view} FROM PUBLIC`);
  await c.query(`COMMENT ON SCHEMA ${D} IS 'tablefate SQL door ${DOOR_VERSION}'`);
}

/**
 * Whether `tablefate_caller` is there; and grants it what it calls (`all`, after a replacement: new routines), or only
 * if it has not been granted the door yet (`unless granted`: the role made since the door was), or nothing (`none`).
 */
async function grantCaller(c: PoolClient, grant: 'all' | 'unless granted' | 'none'): Promise<boolean> {
  const { rows } = await c.query<{ there: boolean; granted: boolean }>(
    `SELECT r.oid IS NOT NULL AS there,
            r.oid IS NOT NULL AND pg_catalog.has_function_privilege(r.oid, $2::regprocedure, 'EXECUTE') AS granted
       FROM (SELECT 1) one LEFT JOIN pg_catalog.pg_roles r ON r.rolname = $1`,
    [DOOR_CALLER_ROLE, `${D}.${FUNCTIONS[0]}`],
  );
  const { there, granted } = rows[0] ?? { there: false, granted: false };
  if (!there || grant === 'none' || (grant === 'unless granted' && granted)) return there;
  const R = DOOR_CALLER_ROLE;
  await c.query(`GRANT USAGE ON SCHEMA ${D} TO ${R}`);
  await c.query(`GRANT INSERT (nonce) ON ${D}.caller_marks TO ${R}`);
  for (const view of VIEWS) await c.query(`GRANT SELECT ON ${D}.${view} TO ${R}`);
  for (const fn of FUNCTIONS) await c.query(`GRANT EXECUTE ON FUNCTION ${D}.${fn} TO ${R}`);
  for (const proc of PROCEDURES) await c.query(`GRANT EXECUTE ON PROCEDURE ${D}.${proc} TO ${R}`);
  return true;
}
