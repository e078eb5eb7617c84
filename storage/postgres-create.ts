import type { Pool, PoolClient, QueryConfig } from 'pg';
import { InvalidInputError, TableExistsError, TableNotFoundError } from '../domain/errors';
import { checkColumnDefinitions } from '../domain/columns';
import { parseNameParts } from '../domain/names';
import { ident } from '../catalog/pg-session';
import { locate, RELATION_KINDS } from './postgres-audit';
import { refuseStrangers } from './postgres-names';
import { ensureSchema, inNodeTransaction, lockShard } from './postgres-node';
import { missing, qualified, SHARDS, type LiveName, type ShardTableId } from './postgres-record';

/**
 * How a shard table comes to be tablefate's: made from a definition (a create), or found at its name and recorded (an
 * adopt), each with its record written in the same transaction; and an adopt taken back.
 */

/** The table's columns: definitions as inside `CREATE TABLE (...)` (checked by domain/columns.ts), or another table's structure. */
export type TableDefinition = { columns: string } | { like: string };

/**
 * Makes the live shard table `live` with `definition`, and records it as this shard's, in one transaction. Made
 * already (a retry), it is found and left as it is. A table of that name that is not this shard's is refused.
 *
 * The column definitions are checked here, where they run, whoever started the create (domain/columns.ts), and the
 * statement goes through the extended protocol, which PostgreSQL refuses to hold a second statement. Names in them
 * resolve in PostgreSQL's own catalog and then the table's schema only: a function or type that a user placed in
 * `public` to catch an unqualified name is never found (write `public.x` to mean it).
 */
export async function createTable(pool: Pool, id: ShardTableId, live: LiveName, definition: TableDefinition): Promise<void> {
  if ('columns' in definition && definition.columns !== '') {
    const check = checkColumnDefinitions(definition.columns);
    if (!check.ok) throw new InvalidInputError(check.reason);
  }
  await inNodeTransaction(pool, async (c) => {
    await lockShard(c, id);
    if (await madeAlready(c, id)) return;
    await refuseStrangers(c, [live]);
    await ensureSchema(c, live.schema);
    const body = 'columns' in definition ? definition.columns : `LIKE ${likeSource(definition.like)} INCLUDING ALL`;
    await c.query({
      text: "SELECT pg_catalog.set_config('search_path', $1, true)",
      values: [`pg_catalog, ${ident(live.schema)}, pg_temp`],
    });
    // (pg sends a query without values through the simple protocol, unless told: that one would run a second statement.)
    await c.query({ text: `CREATE TABLE ${qualified(live.schema, live.table)} (${body})`, queryMode: 'extended' } as QueryConfig);
    await c.query("SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true)");
    const made = await c.query<{ oid: string; kind: string; persistence: string; parents: string; owner: string }>(
      `SELECT c.oid::int8 AS oid, c.relkind AS kind, c.relpersistence AS persistence, c.relowner::regrole::text AS owner,
              (SELECT pg_catalog.count(*) FROM pg_catalog.pg_inherits i WHERE i.inhrelid = c.oid) AS parents
         FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass($1)`,
      [qualified(live.schema, live.table)],
    );
    const table = made.rows[0];
    // Whatever the text said, what was made must be one plain, permanent table of its own, or nothing is kept.
    if (!table || table.kind !== 'r' || table.persistence !== 'p' || Number(table.parents) > 0)
      throw new InvalidInputError(`the definition of ${live.schema}.${live.table} did not make one plain table; nothing was kept`);
    await c.query(
      `INSERT INTO ${SHARDS} (table_oid, catalog_id, table_id, shard, schema_name, table_name, owner_name)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [table.oid, id.catalogId, id.tableId, id.shard, live.schema, live.table, table.owner],
    );
  });
}

/**
 * Records the table that already exists at `live` as this shard's (an adopt), in one transaction: from then on it is
 * found by its oid, as a table tablefate made. Recorded already (a retry) is success. Refused, with nothing changed:
 * no such table; one tablefate records already; and what a move could not carry whole or at all: a view or anything
 * else that is not a table (a partitioned table is one: its partitions move with it), a partition that is partitioned
 * itself, a table in an inheritance tree, a temporary table, a table the worker's role may not alter. A leaf partition
 * is adopted as a table of its own, its partitioned table recorded (`partition_of`: the guard refuses its DETACH).
 */
export async function adoptTable(pool: Pool, id: ShardTableId, live: LiveName): Promise<void> {
  await inNodeTransaction(pool, async (c) => {
    await lockShard(c, id);
    if (await madeAlready(c, id)) return;
    const name = `${live.schema}.${live.table}`;
    const { rows } = await c.query<{
      oid: string;
      kind: string;
      persistence: string;
      partition: boolean;
      parent: string | null;
      inherits: boolean;
      owner: string;
      may_alter: boolean;
      catalog_id: string | null;
      table_id: string | null;
    }>(
      `SELECT c.oid::int8 AS oid, c.relkind AS kind, c.relpersistence AS persistence, c.relispartition AS partition,
              (SELECT i.inhparent::int8 FROM pg_catalog.pg_inherits i WHERE i.inhrelid = c.oid AND c.relispartition) AS parent,
              EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class child ON child.oid = i.inhrelid
                       WHERE (i.inhrelid = c.oid OR i.inhparent = c.oid) AND NOT child.relispartition) AS inherits,
              pg_catalog.pg_get_userbyid(c.relowner) AS owner, pg_catalog.pg_has_role(current_user, c.relowner, 'USAGE') AS may_alter,
              s.catalog_id, s.table_id
         FROM pg_catalog.pg_class c LEFT JOIN ${SHARDS} s ON s.table_oid = c.oid
        WHERE c.oid = pg_catalog.to_regclass($1)`,
      [qualified(live.schema, live.table)],
    );
    const found = rows[0];
    if (!found) throw new TableNotFoundError(`there is no table ${name} to adopt`);
    if (found.catalog_id !== null)
      throw new TableExistsError(`${name} is managed by tablefate already (catalog ${found.catalog_id}, table ${found.table_id})`);
    const refusal = adoptRefusal(found);
    if (refusal) throw new InvalidInputError(`${name} cannot be adopted: ${refusal}`);
    await c.query(
      `INSERT INTO ${SHARDS} (table_oid, catalog_id, table_id, shard, schema_name, table_name, owner_name, partition_of)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [found.oid, id.catalogId, id.tableId, id.shard, live.schema, live.table, found.owner, found.parent],
    );
  });
}

