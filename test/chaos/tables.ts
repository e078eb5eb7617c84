import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import type { TableInfo, TableRecord } from '../../domain/table';
import type { FamilyChecks } from './family-checks';
import type { Problem } from './problems';
import type { Random } from './random';
import { TRANSITIONAL_STATES } from './observe';
import type { OpRecord } from './ops';
import { judgeRows, readShards, type ShardRead } from './row-homes';
import { CHAOS_COLUMNS, liveTableOf, quoteIdent, type NodeDatabase, type RowLedger } from './rows';

/**
 * The PostgreSQL storage checks of a chaos run (they stand in for files.ts with `--driver postgres`): the real
 * tables must say what the catalog says, and hold what the user's service wrote.
 *
 * - a READY table's shard tables are live under its name; a TRASHED table's are in tablefate_trash, and recalled by
 *   the checker (under a fresh name when its own is taken: a truncate's entry's is its table's) it comes back live;
 * - every row seen committed is then in the one table where it belongs, or gone with a purged one (row-homes.ts:
 *   a truncate's rows are in its entry, those written after it in the table);
 * - a PURGED or CREATE_FAILED table has none, anywhere;
 * - nothing in tablefate_trash or tablefate_garbage, nor in tablefate.shards, that the catalog does not account for
 *   (a view there is accounted for by the family a record keeps, family-checks.ts judges whose);
 * - the user's own tables, made by hand under names tablefate is asked for, are as they were (oid, rows, indexes).
 */

const TRASH_SCHEMA = 'tablefate_trash';
const GARBAGE_SCHEMA = 'tablefate_garbage';
const UNDEFINED_TABLE = '42P01';

/** A table a user made by hand before the run, under a name the scenario will ask tablefate to create or recall onto. */
export interface UserTable {
  node: string;
  schema: string;
  table: string;
  /** How it was when the run began: what it must still be at the end. */
  before: TableLook;
}

interface TableLook {
  oid: number;
  rows: number;
  /** md5 of the rows in id order, and the names of its indexes: any write or rename shows. */
  content: string;
  indexes: string;
}

/**
 * Taken by hand: `chaos.legacy` on two of the three nodes (a create of it placed on either must be refused, one
 * placed on node-2 succeeds and makes it an ordinary tablefate name), and `chaos.users_1`, the name shard 1 of
 * `chaos.users` has when a create asks for several shards (usually it asks for one).
 */
export const USER_TABLE_NAMES: ReadonlyArray<{ node: string; schema: string; table: string }> = [
  { node: 'node-0', schema: 'chaos', table: 'legacy' },
  { node: 'node-1', schema: 'chaos', table: 'legacy' },
  { node: 'node-1', schema: 'chaos', table: 'users_1' },
];

/** The one-shard tablefate names the user's tables hold, for the scenario to aim at now and then. */
export const USER_TABLE_TABLEFATE_NAMES: readonly string[] = ['chaos.legacy'];

async function withNode<T>(url: string, fn: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url, application_name: 'chaos checker' });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

const qualified = (schema: string, table: string) => `${quoteIdent(schema)}.${quoteIdent(table)}`;

/** How a table is now, or undefined when no relation has that name. */
async function lookAt(client: Client, schema: string, table: string): Promise<TableLook | undefined> {
  const { rows: found } = await client.query<{ oid: string | null }>('SELECT to_regclass($1)::int8 AS oid', [qualified(schema, table)]);
  const oid = found[0]?.oid;
  if (oid === null || oid === undefined) return undefined;
  const { rows } = await client.query<{ rows: string; content: string; indexes: string | null }>(
    `SELECT (SELECT count(*) FROM ${qualified(schema, table)}) AS rows,
            (SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t.id), '')) FROM ${qualified(schema, table)} t) AS content,
            (SELECT string_agg(i.relname, ',' ORDER BY i.relname) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
              WHERE x.indrelid = $1::oid) AS indexes`,
    [oid],
  );
  return { oid: Number(oid), rows: Number(rows[0]!.rows), content: rows[0]!.content, indexes: rows[0]!.indexes ?? '' };
}

