import type { PoolClient } from 'pg';
import { HasDependentsError } from '../domain/errors';
import type { LiveName } from './postgres-record';

/**
 * What depends on a table outside it, as PostgreSQL itself records it (pg_depend), sorted by what a drop with
 * `cascade` does with each. Views and materialized views on it (and on those, to any depth) are its family: they point
 * at it by oid, so they move into the trash with it, whole, and come back with it. Live tables' foreign keys to it, and
 * their row-level security policies and column defaults that name it (or its sequences), are detached while it is out
 * of the live area, their definitions recorded, and put back on its recall. Anything else (a function with an
 * SQL-standard body or of its row type, another table's column of its row type, a rule on another table, a table that
 * inherits from it or is its partition, a table it inherits from) would be destroyed by PostgreSQL's `DROP ... CASCADE`
 * and cannot be kept: it refuses the drop, named. (A table that is itself a partition is detached from its partitioned
 * table by its move: postgres-partition.ts.) What belongs to the table itself (its indexes, constraints,
 * defaults, triggers, policies, rules, statistics, publication memberships, owned sequences) moves with it.
 */

/**
 * A view, materialized view or partition in the table's family: `depth` 1 reads the table (or is its partition), 2
 * reads such a view (or is such a partition's), and so on.
 */
export interface FamilyMember {
  oid: number;
  kind: 'view' | 'materialized view' | 'partition';
  schema: string;
  name: string;
  depth: number;
}

/** Something of a live table's that names the table, detached while the table is out of the live area. */
export type Detached = {
  /** The live table it belongs to, by oid and by the name it had. */
  tableOid: number;
  table: LiveName;
  name: string;
} & (
  | { kind: 'foreign key'; definition: string }
  | { kind: 'policy'; definition: string }
  /** `name` is the column's. */
  | { kind: 'default'; definition: string }
);

export interface Dependents {
  members: FamilyMember[];
  detached: Detached[];
  /** What no drop can keep, described as PostgreSQL names it. */
  others: string[];
}

const CLASS = (name: string) => `'pg_catalog.${name}'::pg_catalog.regclass`;

/**
 * One query for any number of tables (`root`: whose each row is): each one's family (recursively), then everything
 * depending on any of it that is not its own, sorted.
 */