/** Forgets the shard's table without touching it (an adopt taken back: the table was there before tablefate). */
export async function releaseTable(pool: Pool, id: ShardTableId): Promise<void> {
  await pool.query(`DELETE FROM ${SHARDS} WHERE catalog_id = $1 AND table_id = $2 AND shard = $3`, [id.catalogId, id.tableId, id.shard]);
}

/** Whether the shard's table was made (or adopted) already: a retry. Made, then dropped or moved by hand, is ShardMissing. */
async function madeAlready(c: PoolClient, id: ShardTableId): Promise<boolean> {
  const placed = await locate(c, id);
  if (placed?.drift) throw missing(id, placed.drift);
  return placed !== null;
}

/** Why a relation found at an adopted name cannot be tablefate's table, or undefined if it can. */
function adoptRefusal(r: { kind: string; persistence: string; partition: boolean; inherits: boolean; owner: string; may_alter: boolean }) {
  if (r.kind !== 'r' && r.kind !== 'p') return `it is a ${RELATION_KINDS[r.kind] ?? 'relation that is not a table'}`;
  // (A leaf partition is adopted as a table of its own: its drop detaches it, its recall attaches it; postgres-partition.ts.)
  if (r.partition && r.kind === 'p') return 'it is a partition that is partitioned itself: adopt its partitioned table whole';
  if (r.inherits) return 'it inherits from another table or has tables inheriting from it';
  if (r.persistence === 't') return 'it is a temporary table';
  if (!r.may_alter) return `it is owned by ${r.owner}, and the worker's role is not a member of that role (it could not move the table)`;
  return undefined;
}

/** `schema.table` as a LIKE source (parts as psql writes them, read again here): each part quoted. */
function likeSource(source: string): string {
  const parsed = parseNameParts(source);
  if (!('parts' in parsed) || parsed.parts.length !== 2) throw new InvalidInputError(`--like takes schema.table, not "${source}"`);
  return qualified(parsed.parts[0]!, parsed.parts[1]!);
}
