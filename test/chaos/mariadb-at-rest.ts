import type { Catalog } from '../../catalog/catalog';
import type { TableFateClient } from '../../client/client';
import { toTableInfo, type TableInfo, type TableRecord } from '../../domain/table';
import { GARBAGE_DATABASE, OWN_DATABASE, TRASH_DATABASE } from '../../storage/mariadb-record';
import { qualified } from '../../storage/mariadb-session';
import type { StorageFindings } from './invariants';
import { ObjectChecks, type KeptNames, type MadeObject } from './mariadb-objects';
import { identityOf } from './mariadb-rows';
import { withMariadb, type MariadbNode } from './mariadb-servers';
import { checkMariadbUserTables, type MariadbUserTable } from './mariadb-user';
import { TRANSITIONAL_STATES } from './observe';
import type { OpRecord } from './ops';
import type { Problem } from './problems';
import { judgeRows, type ShardRead } from './row-homes';
import { liveTableOf, type RowLedger } from './rows';
import { unitsAtRest } from './units';

/**
 * The MariaDB storage checks of a chaos run (files.ts's and tables.ts's, for `--driver mariadb`), once it is at rest:
 * - a READY table's shard tables are live under its name, and tablefate.shards says so, by the InnoDB table id the
 *   record holds; a TRASHED table's are in tablefate_trash; a PURGED (or CREATE_FAILED) table has none, anywhere;
 * - nothing in tablefate_trash or tablefate_garbage, nor under a hidden name (`tablefate_moving_*`) in a live database,
 *   nor a record in tablefate.shards, that the catalog does not account for; no key of any table into the trash;
 * - the user's own tables are untouched (mariadb-user.ts), and the run's triggers and keys are where their tables are
 *   (mariadb-objects.ts);
 * - every row seen committed is in its table, live or (once the checker recalled it, as a user would, through the SDK)
 *   back from the trash, or gone with a purged one (row-homes.ts judges).
 */

export interface MariadbAtRest {
  ops: readonly OpRecord[];
  catalog: Catalog;
  sdk: TableFateClient;
  nodes: readonly MariadbNode[];
  userTables: readonly MariadbUserTable[];
  ledger: RowLedger;
  objects: readonly MadeObject[];
}

/** One row of tablefate.shards on a node, with where its InnoDB table is now (`db/table`; null: no such table). */
interface ShardRecord {
  node: string;
  catalogId: string;
  tableId: number;
  shard: number;
  identity: number;
  area: string;
  database: string;
  table: string;
  movingTo: string | null;
  kept: KeptNames | null;
  now: string | null;
}

/** A table in tablefate's own databases, or under a hidden name in a live one. */
interface Parked {
  node: string;
  database: string;
  table: string;
  identity: number | null;
}

interface Survey {
  records: ShardRecord[];
  parked: Parked[];
  /** Keys from or to a table in the trash or the garbage, or under a hidden name: `<node>: <what>`. */
  strayKeys: string[];
}

const HIDDEN_PREFIX = 'tablefate_moving_';

async function survey(nodes: readonly MariadbNode[]): Promise<Survey> {
  const found: Survey = { records: [], parked: [], strayKeys: [] };
  for (const { node, rootUrl } of nodes) {
    await withMariadb(rootUrl, async (c) => {
      const own = await c.query<unknown[]>('SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?', [
        OWN_DATABASE,
        'shards',
      ]);
      if (own.length > 0) {
        const rows = await c.query<
          Array<{
            catalog_id: string;
            table_id: number;
            shard: number;
            identity: number;
            area: string;
            database_name: string;
            table_name: string;
            moving_to: string | null;
            kept: string | null;
            now: string | null;
          }>
        >(
          `SELECT s.catalog_id, s.table_id, s.shard, s.identity, s.area, s.database_name, s.table_name, s.moving_to, s.kept, i.NAME AS now
             FROM ${qualified(OWN_DATABASE, 'shards')} s LEFT JOIN information_schema.INNODB_SYS_TABLES i ON i.TABLE_ID = s.identity`,
        );
        for (const r of rows) {
          const kept =
            r.kept === null ? null : (JSON.parse(r.kept) as { triggers: Array<{ name: string }>; referencing: Array<{ name: string }> });
          found.records.push({
            node,
            catalogId: r.catalog_id,
            tableId: Number(r.table_id),
            shard: r.shard,
            identity: Number(r.identity),
            area: r.area,
            database: r.database_name,
            table: r.table_name,
            movingTo: r.moving_to,
            kept: kept && { triggers: kept.triggers.map((t) => t.name), referencing: kept.referencing.map((k) => k.name) },
            now: r.now,
          });
        }
      }
      const parked = await c.query<Array<{ database: string; table: string }>>(
        `SELECT TABLE_SCHEMA AS \`database\`, TABLE_NAME AS \`table\` FROM information_schema.TABLES
          WHERE TABLE_SCHEMA IN (?, ?) OR TABLE_NAME LIKE 'tablefate\\_moving\\_%'`,
        [TRASH_DATABASE, GARBAGE_DATABASE],
      );
      for (const p of parked) found.parked.push({ node, ...p, identity: await identityOf(c, p.database, p.table) });
      const keys = await c.query<Array<{ db: string; tbl: string; name: string; ref_db: string; ref_tbl: string }>>(
        `SELECT TABLE_SCHEMA AS db, TABLE_NAME AS tbl, CONSTRAINT_NAME AS name, REFERENCED_TABLE_SCHEMA AS ref_db, REFERENCED_TABLE_NAME AS ref_tbl
           FROM information_schema.KEY_COLUMN_USAGE
          WHERE REFERENCED_TABLE_NAME IS NOT NULL
            AND (TABLE_SCHEMA IN (?, ?) OR REFERENCED_TABLE_SCHEMA IN (?, ?)
                 OR TABLE_NAME LIKE 'tablefate\\_moving\\_%' OR REFERENCED_TABLE_NAME LIKE 'tablefate\\_moving\\_%')`,
        [TRASH_DATABASE, GARBAGE_DATABASE, TRASH_DATABASE, GARBAGE_DATABASE],
      );
      for (const k of keys) found.strayKeys.push(`${node}: foreign key ${k.name} of ${k.db}.${k.tbl} references ${k.ref_db}.${k.ref_tbl}`);
    });
  }
  return found;
}