const dependentsSql = (roots: 'one' | 'many') => `
WITH RECURSIVE rel(root, oid, depth) AS (
  ${roots === 'one' ? 'SELECT $1::pg_catalog.oid, $1::pg_catalog.oid, 0' : 'SELECT root, root, 0 FROM pg_catalog.unnest($1::pg_catalog.oid[]) AS root'}
  UNION
  SELECT rel.root, x.oid, rel.depth + 1
    FROM rel
    JOIN pg_catalog.pg_class t ON t.oid = rel.oid
    CROSS JOIN LATERAL (
      -- The views that read it (through their rewrite rule)...
      SELECT r.ev_class AS oid FROM pg_catalog.pg_depend d
        JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid
        JOIN pg_catalog.pg_class v ON v.oid = r.ev_class AND v.relkind IN ('v', 'm')
       WHERE ((d.refclassid = ${CLASS('pg_class')} AND d.refobjid = rel.oid) OR (d.refclassid = ${CLASS('pg_type')} AND d.refobjid = t.reltype))
         AND d.classid = ${CLASS('pg_rewrite')} AND d.deptype = 'n' AND r.ev_class <> rel.oid
      UNION ALL
      -- ...and its partitions, and theirs.
      SELECT i.inhrelid FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class p ON p.oid = i.inhrelid AND p.relispartition
       WHERE i.inhparent = rel.oid
    ) x
   WHERE rel.depth < 64
), family AS (
  SELECT root, oid, max(depth) AS depth FROM rel GROUP BY root, oid
), own AS (
  SELECT f.root, ${CLASS('pg_class')}::oid AS classid, f.oid AS objid FROM family f
  UNION ALL
  SELECT f.root, ${CLASS('pg_type')}::oid, t.oid FROM family f JOIN pg_catalog.pg_class c ON c.oid = f.oid
    JOIN pg_catalog.pg_type t ON t.oid IN (c.reltype, (SELECT typarray FROM pg_catalog.pg_type WHERE oid = c.reltype))
  UNION ALL
  SELECT f.root, ${CLASS('pg_class')}::oid, d.objid FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_class s ON s.oid = d.objid AND s.relkind = 'S'
    JOIN family f ON f.oid = d.refobjid
   WHERE d.classid = ${CLASS('pg_class')} AND d.refclassid = ${CLASS('pg_class')} AND d.deptype IN ('a', 'i')
), parts AS (
  SELECT f.root, ${CLASS('pg_class')}::oid AS classid, x.indexrelid AS objid FROM family f JOIN pg_catalog.pg_index x ON x.indrelid = f.oid
  UNION ALL SELECT f.root, ${CLASS('pg_attrdef')}::oid, x.oid FROM family f JOIN pg_catalog.pg_attrdef x ON x.adrelid = f.oid
  UNION ALL SELECT f.root, ${CLASS('pg_constraint')}::oid, x.oid FROM family f JOIN pg_catalog.pg_constraint x ON x.conrelid = f.oid
  UNION ALL SELECT f.root, ${CLASS('pg_trigger')}::oid, x.oid FROM family f JOIN pg_catalog.pg_trigger x ON x.tgrelid = f.oid
  UNION ALL SELECT f.root, ${CLASS('pg_policy')}::oid, x.oid FROM family f JOIN pg_catalog.pg_policy x ON x.polrelid = f.oid
  UNION ALL SELECT f.root, ${CLASS('pg_rewrite')}::oid, x.oid FROM family f JOIN pg_catalog.pg_rewrite x ON x.ev_class = f.oid
  UNION ALL SELECT f.root, ${CLASS('pg_statistic_ext')}::oid, x.oid FROM family f JOIN pg_catalog.pg_statistic_ext x ON x.stxrelid = f.oid
  UNION ALL SELECT f.root, ${CLASS('pg_publication_rel')}::oid, x.oid FROM family f JOIN pg_catalog.pg_publication_rel x ON x.prrelid = f.oid
  UNION ALL SELECT root, classid, objid FROM own
), outside AS (
  SELECT DISTINCT o.root, d.classid, d.objid, d.objsubid FROM pg_catalog.pg_depend d
    JOIN own o ON o.classid = d.refclassid AND o.objid = d.refobjid
   WHERE d.deptype IN ('n', 'a') AND NOT EXISTS (SELECT 1 FROM parts p WHERE p.root = o.root AND p.classid = d.classid AND p.objid = d.objid)
)
SELECT f.root::int8 AS root, 'member' AS role, c.oid::int8 AS oid, c.relkind::text AS kind, n.nspname AS schema, c.relname AS name, f.depth,
       NULL::int8 AS table_oid, NULL::text AS detail, NULL::text AS definition
  FROM family f JOIN pg_catalog.pg_class c ON c.oid = f.oid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE f.oid <> f.root
UNION ALL
SELECT o.root::int8, CASE WHEN con.contype = 'f' THEN 'foreign key' WHEN pol.oid IS NOT NULL THEN 'policy' WHEN ad.oid IS NOT NULL THEN 'default'
            ELSE 'other' END,
       o.objid::int8, NULL, n.nspname, t.relname, 0, t.oid::int8,
       coalesce(con.conname, pol.polname, a.attname::text,
                CASE WHEN rc.relkind IN ('v', 'm') THEN pg_catalog.pg_describe_object(${CLASS('pg_class')}, r.ev_class, 0)
                     ELSE pg_catalog.pg_describe_object(o.classid, o.objid, o.objsubid) END),
       CASE WHEN con.contype = 'f' THEN pg_catalog.pg_get_constraintdef(con.oid)
            WHEN pol.oid IS NOT NULL THEN pg_catalog.format('AS %s FOR %s TO %s%s%s',
              CASE WHEN pol.polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END,
              CASE pol.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
              (SELECT pg_catalog.string_agg(CASE WHEN role = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(role)) END, ', ')
                 FROM pg_catalog.unnest(pol.polroles) AS role),
              CASE WHEN pol.polqual IS NULL THEN '' ELSE ' USING (' || pg_catalog.pg_get_expr(pol.polqual, pol.polrelid) || ')' END,
              CASE WHEN pol.polwithcheck IS NULL THEN '' ELSE ' WITH CHECK (' || pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid) || ')' END)
            WHEN ad.oid IS NOT NULL THEN pg_catalog.pg_get_expr(ad.adbin, ad.adrelid) END
  FROM outside o
  LEFT JOIN pg_catalog.pg_constraint con ON o.classid = ${CLASS('pg_constraint')} AND con.oid = o.objid
  LEFT JOIN pg_catalog.pg_policy pol ON o.classid = ${CLASS('pg_policy')} AND pol.oid = o.objid
  LEFT JOIN pg_catalog.pg_attrdef ad ON o.classid = ${CLASS('pg_attrdef')} AND ad.oid = o.objid
  LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
  -- A view or rule depends through its rewrite rule: named as its relation.
  LEFT JOIN pg_catalog.pg_rewrite r ON o.classid = ${CLASS('pg_rewrite')} AND r.oid = o.objid
  LEFT JOIN pg_catalog.pg_class rc ON rc.oid = r.ev_class
  LEFT JOIN pg_catalog.pg_class t ON t.oid = coalesce(con.conrelid, pol.polrelid, ad.adrelid)
  LEFT JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace
 -- A partition's copy of a foreign key goes with the key of its partitioned table.
 WHERE con.oid IS NULL OR con.contype <> 'f' OR con.conparentid = 0
UNION ALL
SELECT i.inhrelid::int8, 'other', i.inhparent::int8, NULL, NULL, NULL, 0, NULL,
       pg_catalog.format('%s (%s)', pg_catalog.pg_describe_object(${CLASS('pg_class')}, i.inhparent, 0), 'it inherits from it or is its partition'),
       NULL
  -- (A partition's own partitioned table is not: the move detaches it from that, see postgres-partition.ts.)
  FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class ch ON ch.oid = i.inhrelid AND NOT ch.relispartition
 WHERE i.inhrelid ${roots === 'one' ? '= $1::pg_catalog.oid' : '= ANY ($1::pg_catalog.oid[])'}
UNION ALL
-- A partition's foreign key of its own (not its partitioned table's) would reach into the trash from a live table.
SELECT f.root::int8, 'other', con.oid::int8, NULL, NULL, NULL, 0, NULL,
       pg_catalog.format('%s (declared on the partition, not on its partitioned table)', pg_catalog.pg_describe_object(${CLASS('pg_constraint')}, con.oid, 0)),
       NULL
  FROM family f JOIN pg_catalog.pg_constraint con ON con.conrelid = f.oid
 WHERE f.oid <> f.root AND con.contype = 'f' AND con.conparentid = 0
   AND con.confrelid NOT IN (SELECT g.oid FROM family g WHERE g.root = f.root)
ORDER BY 1, 2, 7, 5, 6, 9`;

