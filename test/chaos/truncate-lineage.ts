import type { Catalog } from '../../catalog/catalog';
import type { TableRecord } from '../../domain/table';
import { couldActAfter } from './answers';
import { ID_HOLES_IN_A_ROW } from './observe';
import { requestedId, requestedName, type OpRecord } from './ops';

/*
 * Where a table's rows may be once truncates (issue 43) have run: each truncate gives the rows the table held then a
 * table id of their own, the entry (`truncatedFrom` names the table; its tombstone keeps it), and leaves the table
 * empty under its id. An entry recalled is a table like any other, which may be truncated in turn. So the rows written
 * into a table are, at any later time, in that table or in one of its descendants: its entries, their entries, ...
 * What the checks of answers, rows, files, holds and leases read to follow them.
 */

/** The entries truncated from table `id`, oldest first: ids come from one counter, chosen when each truncate began. */
export function entriesOf(tables: Iterable<TableRecord>, id: number): TableRecord[] {
  return [...tables].filter((t) => t.truncatedFrom === id).sort((a, b) => a.id - b.id);
}

/** `id` and every table whose rows it could hold: the table its rows came from, and that one's, nearest first. */
export function lineageOf(byId: ReadonlyMap<number, TableRecord>, id: number): number[] {
  const lineage = [id];
  for (let from = byId.get(id)?.truncatedFrom; from !== undefined && !lineage.includes(from); from = byId.get(from)?.truncatedFrom) {
    lineage.push(from);
  }
  return lineage;
}

/** `id` and every table that may hold rows written into it: its entries, theirs, and so on. */
export function descendantsOf(tables: readonly TableRecord[], id: number): Set<number> {
  const found = new Set([id]);
  for (let grew = true; grew;) {
    grew = false;
    for (const t of tables) {
      if (t.truncatedFrom !== undefined && found.has(t.truncatedFrom) && !found.has(t.id)) {
        found.add(t.id);
        grew = true;
      }
    }
  }
  return found;
}

/**
 * The entries of table `id` the catalog holds now, tombstones too (listTables leaves those out): ids are never reused
 * nor deleted, and an entry's id is higher than its table's, so the ids above `id` are read until as many in a row are
 * missing as there may be holes (observe.ts).
 */
export async function entriesNow(catalog: Pick<Catalog, 'getTable'>, id: number): Promise<TableRecord[]> {
  const entries: TableRecord[] = [];
  for (let next = id + 1, holes = 0; holes < ID_HOLES_IN_A_ROW; next++) {
    const table = await catalog.getTable(next);
    holes = table ? 0 : holes + 1;
    if (table?.truncatedFrom === id) entries.push(table);
  }
  return entries;
}

/** Whether `op` is a truncate that may have aimed at table `id` (by its id, or by a name it had: `names`). */
export function mayTruncate(op: OpRecord, id: number, names: ReadonlySet<string>): boolean {
  if (op.request.kind !== 'truncate') return false;
  if (op.outcome.kind === 'ok') return op.outcome.table.truncatedFrom === id;
  const name = requestedName(op.request);
  return requestedId(op.request) === id || op.before?.id === id || (name !== undefined && names.has(name));
}

/** The truncates that may have acted on table `id` after time `t` (by id, or by a name in `names`). */
export function truncatesAfter(ops: readonly OpRecord[], id: number, names: ReadonlySet<string>, t: number): OpRecord[] {
  return ops.filter((op) => mayTruncate(op, id, names) && couldActAfter(op, t));
}
