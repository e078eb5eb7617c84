import type { Queryable } from '../catalog/pg-session';
import { areaOf, SHARDS, type LiveName, type ShardTableId, type TableArea } from './postgres-record';

/**
 * The record against what PostgreSQL has under each oid now: where tablefate put a shard table and whether it is still
 * there as tablefate left it (a move's first look), every one still there (the reconciler's), and every difference (the
 * doctor's).
 */

/**
 * Where tablefate put the shard table (its record), or null when it placed none for it. `drift` says, when the table
 * is not there any more as tablefate left it, what is there instead.
 */
export interface ShardTableLocation {
  oid: number;
  area: TableArea;
  schema: string;
  table: string;
  drift?: string;
  /** With `drift`: nothing at all is under its oid any more (dropped outside tablefate). */
  gone?: boolean;
  /** The partitioned table it is a partition of now, if any (a move's look: what its drop detaches it from). */
  parent?: LiveName & { oid: number };
  /** Whether it has foreign keys to other tables now (a move's look: what its drop detaches, whose parents it locks). */
  hasKeys?: boolean;
  /** Whether its record keeps a partition (`partition`, `partition_of`) from before: a drop forgets it. */
  partitionRecorded?: boolean;
  /** What else its record keeps from its way out of the live area (a recall's look: what it puts back). */
  keeps?: { partition: boolean; family: boolean; foreignKeys: boolean };
  /** The schema its namespace's drop set aside with it, as that schema is named in the trash (postgres-namespace.ts). */
  parkedSchema?: string;
  /** The names its companions (and it) had in the live area, recorded as it left it (see postgres-names.ts). */
  liveNames?: Record<string, string>;
}

/** A shard table's record against what PostgreSQL has under its oid now (the doctor's look). */
export interface ShardTableAudit {
  tableId: number;
  shard: number;
  oid: number;
  expected: { schema: string; table: string; owner: string | null };
  /** What the oid names now, or null when it names nothing (dropped). */
  found: { schema: string; table: string; kind: string; owner: string } | null;
  /** Each way `found` differs from `expected`, in words; empty when the table is as tablefate left it. */
  differences: string[];
}

/** Where tablefate put the shard table, from its record, and whether it is still there (see ShardTableLocation). */
export async function locate(q: Queryable, id: ShardTableId): Promise<ShardTableLocation | null> {
  return (await locateAll(q, [id]))[0]!;
}

/** Where tablefate put each of several shard tables of one catalog (see locate), in one statement, in the order asked. */
export async function locateAll(q: Queryable, ids: readonly ShardTableId[]): Promise<Array<ShardTableLocation | null>> {
  if (ids.length === 0) return [];
  // Prepared once per session (the statement's name): its plan took most of its time, and every move runs it twice.
  const { rows } = await q.query<AuditRow>({
    name: 'tablefate.locate',
    text: LOCATE_SQL,
    values: [ids[0]!.catalogId, ids.map((id) => id.tableId), ids.map((id) => id.shard)],
  });
  const found = new Map(rows.map((row) => [`${row.table_id}/${row.shard}`, locationOf(row)]));
  return ids.map((id) => (id.catalogId === ids[0]!.catalogId ? (found.get(`${id.tableId}/${id.shard}`) ?? null) : null));
}

function locationOf(row: AuditRow): ShardTableLocation {
  const differences = differencesOf(row);
  return {
    oid: Number(row.oid),
    area: areaOf(row.schema_name),
    schema: row.schema_name,
    table: row.table_name,
    ...(differences.some((d) => d.fatal) ? { drift: differences.map((d) => d.text).join('; '), gone: row.found_schema === null } : {}),
    ...(row.parent_oid === null ? {} : { parent: { oid: Number(row.parent_oid), schema: row.parent_schema!, table: row.parent_table! } }),
    hasKeys: row.has_keys,
    partitionRecorded: row.partition_recorded,
    keeps: {
      partition: row.keeps_partition,
      family: row.keeps_family,
      foreignKeys: row.keeps_foreign_keys,
    },
    ...(row.live_names === null ? {} : { liveNames: row.live_names }),
    ...(row.parked_schema === null ? {} : { parkedSchema: row.parked_schema }),
  };
}

/** Every shard table of `catalogId` on this node that is where tablefate put it, and when it last moved (the reconciler's view). */
export async function listPlaced(
  q: Queryable,
  catalogId: string,
): Promise<Array<{ tableId: number; shard: number; area: TableArea; changedAt: number }>> {
  const { rows } = await q.query<AuditRow & { changed_at: Date }>(`${AUDIT_SELECT} WHERE s.catalog_id = $1 ORDER BY s.table_id, s.shard`, [
    catalogId,
  ]);
  return rows
    .filter((r) => !differencesOf(r).some((d) => d.fatal))
    .map((r) => ({ tableId: Number(r.table_id), shard: r.shard, area: areaOf(r.schema_name), changedAt: r.changed_at.getTime() }));
}

