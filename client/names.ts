import type { CatalogReader } from '../catalog/catalog';
import { mariadbNameProblem, reservedDatabaseReason, reservedSchemaReason, type StorageDriverName } from '../domain/deployment';
import { InvalidInputError, TableInTrashError, TableNotFoundError } from '../domain/errors';
import { tableNotFound } from '../domain/refusals';
import { formatTableName, type TableName, type TableRef } from '../domain/names';
import type { TableRecord } from '../domain/table';

/**
 * How the SDK resolves what a caller names (a table's name or id) to the table it means, from the catalog, and what
 * the deployment's storage driver cannot name. Every operation's workflow checks its table again under the lock; the
 * client refuses here at once what it can, and passes the name it resolved along.
 */

/** The table holding this name, or the right error: in the trash (with its id) or not found. */
export async function liveTable(catalog: CatalogReader, name: TableName): Promise<TableRecord> {
  const table = await catalog.findByName(name);
  if (table) return table;
  const trashed = await catalog.findTrashed(name);
  if (trashed) throw new TableInTrashError(`table ${formatTableName(name)} is in the trash, id ${trashed.id}`);
  throw tableNotFound(name);
}

/**
 * Any table by id (not purged; with `tombstones`, purged too: `history` and `operations`), or by name the live one,
 * else the most recently trashed of that name.
 */
export async function anyTable(catalog: CatalogReader, ref: TableRef, { tombstones = false } = {}): Promise<TableRecord> {
  if (ref.kind === 'id') {
    const table = await catalog.getTable(ref.id);
    if (!table || (!tombstones && table.state === 'PURGED')) throw tableNotFound(ref.id, { orPurged: !tombstones });
    return table;
  }
  const table = (await catalog.findByName(ref)) ?? (await catalog.findTrashed(ref));
  if (!table) {
    if (!tombstones) throw tableNotFound(ref);
    throw new TableNotFoundError(`no live or trashed table is named ${formatTableName(ref)} (a purged table answers by its id)`);
  }
  return table;
}

/** The table an undelete names; its state is checked again, under the lock, by the workflow. */
export async function trashedTable(catalog: CatalogReader, ref: TableRef): Promise<TableRecord> {
  const table = ref.kind === 'id' ? await catalog.getTable(ref.id) : await catalog.findTrashed(ref);
  if (!table || table.state === 'PURGED') {
    if (ref.kind === 'id') throw tableNotFound(ref.id, { orPurged: true });
    throw new TableNotFoundError(`no table named ${formatTableName(ref)} is in the trash`);
  }
  return table;
}

/** The name a request gave, for a workflow that refuses a table no longer bearing it; none for an id. */
export function expectedName(ref: TableRef): TableName | undefined {
  return ref.kind === 'name' ? { namespace: ref.namespace, name: ref.name } : undefined;
}

/**
 * What the deployment's storage driver cannot make, refused before anything starts: a definition of columns for files,
 * and for PostgreSQL a shard's table name (`<name>_<shard>`) past its 63 characters, which PostgreSQL would cut short.
 */
export function checkForDriver(
  driver: StorageDriverName,
  create: { table: TableName; shards: number; columns?: string; like?: string },
): void {
  if (driver === 'files' && (create.columns !== undefined || create.like !== undefined)) {
    throw new InvalidInputError(
      'columns and like are for the postgres and mariadb storage drivers; this deployment keeps its tables as files',
    );
  }
  if (driver === 'mariadb') return checkDatabaseFor(create);
  if (driver === 'postgres') checkSchemaFor(create.table);
  // PostgreSQL cuts a longer identifier short without a word: two shards' tables would then share a name.
  const longest = create.shards === 1 ? create.table.name : `${create.table.name}_${create.shards - 1}`;
  if (driver === 'postgres' && new TextEncoder().encode(longest).length > 63) {
    throw new InvalidInputError(
      `name "${create.table.name}" is too long for ${create.shards} PostgreSQL shard tables (${longest}: over 63 bytes)`,
    );
  }
}

/**
 * MariaDB driver: a live table's namespace is its database, not one tablefate or MariaDB keeps for itself; each name at
 * most 64 characters (a shard's `<name>_<shard>` too), none of four bytes in UTF-8, which MariaDB's names cannot hold.
 */
function checkDatabaseFor(create: { table: TableName; shards: number }): void {
  const { table, shards } = create;
  const reason = reservedDatabaseReason(table.namespace);
  if (reason) throw new InvalidInputError(`${formatTableName(table)}: ${reason}; a table's namespace must be a database of live tables`);
  const longest = shards === 1 ? table.name : `${table.name}_${shards - 1}`;
  for (const name of [table.namespace, longest]) {
    const problem = mariadbNameProblem(name);
    if (problem) throw new InvalidInputError(problem);
  }
}

/** PostgreSQL driver: a live table's namespace is its schema, which must not be one tablefate or PostgreSQL keeps for itself. */
export function checkSchemaFor(table: TableName): void {
  const reason = reservedSchemaReason(table.namespace);
  if (reason) throw new InvalidInputError(`${formatTableName(table)}: ${reason}; a table's namespace must be a schema of live tables`);
}
