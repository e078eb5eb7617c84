import type { PoolClient } from 'pg';
import { HasDependentsError, InvalidInputError, TableNotFoundError } from '../domain/errors';
import { formatTableName } from '../domain/names';
import { literal } from '../catalog/pg-session';
import { readPointers, type Pointers } from './postgres-repoint';
// (The guard's own trigger is not the twin's to copy: the guard puts it on the twin once the twin is recorded.)
import { TRUNCATE_TRIGGER } from './postgres-guard-truncate';

/**
 * What an empty twin of a live table is made from, read from PostgreSQL's catalog while the table is still at its name
 * (postgres-twin.ts makes it). A truncate into the trash moves the table, rows and oid, into the trash, and puts in its
 * place a twin that every user and service sees as the same table: its columns, constraints, indexes, triggers,
 * policies, grants, comments, publications and statistics objects, under the same names. The plan is plain data
 * (it may be recorded): names as they are, and every expression as PostgreSQL's own deparsers write it
 * (pg_get_expr, pg_get_indexdef, pg_get_constraintdef, pg_get_triggerdef, pg_get_statisticsobjdef, format_type). The
 * storage sessions run with `search_path = pg_catalog, pg_temp`, so that text names every object of another schema
 * with its schema, and reads back the same under the same setting.
 *
 * Refused, before anything changes, is a table an empty twin cannot stand in for: one that is not a plain table
 * (partitioned, foreign, temporary), a partition, one that inherits or is inherited, a typed table (`OF type`), one
 * with rules or security labels, with a grant made by a role other than its owner, or owned (it, its statistics
 * objects, a publication it is in) by a role the session's is not a member of (InvalidInput); and one that
 * others depend on in a way no twin can take over (HasDependents): another table's foreign key to it, as PostgreSQL's
 * own TRUNCATE refuses it, and what postgres-repoint.ts refuses (a materialized view reading it, a function with an
 * SQL-standard body or of its row type, a rule of another table...). The views, view rules, other tables' policies and
 * column defaults that point at it are read with the plan, to be pointed at the twin once it is made.
 */

/** A grant of an ACL: its privileges to one grantee (`null`: PUBLIC), with or without the grant option. */
export interface TwinGrant {
  grantee: string | null;
  grantor: string;
  privileges: string[];
  grantable: boolean;
}

/**
 * A relation's ACL when it has one (`null`: the defaults, never granted nor revoked): its grants in the order of its
 * items, and what its owner no longer holds of the default.
 */
export interface TwinAcl {
  grants: TwinGrant[];
  ownerLacks: string[];
}

export interface TwinColumn {
  name: string;
  /** format_type's, with its modifier: `numeric(10,2)`, `shop.mood[]`. */
  type: string;
  /** [schema, name] of a collation other than its type's. */
  collation: [string, string] | null;
  notNull: boolean;
  default: string | null;
  /** The expression of a stored generated column. */
  generated: string | null;
  identity: 'ALWAYS' | 'BY DEFAULT' | null;
  /** PLAIN, EXTERNAL, MAIN or EXTENDED when not its type's own. */
  storage: string | null;
  compression: string | null;
  /** Its statistics target when set (`ALTER COLUMN ... SET STATISTICS`). */
  statistics: number | null;
  /** `name=value` (`ALTER COLUMN ... SET (...)`: n_distinct and the like). */
  options: string[] | null;
  comment: string | null;
  grants: TwinGrant[] | null;
}

/** A sequence the table owns: a serial's (or one made `OWNED BY` a column), or an identity column's. */
export interface TwinSequence {
  /** The original's oid: its position is read from it when the twin is made, as late as can be. */
  oid: number;
  name: string;
  column: string;
  identity: boolean;
  type: string;
  /** int8 values, as text: JSON numbers would lose the digits of a bigint's bounds. */
  start: string;
  increment: string;
  min: string;
  max: string;
  cache: string;
  cycle: boolean;
  unlogged: boolean;
  comment: string | null;
  acl: TwinAcl | null;
}