interface DependentRow {
  root: string;
  role: 'member' | 'foreign key' | 'policy' | 'default' | 'other';
  oid: string;
  kind: string | null;
  schema: string | null;
  name: string | null;
  depth: number;
  table_oid: string | null;
  detail: string | null;
  definition: string | null;
}

/** Everything outside the table that depends on it, sorted (see above). */
export async function dependentsOf(c: PoolClient, oid: number): Promise<Dependents> {
  // (A query of one root of its own: the planner then keeps a generic plan of it, where it plans an array's every time.)
  const { rows } = await c.query<DependentRow>({ name: 'tablefate.dependents', text: DEPENDENTS_OF_ONE, values: [oid] });
  return sorted([oid], rows).get(oid)!;
}

/** What depends on each of several tables (tables moved as one), as dependentsOf says it, in one statement. */
export async function dependentsOfAll(c: PoolClient, oids: readonly number[]): Promise<Map<number, Dependents>> {
  if (oids.length === 1) return new Map([[oids[0]!, await dependentsOf(c, oids[0]!)]]);
  // Prepared once per session (the statement's name): its plan took most of its time, and every drop runs it.
  const { rows } = await c.query<DependentRow>({ name: 'tablefate.dependents-of-all', text: DEPENDENTS_OF_MANY, values: [oids] });
  return sorted(oids, rows);
}

