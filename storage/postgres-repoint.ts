import type { PoolClient } from 'pg';
import { ident, literal } from '../catalog/pg-session';
import { dependentsOf, describeDependent, type Dependents } from './postgres-dependents';
import { qualified } from './postgres-record';

/**
 * What outside a table points at it (by its oid, or its row type's, or its sequences'), read so that it can be pointed
 * at another table that takes the table's name: a truncate into the trash moves the table away and makes an empty twin
 * at its name (postgres-twin.ts), and a truncate taken back puts the table back in the twin's place
 * (postgres-truncate.ts). After PostgreSQL's own TRUNCATE they all read the same table, empty; here each is made again
 * from the text PostgreSQL's deparsers write while the table is still at its name (the storage sessions' search_path,
 * pg_catalog and pg_temp, makes that text name the table with its schema), and run again once the other table has the
 * name, which then binds it to that one. Every object keeps its oid, owner, grants and comments, and what is built on it:
 *
 * - a view that reads the table: `CREATE OR REPLACE VIEW ... WITH (<its options, all of them: the replace resets any
 *   left out>) AS <pg_get_viewdef>` (its columns are the same, the twin being the same table); its column defaults,
 *   INSTEAD OF triggers and other rules are untouched. A view on such a view reads it by oid: nothing to do.
 * - a view's rule that names the table (`ON INSERT ... DO INSTEAD INSERT INTO` it): `CREATE OR REPLACE RULE`.
 * - another table's row-level security policy: `ALTER POLICY ... USING (...) WITH CHECK (...)`.
 * - another relation's column default (a serial's sequence shared with another table): `ALTER TABLE ONLY ... SET DEFAULT`.
 *
 * Refused, before anything changes, named: another table's foreign key to it (PostgreSQL's TRUNCATE refuses it too,
 * said in its words by the caller); a materialized view that reads it (none can be pointed elsewhere in place, and one
 * made again would lose its rows, which a TRUNCATE leaves until the next REFRESH); a view with a column of the table's
 * row type (the twin's is another type); a temporary view (PostgreSQL lets no other session replace it); what the
 * worker's role could not make again (PostgreSQL asks for the privileges of the object's owner, USAGE on each schema
 * its text names, and to replace a view, CREATE on its schema); and what no drop keeps either (postgres-dependents.ts:
 * a function with an SQL-standard body, a rule of another table, a view reading only the table's sequence, ...).
 */

export interface RepointedView {
  schema: string;
  name: string;
  /** Its reloptions as `name=value` (security_barrier, security_invoker, check_option). */
  options: string[];
  /** pg_get_viewdef's. */
  definition: string;
}

/** A rule of a view (not its `_RETURN`): pg_get_ruledef's `CREATE RULE` statement. */
export interface RepointedRule {
  schema: string;
  relation: string;
  name: string;
  definition: string;
}

export interface RepointedPolicy {
  schema: string;
  relation: string;
  name: string;
  using: string | null;
  check: string | null;
}

export interface RepointedDefault {
  schema: string;
  relation: string;
  column: string;
  expression: string;
}

/** What outside the table points at it, and how each is made again (plain data: it rides in the twin's plan). */
export interface Pointers {
  views: RepointedView[];
  rules: RepointedRule[];
  policies: RepointedPolicy[];
  defaults: RepointedDefault[];
  /**
   * What depends on the table and stays where it is (postgres-dependents.ts's own description of it), for the move that
   * takes the table away to leave in place: the objects above, and what is built on them.
   */
  staying: Pick<Dependents, 'members' | 'detached'>;
}

/** The table's pointers, and what no other table could take over: `keys` (other tables' foreign keys), `cannot` (clauses). */
export interface PointersRead {
  pointers: Pointers;
  keys: string[];
  cannot: string[];
}

const CLASS = (name: string) => `'pg_catalog.${name}'::pg_catalog.regclass`;

/** A relation's owner, and whether the session's role has its privileges (what PostgreSQL asks to replace or alter it). */
const OWNER = (rel: string) =>
  `'owner', pg_catalog.pg_get_userbyid(${rel}.relowner), 'owned', pg_catalog.pg_has_role(${rel}.relowner, 'USAGE'), 'me', current_user`;

