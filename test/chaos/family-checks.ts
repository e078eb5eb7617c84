import { Client } from 'pg';
import type { TableRecord } from '../../domain/table';
import { describeOp, explainers, namesOf } from './answers';
import type { Dependent } from './families';
import { TRANSITIONAL_STATES } from './observe';
import type { Problem } from './problems';
import type { UnitKey } from './units';
import { quoteIdent, type NodeDatabase } from './rows';
import type { OpRecord } from './ops';
import { mayTruncate } from './truncate-lineage';
import { judgeTruncatesOfFamilies } from './truncate-families';

/**
 * A family is never split (the run's families, families.ts, checked at rest):
 * - a READY table's views are live under their own names in their schema, and readable (a materialized view with its
 *   index), and those that read it read its live relation, never one in the trash (a truncate, issue 43, points them
 *   at its empty twin, or is refused); each key and policy the run made on it is on the run's live table, the key
 *   referencing the table itself, left NOT VALID only if a row matching no parent went in while it was detached, or the
 *   recall said so; and its record keeps no family;
 * - a TRASHED table's views are in tablefate_trash, each a member of the family its record keeps, and its keys and
 *   policies are absent from the live tables and recorded there as detached; the catalog's `family` of the table names
 *   each (as the drop said it), and a READY table's has none; recalled by the checker, it is READY and judged so again;
 * - a PURGED table's views exist nowhere;
 * - a key or a policy names the table by the name it had when it was made: a recall under another name says it and does
 *   not put it back, so it is not looked for after one;
 * - a drop refused HasDependents asked for no cascade, came after the run made a dependent of the table, and was taken
 *   back: the table is READY unless a later drop explains it; a drop without cascade took nothing along;
 * - every family recorded on a node is made of what the run made.
 */

const TRASH_SCHEMA = 'tablefate_trash';
const UNDEFINED_TABLE = '42P01';

const qualified = (schema: string, name: string) => `${quoteIdent(schema)}.${quoteIdent(name)}`;

/** What a node's row of tablefate.shards records of a family (postgres-family.ts), as far as the checks read it. */
interface RecordedFamily {
  members?: Array<{ oid: number }>;
  detached?: Array<{ kind: string; tableOid: number; name: string }>;
}

/** What one node has, looked at once: the relations of the run's dependents, their keys, policies and indexes, the records. */
interface Look {
  relations: Map<number, { schema: string; name: string }>;
  keys: Array<{ on: number; name: string; references: number; validated: boolean }>;
  policies: Array<{ on: number; name: string }>;
  indexes: Array<{ on: number; name: string }>;
  /** The relations each of the run's views reads (its rule's dependencies). */
  reads: Map<number, Set<number>>;
  records: Array<{ tableId: number; shard: number; oid: number; family: RecordedFamily | null; notes: string[] | null }>;
}

