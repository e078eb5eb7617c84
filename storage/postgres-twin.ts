import type { PoolClient } from 'pg';
import { ident, literal } from '../catalog/pg-session';
import { qualified, type LiveName } from './postgres-record';
import { repointStatements } from './postgres-repoint';
import type { TwinAcl, TwinColumn, TwinConstraint, TwinGrant, TwinPlan, TwinSequence } from './postgres-twin-read';

export { planTwin, type TwinPlan } from './postgres-twin-read';

/**
 * The empty twin of a table, made at its live name once the table itself has moved away (a truncate into the trash:
 * postgres-twin-read.ts reads the plan, and says what it refuses). The twin is made from the catalog, object by object,
 * each under the name the original's had, rather than with `CREATE TABLE ... (LIKE ... INCLUDING ALL)`: LIKE names
 * indexes, constraints' indexes, statistics objects and identity sequences by its own rules, and copies a serial's
 * default still calling the original's sequence (in the trash with it); it leaves out foreign keys, triggers, policies,
 * grants, publications, storage options, UNLOGGED and statistics targets. What the twin has is what pg_dump and psql's
 * `\d+` show of the original; and the views, view rules, policies and defaults outside it that pointed at the original
 * point at the twin (postgres-repoint.ts).
 *
 * Two round trips, in the caller's transaction: one query finds where the original's sequences and statistics objects
 * are now, then one simple query of many statements makes the twin whole (the table is locked all the while, and by
 * then its sequences are too, renamed by the caller).
 */

/** Where the original's sequences and statistics objects are now, and the default privileges the twin will be given. */
interface Found {
  there: boolean;
  /** [oid, schema, name] */
  sequences: Array<[number, string, string]>;
  statistics: Array<[number, string, string]>;
  /**
   * The grantees (`null`: PUBLIC) of default privileges for the tables (`r`) and sequences (`S`) the session's role
   * creates in the twin's schema, if it has any.
   */
  defaults: Partial<Record<'r' | 'S', Array<string | null>>>;
}

const FOUND_SQL = `
SELECT pg_catalog.to_regclass($1) IS NOT DISTINCT FROM $2::pg_catalog.oid AS there,
  (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_array(s.oid::int8, n.nspname, s.relname)), '[]')
     FROM pg_catalog.pg_class s JOIN pg_catalog.pg_namespace n ON n.oid = s.relnamespace WHERE s.oid = ANY ($3::pg_catalog.oid[])) AS sequences,
  (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_array(x.oid::int8, n.nspname, x.stxname)), '[]')
     FROM pg_catalog.pg_statistic_ext x JOIN pg_catalog.pg_namespace n ON n.oid = x.stxnamespace WHERE x.oid = ANY ($4::pg_catalog.oid[])) AS statistics,
  (SELECT coalesce(pg_catalog.json_object_agg(t.kind, t.grantees), '{}') FROM (
     SELECT d.defaclobjtype AS kind,
            pg_catalog.array_agg(DISTINCT CASE WHEN e.grantee = 0 THEN NULL ELSE pg_catalog.pg_get_userbyid(e.grantee) END::text) AS grantees
       FROM pg_catalog.pg_default_acl d CROSS JOIN LATERAL pg_catalog.aclexplode(d.defaclacl) e
      WHERE d.defaclrole = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = CURRENT_USER) AND d.defaclobjtype IN ('r', 'S')
        AND d.defaclnamespace IN (0, (SELECT s.oid FROM pg_catalog.pg_namespace s WHERE s.nspname = $5))
      GROUP BY d.defaclobjtype) t) AS defaults`;

/**
 * Makes the empty twin of each plan's table at its live name, in the caller's transaction, once the caller has moved the
 * originals away: each to its `original`, its indexes and owned sequences renamed so that their names are free. The
 * original's statistics objects stay in the live schema when it moves (ALTER TABLE ... SET SCHEMA leaves them): they are
 * renamed here after the original (`<its name>_x<k>`) and moved into its schema, for the twin's to take their names.
 *
 * Several tables truncated as one (a cascade) are made whole one by one, all but their keys to one another, which are
 * made once every twin is (so that each binds to a twin, whatever their order, cycles included); then, last, what
 * pointed at the originals (a view may read two of them).
 *
 * No id is handed out twice by the original's sequences and the twin's, with one exception: a session that read a
 * sequence's name into its oid before the caller's rename (`SELECT nextval('shop.orders_id_seq')` waiting on the lock)
 * takes its value, once the caller commits, from the original's, in the trash.
 */