/** Makes the user's tables by hand (plain SQL, as a user would, before tablefate ever ran), with a few rows each. */
export async function makeUserTables(nodes: readonly NodeDatabase[]): Promise<UserTable[]> {
  const made: UserTable[] = [];
  for (const name of USER_TABLE_NAMES) {
    const url = nodes.find((n) => n.node === name.node)?.url;
    if (!url) continue;
    made.push(
      await withNode(url, async (client) => {
        await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(name.schema)}`);
        await client.query(`CREATE TABLE ${qualified(name.schema, name.table)} (${CHAOS_COLUMNS})`);
        await client.query(`CREATE INDEX ${quoteIdent(`${name.table}_by_client`)} ON ${qualified(name.schema, name.table)} (client)`);
        await client.query(
          `INSERT INTO ${qualified(name.schema, name.table)} (id, client, v)
           SELECT g, 'the user', 'kept by hand ' || g FROM generate_series(1, 25) g`,
        );
        return { ...name, before: (await lookAt(client, name.schema, name.table))! };
      }),
    );
  }
  return made;
}

/**
 * Cuts tablefate's storage connections now and then (pg_terminate_backend, as a server restart or a network
 * fault would): a lost connection is a transient storage error, and the operation it hit must go on or end
 * compensated, never hang.
 */
export class ConnectionCutter {
  cuts = 0;
  private stopped = false;
  private running: Promise<void> | undefined;

  /** Only the connections to the run's own node databases: the server may be shared (jest's), and others' are not ours to cut. */
  private readonly databases: string[];

  constructor(
    private readonly serverUrl: string,
    nodes: readonly NodeDatabase[],
    private readonly rng: Random,
    private readonly everyMs: readonly [number, number],
  ) {
    this.databases = nodes.map((n) => decodeURIComponent(new URL(n.url).pathname.slice(1)));
  }

  start(): void {
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      await sleep(this.rng.int(...this.everyMs));
      if (this.stopped) return;
      try {
        const { rows } = await withNode(this.serverUrl, (client) =>
          client.query<{ cut: boolean }>(
            `SELECT pg_terminate_backend(pid) AS cut FROM pg_stat_activity
              WHERE application_name LIKE 'tablefate storage %' AND datname = ANY($1) AND pid <> pg_backend_pid()`,
            [this.databases],
          ),
        );
        this.cuts += rows.filter((r) => r.cut).length;
      } catch {
        // The checker's own connection failed: try again at the next turn.
      }
    }
  }
}

/** One row of tablefate.shards on a node, with where its table is now (schema null: the relation is gone). */
interface ShardRecord {
  node: string;
  oid: number;
  catalogId: string;
  tableId: number;
  shard: number;
  schema: string | null;
  table: string | null;
  /** The oids of the views its family (a drop with cascade) keeps with it. */
  members: number[];
}

interface NodeSurvey {
  records: ShardRecord[];
  /** Every table, view and materialized view in tablefate's trash and garbage schemas. */
  parked: Array<{ node: string; oid: number; schema: string; table: string; kind: string }>;
}

const KINDS: Readonly<Record<string, string>> = { r: 'table', p: 'table', v: 'view', m: 'materialized view' };

async function survey(nodes: readonly NodeDatabase[]): Promise<NodeSurvey> {
  const result: NodeSurvey = { records: [], parked: [] };
  for (const { node, url } of nodes) {
    await withNode(url, async (client) => {
      try {
        const { rows } = await client.query<{
          oid: string;
          catalog_id: string;
          table_id: string;
          shard: number;
          schema: string | null;
          table: string | null;
          members: string[] | null;
        }>(
          `SELECT s.table_oid::int8 AS oid, s.catalog_id, s.table_id, s.shard, n.nspname AS schema, c.relname AS table,
                  ARRAY(SELECT (m->>'oid')::int8 FROM jsonb_array_elements(s.family->'members') m) AS members
             FROM tablefate.shards s
             LEFT JOIN pg_class c ON c.oid = s.table_oid
             LEFT JOIN pg_namespace n ON n.oid = c.relnamespace`,
        );
        for (const r of rows) {
          result.records.push({
            node,
            oid: Number(r.oid),
            catalogId: r.catalog_id,
            tableId: Number(r.table_id),
            shard: r.shard,
            schema: r.schema,
            table: r.table,
            members: (r.members ?? []).map(Number),
          });
        }
      } catch (err) {
        // No shard was ever placed on this node: tablefate has not made its own schemas there.
        if ((err as { code?: string }).code !== UNDEFINED_TABLE) throw err;
      }
      const { rows } = await client.query<{ oid: string; schema: string; table: string; kind: string }>(
        `SELECT c.oid::int8 AS oid, n.nspname AS schema, c.relname AS table, c.relkind::text AS kind
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname IN ($1, $2) AND c.relkind IN ('r', 'p', 'v', 'm')`,
        [TRASH_SCHEMA, GARBAGE_SCHEMA],
      );
      for (const r of rows) result.parked.push({ node, oid: Number(r.oid), schema: r.schema, table: r.table, kind: KINDS[r.kind]! });
    });
  }
  return result;
}

const where = (r: ShardRecord | undefined) =>
  r === undefined
    ? 'nowhere (no record in tablefate.shards)'
    : r.schema === null
      ? `gone (oid ${r.oid} recorded)`
      : `${r.schema}.${r.table}`;

export interface TableFindings {
  problems: Problem[];
  notes: string[];
  /** Tables whose rows were compared with the rows seen committed into them. */
  tablesChecked: number;
  /** Rows seen committed that were looked for. */
  rowsChecked: number;
  recalled: number;
}

export interface TableChecks {
  nodes: readonly NodeDatabase[];
  catalogId: string;
  ledger: RowLedger;
  /** The calls of the run: a truncate's answer says on which side of it a row was. */
  ops: readonly OpRecord[];
  userTables: readonly UserTable[];
  /** Recalls a trashed table (under `newName` if given) as a user would, through the SDK; throws its error. */
  recall: (tableId: number, newName?: string) => Promise<TableInfo>;
  /** The table as the catalog holds it now (after a recall). */
  getTable: (tableId: number) => Promise<TableRecord | undefined>;
  /** The families the run made (families.ts): judged before the recalls, and each recalled table's after its recall. */
  families?: FamilyChecks;
}

/** Whether `err` is a NameTaken refusal (the recall's name is another table's, or a user's). */
const isNameTaken = (err: unknown) => (err as { type?: string }).type === 'NameTaken';

export async function checkTables(checks: TableChecks, tables: readonly TableRecord[]): Promise<TableFindings> {
  const findings: TableFindings = { problems: [], notes: [], tablesChecked: 0, rowsChecked: 0, recalled: 0 };
  const problem = (invariant: string, detail: string) => findings.problems.push({ invariant, detail });
  const { records, parked } = await survey(checks.nodes);
  const recordOf = (node: string, tableId: number, shard: number) =>
    records.find((r) => r.node === node && r.catalogId === checks.catalogId && r.tableId === tableId && r.shard === shard);
  const accounted = new Set<ShardRecord>();
  const byId = new Map(tables.map((t) => [t.id, t]));

  for (const t of tables) {
    const label = `table ${t.id} (${t.namespace}.${t.name}, ${t.state})`;
    const transitional = TRANSITIONAL_STATES.includes(t.state);
    for (const { shard, node } of t.placement) {
      const record = recordOf(node, t.id, shard);
      if (record) accounted.add(record);
      // (A truncate's shards already moved are its entry's, recorded before the entry's row is: the truncate's own.)
      const moved = t.state === 'TRUNCATING' && t.truncateInto !== undefined ? recordOf(node, t.truncateInto, shard) : undefined;
      if (moved) accounted.add(moved);
      // Reported as stuck already: its shards may be on either side of a move.
      if (transitional) continue;
      const at = `shard ${shard} on ${node}`;
      if (t.state === 'READY') {
        const live = liveTableOf(t, shard);
        if (record?.schema !== live.schema || record.table !== live.table) {
          problem('tables', `${label}: ${at} is ${where(record)}, expected live as ${live.schema}.${live.table}`);
        }
      } else if (t.state === 'TRASHED') {
        if (record?.schema !== TRASH_SCHEMA) problem('tables', `${label}: ${at} is ${where(record)}, expected in ${TRASH_SCHEMA}`);
      } else if (record) {
        problem('tables', `${label}: ${at} should be gone, but tablefate.shards still has it, at ${where(record)}`);
      }
    }
  }
  for (const r of records) {
    if (accounted.has(r)) continue;
    const table = r.catalogId === checks.catalogId ? byId.get(r.tableId) : undefined;
    const whose =
      r.catalogId !== checks.catalogId
        ? `of another catalog (${r.catalogId})`
        : table
          ? `of table ${r.tableId} (${table.state}), which is not placed there`
          : `of table ${r.tableId}, which the catalog does not have`;
    problem('tables', `${r.node}: tablefate.shards records shard ${r.shard} ${whose}, at ${where(r)}`);
  }
  const recorded = new Set(records.map((r) => `${r.node}/${r.oid}`));
  const members = new Set(records.flatMap((r) => r.members.map((oid) => `${r.node}/${oid}`)));
  for (const p of parked) {
    const at = `${p.node}/${p.oid}`;
    if (!recorded.has(at) && !members.has(at)) {
      problem(
        'tables',
        `${p.node}: ${p.kind} ${p.schema}.${p.table} is in tablefate's schemas, and tablefate.shards records it neither as a ` +
          "shard's table nor as a member of a table's family",
      );
    }
  }
  // Before the recalls below change where the families are.
  if (checks.families) findings.problems.push(...(await checks.families.atRest(tables)));

  // The user's tables, untouched: same relation under the same name, same rows, same indexes, never recorded as a shard.
  for (const u of checks.userTables) {
    const url = checks.nodes.find((n) => n.node === u.node)!.url;
    const now = await withNode(url, (client) => lookAt(client, u.schema, u.table));
    const name = `${u.node}: the user's table ${u.schema}.${u.table}`;
    if (!now) problem('user-tables', `${name} is gone`);
    else if (now.oid !== u.before.oid) problem('user-tables', `${name} is another relation now (oid ${now.oid}, was ${u.before.oid})`);
    else if (now.rows !== u.before.rows || now.content !== u.before.content)
      problem(
        'user-tables',
        `${name} has other rows now: ${now.rows} rows of content md5 ${now.content}, it had ${u.before.rows} of ${u.before.content}`,
      );
    else if (now.indexes !== u.before.indexes)
      problem('user-tables', `${name} has other indexes now (${now.indexes}, had ${u.before.indexes})`);
    if (recorded.has(`${u.node}/${u.before.oid}`))
      problem('user-tables', `${name} is recorded in tablefate.shards as a shard tablefate placed`);
  }

  // READY tables: the rows where they are.
  const reads: ShardRead[] = [];
  const read = async (t: TableRecord, when: string) => {
    const found = await readShards(checks.nodes, t, when);
    reads.push(...found.reads);
    findings.problems.push(...found.problems);
    findings.tablesChecked++;
  };
  for (const t of tables.filter((x) => x.state === 'READY')) await read(t, '');

  // TRASHED tables: recalled as a user would, then their rows where they came back.
  for (const t of tables.filter((x) => x.state === 'TRASHED')) {
    const label = `table ${t.id} (${t.namespace}.${t.name}, TRASHED)`;
    let recalled: TableInfo | undefined;
    let renamed = false;
    try {
      recalled = await checks.recall(t.id);
    } catch (err) {
      if (!isNameTaken(err)) {
        problem('recall', `${label}: the recall failed: ${(err as Error).name}: ${(err as Error).message}`);
      } else {
        const fresh = `recalled.t${t.id}`;
        try {
          recalled = await checks.recall(t.id, fresh);
          renamed = true;
          findings.notes.push(`${label}: its name is taken (${(err as Error).message}); recalled as ${fresh}`);
        } catch (again) {
          problem('recall', `${label}: the recall as ${fresh} failed: ${(again as Error).name}: ${(again as Error).message}`);
        }
      }
    }
    if (!recalled) continue;
    findings.recalled++;
    const now = await checks.getTable(t.id);
    if (now?.state !== 'READY') {
      problem('recall', `${label}: the recall answered ${recalled.state}, and the catalog says ${String(now?.state)}`);
      continue;
    }
    await read(now, ' after its recall');
    if (checks.families) findings.problems.push(...(await checks.families.afterRecall(now, renamed, recalled.notes ?? [])));
  }
  const rows = judgeRows(checks.ledger, tables, reads, checks.ops);
  findings.problems.push(...rows.problems);
  findings.rowsChecked = rows.rowsChecked;
  return findings;
}