async function lookAt(url: string, catalogId: string, oids: readonly number[]): Promise<Look> {
  const client = new Client({ connectionString: url, application_name: 'chaos checker' });
  await client.connect();
  try {
    const relations = await client.query<{ oid: string; schema: string; name: string }>(
      `SELECT c.oid::int8 AS oid, n.nspname AS schema, c.relname AS name
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ANY($1::oid[])`,
      [oids],
    );
    const keys = await client.query<{ on: string; name: string; references: string; validated: boolean }>(
      `SELECT conrelid::int8 AS on, conname AS name, confrelid::int8 AS references, convalidated AS validated
         FROM pg_constraint WHERE contype = 'f' AND conrelid = ANY($1::oid[])`,
      [oids],
    );
    const policies = await client.query<{ on: string; name: string }>(
      'SELECT polrelid::int8 AS on, polname AS name FROM pg_policy WHERE polrelid = ANY($1::oid[])',
      [oids],
    );
    const indexes = await client.query<{ on: string; name: string }>(
      `SELECT x.indrelid::int8 AS on, i.relname AS name FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
        WHERE x.indrelid = ANY($1::oid[])`,
      [oids],
    );
    const reads = await client.query<{ view: string; reads: string }>(
      `SELECT r.ev_class::int8 AS view, d.refobjid::int8 AS reads FROM pg_rewrite r
         JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid AND d.refclassid = 'pg_class'::regclass
        WHERE r.ev_class = ANY($1::oid[]) AND d.refobjid <> r.ev_class`,
      [oids],
    );
    let records: Look['records'] = [];
    try {
      const { rows } = await client.query<{
        table_id: string;
        shard: number;
        oid: string;
        family: RecordedFamily | null;
        notes: string[] | null;
      }>('SELECT table_id, shard, table_oid::int8 AS oid, family, notes FROM tablefate.shards WHERE catalog_id = $1', [catalogId]);
      records = rows.map((r) => ({ tableId: Number(r.table_id), shard: r.shard, oid: Number(r.oid), family: r.family, notes: r.notes }));
    } catch (err) {
      // No shard was ever placed on this node.
      if ((err as { code?: string }).code !== UNDEFINED_TABLE) throw err;
    }
    return {
      relations: new Map(relations.rows.map((r) => [Number(r.oid), { schema: r.schema, name: r.name }])),
      keys: keys.rows.map((r) => ({ on: Number(r.on), name: r.name, references: Number(r.references), validated: r.validated })),
      policies: policies.rows.map((r) => ({ on: Number(r.on), name: r.name })),
      indexes: indexes.rows.map((r) => ({ on: Number(r.on), name: r.name })),
      reads: reads.rows.reduce(
        (map, r) => map.set(Number(r.view), (map.get(Number(r.view)) ?? new Set()).add(Number(r.reads))),
        new Map<number, Set<number>>(),
      ),
      records,
    };
  } finally {
    await client.end();
  }
}

const isView = (d: Dependent) => d.kind === 'view' || d.kind === 'materialized view';
/** As tablefate names a dependent (postgres-dependents.ts, describeDependent). */
const describe = (d: Dependent) => (isView(d) ? `${d.kind} ${d.schema}.${d.name}` : `${d.kind} ${d.part} of ${d.schema}.${d.name}`);
/** Whether a drop's sentences (`chaos.t: moved into the trash with it: view chaos.t_v1, view ...`) name `what`. */
const names = (said: readonly string[], what: string) => said.some((sentence) => sentence.split(/: |, /).includes(what));
/** Whether the sentences say a family went along: its views moved, or what names the table detached. */
const tookAlong = (said: readonly string[]) => said.some((s) => /(^|: )(moved into the trash with it|detached until its recall): /.test(s));

export interface FamilyEvidence {
  dependents: readonly Dependent[];
  /** `<node>/<oid>` of the run's live tables holding a row that matches no parent. */
  orphaned: ReadonlySet<string>;
  ops: readonly OpRecord[];
  /** The keys the run made between tablefate's own tables (units.ts): a cascade detaches them, and they refuse a drop too. */
  unitKeys?: readonly UnitKey[];
}

export class FamilyChecks {
  /** How many of the run's dependents were judged with their table READY, TRASHED, gone, and READY again after its recall. */
  private readonly judged = { ready: 0, trashed: 0, gone: 0, recalled: 0 };
  private notLookedFor = 0;
  private readonly tables = new Set<number>();

  constructor(
    private readonly evidence: FamilyEvidence,
    private readonly nodes: readonly NodeDatabase[],
    private readonly catalogId: string,
  ) {}

  /** What the checks looked at, for the report's line. */
  summary(): string {
    const made = this.evidence.dependents.filter((d) => !d.uncertain).length;
    const { ready, trashed, gone, recalled } = this.judged;
    return (
      `families: the ${made} dependents the run made on ${this.tables.size} tables judged with their table READY ${ready}, ` +
      `TRASHED ${trashed}, gone ${gone}, recalled by the checker ${recalled} ` +
      `(${this.notLookedFor} keys or policies not looked for after a recall under another name)`
    );
  }