const DEPENDENTS_OF_ONE = dependentsSql('one');
const DEPENDENTS_OF_MANY = dependentsSql('many');

/** The rows of a dependents query, by root: members, what is detached, what no drop can keep. */
function sorted(oids: readonly number[], rows: readonly DependentRow[]): Map<number, Dependents> {
  const all = new Map(oids.map((oid): [number, Dependents] => [oid, { members: [], detached: [], others: [] }]));
  for (const row of rows) {
    const found = all.get(Number(row.root))!;
    if (row.role === 'member') {
      const kind = row.kind === 'm' ? 'materialized view' : row.kind === 'v' ? 'view' : 'partition';
      found.members.push({ oid: Number(row.oid), kind, schema: row.schema!, name: row.name!, depth: row.depth });
    } else if (row.role === 'other') {
      found.others.push(row.detail!);
    } else {
      const table = { schema: row.schema!, table: row.name! };
      found.detached.push({ kind: row.role, tableOid: Number(row.table_oid), table, name: row.detail!, definition: row.definition! });
    }
  }
  return all;
}

/** How a dependent is named to a person: `view shop.items_v`, `foreign key orders_item_fk of shop.orders`. */
export function describeDependent(dependent: FamilyMember | Detached): string {
  if ('depth' in dependent) return `${dependent.kind} ${dependent.schema}.${dependent.name}`;
  const of = `${dependent.table.schema}.${dependent.table.table}`;
  return dependent.kind === 'default' ? `default of ${of}.${dependent.name}` : `${dependent.kind} ${dependent.name} of ${of}`;
}

/**
 * The rule of a table leaving the live area (`table`, as named in the refusal): refused while anything depends on it,
 * naming each and the flag; with `cascade`, only while something no drop can keep does.
 */
export function admitLeaving(found: Dependents, table: string, cascade: boolean, what: string): void {
  // (Its partitions are the table's own rows: they go with it, cascade or not, as with DROP TABLE.)
  const members = found.members.filter((m) => m.kind !== 'partition');
  const every = [...members.map(describeDependent), ...found.detached.map(describeDependent), ...found.others];
  if (found.others.length > 0) throw hasDependents(table, cascade ? found.others : every, what, false);
  if (!cascade && every.length > 0) throw hasDependents(table, every, what, true);
}

/** What a move out of the live area takes along (`done`) or would (`would`: a dry run), a sentence each. */
export function familyNotes(found: Pick<Dependents, 'members' | 'detached'>, tense: 'done' | 'would' = 'done'): string[] {
  const [moved, detached] = tense === 'done' ? ['moved', 'detached'] : ['would move', 'would detach'];
  const notes: string[] = [];
  if (found.members.length > 0) notes.push(`${moved} into the trash with it: ${found.members.map(describeDependent).join(', ')}`);
  if (found.detached.length > 0) notes.push(`${detached} until its recall: ${found.detached.map(describeDependent).join(', ')}`);
  return notes;
}

/**
 * A trash (or purge) refused because objects outside the table depend on it. Without `cascade`, every one is named,
 * with the flag that takes them along; with it, only those no drop can keep.
 */
export function hasDependents(table: string, dependents: readonly string[], what: string, cascadable: boolean): HasDependentsError {
  const how = cascadable
    ? 'drop them first, or drop with --cascade, which takes the views with the table and detaches the rest until its recall'
    : 'a drop cannot keep them (PostgreSQL would destroy them with the table); drop them first';
  return new HasDependentsError(`${table} cannot be ${what} while others depend on it: ${dependents.join(', ')}; ${how}`);
}