const placeOf = (r: ShardRecord | undefined) =>
  r === undefined
    ? 'nowhere (no record in tablefate.shards)'
    : `${r.database}.${r.table} by its record (${r.area}), InnoDB id ${r.identity} ${r.now === null ? 'gone' : `at ${r.now}`}` +
      (r.movingTo === null ? '' : `, moving to ${r.movingTo}`);

/** Whether the record's table is where the record says (InnoDB names `db/table`; the run's names need no encoding). */
const inPlace = (r: ShardRecord) => r.now === `${r.database}/${r.table}` && r.movingTo === null;

export async function checkMariadbAtRest(at: MariadbAtRest, tables: readonly TableRecord[]): Promise<StorageFindings> {
  const { ops, catalog, sdk, nodes } = at;
  const problems: Problem[] = [];
  const notes: string[] = [];
  const problem = (invariant: string, detail: string) => problems.push({ invariant, detail });
  const catalogId = catalog.id;
  const units = unitsAtRest(tables, ops);
  problems.push(...units.problems);

  const { records, parked, strayKeys } = await survey(nodes);
  const recordOf = (node: string, tableId: number, shard: number) =>
    records.find((r) => r.node === node && r.catalogId === catalogId && r.tableId === tableId && r.shard === shard);
  const accounted = new Set<ShardRecord>();
  const byId = new Map(tables.map((t) => [t.id, t]));
  for (const t of tables) {
    const label = `table ${t.id} (${t.namespace}.${t.name}, ${t.state})`;
    for (const { shard, node } of t.placement) {
      const record = recordOf(node, t.id, shard);
      if (record) accounted.add(record);
      // Reported as stuck already: its shards may be on either side of a move.
      if (TRANSITIONAL_STATES.includes(t.state)) continue;
      const on = `shard ${shard} on ${node}`;
      if (t.state === 'READY') {
        const live = liveTableOf(t, shard);
        if (!record || record.area !== 'live' || record.database !== live.schema || record.table !== live.table || !inPlace(record))
          problem('tables', `${label}: ${on} is ${placeOf(record)}, expected live as ${live.schema}.${live.table}`);
      } else if (t.state === 'TRASHED') {
        if (!record || record.area !== 'trash' || record.database !== TRASH_DATABASE || !inPlace(record))
          problem('tables', `${label}: ${on} is ${placeOf(record)}, expected in ${TRASH_DATABASE}`);
      } else if (record) {
        problem('tables', `${label}: ${on} should be gone, but tablefate.shards still has it: ${placeOf(record)}`);
      }
    }
  }
  for (const r of records) {
    if (accounted.has(r)) continue;
    const t = r.catalogId === catalogId ? byId.get(r.tableId) : undefined;
    const whose =
      r.catalogId !== catalogId
        ? `of another catalog (${r.catalogId})`
        : t
          ? `of table ${r.tableId} (${t.state}), which is not placed there`
          : `of table ${r.tableId}, which the catalog does not have`;
    problem('tables', `${r.node}: tablefate.shards records shard ${r.shard} ${whose}: ${placeOf(r)}`);
  }
  const recorded = new Set(records.map((r) => `${r.node}/${r.identity}`));
  for (const p of parked) {
    const what = `${p.node}: ${p.database}.${p.table} (InnoDB id ${String(p.identity)})`;
    if (p.table.startsWith(HIDDEN_PREFIX)) problem('tables', `${what} is under a hidden name at rest: a move was left half way`);
    else if (!recorded.has(`${p.node}/${String(p.identity)}`))
      problem('tables', `${what} is in tablefate's databases, and no record names it`);
  }
  for (const key of strayKeys) problem('tables', `${key}: a key between a live table and one out of the live area`);
  problems.push(...(await checkMariadbUserTables(nodes, at.userTables, recorded)));

  const objectChecks = new ObjectChecks({
    nodes,
    objects: at.objects,
    ops,
    kept: (node, tableId, shard) => recordOf(node, tableId, shard)?.kept ?? undefined,
  });
  problems.push(...(await objectChecks.atRest(tables)));

  // The rows: READY tables where they are; TRASHED ones recalled by the checker first.
  const reads: ShardRead[] = [];
  const read = async (t: TableRecord, when: string) => {
    for (const { shard, node } of t.placement) {
      const live = liveTableOf(t, shard);
      try {
        reads.push(
          await withMariadb(nodes.find((n) => n.node === node)!.rootUrl, async (c) => {
            const rows = await c.query<Array<{ id: number }>>(`SELECT id FROM ${qualified(live.schema, live.table)}`);
            const identity = (await identityOf(c, live.schema, live.table)) ?? 0;
            return { tableId: t.id, shard, node, oid: identity, ids: new Set(rows.map((r) => Number(r.id))), when };
          }),
        );
      } catch (err) {
        problem(
          'rows',
          `table ${t.id} (${t.namespace}.${t.name}): shard ${shard} on ${node} cannot be read as ${live.schema}.${live.table}${when}: ${(err as Error).message}`,
        );
      }
    }
  };
  let tablesChecked = 0;
  for (const t of tables.filter((x) => x.state === 'READY')) {
    await read(t, '');
    tablesChecked++;
  }
  let recalled = 0;
  for (const t of tables.filter((x) => x.state === 'TRASHED')) {
    const label = `table ${t.id} (${t.namespace}.${t.name}, TRASHED)`;
    let answer: TableInfo | undefined;
    try {
      answer = await recallAtRest(catalog, sdk, t.id);
    } catch (err) {
      if ((err as { type?: string }).type !== 'NameTaken') {
        problem('recall', `${label}: the recall failed: ${(err as Error).name}: ${(err as Error).message}`);
      } else {
        // (In its own database: a table with triggers comes back into no other.)
        const fresh = `${t.namespace}.recalled_t${t.id}`;
        try {
          answer = await recallAtRest(catalog, sdk, t.id, fresh);
          notes.push(`${label}: its name is taken (${(err as Error).message}); recalled as ${fresh}`);
        } catch (again) {
          problem('recall', `${label}: the recall as ${fresh} failed: ${(again as Error).name}: ${(again as Error).message}`);
        }
      }
    }
    if (!answer) continue;
    recalled++;
    const now = await catalog.getTable(t.id);
    if (now?.state !== 'READY') {
      problem('recall', `${label}: the recall answered ${answer.state}, and the catalog says ${String(now?.state)}`);
      continue;
    }
    await read(now, ' after its recall');
    tablesChecked++;
    problems.push(...(await objectChecks.afterRecall(now)));
  }
  const rows = judgeRows(at.ledger, tables, reads, ops);
  problems.push(...rows.problems);
  return {
    problems,
    notes,
    summary:
      `rows compared for ${tablesChecked} tables (${rows.rowsChecked} rows seen committed looked for), ${recalled} trashed tables ` +
      `recalled; ${records.length} records and ${parked.length} tables in tablefate's databases surveyed; ` +
      `${objectChecks.judged} looks at the run's triggers and keys, ${objectChecks.fired} triggers seen firing after a recall; ` +
      `${units.units} units in the trash at rest`,
  };
}

/**
 * The checker's recall of a trashed table, as a user would (through the SDK): a table dropped with others that came
 * back with an earlier one is READY already; one recalled under a fresh name comes alone.
 */
async function recallAtRest(catalog: Catalog, sdk: TableFateClient, tableId: number, newName?: string): Promise<TableInfo> {
  const now = await catalog.getTable(tableId);
  if (now?.state === 'READY' && newName === undefined) return toTableInfo(now);
  const mates = (now?.droppedWith ?? []).length > 0;
  return sdk.undelete({ table: tableId, ...(newName ? { newName, ...(mates ? { alone: true } : {}) } : {}) }, { timeoutMs: 60_000 });
}
