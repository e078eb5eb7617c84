import type { PoolClient } from 'pg';
import { NameTakenError } from '../domain/errors';
import type { ShardTableLocation } from './postgres-audit';
import { ident } from '../catalog/pg-session';
import { parkedName, qualified, SHARDS, type LiveName, type ShardTableId } from './postgres-record';
import { moveTableSteps, type Step } from './postgres-steps';

/**
 * The names a shard table and its companions take as it moves. Indexes and owned sequences move with their table but
 * keep their names, and those must be unique in a schema: two trashed `orders` would both bring `orders_pkey`. A move
 * out of the live schema renames them after the shard (`<shard name>_i<k>`, `_q<k>`) and records the names they had; a
 * move back gives them those names again, unless another relation in the target schema has taken one meanwhile (the
 * new `orders` made after the drop): then that one is named after the table it now belongs to.
 */

/** An index or owned sequence (serial, identity) of a table, named as it is now. */
export interface Companion {
  name: string;
  kind: 'INDEX' | 'SEQUENCE';
}

/**
 * The steps that rename the live table's companions, then the table, after the shard (at.schema stays): its record
 * written first with the names they had (`names`, answered too, to give them back), and the companions as then named.
 */
export function parkSteps(
  id: ShardTableId,
  at: ShardTableLocation,
  companions: readonly Companion[],
): { steps: Step[]; names: Record<string, string>; parked: Companion[] } {
  const parked = parkedName(id);
  const names: Record<string, string> = { table: at.table };
  const renamed = companions.map((rel, k) => ({ ...rel, name: `${parked}_${rel.kind === 'SEQUENCE' ? 'q' : 'i'}${k}`, was: rel.name }));
  for (const rel of renamed) names[rel.name] = rel.was;
  const steps: Step[] = renamed.map((rel) => ({ alter: rel.kind, schema: at.schema, name: rel.was, rename: rel.name }));
  steps.push(...moveTableSteps(at.oid, at, { schema: at.schema, table: parked }, { liveNames: names }));
  return { steps, names, parked: renamed.map(({ name, kind }) => ({ name, kind })) };
}

/**
 * The steps that give the companions (in `live.schema`, named as they will be then) back the names they had when they
 * were parked (`names`, as parkSteps answered or the record kept), or names after the table when another relation has
 * taken one meanwhile (the new `orders` made after the drop has `orders_pkey`).
 */
export function unparkSteps(companions: readonly Companion[], live: LiveName, names: Record<string, string>): Step[] {
  return companions.flatMap((rel): Step[] => {
    const original = names[rel.name];
    if (original === undefined) return [];
    return [
      { alter: rel.kind, schema: live.schema, name: rel.name, renameFree: [original, renamedAfter(original, names.table, live.table)] },
    ];
  });
}

/**
 * A table's statistics objects that a truncate set aside beside it in the trash (postgres-twin.ts: its twin took their
 * names), moved into its live schema as it comes back, under the names they had (`names`, as its record kept them), or
 * names after the table when another has taken one meanwhile (the twin's, for a recall under a new name). A drop leaves
 * a table's statistics objects in its schema: those need nothing.
 */
export async function restoreStatistics(c: PoolClient, oid: number, live: LiveName, names: Record<string, string>): Promise<void> {
  if (!Object.keys(names).some(isParkedStatistics)) return;
  const { rows } = await c.query<{ name: string; schema: string; taken: string[] }>(
    `SELECT x.stxname AS name, n.nspname AS schema,
            ARRAY(SELECT o.stxname::text FROM pg_catalog.pg_statistic_ext o JOIN pg_catalog.pg_namespace s ON s.oid = o.stxnamespace
                   WHERE s.nspname = $2) AS taken
       FROM pg_catalog.pg_statistic_ext x JOIN pg_catalog.pg_namespace n ON n.oid = x.stxnamespace
      WHERE x.stxrelid = $1 AND n.nspname <> $2 ORDER BY x.stxname`,
    [oid, live.schema],
  );
  const taken = new Set(rows[0]?.taken ?? []);
  for (const { name, schema } of rows) {
    const original = names[name];
    if (original === undefined) continue;
    const wanted = [original, renamedAfter(original, names.table, live.table), name].find((n) => !taken.has(n))!;
    // (Its parked name is its own in any schema: moved first, then renamed where `taken` says what is free.)
    await c.query(`ALTER STATISTICS ${qualified(schema, name)} SET SCHEMA ${ident(live.schema)}`);
    if (wanted !== name) await c.query(`ALTER STATISTICS ${qualified(live.schema, name)} RENAME TO ${ident(wanted)}`);
    taken.add(wanted);
  }
}