/** A check, primary key, unique, exclusion or foreign key constraint, as pg_get_constraintdef writes it. */
export interface TwinConstraint {
  name: string;
  /** pg_constraint.contype: c, p, u, x or f. */
  type: string;
  definition: string;
  /** A foreign key's: the oid of the table it references (null for the other kinds). */
  references: number | null;
  comment: string | null;
}

export interface TwinIndex {
  name: string;
  /** The constraint it backs (made with it, its definition then null), if any. */
  constraint: string | null;
  definition: string | null;
  /** An index backing a constraint: its storage options, which pg_get_constraintdef leaves out. */
  options: string[] | null;
  tablespace: string | null;
  clustered: boolean;
  replicaIdentity: boolean;
  /** [column number, target] of its columns with a statistics target set. */
  statistics: Array<[number, number]> | null;
  comment: string | null;
}

export interface TwinTrigger {
  name: string;
  definition: string;
  /** pg_trigger.tgenabled: O (enabled), D (disabled), R (replica), A (always). */
  enabled: string;
  comment: string | null;
}

export interface TwinPolicy {
  name: string;
  permissive: boolean;
  command: string;
  /** `null`: PUBLIC. */
  roles: Array<string | null>;
  using: string | null;
  check: string | null;
  comment: string | null;
}

export interface TwinPublication {
  name: string;
  /** Its column list, if it has one. */
  columns: string[] | null;
  /** Its row filter, if it has one. */
  where: string | null;
}

export interface TwinStatistics {
  oid: number;
  schema: string;
  name: string;
  owner: string;
  definition: string;
  target: number | null;
  comment: string | null;
}

/** Everything an empty twin of the table is made of. */
export interface TwinPlan {
  oid: number;
  /** Where the table is live, and the twin will be. */
  schema: string;
  table: string;
  owner: string;
  unlogged: boolean;
  accessMethod: string;
  tablespace: string | null;
  /** Its storage options (`name=value`), its TOAST table's as `toast.name=value`. */
  options: string[];
  comment: string | null;
  acl: TwinAcl | null;
  rowSecurity: boolean;
  forceRowSecurity: boolean;
  /** pg_class.relreplident: d (default), f (full), n (nothing), i (the index marked so). */
  replicaIdentity: string;
  columns: TwinColumn[];
  sequences: TwinSequence[];
  constraints: TwinConstraint[];
  indexes: TwinIndex[];
  triggers: TwinTrigger[];
  policies: TwinPolicy[];
  publications: TwinPublication[];
  statistics: TwinStatistics[];
  /** What outside the table points at it, pointed at the twin once it is made (postgres-repoint.ts). */
  pointers: Pointers;
}

/** What makes a table one no twin can stand in for, read with the plan. */
interface TwinFacts {
  kind: string;
  persistence: string;
  typed: string | null;
  partition: boolean;
  parents: Array<{ schema: string; name: string }>;
  children: Array<{ schema: string; name: string }>;
  rules: string[];
  labels: string[];
  /**
   * What the session's role could not make the twin's (PostgreSQL would refuse it halfway): an owner it is not a member
   * of (`role`, of `of`), a publication it does not own.
   */
  strangers: Array<{ of: string; role: string }>;
}

const CLASS = (name: string) => `'pg_catalog.${name}'::pg_catalog.regclass`;

/**
 * An ACL's grants, grouped by grantee, grantor and grant option in the order of its items: granted again in that order,
 * they make the same items in the same order (pg_dump writes them so).
 */
const grantsOf = (acl: string) => `(SELECT pg_catalog.json_agg(pg_catalog.json_build_object(
      'grantee', CASE WHEN g.grantee = 0 THEN NULL ELSE pg_catalog.pg_get_userbyid(g.grantee) END,
      'grantor', pg_catalog.pg_get_userbyid(g.grantor), 'privileges', g.privileges, 'grantable', g.grantable) ORDER BY g.k)
    FROM (SELECT e.grantee, e.grantor, e.is_grantable AS grantable, pg_catalog.array_agg(e.privilege_type ORDER BY e.k) AS privileges,
                 pg_catalog.min(e.k) AS k
            FROM pg_catalog.aclexplode(${acl}) WITH ORDINALITY AS e(grantor, grantee, privilege_type, is_grantable, k)
           GROUP BY e.grantee, e.grantor, e.is_grantable) g)`;

