import { Client } from 'pg';
import type { TableRecord } from '../../domain/table';
import type { OpRecord } from './ops';
import type { Problem } from './problems';
import { liveTableOf, quoteIdent, type CommittedRow, type NodeDatabase, type RowLedger } from './rows';
import { descendantsOf, entriesOf } from './truncate-lineage';

/**
 * Where each row seen committed is at rest (postgres driver), as the checker reads the tables, live under their names:
 * the READY ones, and the trashed ones once it has recalled them (tables.ts). A row went into one shard of one table;
 * a drop or a recall moves the table with its rows; a truncate (issue 43) moves the rows its table holds then into a
 * table of their own, its entry, and the table goes on with an empty twin. An entry recalled may be truncated in turn.
 * So a row written into table A is, at rest, on the same shard of A or of one of A's descendants (entriesOf, and
 * theirs): in exactly one place, or nowhere only if one that may hold it is gone (purged). Which one the truncates'
 * answers say, each by its call's times:
 *
 * - A's slots: its entries E1 < E2 < ... < Em (by id, the order of their truncates) hold, each with its own entries,
 *   what A held at that truncate: Ek's is slot k-1, and A's own, what it holds since its last truncate, slot m.
 * - A row whose COMMIT was heard before a call answered with Ek began was moved by that truncate or an earlier one: a
 *   slot below k. A row whose transaction began after that call's answer went into the twin: slot k or later. A row in
 *   between may be on either side; an entry no call was answered with bounds no row.
 * - The relations (OIDs, handed out in increasing order) the checker read A's entries and A in grow with the slots: an
 *   entry holds older rows than the entry after it, and the table the newest.
 */

/** One shard table as the checker read it, by its live name: the relation it is, and the ids in it. */
export interface ShardRead {
  tableId: number;
  shard: number;
  node: string;
  oid: number;
  ids: Set<number>;
  /** ' after its recall' when the checker recalled it first; '' for a READY table. */
  when: string;
}

const qualified = (schema: string, table: string) => `${quoteIdent(schema)}.${quoteIdent(table)}`;

/** Reads each shard of the live table `t` by its name; a shard that cannot be read is a problem. */
export async function readShards(
  nodes: readonly NodeDatabase[],
  t: TableRecord,
  when: string,
): Promise<{ reads: ShardRead[]; problems: Problem[] }> {
  const found: { reads: ShardRead[]; problems: Problem[] } = { reads: [], problems: [] };
  for (const { shard, node } of t.placement) {
    const live = liveTableOf(t, shard);
    const client = new Client({ connectionString: nodes.find((n) => n.node === node)!.url, application_name: 'chaos checker' });
    try {
      await client.connect();
      const { rows: at } = await client.query<{ oid: string }>('SELECT to_regclass($1)::int8 AS oid', [qualified(live.schema, live.table)]);
      const { rows } = await client.query<{ id: string }>(`SELECT id FROM ${qualified(live.schema, live.table)}`);
      found.reads.push({ tableId: t.id, shard, node, oid: Number(at[0]!.oid), ids: new Set(rows.map((r) => Number(r.id))), when });
    } catch (err) {
      found.problems.push({
        invariant: 'rows',
        detail:
          `table ${t.id} (${t.namespace}.${t.name}): shard ${shard} on ${node} cannot be read as ${live.schema}.${live.table}${when}: ` +
          (err as Error).message,
      });
    } finally {
      await client.end().catch(() => undefined);
    }
  }
  return found;
}

/** A's slots: which slot each table that may hold its rows is, and what the answered truncates say of each row. */
interface Slots {
  entries: TableRecord[];
  /** The slot of A and of each of its descendants. */
  slotOf: Map<number, number>;
  /** Per entry answered to a call (slot index k-1): the latest start of those calls, the earliest answer. */
  windows: Array<{ slot: number; began: number; answered: number }>;
}

function slotsOf(tables: readonly TableRecord[], ops: readonly OpRecord[], a: number): Slots {
  const entries = entriesOf(tables, a);
  const slotOf = new Map<number, number>([[a, entries.length]]);
  const windows: Slots['windows'] = [];
  entries.forEach((entry, slot) => {
    for (const id of descendantsOf(tables, entry.id)) slotOf.set(id, slot);
    // (A call that joined the run began before its move too: its plan found the table READY.)
    const calls = ops.filter((op) => op.request.kind === 'truncate' && op.outcome.kind === 'ok' && op.outcome.table.id === entry.id);
    if (calls.length > 0) {
      windows.push({ slot, began: Math.max(...calls.map((c) => c.startedAt)), answered: Math.min(...calls.map((c) => c.endedAt)) });
    }
  });
  return { entries, slotOf, windows };
}

/** The slots row `r` may be in: [lo, hi]. */
function rangeOf(r: CommittedRow, slots: Slots): [number, number] {
  let lo = 0;
  let hi = slots.entries.length;
  for (const w of slots.windows) {
    if (r.at < w.began) hi = Math.min(hi, w.slot);
    if (r.startedAt !== undefined && r.startedAt > w.answered) lo = Math.max(lo, w.slot + 1);
  }
  return [lo, hi];
}