export async function makeTwins(c: PoolClient, twins: ReadonlyArray<{ plan: TwinPlan; original: LiveName }>): Promise<void> {
  const family = new Set(twins.map(({ plan }) => plan.oid));
  const whole: string[] = [];
  const keys: string[] = [];
  const pointers = new Set<string>();
  for (const { plan, original } of twins) {
    whole.push(...twinStatements(plan, original, await foundOf(c, plan, original), family));
    keys.push(...familyKeyStatements(plan, family));
    for (const statement of repointStatements(plan.pointers)) pointers.add(statement);
  }
  await c.query([...whole, ...keys, ...pointers].join(';\n'));
}

/** Where the original's sequences and statistics objects are, read once it has moved to `original` (checked). */
async function foundOf(c: PoolClient, plan: TwinPlan, original: LiveName): Promise<Found> {
  const { rows } = await c.query<Found>(FOUND_SQL, [
    qualified(original.schema, original.table),
    plan.oid,
    plan.sequences.map((s) => s.oid),
    plan.statistics.map((s) => s.oid),
    plan.schema,
  ]);
  const found = rows[0]!;
  if (!found.there) {
    throw new Error(
      `the table of oid ${plan.oid} is not at ${original.schema}.${original.table}: its twin is made only once it has moved there`,
    );
  }
  return found;
}

/** A foreign key of the table to another table truncated with it: made once that one's twin is. */
const toFamily = (plan: TwinPlan, family: ReadonlySet<number>) => (k: TwinConstraint) =>
  k.type === 'f' && k.references !== null && k.references !== plan.oid && family.has(k.references);

/** The twin's keys to the other twins, with their comments. */
function familyKeyStatements(plan: TwinPlan, family: ReadonlySet<number>): string[] {
  const twin = qualified(plan.schema, plan.table);
  return plan.constraints
    .filter(toFamily(plan, family))
    .flatMap((k) => [
      `ALTER TABLE ${twin} ADD CONSTRAINT ${ident(k.name)} ${k.definition}`,
      ...(k.comment === null ? [] : [`COMMENT ON CONSTRAINT ${ident(k.name)} ON ${twin} IS ${literal(k.comment)}`]),
    ]);
}