/** Every shard table of `catalogId` on this node against what PostgreSQL has under its oid (the doctor's look). */
export async function audit(q: Queryable, catalogId: string): Promise<ShardTableAudit[]> {
  const { rows } = await q.query<AuditRow>(`${AUDIT_SELECT} WHERE s.catalog_id = $1 ORDER BY s.table_id, s.shard`, [catalogId]);
  return rows.map((r) => ({
    tableId: Number(r.table_id),
    shard: r.shard,
    oid: Number(r.oid),
    expected: { schema: r.schema_name, table: r.table_name, owner: r.owner_name },
    found: r.found_schema === null ? null : { schema: r.found_schema, table: r.found_table!, kind: r.kind!, owner: r.owner! },
    differences: differencesOf(r).map((d) => d.text),
  }));
}

/** A record joined to what its oid names now. */
interface AuditRow {
  oid: string;
  table_id: string;
  shard: number;
  schema_name: string;
  table_name: string;
  owner_name: string | null;
  notes: string[] | null;
  found_schema: string | null;
  found_table: string | null;
  kind: string | null;
  owner: string | null;
  parent_oid: string | null;
  parent_schema: string | null;
  parent_table: string | null;
  has_keys: boolean;
  partition_recorded: boolean;
  parked_schema: string | null;
  keeps_partition: boolean;
  keeps_family: boolean;
  keeps_foreign_keys: boolean;
  live_names: Record<string, string> | null;
}

const AUDIT_SELECT = `
  SELECT s.table_oid::int8 AS oid, s.table_id, s.shard, s.owner_name, s.notes, s.changed_at, s.live_names,
         -- (A record written without its names, by hand, takes the table's as they are.)
         coalesce(s.schema_name, n.nspname, '?') AS schema_name, coalesce(s.table_name, c.relname, '?') AS table_name,
         n.nspname AS found_schema, c.relname AS found_table, c.relkind::text AS kind, pg_catalog.pg_get_userbyid(c.relowner) AS owner,
         p.oid::int8 AS parent_oid, pn.nspname AS parent_schema, p.relname AS parent_table,
         EXISTS (SELECT 1 FROM pg_catalog.pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'f' AND k.confrelid <> c.oid) AS has_keys,
         (s.partition IS NOT NULL OR s.partition_of IS NOT NULL) AS partition_recorded,
         s.parked_schema->>'parked' AS parked_schema, s.partition IS NOT NULL AS keeps_partition,
         s.family IS NOT NULL AS keeps_family, s.foreign_keys IS NOT NULL AS keeps_foreign_keys
    FROM ${SHARDS} s
    LEFT JOIN pg_catalog.pg_class c ON c.oid = s.table_oid
    LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_catalog.pg_inherits i ON i.inhrelid = c.oid AND c.relispartition
    LEFT JOIN pg_catalog.pg_class p ON p.oid = i.inhparent
    LEFT JOIN pg_catalog.pg_namespace pn ON pn.oid = p.relnamespace`;

const LOCATE_SQL = `${AUDIT_SELECT}
    JOIN ROWS FROM (pg_catalog.unnest($2::int8[]), pg_catalog.unnest($3::int4[])) AS asked(table_id, shard)
      ON asked.table_id = s.table_id AND asked.shard = s.shard
   WHERE s.catalog_id = $1`;

/** How what PostgreSQL has differs from the record; `fatal` when the table is not tablefate's to touch any more. */
function differencesOf(r: AuditRow): Array<{ text: string; fatal: boolean }> {
  const was = `${r.schema_name}.${r.table_name}`;
  if (r.found_schema === null) return [{ text: `${was} was dropped outside tablefate`, fatal: true }];
  // (A partitioned table is a table too: its partitions move with it.)
  if (r.kind !== 'r' && r.kind !== 'p')
    return [{ text: `${was}'s oid ${r.oid} now names a ${RELATION_KINDS[r.kind!] ?? 'relation'}, not its table`, fatal: true }];
  const out: Array<{ text: string; fatal: boolean }> = [];
  if (r.found_schema !== r.schema_name)
    out.push({ text: `${was} was moved outside tablefate to schema ${r.found_schema} (as ${r.found_table})`, fatal: true });
  else if (r.found_table !== r.table_name)
    out.push({ text: `${was} was renamed outside tablefate to ${r.found_schema}.${r.found_table}`, fatal: true });
  if (r.owner_name !== null && r.owner !== r.owner_name)
    out.push({ text: `${was}'s owner was changed outside tablefate from ${r.owner_name} to ${r.owner}`, fatal: false });
  for (const note of r.notes ?? []) out.push({ text: `${was}: ${note}`, fatal: false });
  return out;
}

/** pg_class's relkind in words. */
export const RELATION_KINDS: Record<string, string> = {
  v: 'view',
  m: 'materialized view',
  f: 'foreign table',
  S: 'sequence',
  i: 'index',
  p: 'partitioned table',
  c: 'composite type',
  t: 'TOAST table',
  I: 'partitioned index',
};
