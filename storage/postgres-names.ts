import type { PoolClient } from 'pg';
import { NameTakenError } from '../domain/errors';
import { ident } from '../catalog/pg-session';
import type { ShardTableLocation } from './postgres-audit';
import { parkedName, qualified, SHARDS, type LiveName, type ShardTableId } from './postgres-record';

/**
 * The names a shard table and its companions take as it moves. Indexes and owned sequences move with their table but
 * keep their names, and those must be unique in a schema: two trashed `orders` would both bring `orders_pkey`. A move
 * out of the live schema renames them after the shard (`<shard name>_i<k>`, `_q<k>`) and records the names they had; a
 * move back gives them those names again, unless another relation in the target schema has taken one meanwhile (the
 * new `orders` made after the drop): then that one is named after the table it now belongs to.
 */

/**
 * Renames the table or sets its schema, the record first: the guard's trigger, at the end of the statement, then finds
 * the table where tablefate says it is. The same write records, if asked, the names its companions had in the live area
 * (`liveNames`), and that the table has made its move (`moved`: when, for the reconciler's grace; no notes of an
 * earlier move).
 */
export async function relocate(
  c: PoolClient,
  oid: number,
  from: LiveName,
  to: LiveName,
  also: { liveNames?: Record<string, string>; moved?: true } = {},
): Promise<void> {
  const names = also.liveNames ? ', live_names = $4' : '';
  const moved = also.moved ? ', changed_at = pg_catalog.now(), notes = NULL' : '';
  await c.query(`UPDATE ${SHARDS} SET schema_name = $2, table_name = $3${names}${moved} WHERE table_oid = $1`, [
    oid,
    to.schema,
    to.table,
    ...(also.liveNames ? [JSON.stringify(also.liveNames)] : []),
  ]);
  if (from.schema !== to.schema) await c.query(`ALTER TABLE ${qualified(from.schema, from.table)} SET SCHEMA ${ident(to.schema)}`);
  else if (from.table !== to.table) await c.query(`ALTER TABLE ${qualified(from.schema, from.table)} RENAME TO ${ident(to.table)}`);
}

/**
 * Renames the live table's indexes and owned sequences, then the table, after the shard, recording the names they
 * had; answers them.
 */
export async function park(c: PoolClient, id: ShardTableId, at: ShardTableLocation): Promise<Record<string, string>> {
  const parked = parkedName(id);
  const companions = await companionsOf(c, at.oid);
  const names: Record<string, string> = { table: at.table };
  for (const [k, rel] of companions.entries()) {
    const derived = `${parked}_${rel.kind === 'S' ? 'q' : 'i'}${k}`;
    names[derived] = rel.name;
    await c.query(`ALTER ${rel.kind === 'S' ? 'SEQUENCE' : 'INDEX'} ${qualified(rel.schema, rel.name)} RENAME TO ${ident(derived)}`);
  }
  await relocate(c, at.oid, at, { schema: at.schema, table: parked }, { liveNames: names });
  return names;
}

/**
 * Gives the companions in `live.schema` back the names they had when they were parked (`names`, as park answered or
 * recorded them), or names after the table when another relation has taken one meanwhile.
 */
export async function unpark(c: PoolClient, oid: number, live: LiveName, names: Record<string, string>): Promise<void> {
  for (const rel of await companionsOf(c, oid)) {
    const original = names[rel.name];
    if (original === undefined) continue;
    const wanted = (await isTaken(c, rel.schema, original))
      ? await freeName(c, rel.schema, renamedAfter(original, names.table, live.table))
      : original;
    await c.query(`ALTER ${rel.kind === 'S' ? 'SEQUENCE' : 'INDEX'} ${qualified(rel.schema, rel.name)} RENAME TO ${ident(wanted)}`);
  }
}

/** A relation already at `live` (a user's table, or another shard tablefate placed): never touched, the change refused. */
export async function refuseStranger(c: PoolClient, live: LiveName): Promise<void> {
  const { rows } = await c.query<{ ours: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM ${SHARDS} WHERE table_oid = pg_catalog.to_regclass($1)::oid) AS ours
      WHERE pg_catalog.to_regclass($1) IS NOT NULL`,
    [qualified(live.schema, live.table)],
  );
  if (!rows[0]) return;
  const whose = rows[0].ours ? "another table's shard" : 'a table tablefate did not place';
  throw new NameTakenError(`${live.schema}.${live.table} is taken: ${whose} is there`);
}

/** The indexes and owned sequences (serial and identity) of a table, in a stable order (PostgreSQL keeps both in the table's schema). */
export async function companionsOf(c: PoolClient, oid: number): Promise<Array<{ schema: string; name: string; kind: 'i' | 'S' }>> {
  const { rows } = await c.query<{ schema: string; name: string; kind: 'i' | 'S' }>(
    `SELECT n.nspname AS schema, rel.relname AS name, rel.relkind AS kind
       FROM pg_catalog.pg_class rel JOIN pg_catalog.pg_namespace n ON n.oid = rel.relnamespace
      WHERE rel.oid IN (SELECT indexrelid FROM pg_catalog.pg_index WHERE indrelid = $1)
         OR rel.oid IN (SELECT objid FROM pg_catalog.pg_depend
                         WHERE refobjid = $1 AND classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND deptype IN ('a', 'i')
                           AND (SELECT relkind FROM pg_catalog.pg_class WHERE oid = objid) = 'S')
      ORDER BY rel.relkind, rel.relname`,
    [oid],
  );
  return rows;
}

export async function isTaken(c: PoolClient, schema: string, name: string): Promise<boolean> {
  const { rows } = await c.query('SELECT 1 FROM pg_catalog.pg_class WHERE relnamespace = $1::pg_catalog.regnamespace AND relname = $2', [
    ident(schema),
    name,
  ]);
  return rows.length > 0;
}

/** `name`, or `name_2`, `name_3`... whichever is free in `schema`. */
export async function freeName(c: PoolClient, schema: string, name: string): Promise<string> {
  for (let n = 1; ; n++) {
    const candidate = n === 1 ? name : `${name.slice(0, 60)}_${n}`;
    if (!(await isTaken(c, schema, candidate))) return candidate;
  }
}

/** An index or sequence name made after its table (`orders_pkey`), made after the table's new name (`orders2_pkey`). */
function renamedAfter(original: string, oldTable: string | undefined, newTable: string): string {
  return oldTable && original.startsWith(oldTable) ? `${newTable}${original.slice(oldTable.length)}`.slice(0, 63) : original;
}
