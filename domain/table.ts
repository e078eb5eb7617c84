import { InvalidInputError } from './errors';
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
  /**
   * PostgreSQL driver: the table was not made by tablefate but adopted (`tablefate adopt`): a table that already
   * existed under this name on `node`, registered as the table's one shard. Its create made nothing, so taking the
   * create back forgets the table and leaves it where it was.
   */
  adopt?: { node: string };
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
  /**
   * Who dropped it, as its drop was started (the SDK client's identity, `user@host` by default; the SQL door's
   * `sql:<role> ...`): set with droppedAt by the drop's commit, kept on the PURGED tombstone, null once back from the
   * trash, and null for a drop that did not say (one made before it was recorded, or a drop resumed by the reconciler
   * that could not read the first run's input).
   */
  droppedBy: string | null;
  /**
   * What its drop took along (PostgreSQL, with cascade), as the drop said it, a sentence each (`shop.items: moved into
   * the trash with it: view shop.items_v`; `...: detached until its recall: foreign key ... of shop.orders`): set by the
   * drop's commit, kept on the PURGED tombstone, absent once back from the trash and when it took nothing.
   */
  family?: string[];
  /**
   * The other tables dropped with it as one (`drop a b c`), by id: set by the drop's commit, kept on the PURGED tombstone,
   * absent once back from the trash and when it was dropped alone. A recall of it recalls those still in the trash from
   * that drop with it, unless asked to recall it alone. While TRUNCATING: the other tables of its truncate (a cascade's).
   */
  droppedWith?: number[];
  /**
   * While TRUNCATING: the id of the trash entry its rows are moving into, chosen (and locked) when the truncate began, so
   * that a truncate resumed moves them to the same one.
   */
  truncateInto?: number;
  /** A trash entry a truncate made: the table whose rows it holds (which stayed live, empty). Kept on the tombstone. */
  truncatedFrom?: number;
  expireAt: number | null;
  purgedAt: number | null;
  updatedAt: number;
  /** A legal hold: while set, nothing purges the table (not its expiry, not the trash's space cap, not a purge by hand). */
  hold: Hold | null;
}

/** A legal hold on a table, with why, and since when (epoch ms, workflow time). */
export interface Hold {
  reason: string | null;
  since: number;
}

/** Only a READY or trashed table can be held: any other is on its way somewhere, and its operation holds the lock. */
export const canBeHeld = (table: Pick<TableRecord, 'state'>): boolean => table.state === 'READY' || table.state === 'TRASHED';

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
  /** Who dropped it (TableRecord.droppedBy): null unless it is in the trash (or was, for a purged table), or when the drop did not say. */
  droppedBy: string | null;
  expireAt: string | null;
  purgedAt: string | null;
  /** The legal hold on it, if any: while held it is never purged. */
  hold: { reason: string | null; since: string } | null;
  /** What its drop took along (TableRecord.family): present while it is in the trash (or purged) with a family. */
  family?: string[];
  /** The ids of the tables dropped with it as one (TableRecord.droppedWith): present while it is in the trash (or purged). */
  droppedWith?: number[];
  /** A trash entry a truncate made: the id of the table whose rows it holds (TableRecord.truncatedFrom). */
  truncatedFrom?: number;
  /**
   * With `withSizes`: the bytes its shards take on their nodes (for PostgreSQL the total relation size: heap, indexes
   * and TOAST; for files the files), 0 once purged; null when a node holding one did not answer. Absent otherwise.
   */
  bytes?: number | null;
  /**
   * What the operation could not do as the table had it, a sentence each, when anything (PostgreSQL, a recall: a
   * foreign key put back NOT VALID because parent rows went while the table was in the trash, or not put back because
   * its parent went). Absent otherwise.
   */
  notes?: string[];
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
    // (A record journaled before the column was there has none.)
    droppedBy: table.droppedBy ?? null,
    expireAt: iso(table.expireAt),
    purgedAt: iso(table.purgedAt),
    hold: table.hold ? { reason: table.hold.reason, since: iso(table.hold.since)! } : null,
    ...(table.family && table.family.length > 0 ? { family: table.family } : {}),
    ...(table.droppedWith && table.droppedWith.length > 0 ? { droppedWith: table.droppedWith } : {}),
    ...(table.truncatedFrom !== undefined ? { truncatedFrom: table.truncatedFrom } : {}),
  };
}

/** What a create asked for, as a person reads it: `3 shards`, `1 shard with columns (id int)`, `2 shards like app.t`. */
export function describeCreateParams(p: CreateParams): string {
  if (p.adopt !== undefined) return `the table adopted on ${p.adopt.node}`;
  const shards = `${p.shards} shard${p.shards === 1 ? '' : 's'}`;
  if (p.like !== undefined) return `${shards} like ${p.like}`;
  return p.columns !== undefined ? `${shards} with columns (${p.columns})` : shards;
}

export function sameCreateParams(a: CreateParams, b: CreateParams): boolean {
  return a.shards === b.shards && a.columns === b.columns && a.like === b.like && a.adopt?.node === b.adopt?.node;
}

/** What a create asked for besides its shard count (its definition: columns, like, or the table it adopts), as its input carries it. */
export function definitionOf(p: CreateParams): Pick<CreateParams, 'columns' | 'like' | 'adopt'> {
  return {
    ...(p.columns !== undefined ? { columns: p.columns } : {}),
    ...(p.like !== undefined ? { like: p.like } : {}),
    ...(p.adopt !== undefined ? { adopt: p.adopt } : {}),
  };
}

/**
 * Where a new table's shards go: spread over the nodes (placeShards), or, for an adopted table, the node it already
 * is on, which must be one of them.
 */
export function placeTable(tableId: number, params: CreateParams, nodes: readonly string[]): ShardPlacement[] {
  if (params.adopt === undefined) return placeShards(tableId, params.shards, nodes);
  if (!nodes.includes(params.adopt.node)) {
    throw new InvalidInputError(`there is no storage node ${params.adopt.node}: the nodes are ${nodes.join(', ')}`);
  }
  return [{ shard: 0, node: params.adopt.node }];
}

/**
 * Spreads a table's shards over the storage nodes, starting at a node chosen by the id so that
 * consecutive tables do not all begin on the first node. Pure: the same id and nodes give the same placement.
 */
export function placeShards(tableId: number, shards: number, nodes: readonly string[]): ShardPlacement[] {
  if (nodes.length === 0) throw new Error('no storage nodes to place shards on');
  return Array.from({ length: shards }, (_, shard) => ({ shard, node: nodes[(tableId + shard) % nodes.length]! }));
}
