import type { PoolClient } from 'pg';
import { ident } from '../catalog/pg-session';
import { HasDependentsError, NameTakenError } from '../domain/errors';
import { quotePart } from '../domain/names';
import { SHARDS } from './postgres-record';

/**
 * A namespace dropped whole (`drop --namespace shop`): its tables go into tablefate's trash as every dropped table does
 * (with their views, as with cascade), in one transaction per node, and then the schema itself, with whatever else it
 * holds (sequences of its own, functions, types, views on no table of it), is renamed out of the way in the same
 * transaction: `tablefate_ns_<oid>`, so that `shop` is free and nothing in it is reachable under its name, every object
 * whole (same oid, grants, owner, definition). Each moved table's record names the schema it parked
 * (`shards.parked_schema`); the first of them to come back into the live area puts the schema back, under its name or
 * the one the recall gives, before it moves in; the last of them purged drops it.
 */

/** A schema set aside with its tables: its name and the name it waits under. */
export interface ParkedSchema {
  name: string;
  parked: string;
}

/** The name a schema waits under while its tables are in the trash: from its oid, so that two never collide. */
const parkedSchemaName = (oid: number) => `tablefate_ns_${oid}`;

/**
 * Parks `schema` once its tables (`moved`, by oid, now out of it) have left: refused, before anything commits, while it
 * still holds a table (one tablefate does not keep: adopt it first, or drop it by itself). Absent (parked by this same
 * move, made again after a crash), nothing to do. Answers what it took, in words.
 */
export async function parkSchema(c: PoolClient, schema: string, moved: readonly number[]): Promise<string[]> {
  const { rows: found } = await c.query<{ oid: string }>('SELECT oid::int8 FROM pg_catalog.pg_namespace WHERE nspname = $1', [schema]);
  if (found.length === 0) return [];
  const oid = Number(found[0]!.oid);
  const { rows: tables } = await c.query<{ name: string }>(
    `SELECT pg_catalog.format('%I.%I', $2::text, c.relname) AS name FROM pg_catalog.pg_class c
      WHERE c.relnamespace = $1 AND c.relkind IN ('r', 'p', 'f') ORDER BY c.relname`,
    [oid, schema],
  );
  if (tables.length > 0) {
    throw new HasDependentsError(
      `schema ${quotePart(schema)} still holds tables its drop does not take: ${tables.map((t) => t.name).join(', ')}; ` +
        `adopt those tablefate does not keep ("tablefate adopt ${tables[0]!.name}"), and drop the namespace again`,
    );
  }
  const parked: ParkedSchema = { name: schema, parked: parkedSchemaName(oid) };
  const { rows: contents } = await c.query<{ kind: string; n: string }>(
    `SELECT kind, pg_catalog.count(*) AS n FROM (
        SELECT CASE c.relkind WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' ELSE 'relation' END AS kind
          FROM pg_catalog.pg_class c WHERE c.relnamespace = $1 AND c.relkind IN ('S', 'v', 'm')
        UNION ALL SELECT 'function' FROM pg_catalog.pg_proc p WHERE p.pronamespace = $1
        UNION ALL SELECT 'type' FROM pg_catalog.pg_type t WHERE t.typnamespace = $1 AND t.typtype IN ('e', 'd', 'c', 'r')
          AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class r WHERE r.reltype = t.oid)) o
      GROUP BY kind ORDER BY kind`,
    [oid],
  );
  await c.query(`UPDATE ${SHARDS} SET parked_schema = $2 WHERE table_oid = ANY ($1::pg_catalog.oid[])`, [moved, JSON.stringify(parked)]);
  await c.query(`ALTER SCHEMA ${ident(schema)} RENAME TO ${ident(parked.parked)}`);
  const held = contents.map((r) => `${r.n} ${r.kind}${r.n === '1' ? '' : 's'}`);
  return [`schema ${quotePart(schema)} moved into the trash with them${held.length > 0 ? `, holding ${held.join(', ')}` : ', empty'}`];
}

/**
 * Puts back the schema the table's drop parked, under `schema` (its name, or the one its recall gives), before the table
 * moves into it. Put back already (by another table of the same drop) or gone, nothing to do. A schema of that name made
 * meanwhile refuses the recall (NameTaken): the parked one's objects cannot share it.
 */
export async function unparkSchema(c: PoolClient, oid: number, schema: string): Promise<string[]> {
  const { rows } = await c.query<{ parked_schema: ParkedSchema | null }>(`SELECT parked_schema FROM ${SHARDS} WHERE table_oid = $1`, [oid]);
  const parked = rows[0]?.parked_schema;
  if (!parked) return [];
  await c.query(`UPDATE ${SHARDS} SET parked_schema = NULL WHERE parked_schema->>'parked' = $1`, [parked.parked]);
  if (!(await schemaExists(c, parked.parked))) return [];
  if (await schemaExists(c, schema)) {
    throw new NameTakenError(
      `schema ${quotePart(schema)} was made while its drop's tables were in the trash, and the schema they were dropped with cannot ` +
        `share its name; recall them into another namespace, or drop that schema first`,
    );
  }
  await c.query(`ALTER SCHEMA ${ident(parked.parked)} RENAME TO ${ident(schema)}`);
  return [
    `schema ${quotePart(schema)} is back${schema === parked.name ? '' : ` (dropped as ${quotePart(parked.name)})`}, with what it held`,
  ];
}

/** Drops the schema the table's drop parked once no other table of that drop waits in the trash with it (a purge's). */
export async function dropParkedSchema(c: PoolClient, parked: ParkedSchema | null): Promise<void> {
  if (!parked) return;
  const { rows } = await c.query(`SELECT 1 FROM ${SHARDS} WHERE parked_schema->>'parked' = $1`, [parked.parked]);
  if (rows.length > 0 || !(await schemaExists(c, parked.parked))) return;
  // (As the drop of the schema would have: what it held, and what depends on that.)
  await c.query(`DROP SCHEMA ${ident(parked.parked)} CASCADE`);
}

/** The schema the table's drop parked, from its record, if any. */
export async function parkedSchemaOf(c: PoolClient, oid: number): Promise<ParkedSchema | null> {
  const { rows } = await c.query<{ parked_schema: ParkedSchema | null }>(`SELECT parked_schema FROM ${SHARDS} WHERE table_oid = $1`, [oid]);
  return rows[0]?.parked_schema ?? null;
}

async function schemaExists(c: PoolClient, name: string): Promise<boolean> {
  return (await c.query('SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1', [name])).rows.length > 0;
}