  /** Every table's family where its state says, before the checker recalls anything; and the drops refused HasDependents. */
  async atRest(tables: readonly TableRecord[]): Promise<Problem[]> {
    const problems: Problem[] = [];
    const problem = (detail: string) => problems.push({ invariant: 'families', detail });
    const byId = new Map(tables.map((t) => [t.id, t]));
    const looks = await this.lookEverywhere();
    for (const d of this.judgeable()) {
      const t = byId.get(d.tableId);
      if (!t || TRANSITIONAL_STATES.includes(t.state)) continue;
      const look = looks.get(d.node)!;
      this.tables.add(t.id);
      this.judged[t.state === 'READY' ? 'ready' : t.state === 'TRASHED' ? 'trashed' : 'gone']++;
      if (t.state === 'READY') {
        const found = this.judgeReady(d, t, look, false, []);
        problems.push(...found);
        const unreadable = found.length === 0 && isView(d) ? await this.unreadable(d, look.relations.get(d.oid)) : undefined;
        if (unreadable) problem(`${this.label(d, t)}: ${unreadable}`);
      } else if (t.state === 'TRASHED') problems.push(...this.judgeTrashed(d, t, look));
      else if (isView(d) && look.relations.has(d.oid)) {
        const at = look.relations.get(d.oid)!;
        problem(`${this.label(d, t)}: still exists, as ${at.schema}.${at.name}, though its table is ${t.state}`);
      }
    }
    // A family recorded on a node is made of what the run made (nobody else makes views on tablefate's tables here).
    for (const [node, look] of looks) {
      for (const r of look.records) {
        const own = this.evidence.dependents.filter((d) => d.node === node && d.tableId === r.tableId);
        for (const m of r.family?.members ?? []) {
          if (!own.some((d) => isView(d) && d.oid === m.oid)) {
            problem(`${node}: the family of table ${r.tableId} shard ${r.shard} records a member (oid ${m.oid}) the run never made on it`);
          }
        }
        for (const x of r.family?.detached ?? []) {
          // (A child truncated since the key was made holds it on its empty twin, another relation under the same name.)
          const unitKey = (this.evidence.unitKeys ?? []).some(
            (k) => k.name === x.name && (k.childOid === x.tableOid || this.truncated(k.childId, k.childName)),
          );
          if (!unitKey && !own.some((d) => !isView(d) && d.oid === x.tableOid && d.part === x.name)) {
            problem(
              `${node}: the family of table ${r.tableId} shard ${r.shard} records ${x.kind} ${x.name} detached, which the run never made on it`,
            );
          }
        }
      }
    }
    problems.push(...this.judgeDrops(byId));
    problems.push(...judgeTruncatesOfFamilies(this.evidence, byId));
    return problems;
  }

  /** The checker recalled `table` (now READY; `renamed`: under a fresh name, its own being taken): its family is back. */
  async afterRecall(table: TableRecord, renamed: boolean, answerNotes: readonly string[]): Promise<Problem[]> {
    const problems: Problem[] = [];
    const own = this.judgeable().filter((d) => d.tableId === table.id);
    if (own.length === 0) return problems;
    const looks = await this.lookEverywhere(new Set(own.map((d) => d.node)));
    for (const d of own) {
      this.judged.recalled++;
      problems.push(...this.judgeReady(d, table, looks.get(d.node)!, renamed, answerNotes, ' after the checker recalled it'));
    }
    for (const d of own.filter((x) => isView(x))) {
      const at = looks.get(d.node)!.relations.get(d.oid);
      const problem = await this.unreadable(d, at);
      if (problem) problems.push({ invariant: 'families', detail: `${this.label(d, table)} after the checker recalled it: ${problem}` });
    }
    return problems;
  }

  /** Whether a truncate of table `id` (or of `name`) was called and not refused: its relation may be a twin since. */
  private truncated(id: number, name: string): boolean {
    return this.evidence.ops.some((op) => op.outcome.kind !== 'rejected' && mayTruncate(op, id, new Set([name])));
  }

  /** Whether a recall of table `id` into namespace `schema` was asked and went unanswered (it may have been made). */
  private mayHaveRecalledInto(id: number, schema: string): boolean {
    return this.evidence.ops.some(
      (op) =>
        op.request.kind === 'undelete' && op.request.tableId === id && op.request.newNamespace === schema && op.outcome.kind === 'unknown',
    );
  }