/**
 * The schemas of what the pointer's text names (other than its own relation) where the session's role may not look
 * things up: PostgreSQL parses the text again as that role, and refuses a name in such a schema.
 */
const UNSEEN = `'unseen', ARRAY(SELECT DISTINCT o.schema
     FROM pg_catalog.pg_depend d CROSS JOIN LATERAL pg_catalog.pg_identify_object(d.refclassid, d.refobjid, 0) o
    WHERE d.classid = x.classid AND d.objid = x.objid AND d.deptype = 'n' AND o.schema IS NOT NULL
      AND NOT pg_catalog.has_schema_privilege(o.schema, 'USAGE') ORDER BY 1)`;

/**
 * What depends on the table itself, its row type (and that type's array) or the sequences it owns, from outside it,
 * one JSON object a row: what is pointed at the other table, and what refuses that.
 */
const POINTERS_SQL = `
WITH own(classid, objid) AS (
  SELECT ${CLASS('pg_class')}::pg_catalog.oid, $1::pg_catalog.oid
  UNION ALL
  SELECT ${CLASS('pg_type')}::pg_catalog.oid, t.oid FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_type t ON t.oid IN (c.reltype, (SELECT a.typarray FROM pg_catalog.pg_type a WHERE a.oid = c.reltype))
   WHERE c.oid = $1::pg_catalog.oid
  UNION ALL
  SELECT ${CLASS('pg_class')}::pg_catalog.oid, d.objid FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_class s ON s.oid = d.objid AND s.relkind = 'S'
   WHERE d.classid = ${CLASS('pg_class')} AND d.refclassid = ${CLASS('pg_class')} AND d.refobjid = $1::pg_catalog.oid
     AND d.deptype IN ('a', 'i')
), direct AS (
  SELECT DISTINCT d.classid, d.objid FROM pg_catalog.pg_depend d JOIN own o ON o.classid = d.refclassid AND o.objid = d.refobjid
   WHERE d.deptype IN ('n', 'a')
)
SELECT pg_catalog.json_build_object(
         'kind', CASE WHEN r.rulename <> '_RETURN' THEN 'rule' WHEN v.relkind = 'v' THEN 'view' ELSE 'materialized view' END,
         'schema', n.nspname, 'relation', v.relname, 'name', r.rulename, ${OWNER('v')},
         'creates', pg_catalog.has_schema_privilege(v.relnamespace, 'CREATE'), 'temporary', v.relpersistence = 't',
         'definition', CASE WHEN r.rulename <> '_RETURN' THEN pg_catalog.pg_get_ruledef(r.oid)
                            WHEN v.relkind = 'v' THEN pg_catalog.pg_get_viewdef(v.oid) END,
         'options', coalesce(v.reloptions, '{}'), ${UNSEEN},
         'rowTyped', ARRAY(SELECT a.attname FROM pg_catalog.pg_attribute a
                            WHERE r.rulename = '_RETURN' AND a.attrelid = v.oid AND a.attnum > 0 AND NOT a.attisdropped
                              AND a.atttypid IN (SELECT o.objid FROM own o WHERE o.classid = ${CLASS('pg_type')})
                            ORDER BY a.attnum)) AS pointer
  FROM direct x
  JOIN pg_catalog.pg_rewrite r ON x.classid = ${CLASS('pg_rewrite')} AND r.oid = x.objid
  -- (A rule of another table is refused as no drop keeps it: postgres-dependents.ts.)
  JOIN pg_catalog.pg_class v ON v.oid = r.ev_class AND v.relkind IN ('v', 'm') AND v.oid <> $1::pg_catalog.oid
  JOIN pg_catalog.pg_namespace n ON n.oid = v.relnamespace
UNION ALL
SELECT pg_catalog.json_build_object('kind', 'policy', 'schema', n.nspname, 'relation', t.relname, 'name', p.polname, ${OWNER('t')},
         'using', pg_catalog.pg_get_expr(p.polqual, p.polrelid), 'check', pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid), ${UNSEEN})
  FROM direct x
  JOIN pg_catalog.pg_policy p ON x.classid = ${CLASS('pg_policy')} AND p.oid = x.objid AND p.polrelid <> $1::pg_catalog.oid
  JOIN pg_catalog.pg_class t ON t.oid = p.polrelid
  JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace
UNION ALL
SELECT pg_catalog.json_build_object('kind', 'default', 'schema', n.nspname, 'relation', t.relname, 'name', a.attname, ${OWNER('t')},
         'definition', pg_catalog.pg_get_expr(ad.adbin, ad.adrelid), ${UNSEEN})
  FROM direct x
  JOIN pg_catalog.pg_attrdef ad ON x.classid = ${CLASS('pg_attrdef')} AND ad.oid = x.objid AND ad.adrelid <> $1::pg_catalog.oid
  JOIN pg_catalog.pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
  JOIN pg_catalog.pg_class t ON t.oid = ad.adrelid
  JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace`;