/** The statements that make the twin, in an order each can run in: what one names is made before it. */
function twinStatements(plan: TwinPlan, original: LiveName, found: Found, family: ReadonlySet<number>): string[] {
  const ownKey = (k: TwinConstraint) => !toFamily(plan, family)(k);
  const twin = qualified(plan.schema, plan.table);
  const alter = `ALTER TABLE ${twin}`;
  const out: string[] = [];
  out.push(...freeStatisticsNames(plan, original, found));
  const serials = plan.sequences.filter((s) => !s.identity);
  // A serial's default calls its sequence by name (`nextval('shop.orders_id_seq'::regclass)`, as read): made first
  // under that name, the default read back calls the twin's own.
  for (const seq of serials) {
    out.push(`CREATE ${seq.unlogged ? 'UNLOGGED ' : ''}SEQUENCE ${qualified(plan.schema, seq.name)} ${sequenceOptions(seq)}`);
  }
  const columns = plan.columns.map((col) => columnSql(plan, col));
  const options = plan.options.length > 0 ? ` WITH (${plan.options.map(option).join(', ')})` : '';
  const tablespace = plan.tablespace === null ? '' : ` TABLESPACE ${ident(plan.tablespace)}`;
  out.push(
    `CREATE ${plan.unlogged ? 'UNLOGGED ' : ''}TABLE ${twin} (${columns.join(', ')}) USING ${ident(plan.accessMethod)}${options}${tablespace}`,
  );
  for (const seq of serials) out.push(`ALTER SEQUENCE ${qualified(plan.schema, seq.name)} OWNED BY ${twin}.${ident(seq.column)}`);
  // An identity sequence is made with its table, logged or not as the table is: one the original had set otherwise is
  // set so again.
  for (const seq of plan.sequences.filter((s) => s.identity && s.unlogged !== plan.unlogged)) {
    out.push(`ALTER SEQUENCE ${qualified(plan.schema, seq.name)} SET ${seq.unlogged ? 'UNLOGGED' : 'LOGGED'}`);
  }
  // Each sequence goes on from where the original's is, read here: the caller's renames hold the original's locked
  // until its commit, so no nextval moves them meanwhile. (Before the grants, which may take UPDATE from the owner.)
  for (const seq of plan.sequences) {
    const was = found.sequences.find(([oid]) => oid === seq.oid);
    if (!was) throw new Error(`sequence ${seq.name} (oid ${seq.oid}) of the table of oid ${plan.oid} is gone`);
    out.push(
      `SELECT pg_catalog.setval(${literal(qualified(plan.schema, seq.name))}::pg_catalog.regclass, s.last_value, s.is_called) ` +
        `FROM ${qualified(was[1], was[2])} s`,
    );
  }
  for (const col of plan.columns) {
    const column = `${alter} ALTER COLUMN ${ident(col.name)}`;
    if (col.statistics !== null) out.push(`${column} SET STATISTICS ${col.statistics}`);
    if (col.storage !== null) out.push(`${column} SET STORAGE ${col.storage}`);
    if (col.compression !== null) out.push(`${column} SET COMPRESSION ${ident(col.compression)}`);
    if (col.options !== null && col.options.length > 0) out.push(`${column} SET (${col.options.map(option).join(', ')})`);
  }
  // Owned by the original's owner before anything else is made: what follows is made as by the owner (its grants
  // recorded as the owner's), and ALTER TABLE ... OWNER takes the owned sequences along.
  out.push(`${alter} OWNER TO ${ident(plan.owner)}`);
  // Constraints, then the other indexes, then foreign keys: a foreign key to the table itself needs its key first.
  const constraint = (k: { name: string; definition: string }) => `${alter} ADD CONSTRAINT ${ident(k.name)} ${k.definition}`;
  out.push(...plan.constraints.filter((k) => k.type !== 'f').map(constraint));
  for (const index of plan.indexes) {
    const at = qualified(plan.schema, index.name);
    if (index.definition !== null) out.push(index.definition);
    if (index.options !== null && index.options.length > 0) out.push(`ALTER INDEX ${at} SET (${index.options.map(option).join(', ')})`);
    if (index.tablespace !== null) out.push(`ALTER INDEX ${at} SET TABLESPACE ${ident(index.tablespace)}`);
    for (const [column, target] of index.statistics ?? []) out.push(`ALTER INDEX ${at} ALTER COLUMN ${column} SET STATISTICS ${target}`);
    if (index.clustered) out.push(`${alter} CLUSTER ON ${ident(index.name)}`);
    if (index.replicaIdentity && plan.replicaIdentity === 'i') out.push(`${alter} REPLICA IDENTITY USING INDEX ${ident(index.name)}`);
  }
  out.push(...plan.constraints.filter((k) => k.type === 'f' && ownKey(k)).map(constraint));
  if (plan.replicaIdentity === 'f') out.push(`${alter} REPLICA IDENTITY FULL`);
  if (plan.replicaIdentity === 'n') out.push(`${alter} REPLICA IDENTITY NOTHING`);
  if (plan.rowSecurity) out.push(`${alter} ENABLE ROW LEVEL SECURITY`);
  if (plan.forceRowSecurity) out.push(`${alter} FORCE ROW LEVEL SECURITY`);
  for (const p of plan.policies) {
    const roles = p.roles.map((role) => (role === null ? 'PUBLIC' : ident(role))).join(', ');
    out.push(
      `CREATE POLICY ${ident(p.name)} ON ${twin} AS ${p.permissive ? 'PERMISSIVE' : 'RESTRICTIVE'} FOR ${p.command} TO ${roles}` +
        (p.using === null ? '' : ` USING (${p.using})`) +
        (p.check === null ? '' : ` WITH CHECK (${p.check})`),
    );
  }
  // pg_get_triggerdef names the table by its live name, the twin's now.
  for (const t of plan.triggers) {
    out.push(t.definition);
    const state = { D: 'DISABLE', R: 'ENABLE REPLICA', A: 'ENABLE ALWAYS' }[t.enabled];
    if (state !== undefined) out.push(`${alter} ${state} TRIGGER ${ident(t.name)}`);
  }
  for (const pub of plan.publications) {
    const columns = pub.columns === null ? '' : ` (${pub.columns.map(ident).join(', ')})`;
    out.push(`ALTER PUBLICATION ${ident(pub.name)} ADD TABLE ONLY ${twin}${columns}${pub.where === null ? '' : ` WHERE (${pub.where})`}`);
  }
  for (const st of plan.statistics) {
    out.push(st.definition, `ALTER STATISTICS ${qualified(st.schema, st.name)} OWNER TO ${ident(st.owner)}`);
    if (st.target !== null) out.push(`ALTER STATISTICS ${qualified(st.schema, st.name)} SET STATISTICS ${st.target}`);
  }
  out.push(...grantStatements(plan, found));
  out.push(...commentStatements(plan, ownKey));
  return out;
}