/** A relation's ACL (TwinAcl), `kind` as acldefault takes it: 'r' a table, 's' a sequence. */
const aclOf = (acl: string, kind: 'r' | 's', owner: string) => `CASE WHEN ${acl} IS NULL THEN NULL ELSE pg_catalog.json_build_object(
    'grants', coalesce(${grantsOf(acl)}, '[]'),
    'ownerLacks', ARRAY(SELECT d.privilege_type FROM pg_catalog.aclexplode(pg_catalog.acldefault('${kind}', ${owner})) d
                         WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.aclexplode(${acl}) e
                                            WHERE e.grantee = ${owner} AND e.privilege_type = d.privilege_type))) END`;

/** The sequences the table owns (serial and identity), as pg_depend links them to its columns. */
const OWNED_SEQUENCES = `SELECT d.objid, d.refobjsubid, d.deptype FROM pg_catalog.pg_depend d
   WHERE d.classid = ${CLASS('pg_class')} AND d.refclassid = ${CLASS('pg_class')} AND d.refobjid = c.oid
     AND d.refobjsubid > 0 AND d.deptype IN ('a', 'i')`;

/** The whole plan, and what would refuse it, in one statement. */
const PLAN_SQL = `
SELECT pg_catalog.json_build_object(
  'oid', c.oid::int8, 'schema', n.nspname, 'table', c.relname, 'owner', pg_catalog.pg_get_userbyid(c.relowner),
  'unlogged', c.relpersistence = 'u', 'accessMethod', am.amname, 'tablespace', ts.spcname,
  'options', ARRAY(SELECT o.option FROM (SELECT 0, k, x FROM pg_catalog.unnest(c.reloptions) WITH ORDINALITY AS u(x, k)
                                         UNION ALL
                                         SELECT 1, k, 'toast.' || x FROM pg_catalog.unnest(toast.reloptions) WITH ORDINALITY AS u(x, k)) o(toast, k, option)
                    ORDER BY o.toast, o.k),
  'comment', pg_catalog.obj_description(c.oid, 'pg_class'),
  'acl', ${aclOf('c.relacl', 'r', 'c.relowner')},
  'rowSecurity', c.relrowsecurity, 'forceRowSecurity', c.relforcerowsecurity, 'replicaIdentity', c.relreplident,
  'columns', (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object(
      'name', a.attname, 'type', pg_catalog.format_type(a.atttypid, a.atttypmod),
      'collation', CASE WHEN a.attcollation <> t.typcollation THEN pg_catalog.json_build_array(cn.nspname, co.collname) END,
      'notNull', a.attnotnull,
      'default', CASE WHEN a.attgenerated = '' THEN pg_catalog.pg_get_expr(ad.adbin, ad.adrelid) END,
      'generated', CASE WHEN a.attgenerated = 's' THEN pg_catalog.pg_get_expr(ad.adbin, ad.adrelid) END,
      'identity', CASE a.attidentity WHEN 'a' THEN 'ALWAYS' WHEN 'd' THEN 'BY DEFAULT' END,
      'storage', CASE WHEN a.attstorage <> t.typstorage THEN
                   CASE a.attstorage WHEN 'p' THEN 'PLAIN' WHEN 'e' THEN 'EXTERNAL' WHEN 'm' THEN 'MAIN' WHEN 'x' THEN 'EXTENDED' END END,
      'compression', CASE a.attcompression WHEN 'p' THEN 'pglz' WHEN 'l' THEN 'lz4' END,
      'statistics', CASE WHEN a.attstattarget >= 0 THEN a.attstattarget END,
      'options', a.attoptions,
      'comment', pg_catalog.col_description(c.oid, a.attnum),
      'grants', ${grantsOf('a.attacl')}) ORDER BY a.attnum), '[]')
     FROM pg_catalog.pg_attribute a
     JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
     LEFT JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation
     LEFT JOIN pg_catalog.pg_namespace cn ON cn.oid = co.collnamespace
     LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
  'sequences', (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object(
      'oid', s.oid::int8, 'name', s.relname, 'column', a.attname, 'identity', o.deptype = 'i',
      'type', pg_catalog.format_type(q.seqtypid, NULL), 'start', q.seqstart::text, 'increment', q.seqincrement::text,
      'min', q.seqmin::text, 'max', q.seqmax::text, 'cache', q.seqcache::text, 'cycle', q.seqcycle,
      'unlogged', s.relpersistence = 'u', 'comment', pg_catalog.obj_description(s.oid, 'pg_class'),
      'acl', ${aclOf('s.relacl', 's', 's.relowner')}) ORDER BY s.relname), '[]')
     FROM (${OWNED_SEQUENCES}) o
     JOIN pg_catalog.pg_class s ON s.oid = o.objid AND s.relkind = 'S'
     JOIN pg_catalog.pg_sequence q ON q.seqrelid = s.oid
     JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = o.refobjsubid),
  'constraints', (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object(
      'name', k.conname, 'type', k.contype, 'definition', pg_catalog.pg_get_constraintdef(k.oid),
      'references', CASE WHEN k.contype = 'f' THEN k.confrelid::int8 END,
      'comment', pg_catalog.obj_description(k.oid, 'pg_constraint')) ORDER BY k.conname), '[]')
     FROM pg_catalog.pg_constraint k WHERE k.conrelid = c.oid AND k.contype IN ('c', 'p', 'u', 'x', 'f')),
  'indexes', (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object(
      'name', x.relname, 'constraint', k.conname,
      'definition', CASE WHEN k.oid IS NULL THEN pg_catalog.pg_get_indexdef(i.indexrelid) END,
      'options', CASE WHEN k.oid IS NOT NULL THEN x.reloptions END,
      'tablespace', xs.spcname, 'clustered', i.indisclustered, 'replicaIdentity', i.indisreplident,
      'statistics', (SELECT pg_catalog.json_agg(pg_catalog.json_build_array(ia.attnum, ia.attstattarget) ORDER BY ia.attnum)
                       FROM pg_catalog.pg_attribute ia WHERE ia.attrelid = x.oid AND ia.attstattarget >= 0),
      'comment', pg_catalog.obj_description(x.oid, 'pg_class')) ORDER BY x.relname), '[]')
     FROM pg_catalog.pg_index i
     JOIN pg_catalog.pg_class x ON x.oid = i.indexrelid
     LEFT JOIN pg_catalog.pg_tablespace xs ON xs.oid = x.reltablespace
     LEFT JOIN pg_catalog.pg_constraint k ON k.conindid = i.indexrelid AND k.conrelid = c.oid AND k.contype IN ('p', 'u', 'x')
    WHERE i.indrelid = c.oid),
  'triggers', (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object(
      'name', g.tgname, 'definition', pg_catalog.pg_get_triggerdef(g.oid), 'enabled', g.tgenabled,
      'comment', pg_catalog.obj_description(g.oid, 'pg_trigger')) ORDER BY g.tgname), '[]')
     FROM pg_catalog.pg_trigger g WHERE g.tgrelid = c.oid AND NOT g.tgisinternal AND g.tgname <> ${literal(TRUNCATE_TRIGGER)}),
  'policies', (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object(
      'name', p.polname, 'permissive', p.polpermissive,
      'command', CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
      'roles', ARRAY(SELECT CASE WHEN r.role = 0 THEN NULL ELSE pg_catalog.pg_get_userbyid(r.role) END
                       FROM pg_catalog.unnest(p.polroles) WITH ORDINALITY AS r(role, k) ORDER BY r.k),
      'using', pg_catalog.pg_get_expr(p.polqual, p.polrelid), 'check', pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid),
      'comment', pg_catalog.obj_description(p.oid, 'pg_policy')) ORDER BY p.polname), '[]')
     FROM pg_catalog.pg_policy p WHERE p.polrelid = c.oid),
  'publications', (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object(
      'name', b.pubname,
      'columns', CASE WHEN r.prattrs IS NOT NULL THEN
                   ARRAY(SELECT a.attname FROM pg_catalog.unnest(r.prattrs::pg_catalog.int2[]) WITH ORDINALITY AS u(attnum, k)
                           JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = u.attnum ORDER BY u.k) END,
      'where', pg_catalog.pg_get_expr(r.prqual, r.prrelid)) ORDER BY b.pubname), '[]')
     FROM pg_catalog.pg_publication_rel r JOIN pg_catalog.pg_publication b ON b.oid = r.prpubid WHERE r.prrelid = c.oid),
  'statistics', (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object(
      'oid', x.oid::int8, 'schema', xn.nspname, 'name', x.stxname, 'owner', pg_catalog.pg_get_userbyid(x.stxowner),
      'definition', pg_catalog.pg_get_statisticsobjdef(x.oid), 'target', CASE WHEN x.stxstattarget >= 0 THEN x.stxstattarget END,
      'comment', pg_catalog.obj_description(x.oid, 'pg_statistic_ext')) ORDER BY xn.nspname, x.stxname), '[]')
     FROM pg_catalog.pg_statistic_ext x JOIN pg_catalog.pg_namespace xn ON xn.oid = x.stxnamespace WHERE x.stxrelid = c.oid)
) AS plan,
pg_catalog.json_build_object(
  'kind', c.relkind, 'persistence', c.relpersistence, 'partition', c.relispartition,
  'typed', CASE WHEN c.reloftype <> 0 THEN pg_catalog.format_type(c.reloftype, NULL) END,
  'parents', (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object('schema', pn.nspname, 'name', p.relname) ORDER BY i.inhseqno), '[]')
                FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class p ON p.oid = i.inhparent
                JOIN pg_catalog.pg_namespace pn ON pn.oid = p.relnamespace WHERE i.inhrelid = c.oid),
  'children', (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object('schema', hn.nspname, 'name', h.relname) ORDER BY hn.nspname, h.relname), '[]')
                 FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class h ON h.oid = i.inhrelid
                 JOIN pg_catalog.pg_namespace hn ON hn.oid = h.relnamespace WHERE i.inhparent = c.oid),
  'rules', ARRAY(SELECT r.rulename FROM pg_catalog.pg_rewrite r WHERE r.ev_class = c.oid ORDER BY r.rulename),
  'labels', ARRAY(SELECT pg_catalog.format('%s (provider %s)', pg_catalog.pg_describe_object(l.classoid, l.objoid, l.objsubid), l.provider)
                    FROM pg_catalog.pg_seclabel l
                   WHERE l.classoid = ${CLASS('pg_class')} AND (l.objoid = c.oid OR l.objoid IN (SELECT objid FROM (${OWNED_SEQUENCES}) o))
                   ORDER BY l.objoid, l.objsubid, l.provider),
  'strangers', (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object('of', o.what, 'role', pg_catalog.pg_get_userbyid(o.role))
                                                     ORDER BY o.what), '[]')
                  FROM (SELECT 'the table' AS what, c.relowner AS role
                        UNION ALL
                        SELECT pg_catalog.format('statistics object %s', x.stxname), x.stxowner FROM pg_catalog.pg_statistic_ext x WHERE x.stxrelid = c.oid
                        UNION ALL
                        SELECT pg_catalog.format('publication %s', b.pubname), b.pubowner FROM pg_catalog.pg_publication_rel r
                          JOIN pg_catalog.pg_publication b ON b.oid = r.prpubid WHERE r.prrelid = c.oid) o
                 WHERE NOT pg_catalog.pg_has_role(o.role, 'MEMBER'))
) AS facts
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
  LEFT JOIN pg_catalog.pg_tablespace ts ON ts.oid = c.reltablespace
  LEFT JOIN pg_catalog.pg_class toast ON toast.oid = c.reltoastrelid
 WHERE c.oid = $1::pg_catalog.oid`;