  /** The dependents whose COMMIT was heard. */
  private judgeable(): Dependent[] {
    return this.evidence.dependents.filter((d) => !d.uncertain);
  }

  private label(d: Dependent, t: TableRecord): string {
    return `${d.node}: ${describe(d)}, made on table ${t.id} (${d.tableName} shard ${d.shard}; now ${t.namespace}.${t.name}, ${t.state})`;
  }

  private async lookEverywhere(only?: ReadonlySet<string>): Promise<Map<string, Look>> {
    const looks = new Map<string, Look>();
    for (const { node, url } of this.nodes) {
      if (only && !only.has(node)) continue;
      const oids = [...new Set(this.evidence.dependents.filter((d) => d.node === node).map((d) => d.oid))];
      looks.set(node, await lookAt(url, this.catalogId, oids));
    }
    return looks;
  }

  /**
   * Whether a key or a policy made on the table may have been left out by a recall under another name (it names the
   * table by its name then, so such a recall says it and does not put it back).
   */
  private lostToRename(d: Dependent): boolean {
    return this.evidence.ops.some(
      (op) =>
        op.request.kind === 'undelete' &&
        op.request.tableId === d.tableId &&
        ((op.request.newName !== undefined && op.request.newName !== d.tableName) || op.request.newNamespace !== undefined) &&
        op.outcome.kind !== 'rejected' &&
        (op.outcome.kind !== 'ok' || op.endedAt > d.madeAt),
    );
  }

  private judgeReady(d: Dependent, t: TableRecord, look: Look, renamed: boolean, answerNotes: readonly string[], when = ''): Problem[] {
    const problems: Problem[] = [];
    const problem = (detail: string) => problems.push({ invariant: 'families', detail: `${this.label(d, t)}${when}: ${detail}` });
    const record = look.records.find((r) => r.tableId === t.id && r.shard === d.shard);
    if (record?.family)
      problem(`the table is READY, and its record in tablefate.shards still keeps a family: ${JSON.stringify(record.family)}`);
    if ((t.family ?? []).length > 0) problem(`the table is READY, and the catalog still keeps its family: ${JSON.stringify(t.family)}`);
    if (isView(d)) {
      const at = look.relations.get(d.oid);
      // (Recalled under a name in another schema, a view of the table's schema follows it there, and the recall says so;
      // a recall into another namespace that went unanswered may have taken it there, under its own name.)
      const moved =
        at !== undefined &&
        (this.aliases(d, answerNotes).has(`${d.kind} ${at.schema}.${at.name}`) ||
          (at.name === d.name && this.mayHaveRecalledInto(d.tableId, at.schema)));
      if (!at) problem('gone, though its table is READY');
      else if ((at.schema !== d.schema || at.name !== d.name) && !moved)
        problem(`at ${at.schema}.${at.name}, not live as ${d.schema}.${d.name} beside its READY table`);
      else if (d.depth === 1 && record && !look.reads.get(d.oid)?.has(record.oid)) {
        problem(`reads ${JSON.stringify([...(look.reads.get(d.oid) ?? [])])}, not its table's live relation (oid ${record.oid})`);
      } else if (d.kind === 'materialized view' && !look.indexes.some((i) => i.on === d.oid && i.name === d.part)) {
        problem(
          `back without its index ${d.part} (it has ${
            look.indexes
              .filter((i) => i.on === d.oid)
              .map((i) => i.name)
              .join(', ') || 'none'
          })`,
        );
      }
      return problems;
    }
    if (renamed || this.lostToRename(d)) {
      this.notLookedFor++;
      return problems;
    }
    if (d.kind === 'policy') {
      if (!look.policies.some((p) => p.on === d.oid && p.name === d.part)) problem('absent from its live table, though the table is READY');
      return problems;
    }
    const key = look.keys.find((k) => k.on === d.oid && k.name === d.part);
    if (!key) problem('absent from its live table, though the table is READY');
    else if (key.references !== record?.oid) problem(`references oid ${key.references}, not the table's (${String(record?.oid)})`);
    else if (!key.validated && !this.evidence.orphaned.has(`${d.node}/${d.oid}`)) {
      const said = [...(record.notes ?? []), ...answerNotes, ...this.recallNotes(t.id)].filter(
        (n) => n.includes(d.part!) && n.includes('NOT VALID'),
      );
      if (said.length === 0) {
        problem(
          'back NOT VALID, though no row matching no parent was ever written into its table, and no recall or record of the table says so ' +
            `(the record's notes: ${JSON.stringify(record.notes)})`,
        );
      }
    }
    return problems;
  }