/** A column of CREATE TABLE: its type, collation, default or generation, identity (its sequence named), NOT NULL. */
function columnSql(plan: TwinPlan, col: TwinColumn): string {
  const parts = [ident(col.name), col.type];
  if (col.collation !== null) parts.push(`COLLATE ${qualified(...col.collation)}`);
  if (col.generated !== null) parts.push(`GENERATED ALWAYS AS (${col.generated}) STORED`);
  if (col.identity !== null) {
    const seq = plan.sequences.find((s) => s.identity && s.column === col.name);
    // (Of the column's type: PostgreSQL refuses an AS here.)
    const name = seq ? `SEQUENCE NAME ${qualified(plan.schema, seq.name)} ${sequenceOptions(seq, false)}` : '';
    parts.push(`GENERATED ${col.identity} AS IDENTITY (${name})`);
  }
  if (col.default !== null) parts.push(`DEFAULT ${col.default}`);
  if (col.notNull) parts.push('NOT NULL');
  return parts.join(' ');
}

/** Every option of a sequence, spelled out: the twin's holds the same values, whatever the defaults would be. */
function sequenceOptions(seq: TwinSequence, typed = true): string {
  return (
    `${typed ? `AS ${seq.type} ` : ''}INCREMENT BY ${seq.increment} MINVALUE ${seq.min} MAXVALUE ${seq.max} START WITH ${seq.start} ` +
    `CACHE ${seq.cache} ${seq.cycle ? 'CYCLE' : 'NO CYCLE'}`
  );
}

/**
 * The names the original's statistics objects take beside it (see freeStatisticsNames), each with the name it had: what
 * the original's record keeps, for its recall to give them back (restoreStatistics in postgres-names.ts).
 */
export function parkedStatistics(plan: TwinPlan, original: LiveName): Record<string, string> {
  return Object.fromEntries(plan.statistics.map((st, k) => [withSuffix(original.table, `_x${k}`), st.name]));
}

/**
 * The original's statistics objects, still at the names the twin's take: renamed after the original and moved into its
 * schema (a name taken there, by a statistics object of another table, would fail the transaction).
 */
function freeStatisticsNames(plan: TwinPlan, original: LiveName, found: Found): string[] {
  return plan.statistics.flatMap((st, k) => {
    const at = found.statistics.find(([oid]) => oid === st.oid);
    if (!at || at[1] !== st.schema || at[2] !== st.name) return [];
    const parked = withSuffix(original.table, `_x${k}`);
    const moves = [`ALTER STATISTICS ${qualified(st.schema, st.name)} RENAME TO ${ident(parked)}`];
    if (original.schema !== st.schema) moves.push(`ALTER STATISTICS ${qualified(st.schema, parked)} SET SCHEMA ${ident(original.schema)}`);
    return moves;
  });
}

/**
 * The twin's grants: what default privileges gave the twin and its sequences as they were made is taken back first
 * (the original may have had other ones, or none), then the original's are granted again in the order of its items.
 * (A relation default privileges were given to keeps an ACL of its own, its owner's privileges only, where the
 * original may have had none: the same privileges, but PostgreSQL has no command that makes an ACL none again.)
 */