const KINDS: Record<string, string> = {
  p: 'a partitioned table (its partitions are tables of their own)',
  f: 'a foreign table (its rows are elsewhere)',
  v: 'a view',
  m: 'a materialized view',
};

/**
 * Everything the empty twin of table `oid` is made of, read while the table is live at its name, in the caller's
 * transaction and under its ACCESS EXCLUSIVE lock (nothing of it changes until the caller commits). Two statements,
 * three when something depends on the table: the plan with what would refuse it, then what points at the table
 * (postgres-repoint.ts). Another table's key to it refuses it unless that table is one of `truncatedWith` (oids: a
 * cascade's, truncated in the same transaction). Throws InvalidInputError or HasDependentsError, naming each thing a twin
 * could not carry over; reads, never changes.
 */
export async function planTwin(c: PoolClient, oid: number, truncatedWith: ReadonlySet<number> = new Set()): Promise<TwinPlan> {
  const { rows } = await c.query<{ plan: Omit<TwinPlan, 'pointers'>; facts: TwinFacts }>({
    name: 'tablefate.twin-plan',
    text: PLAN_SQL,
    values: [oid],
  });
  if (!rows[0]) throw new TableNotFoundError(`no table has oid ${oid}`);
  const { plan, facts } = rows[0];
  const name = formatTableName({ namespace: plan.schema, name: plan.table });
  const cannot = refusals(plan, facts);
  if (cannot.length > 0) {
    throw new InvalidInputError(`${name} cannot be truncated into the trash: ${cannot.join('; ')}; no empty twin can stand in for it`);
  }
  const { pointers, keys, cannot: others } = await readPointers(c, oid, truncatedWith);
  if (keys.length > 0) {
    // In PostgreSQL's own words: its TRUNCATE refuses the same.
    throw new HasDependentsError(
      `${name} cannot be truncated into the trash: cannot truncate a table referenced in a foreign key constraint ` +
        `(${keys.map((key) => `${key} references it`).join(', ')}), as PostgreSQL's own TRUNCATE says: it truncates a table ` +
        'others reference only together with them (TRUNCATE ... CASCADE): truncate it with --cascade to truncate them too',
    );
  }
  if (others.length > 0)
    throw new HasDependentsError(`${name} cannot be truncated into the trash while others depend on it: ${others.join('; ')}`);
  return { ...plan, pointers };
}