/**
 * A relation already at one of `lives` (a user's table, or another shard tablefate placed): never touched, the change
 * refused. So is one name asked for twice.
 */
export async function refuseStrangers(c: PoolClient, lives: readonly LiveName[]): Promise<void> {
  const names = lives.map((live) => qualified(live.schema, live.table));
  const twice = names.find((name, i) => names.indexOf(name) !== i);
  if (twice !== undefined) throw new NameTakenError(`${twice} is asked for twice in one move`);
  const { rows } = await c.query<{ name: string; ours: boolean }>(
    `SELECT asked.name, EXISTS (SELECT 1 FROM ${SHARDS} WHERE table_oid = pg_catalog.to_regclass(asked.name)::oid) AS ours
       FROM pg_catalog.unnest($1::text[]) WITH ORDINALITY AS asked(name, k)
      WHERE pg_catalog.to_regclass(asked.name) IS NOT NULL ORDER BY asked.k LIMIT 1`,
    [names],
  );
  if (!rows[0]) return;
  const live = lives[names.indexOf(rows[0].name)]!;
  const whose = rows[0].ours ? "another table's shard" : 'a table tablefate did not place';
  throw new NameTakenError(`${live.schema}.${live.table} is taken: ${whose} is there`);
}

/**
 * The indexes and owned sequences (serial and identity) of each table, in a stable order (PostgreSQL keeps both in the
 * table's schema), in one statement.
 */
export async function companionsOfAll(c: PoolClient, oids: readonly number[]): Promise<Map<number, Companion[]>> {
  const all = new Map(oids.map((oid): [number, Companion[]] => [oid, []]));
  if (oids.length === 0) return all;
  const { rows } = await c.query<{ owner: string; name: string; kind: 'i' | 'S' }>({
    name: 'tablefate.companions',
    text: `SELECT owned.owner::int8 AS owner, rel.relname AS name, rel.relkind AS kind
       FROM (SELECT indrelid AS owner, indexrelid AS oid FROM pg_catalog.pg_index WHERE indrelid = ANY ($1::pg_catalog.oid[])
             UNION
             SELECT d.refobjid, d.objid FROM pg_catalog.pg_depend d
               JOIN pg_catalog.pg_class q ON q.oid = d.objid AND q.relkind = 'S'
              WHERE d.refobjid = ANY ($1::pg_catalog.oid[]) AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
                AND d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.deptype IN ('a', 'i')) owned
       JOIN pg_catalog.pg_class rel ON rel.oid = owned.oid
      ORDER BY owned.owner, rel.relkind, rel.relname`,
    values: [[...oids]],
  });
  for (const row of rows) all.get(Number(row.owner))!.push({ name: row.name, kind: row.kind === 'S' ? 'SEQUENCE' : 'INDEX' });
  return all;
}

/** A statistics object's name as a truncate set it aside (`<table's name>_x<k>`): the record keeps it beside its companions'. */
const isParkedStatistics = (name: string) => /_x[0-9]+$/.test(name);

/** An index or sequence name made after its table (`orders_pkey`), made after the table's new name (`orders2_pkey`). */
function renamedAfter(original: string, oldTable: string | undefined, newTable: string): string {
  return oldTable && original.startsWith(oldTable) ? `${newTable}${original.slice(oldTable.length)}`.slice(0, 63) : original;
}