  private judgeTrashed(d: Dependent, t: TableRecord, look: Look): Problem[] {
    const problems: Problem[] = [];
    const problem = (detail: string) => problems.push({ invariant: 'families', detail: `${this.label(d, t)}: ${detail}` });
    // (A view may read several shards of the table on its node: any of their records may keep it.)
    const families = look.records.filter((r) => r.tableId === t.id && r.family).map((r) => r.family!);
    if (isView(d)) {
      const at = look.relations.get(d.oid);
      if (!at) problem('gone, though its table is in the trash');
      else if (at.schema !== TRASH_SCHEMA) problem(`at ${at.schema}.${at.name}, not in ${TRASH_SCHEMA} with its TRASHED table`);
      if (!families.some((f) => f.members?.some((m) => m.oid === d.oid))) {
        problem(`not a member of the family tablefate.shards records for the table (${JSON.stringify(families)})`);
      }
      if (at?.schema === TRASH_SCHEMA && !this.namedAny(t.family ?? [], d)) {
        problem(`in the trash with its table, and the catalog's family of the table does not name it: ${JSON.stringify(t.family ?? null)}`);
      }
      return problems;
    }
    if (this.lostToRename(d)) {
      this.notLookedFor++;
      return problems;
    }
    const present =
      d.kind === 'policy'
        ? look.policies.some((p) => p.on === d.oid && p.name === d.part)
        : look.keys.some((k) => k.on === d.oid && k.name === d.part);
    if (present) problem('still on its live table, though the table is in the trash');
    if (!families.some((f) => f.detached?.some((x) => x.kind === d.kind && x.tableOid === d.oid && x.name === d.part))) {
      problem(`not recorded as detached in the family tablefate.shards records for the table (${JSON.stringify(families)})`);
    } else if (!this.namedAny(t.family ?? [], d)) {
      problem(
        `detached while its table is in the trash, and the catalog's family of the table does not name it: ${JSON.stringify(t.family ?? null)}`,
      );
    }
    return problems;
  }

  /**
   * What `d` is called now, as far as the answers say: its own name, and where a recall said it came back (a view of the
   * table's schema follows a table recalled under a name in another schema: `view a.t_v1 came back as b.t_v1`).
   */
  private aliases(d: Dependent, more: readonly string[] = []): Set<string> {
    const said = [...more, ...this.recallNotes(d.tableId)];
    const known = new Set([describe(d)]);
    for (let grew = true; grew;) {
      grew = false;
      for (const note of said) {
        for (const k of [...known]) {
          const at = note.indexOf(`${k} came back as `);
          if (at < 0) continue;
          const where = /^[^\s:,]+/.exec(note.slice(at + k.length + ' came back as '.length))?.[0];
          const to = `${d.kind} ${where ?? ''}`;
          if (where !== undefined && !known.has(to)) {
            known.add(to);
            grew = true;
          }
        }
      }
    }
    return known;
  }

  /** Whether sentences name `d` by any name it is known to have had. */
  private namedAny(said: readonly string[], d: Dependent): boolean {
    return [...this.aliases(d)].some((name) => names(said, name));
  }

  /** What the answers of the recalls of table `id` said. */
  private recallNotes(id: number): string[] {
    return this.evidence.ops.flatMap((op) =>
      op.request.kind === 'undelete' && op.outcome.kind === 'ok' && op.outcome.table.id === id ? (op.outcome.table.notes ?? []) : [],
    );
  }

