import { ShardMissingError } from '../domain/errors';
import { POSTGRES_OWN_SCHEMAS } from '../domain/deployment';
import { ident } from '../catalog/pg-session';

/**
 * What the record of a PostgreSQL storage node speaks of (see postgres-tables.ts): which shard a table is, where it is
 * (the live area, the trash, the garbage), and the names tablefate gives it there. The record itself is the table
 * `tablefate.shards`; postgres-record-schema.ts makes and migrates it.
 */

/** Which shard of which table of which catalog. */
export interface ShardTableId {
  catalogId: string;
  tableId: number;
  shard: number;
}

/** Where a live shard table is: its schema (the tablefate namespace) and its name. */
export interface LiveName {
  schema: string;
  table: string;
}

export type TableArea = 'live' | 'trash' | 'garbage';

/** One table of a move: its shard, and under what name it comes back into the live area. */
export interface TableMove {
  id: ShardTableId;
  live?: LiveName;
}

export const { own: OWN_SCHEMA, trash: TRASH_SCHEMA, garbage: GARBAGE_SCHEMA } = POSTGRES_OWN_SCHEMAS;
export const AREA_SCHEMAS: Record<Exclude<TableArea, 'live'>, string> = { trash: TRASH_SCHEMA, garbage: GARBAGE_SCHEMA };
/** The record's table, qualified. */
export const SHARDS = `"${OWN_SCHEMA}"."shards"`;

export const qualified = (schema: string, table: string) => `${ident(schema)}.${ident(table)}`;

/** The shard's name outside the live schema: derived from its identity only, so that nothing collides there. */
export function parkedName(id: ShardTableId): string {
  return `c${id.catalogId.replace(/[^a-zA-Z0-9]/g, '').slice(0, 16)}_t${id.tableId}_s${id.shard}`;
}

/** The area a schema stands for: tablefate's own two, or any other (a user's namespace) for live. */
export const areaOf = (schema: string): TableArea => (schema === TRASH_SCHEMA ? 'trash' : schema === GARBAGE_SCHEMA ? 'garbage' : 'live');

export const describeShard = (id: ShardTableId) => `table ${id.tableId} shard ${id.shard} of catalog ${id.catalogId}`;

export const missing = (id: ShardTableId, why: string) =>
  new ShardMissingError(`${describeShard(id)}: ${why}; nothing was changed (tablefate doctor lists what differs)`);