export function judgeRows(
  ledger: RowLedger,
  tables: readonly TableRecord[],
  reads: readonly ShardRead[],
  ops: readonly OpRecord[],
): { problems: Problem[]; rowsChecked: number } {
  const problems: Problem[] = [];
  const byId = new Map(tables.map((t) => [t.id, t]));
  const label = (id: number) => {
    const t = byId.get(id);
    return t ? `table ${id} (${t.namespace}.${t.name}, ${t.state})` : `table ${id}`;
  };
  const readOf = new Map(reads.map((r) => [`${r.tableId}/${r.shard}`, r]));
  const where = new Map<number, ShardRead[]>();
  for (const read of reads) for (const id of read.ids) where.set(id, [...(where.get(id) ?? []), read]);
  const families = new Map<number, Slots>();
  const slotsFor = (a: number) => families.get(a) ?? families.set(a, slotsOf(tables, ops, a)).get(a)!;
  /** Rows judged wrong, by what is wrong with them: one problem each, with a few ids. */
  const wrong = new Map<string, number[]>();
  const add = (what: string, id: number) => wrong.set(what, [...(wrong.get(what) ?? []), id]);
  let rowsChecked = 0;

  for (const r of ledger.all()) {
    const of = `rows seen committed into ${label(r.tableId)} shard ${r.shard} on ${r.node}`;
    if (!byId.has(r.tableId)) {
      add(`${of}: the catalog has no such table`, r.id);
      continue;
    }
    rowsChecked++;
    const slots = slotsFor(r.tableId);
    const [lo, hi] = rangeOf(r, slots);
    const found = where.get(r.id) ?? [];
    const slotName = (slot: number) =>
      slot === slots.entries.length ? `the table itself` : `entry ${slots.entries[slot]!.id} (or an entry of it)`;
    const may = lo === hi ? slotName(lo) : `${slotName(lo)} to ${slotName(hi)}`;
    if (found.length > 1) {
      add(
        `${of}: each is in ${found.length} tables (${found.map((f) => `${label(f.tableId)} shard ${f.shard}${f.when}`).join('; ')})`,
        r.id,
      );
      continue;
    }
    if (found.length === 1) {
      const f = found[0]!;
      const slot = slots.slotOf.get(f.tableId);
      if (slot === undefined || f.shard !== r.shard) {
        add(`${of}: found in ${label(f.tableId)} shard ${f.shard}${f.when}, which holds none of that table's rows`, r.id);
      } else if (slot < lo || slot > hi) {
        add(`${of}: found in ${label(f.tableId)}${f.when}, ${slotName(slot)}, where the truncates' calls say ${may}`, r.id);
      }
      continue;
    }
    // Nowhere: only if a table that may hold it was not read (purged, or reported already: left in a transitional
    // state, its recall or its read failed).
    const holders = [...slots.slotOf.entries()].filter(([, slot]) => slot >= lo && slot <= hi).map(([id]) => id);
    if (holders.some((id) => !readOf.has(`${id}/${r.shard}`))) continue;
    add(`${of}: in none of ${holders.map(label).join(', ')}, which the checker read (${may} may hold them)`, r.id);
  }
  for (const [what, ids] of wrong) {
    problems.push({
      invariant: 'rows',
      detail: `${ids.length} ${what} (ids ${ids.slice(0, 10).join(', ')}${ids.length > 10 ? ', ...' : ''})`,
    });
  }

  // Rows nobody saw committed: a row the service wrote whose COMMIT it never heard may be there, no other.
  for (const read of reads) {
    const strangers = [...read.ids].filter((id) => !ledger.get(id) && !ledger.uncertain.has(id));
    if (strangers.length > 0) {
      problems.push({
        invariant: 'rows',
        detail:
          `${label(read.tableId)}: shard ${read.shard} on ${read.node}${read.when} holds ${strangers.length} rows never seen ` +
          `committed (ids ${strangers.slice(0, 5).join(', ')})`,
      });
    }
  }

  // The relations grow with the slots: an entry not truncated in turn holds what its table had then, older than what
  // the next entry holds, and the table the newest.
  for (const [a, slots] of families) {
    const shards = new Set(reads.filter((read) => slots.slotOf.has(read.tableId)).map((read) => read.shard));
    for (const shard of shards) {
      const direct = [...slots.entries.filter((e) => descendantsOf(tables, e.id).size === 1), byId.get(a)!]
        .map((t) => ({ id: t.id, read: readOf.get(`${t.id}/${shard}`) }))
        .filter((x): x is { id: number; read: ShardRead } => x.read !== undefined);
      const out = direct.find((x, i) => i > 0 && direct[i - 1]!.read.oid >= x.read.oid);
      if (out) {
        problems.push({
          invariant: 'rows',
          detail:
            `${label(a)} shard ${shard}: its entries and itself were read in relations whose OIDs do not grow with their ` +
            `truncates (${direct.map((x) => `${x.id}: oid ${x.read.oid}`).join(', ')}): an entry holds newer rows than what came after it`,
        });
      }
    }
  }
  return { problems, rowsChecked };
}