/** What of the table itself no twin can carry over, a clause each. */
function refusals(plan: Omit<TwinPlan, 'pointers'>, facts: TwinFacts): string[] {
  const table = (t: { schema: string; name: string }) => `table ${formatTableName({ namespace: t.schema, name: t.name })}`;
  const cannot: string[] = [];
  if (facts.kind !== 'r') cannot.push(`it is ${KINDS[facts.kind] ?? `not a table (relkind ${facts.kind})`}`);
  if (facts.persistence === 't') cannot.push('it is a temporary table');
  if (facts.typed !== null) cannot.push(`it is a typed table (OF ${facts.typed})`);
  for (const parent of facts.parents) {
    cannot.push(facts.partition ? `it is a partition of ${table(parent)}` : `it inherits from ${table(parent)}`);
  }
  // (A partitioned table's children are its partitions, said above.)
  if (facts.kind !== 'p') for (const child of facts.children) cannot.push(`${table(child)} inherits from it`);
  for (const rule of facts.rules) cannot.push(`it has rule ${rule}`);
  for (const label of facts.labels) cannot.push(`it has a security label: ${label}`);
  // The twin is given its owner, and added to publications, by the session's role: which must be that owner, or a
  // member of it (or a superuser), and own each publication.
  for (const { of, role } of facts.strangers) cannot.push(`${of} is owned by ${role}, a role the worker's role is not a member of`);
  // A grant is made again by the twin's owner (or a superuser, which PostgreSQL records as the owner): one by another
  // role (a holder of the grant option) could be made again only as that role.
  const grants = [
    ...(plan.acl?.grants ?? []).map((g) => ({ ...g, on: '' })),
    ...plan.columns.flatMap((col) => (col.grants ?? []).map((g) => ({ ...g, on: ` (${col.name})` }))),
    ...plan.sequences.flatMap((seq) => (seq.acl?.grants ?? []).map((g) => ({ ...g, on: ` on sequence ${seq.name}` }))),
  ];
  for (const g of grants.filter((grant) => grant.grantor !== plan.owner)) {
    cannot.push(
      `${g.privileges.join(', ')}${g.on} was granted to ${g.grantee ?? 'PUBLIC'} by ${g.grantor}, not by its owner ${plan.owner}`,
    );
  }
  return cannot;
}
