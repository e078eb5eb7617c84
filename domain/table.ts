import type { TableState } from './states';

/** Where one shard lives: its index within the table and the storage node that holds it. */
export interface ShardPlacement {
  shard: number;
  node: string;
}

/** What a create asked for; a retry of the same create must ask for the same. */
export interface CreateParams {
  shards: number;
  /** PostgreSQL driver: the column definitions, as inside `CREATE TABLE (...)` (checked by domain/columns.ts). */
  columns?: string;
  /** PostgreSQL driver: the `schema.table` whose structure (indexes and defaults included) the shard tables copy. */
  like?: string;
}

/** A table as the catalog records it. Times are epoch milliseconds. */
export interface TableRecord {
  id: number;
  namespace: string;
  name: string;
  state: TableState;
  params: CreateParams;
  placement: ShardPlacement[];
  createdAt: number;
  droppedAt: number | null;
  expireAt: number | null;
  purgedAt: number | null;
  updatedAt: number;
}

/** A table as the SDK and the command line show it: what `--json` prints. */
export interface TableInfo {
  id: number;
  namespace: string;
  name: string;
  state: TableState;
  shards: number;
  placement: ShardPlacement[];
  createdAt: string;
  droppedAt: string | null;
  expireAt: string | null;
  purgedAt: string | null;
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

export function toTableInfo(table: TableRecord): TableInfo {
  return {
    id: table.id,
    namespace: table.namespace,
    name: table.name,
    state: table.state,
    shards: table.params.shards,
    placement: table.placement,
    createdAt: iso(table.createdAt)!,
    droppedAt: iso(table.droppedAt),
    expireAt: iso(table.expireAt),
    purgedAt: iso(table.purgedAt),
  };
}

/** What a create asked for, as a person reads it: `3 shards`, `1 shard with columns (id int)`, `2 shards like app.t`. */
export function describeCreateParams(p: CreateParams): string {
  const shards = `${p.shards} shard${p.shards === 1 ? '' : 's'}`;
  if (p.like !== undefined) return `${shards} like ${p.like}`;
  return p.columns !== undefined ? `${shards} with columns (${p.columns})` : shards;
}

export function sameCreateParams(a: CreateParams, b: CreateParams): boolean {
  return a.shards === b.shards && a.columns === b.columns && a.like === b.like;
}

/**
 * Spreads a table's shards over the storage nodes, starting at a node chosen by the id so that
 * consecutive tables do not all begin on the first node. Pure: the same id and nodes give the same placement.
 */
export function placeShards(tableId: number, shards: number, nodes: readonly string[]): ShardPlacement[] {
  if (nodes.length === 0) throw new Error('no storage nodes to place shards on');
  return Array.from({ length: shards }, (_, shard) => ({ shard, node: nodes[(tableId + shard) % nodes.length]! }));
}
