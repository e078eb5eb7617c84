/**
 * Table names and references, as plain data: workflow code uses them too, so this module stays free of the
 * validation library (its schemas, in domain/requests.ts, would otherwise be evaluated again for every run a
 * worker holds in memory).
 */

/** The namespace a bare table name belongs to. */
export const DEFAULT_NAMESPACE = 'default';

export interface TableName {
  namespace: string;
  name: string;
}

/**
 * The name a shard's table has while it is live (PostgreSQL driver): the table's own for a table of one shard,
 * `<name>_<shard>` for each of several, in the schema named after the namespace.
 */
export function liveShardName(table: TableName & { shards: number }, shard: number): { schema: string; table: string } {
  return { schema: table.namespace, table: table.shards === 1 ? table.name : `${table.name}_${shard}` };
}

/** `<ns>.<name>`: how a table's name is written everywhere (ids of create runs, messages, the catalog). */
export function formatTableName(table: TableName): string {
  return `${table.namespace}.${table.name}`;
}

/**
 * A reference to a table as a person types it: a number is an id, anything else a name.
 * Ids and names cannot be confused because a name part must start with a letter.
 */
export type TableRef = { kind: 'id'; id: number } | ({ kind: 'name' } & TableName);