interface PointerRow {
  kind: 'view' | 'materialized view' | 'rule' | 'policy' | 'default';
  schema: string;
  relation: string;
  name: string;
  owner: string;
  owned: boolean;
  /** The session's role. */
  me: string;
  unseen: string[];
  creates?: boolean;
  temporary?: boolean;
  definition?: string | null;
  options?: string[];
  rowTyped?: string[];
  using?: string | null;
  check?: string | null;
}

/**
 * What points at table `oid` from outside it, read in the caller's transaction while the table is at its name and under
 * its ACCESS EXCLUSIVE lock (nothing new can point at it until the commit). Reads, never changes; a table nothing
 * depends on costs one statement (postgres-dependents.ts's), any other two.
 */
export async function readPointers(c: PoolClient, oid: number, truncatedWith: ReadonlySet<number> = new Set()): Promise<PointersRead> {
  const found = await dependentsOf(c, oid);
  // (The keys of tables truncated with it, a cascade's, go on to their twins, made from their own plans.)
  const keys = found.detached.filter((d) => d.kind === 'foreign key' && !truncatedWith.has(d.tableOid)).map(describeDependent);
  const cannot = found.others.map((other) => `${other} would go on pointing at it, not at the table that takes its name (drop it first)`);
  if (found.members.length + found.detached.length === 0) return { pointers: noPointers(), keys, cannot };
  const { rows } = await c.query<{ pointer: PointerRow }>({ name: 'tablefate.pointers', text: POINTERS_SQL, values: [oid] });
  const pointers = noPointers();
  pointers.staying = { members: found.members, detached: found.detached.filter((d) => d.kind !== 'foreign key') };
  for (const { pointer: p } of sortedRows(rows)) {
    const what = describe(p);
    if (p.kind === 'materialized view') {
      cannot.push(
        `${what} reads it: PostgreSQL's TRUNCATE would leave its rows until its next REFRESH, and no materialized view can ` +
          'be pointed at another table in place (made again, it would lose its rows): drop it first, and make it again after',
      );
      continue;
    }
    if (p.temporary === true) {
      cannot.push(`${what} is a temporary view of a session: no other session can make it again`);
      continue;
    }
    if (p.rowTyped !== undefined && p.rowTyped.length > 0) {
      cannot.push(`${what} has a column of the table's row type (${p.rowTyped.join(', ')}): the empty twin's row type is another type`);
      continue;
    }
    // PostgreSQL lets only its owner (or a role with the owner's privileges) replace or alter it, replace a view only in
    // a schema where it may CREATE, and parse a name only in a schema it may use.
    const lacks: string[] = [];
    if (!p.owned) lacks.push(`the privileges of its owner ${p.owner} (a member of that role with INHERIT has them)`);
    if (p.kind === 'view' && p.creates === false) lacks.push(`CREATE on schema ${p.schema}`);
    for (const schema of p.unseen) lacks.push(`USAGE on schema ${schema}, which its text names`);
    if (lacks.length > 0) {
      cannot.push(`${what} cannot be pointed at the empty twin: the worker's role ${p.me} lacks ${lacks.join(', and ')}`);
      continue;
    }
    if (p.kind === 'view') pointers.views.push({ schema: p.schema, name: p.relation, options: p.options ?? [], definition: p.definition! });
    if (p.kind === 'rule') pointers.rules.push({ schema: p.schema, relation: p.relation, name: p.name, definition: p.definition! });
    if (p.kind === 'policy')
      pointers.policies.push({ schema: p.schema, relation: p.relation, name: p.name, using: p.using ?? null, check: p.check ?? null });
    if (p.kind === 'default') pointers.defaults.push({ schema: p.schema, relation: p.relation, column: p.name, expression: p.definition! });
  }
  return { pointers, keys, cannot };
}