  /** Why the view cannot be read where it is, or undefined when it can. */
  private async unreadable(d: Dependent, at?: { schema: string; name: string }): Promise<string | undefined> {
    const where = at ?? { schema: d.schema, name: d.name };
    const url = this.nodes.find((n) => n.node === d.node)!.url;
    const client = new Client({ connectionString: url, application_name: 'chaos checker' });
    await client.connect();
    try {
      await client.query(`SELECT count(*) FROM ${qualified(where.schema, where.name)}`);
      return undefined;
    } catch (err) {
      return `cannot be read as ${where.schema}.${where.name}: ${(err as Error).message}`;
    } finally {
      await client.end();
    }
  }

  /**
   * The drops refused HasDependents: without cascade, after the run made a dependent of the table, and taken back. The
   * drops without cascade answered TRASHED took nothing along; those with it said (their notes, the catalog's family in
   * their answer) that they took each view the run had made on the table before they were called, and each key and
   * policy (unless a recall under another name may have left it out since).
   */
  private judgeDrops(byId: ReadonlyMap<number, TableRecord>): Problem[] {
    const problems: Problem[] = [];
    const { ops, dependents } = this.evidence;
    for (const op of ops) {
      const { request, outcome } = op;
      const problem = (detail: string) => problems.push({ invariant: 'families', detail: `${describeOp(op)}: ${detail}` });
      if (request.kind === 'trash' && !request.cascade && outcome.kind === 'ok') {
        const said = [...(outcome.table.notes ?? []), ...(outcome.table.family ?? [])];
        if (tookAlong(said))
          problem(`asked for no cascade, and answered table ${outcome.table.id} TRASHED with its family: ${JSON.stringify(said)}`);
      }
      if (request.kind === 'trash' && request.cascade && outcome.kind === 'ok' && outcome.table.state === 'TRASHED') {
        const said = [...(outcome.table.notes ?? []), ...(outcome.table.family ?? [])];
        const unsaid = dependents.filter(
          (d) =>
            !d.uncertain &&
            d.tableId === outcome.table.id &&
            d.madeAt < op.startedAt &&
            (isView(d) || !this.lostToRename(d)) &&
            !this.namedAny(said, d),
        );
        if (unsaid.length > 0) {
          problem(
            `answered table ${outcome.table.id} TRASHED, saying ${JSON.stringify(said)}: not ${unsaid.map(describe).join(', ')}, ` +
              'made on it before the drop was called',
          );
        }
      }
      if (request.kind !== 'trash' || outcome.kind !== 'rejected' || outcome.type !== 'HasDependentsError') continue;
      // (A whole namespace's: judged in namespaces.ts; a table tablefate was making there meanwhile refuses it.)
      if (request.namespace !== undefined) continue;
      if (request.cascade) {
        problem(
          `answered HasDependents with cascade, though the run makes only views, keys and policies, which a cascade takes: ${outcome.message}`,
        );
        continue;
      }
      const id = op.before?.id;
      // (Dropped with others: a dependent of any of them refuses the drop; a key the run made between tables, too.)
      const named = new Set([request.table, ...(request.together ?? [])]);
      const keyed = (this.evidence.unitKeys ?? []).some(
        (k) => (k.parentId === id || named.has(k.parentName)) && !named.has(k.childName) && k.madeAt < op.endedAt,
      );
      if (!keyed && !dependents.some((d) => (d.tableId === id || named.has(d.tableName)) && d.madeAt < op.endedAt)) {
        problem(`answered HasDependents (${outcome.message}), but the run had made no dependent of ${request.table} before the answer`);
      }
      const now = id === undefined ? undefined : byId.get(id);
      if (
        id !== undefined &&
        now &&
        now.state !== 'READY' &&
        explainers(ops, 'trash', id, namesOf(ops, id, now), op.startedAt).length === 0
      ) {
        problem(`answered HasDependents (the drop taken back), but table ${id} is ${now.state} now, and no drop of it was called after`);
      }
    }
    return problems;
  }
}