function grantStatements(plan: TwinPlan, found: Found): string[] {
  const twin = qualified(plan.schema, plan.table);
  const out: string[] = [];
  const relations = [
    { on: `TABLE ${twin}`, acl: plan.acl, defaults: found.defaults.r },
    ...plan.sequences.map((seq) => ({ on: `SEQUENCE ${qualified(plan.schema, seq.name)}`, acl: seq.acl, defaults: found.defaults.S })),
  ];
  for (const { on, acl, defaults } of relations) {
    if (defaults !== undefined) {
      out.push(`REVOKE ALL ON ${on} FROM ${defaults.map(grantee).join(', ')}`);
      // (Default privileges may have taken some of the owner's own.)
      out.push(`GRANT ALL ON ${on} TO ${ident(plan.owner)}`);
    }
    out.push(...aclStatements(on, acl, plan.owner));
  }
  for (const col of plan.columns) {
    for (const g of col.grants ?? []) {
      const privileges = g.privileges.map((p) => `${p} (${ident(col.name)})`).join(', ');
      out.push(`GRANT ${privileges} ON TABLE ${twin} TO ${grantee(g.grantee)}${g.grantable ? ' WITH GRANT OPTION' : ''}`);
    }
  }
  return out;
}

/** A relation's ACL made again: what the owner lacks revoked, then each other grant in order. */
function aclStatements(on: string, acl: TwinAcl | null, owner: string): string[] {
  if (acl === null) return [];
  const out: string[] = [];
  if (acl.ownerLacks.length > 0) out.push(`REVOKE ${acl.ownerLacks.join(', ')} ON ${on} FROM ${ident(owner)}`);
  // The owner holds its own privileges already: only a grant option given to it is granted again.
  const grants = acl.grants.filter((g: TwinGrant) => g.grantee !== owner || g.grantable);
  for (const g of grants) {
    out.push(`GRANT ${g.privileges.join(', ')} ON ${on} TO ${grantee(g.grantee)}${g.grantable ? ' WITH GRANT OPTION' : ''}`);
  }
  return out;
}

function commentStatements(plan: TwinPlan, ownKey: (k: TwinConstraint) => boolean): string[] {
  const twin = qualified(plan.schema, plan.table);
  const on = (what: string, comment: string | null) => (comment === null ? [] : [`COMMENT ON ${what} IS ${literal(comment)}`]);
  return [
    ...on(`TABLE ${twin}`, plan.comment),
    ...plan.columns.flatMap((col) => on(`COLUMN ${twin}.${ident(col.name)}`, col.comment)),
    ...plan.sequences.flatMap((seq) => on(`SEQUENCE ${qualified(plan.schema, seq.name)}`, seq.comment)),
    ...plan.constraints.filter(ownKey).flatMap((k) => on(`CONSTRAINT ${ident(k.name)} ON ${twin}`, k.comment)),
    ...plan.indexes.flatMap((index) => on(`INDEX ${qualified(plan.schema, index.name)}`, index.comment)),
    ...plan.triggers.flatMap((t) => on(`TRIGGER ${ident(t.name)} ON ${twin}`, t.comment)),
    ...plan.policies.flatMap((p) => on(`POLICY ${ident(p.name)} ON ${twin}`, p.comment)),
    ...plan.statistics.flatMap((st) => on(`STATISTICS ${qualified(st.schema, st.name)}`, st.comment)),
  ];
}

const grantee = (role: string | null) => (role === null ? 'PUBLIC' : ident(role));

/** `name=value` as a storage option: `"fillfactor" = '70'`, `"toast"."autovacuum_enabled" = 'false'`. */
function option(text: string): string {
  const eq = text.indexOf('=');
  const [name, value] = eq < 0 ? [text, 'true'] : [text.slice(0, eq), text.slice(eq + 1)];
  return `${name.split('.').map(ident).join('.')} = ${literal(value)}`;
}

/** `base` + `suffix`, `base` cut short (at a character) to keep it within PostgreSQL's 63 bytes. */
function withSuffix(base: string, suffix: string): string {
  let cut = base;
  while (Buffer.byteLength(cut + suffix) > 63) cut = [...cut].slice(0, -1).join('');
  return cut + suffix;
}