/**
 * The statements that make each pointer again, in the caller's transaction once another table has the name: bound, as
 * PostgreSQL parses them, to that table.
 */
export function repointStatements(pointers: Pointers): string[] {
  const out: string[] = [];
  for (const view of pointers.views) {
    const options = view.options.length > 0 ? ` WITH (${view.options.map(option).join(', ')})` : '';
    out.push(`CREATE OR REPLACE VIEW ${qualified(view.schema, view.name)}${options} AS ${withoutSemicolon(view.definition)}`);
  }
  for (const rule of pointers.rules) {
    if (!rule.definition.startsWith('CREATE RULE ')) throw new Error(`rule ${rule.name} reads as no CREATE RULE: ${rule.definition}`);
    out.push(`CREATE OR REPLACE RULE ${withoutSemicolon(rule.definition.slice('CREATE RULE '.length))}`);
  }
  for (const p of pointers.policies) {
    out.push(
      `ALTER POLICY ${ident(p.name)} ON ${qualified(p.schema, p.relation)}` +
        (p.using === null ? '' : ` USING (${p.using})`) +
        (p.check === null ? '' : ` WITH CHECK (${p.check})`),
    );
  }
  for (const d of pointers.defaults) {
    out.push(`ALTER TABLE ONLY ${qualified(d.schema, d.relation)} ALTER COLUMN ${ident(d.column)} SET DEFAULT ${d.expression}`);
  }
  return out;
}

/** Each pointer as a person reads it: `view shop.items_v`, `policy p of shop.orders`, `default of shop.orders.id`. */
export function describePointers(pointers: Pointers): string[] {
  return [
    ...pointers.views.map((v) => `view ${v.schema}.${v.name}`),
    ...pointers.rules.map((r) => `rule ${r.name} of view ${r.schema}.${r.relation}`),
    ...pointers.policies.map((p) => `policy ${p.name} of ${p.schema}.${p.relation}`),
    ...pointers.defaults.map((d) => `default of ${d.schema}.${d.relation}.${d.column}`),
  ];
}

const noPointers = (): Pointers => ({ views: [], rules: [], policies: [], defaults: [], staying: { members: [], detached: [] } });

function describe(p: PointerRow): string {
  if (p.kind === 'rule') return `rule ${p.name} of view ${p.schema}.${p.relation}`;
  if (p.kind === 'policy') return `policy ${p.name} of ${p.schema}.${p.relation}`;
  if (p.kind === 'default') return `default of ${p.schema}.${p.relation}.${p.name}`;
  return `${p.kind} ${p.schema}.${p.relation}`;
}

/** In a stable order: by kind, then by name. */
function sortedRows(rows: ReadonlyArray<{ pointer: PointerRow }>): Array<{ pointer: PointerRow }> {
  const key = ({ pointer: p }: { pointer: PointerRow }) => `${p.kind}\u0000${p.schema}\u0000${p.relation}\u0000${p.name}`;
  return [...rows].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

/** pg_get_viewdef and pg_get_ruledef end their text with `;`: not one of a statement run in a list of them. */
const withoutSemicolon = (text: string) => text.replace(/;\s*$/, '');

/** `name=value` as a view option: `"check_option" = 'cascaded'`. */
function option(text: string): string {
  const eq = text.indexOf('=');
  const [name, value] = eq < 0 ? [text, 'true'] : [text.slice(0, eq), text.slice(eq + 1)];
  return `${ident(name)} = ${literal(value)}`;
}
