import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import type { Catalog } from '../../catalog/catalog';
import type { TableRecord } from '../../domain/table';
import { couldActAfter, describeOp } from './answers';
import type { Dependent } from './families';
import type { Problem } from './problems';
import { quoteIdent, type NodeChaosDeps, type NodeDatabase } from './rows';
import type { OpRecord } from './ops';

/**
 * A whole namespace dropped as one under chaos (issue 42 item 7). The scenario creates tables in the run's own
 * namespaces (NAMESPACE_NAMES), drops a whole one now and then (`trash({ namespace })`, `drop --namespace`), recalls a
 * table of such a drop with the others, alone, or into another of them (`newNamespace`), and purges. Here, with the
 * postgres driver, the user's side: each schema tablefate makes for them on a node (an incarnation, known by its oid)
 * is furnished at once, by plain SQL, with a sequence of its own (`chaos_tickets`, ticked all along), a function
 * (`chaos_double`) and a view on one of its tables (`chaos_ns_view`, a family member the family checks follow too).
 * The rows come from the run's inserter, as for every live table.
 *
 * The checks at rest, before and after the checker's recalls: an incarnation live under a name holds its sequence
 * (its next value past every one handed out: never reset), its function (callable) and its view (readable when its
 * table is live); one set aside (`tablefate_ns_<oid>`) holds them too, and is set aside for a table of its drop still
 * in the trash; one gone leaves no record pointing at it. A namespace's drop whose tables are all still in the trash
 * from it: each one's record names its schema set aside, which exists under `tablefate_ns_<oid>`, and the name is free
 * unless a later call may have made it again.
 */

/** The run's namespaces: the first two hold tables the scenario creates; the third is where recalls move them. */
export const NAMESPACES: readonly string[] = ['chaos_ns1', 'chaos_ns2', 'chaos_ns3'];

/** The names the scenario creates in them, with the shard count its creates usually ask for. */
export const NAMESPACE_NAMES: ReadonlyArray<readonly [string, number]> = [
  ['chaos_ns1.a', 1],
  ['chaos_ns1.b', 1],
  ['chaos_ns2.a', 1],
  ['chaos_ns2.b', 2],
];

const SEQUENCE = 'chaos_tickets';
const FUNCTION = 'chaos_double';
const VIEW = 'chaos_ns_view';
const PARKED = /^tablefate_ns_\d+$/;
const UNDEFINED_TABLE = '42P01';
const TICK_EVERY_MS: readonly [number, number] = [300, 1200];

/** A schema of one of the run's namespaces, on one node, as the run furnished it. */
export interface Incarnation {
  node: string;
  /** The name it had when the run found it. */
  namespace: string;
  oid: number;
  sequenceOid: number;
  functionOid: number;
  viewOid: number;
  /** The table the view reads, and its shard. */
  viewTableId: number;
  madeAt: number;
  /** The highest value its sequence handed out to the run. */
  ticked: number;
  /** The tables seen in it (live) or set aside with it, over the run. */
  members: Set<number>;
}

export interface NamespaceStats {
  furnished: number;
  ticks: number;
  /** Tries that made nothing, by reason. */
  missed: Map<string, number>;
}

const qualified = (schema: string, name: string) => `${quoteIdent(schema)}.${quoteIdent(name)}`;
const reason = (err: unknown) => ((err as Error).message ?? String(err)).split('\n')[0]!.replace(/\d+/g, 'N').slice(0, 100);

export class NamespaceLoad {
  readonly incarnations: Incarnation[] = [];
  readonly stats: NamespaceStats = { furnished: 0, ticks: 0, missed: new Map() };
  private stopped = false;
  private running: Promise<void> | undefined;
  private readonly clients = new Map<string, Client>();
  private next = 1;

  constructor(
    private readonly opts: NodeChaosDeps & {
      /** The view made on a table: a member of its family, for the family checks. */
      onView: (view: Dependent) => void;
    },
  ) {}

  start(): void {
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
    await Promise.all([...this.clients.values()].map((c) => c.end().catch(() => undefined)));
    this.clients.clear();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      await sleep(this.opts.rng.int(...TICK_EVERY_MS));
      if (this.stopped) return;
      for (const { node } of this.opts.nodes) {
        let client: Client | undefined;
        try {
          client = await this.clientOf(node);
          await this.turn(client, node);
        } catch (err) {
          this.miss(err);
          if (client) await this.failed(node, client, err);
        }
      }
    }
  }

  /** Furnishes the run's schemas new on `node`, and ticks the sequence of each one known there. */
  private async turn(client: Client, node: string): Promise<void> {
    const { rows } = await client.query<{ oid: string; nspname: string }>(
      'SELECT oid::int8 AS oid, nspname FROM pg_namespace WHERE nspname = ANY($1)',
      [NAMESPACES],
    );
    for (const r of rows) {
      if (this.incarnations.some((i) => i.node === node && i.oid === Number(r.oid))) continue;
      await this.furnish(client, node, Number(r.oid), r.nspname);
    }
    for (const inc of this.incarnations.filter((i) => i.node === node)) {
      try {
        const ticked = await client.query<{ v: string }>('SELECT nextval($1::oid::regclass) AS v', [inc.sequenceOid]);
        inc.ticked = Math.max(inc.ticked, Number(ticked.rows[0]!.v));
        this.stats.ticks++;
      } catch (err) {
        // Gone with its schema (purged): nothing to tick any more.
        if ((err as { code?: string }).code === undefined) throw err;
      }
      const members = await client.query<{ table_id: string }>(
        `SELECT s.table_id FROM tablefate.shards s LEFT JOIN pg_class c ON c.oid = s.table_oid
          WHERE s.catalog_id = $2 AND (c.relnamespace = $1 OR s.parked_schema->>'parked' = $3)`,
        [inc.oid, this.opts.catalogId, `tablefate_ns_${inc.oid}`],
      );
      for (const m of members.rows) inc.members.add(Number(m.table_id));
    }
  }

  /** A sequence, a function and a view on one of its tables, made in the schema in one transaction, as a user would. */
  private async furnish(client: Client, node: string, oid: number, namespace: string): Promise<void> {
    try {
      await client.query('BEGIN');
      await client.query("SET LOCAL lock_timeout = '1s'");
      const table = await client.query<{ relname: string; table_id: string; shard: number }>(
        `SELECT c.relname, s.table_id, s.shard FROM tablefate.shards s JOIN pg_class c ON c.oid = s.table_oid
          WHERE c.relnamespace = $1 AND s.catalog_id = $2 AND c.relkind = 'r' ORDER BY s.table_id, s.shard LIMIT 1`,
        [oid, this.opts.catalogId],
      );
      const base = table.rows[0];
      if (!base) {
        await client.query('ROLLBACK');
        this.count('no table of tablefate in the schema yet');
        return;
      }
      await client.query(`CREATE SEQUENCE ${qualified(namespace, SEQUENCE)} START 1000`);
      await client.query(`CREATE FUNCTION ${qualified(namespace, FUNCTION)}(x int) RETURNS int LANGUAGE sql AS 'SELECT x * 2'`);
      await client.query(`CREATE VIEW ${qualified(namespace, VIEW)} AS SELECT id, v FROM ${qualified(namespace, base.relname)}`);
      const made = await client.query<{ nsp: string | null; seq: string; fn: string; view: string; owner: string | null }>(
        `SELECT (SELECT nspname FROM pg_namespace WHERE oid = $1) AS nsp, to_regclass($2)::int8 AS seq,
                to_regprocedure($3)::oid::int8 AS fn, to_regclass($4)::int8 AS view,
                (SELECT s.table_id FROM tablefate.shards s WHERE s.table_oid = to_regclass($5) AND s.catalog_id = $6) AS owner`,
        [
          oid,
          qualified(namespace, SEQUENCE),
          `${qualified(namespace, FUNCTION)}(int)`,
          qualified(namespace, VIEW),
          qualified(namespace, base.relname),
          this.opts.catalogId,
        ],
      );
      const m = made.rows[0]!;
      if (m.nsp !== namespace || m.owner !== base.table_id) {
        await client.query('ROLLBACK');
        this.count('the schema or its table changed meanwhile');
        return;
      }
      const tableId = Number(base.table_id);
      const record = await this.opts.catalog.getTable(tableId);
      const madeAt = Date.now();
      await client.query('COMMIT');
      this.incarnations.push({
        node,
        namespace,
        oid,
        sequenceOid: Number(m.seq),
        functionOid: Number(m.fn),
        viewOid: Number(m.view),
        viewTableId: tableId,
        madeAt,
        ticked: 0,
        members: new Set([tableId]),
      });
      this.stats.furnished++;
      this.opts.onView({
        n: 1_000_000 + this.next++,
        kind: 'view',
        node,
        oid: Number(m.view),
        schema: namespace,
        name: VIEW,
        tableId,
        shard: base.shard,
        tableName: record ? `${record.namespace}.${record.name}` : `${namespace}.${base.relname}`,
        depth: 1,
        madeAt,
      });
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  private async clientOf(node: string): Promise<Client> {
    const known = this.clients.get(node);
    if (known) return known;
    const url = this.opts.nodes.find((n) => n.node === node)!.url;
    const client = new Client({ connectionString: url, application_name: 'chaos namespaces' });
    client.on('error', () => this.clients.delete(node));
    await client.connect();
    this.clients.set(node, client);
    return client;
  }

  private async failed(node: string, client: Client, err: unknown): Promise<void> {
    await client.query('ROLLBACK').catch(() => undefined);
    if ((err as { code?: string }).code === undefined) {
      this.clients.delete(node);
      await client.end().catch(() => undefined);
    }
  }

  private miss(err: unknown): void {
    if ((err as { code?: string }).code === UNDEFINED_TABLE) return this.count('tablefate.shards not there yet');
    this.count(reason(err));
  }

  private count(why: string): void {
    this.stats.missed.set(why, (this.stats.missed.get(why) ?? 0) + 1);
  }
}

/** How an incarnation is now. */
interface Look {
  name: string | null;
  sequenceIn: boolean;
  functionIn: boolean;
  viewAt: { schema: string; name: string } | null;
  /** The tables whose records say their drop set it aside. */
  parkedFor: number[];
}

async function withNode<T>(nodes: readonly NodeDatabase[], node: string, use: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: nodes.find((n) => n.node === node)!.url, application_name: 'chaos namespace checks' });
  await c.connect();
  try {
    return await use(c);
  } finally {
    await c.end();
  }
}

async function look(c: Client, inc: Incarnation, catalogId: string): Promise<Look> {
  const { rows } = await c.query<{
    name: string | null;
    seq: string | null;
    fn: string | null;
    vschema: string | null;
    vname: string | null;
  }>(
    `SELECT (SELECT nspname FROM pg_namespace WHERE oid = $1) AS name,
            (SELECT relnamespace::int8 FROM pg_class WHERE oid = $2) AS seq,
            (SELECT pronamespace::int8 FROM pg_proc WHERE oid = $3) AS fn,
            (SELECT n.nspname FROM pg_class v JOIN pg_namespace n ON n.oid = v.relnamespace WHERE v.oid = $4) AS vschema,
            (SELECT relname FROM pg_class WHERE oid = $4) AS vname`,
    [inc.oid, inc.sequenceOid, inc.functionOid, inc.viewOid],
  );
  const r = rows[0]!;
  const parked = await c.query<{ table_id: string }>(
    "SELECT table_id FROM tablefate.shards WHERE catalog_id = $1 AND parked_schema->>'parked' = $2",
    [catalogId, `tablefate_ns_${inc.oid}`],
  );
  return {
    name: r.name,
    sequenceIn: Number(r.seq) === inc.oid,
    functionIn: Number(r.fn) === inc.oid,
    viewAt: r.vschema !== null && r.vname !== null ? { schema: r.vschema, name: r.vname } : null,
    parkedFor: parked.rows.map((p) => Number(p.table_id)),
  };
}

/**
 * The checks of the run's namespaces at rest (`when`: before the checker's recalls, or after them): each incarnation as
 * its tables' states say it must be; each namespace's drop still whole in the trash with its schema set aside.
 */
export async function checkNamespaces(opts: {
  incarnations: readonly Incarnation[];
  nodes: readonly NodeDatabase[];
  catalog: Catalog;
  catalogId: string;
  ops: readonly OpRecord[];
  when: 'before the recalls' | 'after the recalls';
}): Promise<{ problems: Problem[]; summary: string }> {
  const problems: Problem[] = [];
  const counts = { live: 0, setAside: 0, gone: 0, dropsWhole: 0 };
  const tables = new Map((await opts.catalog.listTables({ includeTrashed: true })).map((t) => [t.id, t]));
  const stateOf = (id: number) => tables.get(id)?.state ?? 'not in the catalog';
  for (const inc of opts.incarnations) {
    const label = `${inc.node}: schema ${inc.namespace} (oid ${inc.oid}, furnished ${new Date(inc.madeAt).toISOString()}) ${opts.when}`;
    const problem = (detail: string) => problems.push({ invariant: 'namespaces', detail: `${label}: ${detail}` });
    await withNode(opts.nodes, inc.node, async (c) => {
      const now = await look(c, inc, opts.catalogId);
      const members = [...inc.members].map((id) => `${id} ${stateOf(id)}`).join(', ');
      if (now.name === null) {
        counts.gone++;
        if (now.parkedFor.length > 0)
          problem(`gone, and the records of tables ${now.parkedFor.join(', ')} still say their drop set it aside`);
        const waiting = now.parkedFor.filter((id) => tables.get(id)?.state === 'TRASHED');
        if (waiting.length > 0) problem(`gone while tables ${waiting.join(', ')} of its drop wait in the trash (members seen: ${members})`);
        return;
      }
      if (!now.sequenceIn || !now.functionIn) {
        problem(
          `named ${now.name}, and its sequence ${now.sequenceIn ? 'is' : 'is not'} in it, its function ${now.functionIn ? 'is' : 'is not'}`,
        );
      }
      if (PARKED.test(now.name)) {
        counts.setAside++;
        if (now.name !== `tablefate_ns_${inc.oid}`) problem(`set aside under ${now.name}, not tablefate_ns_${inc.oid}`);
        const waiting = now.parkedFor.filter((id) => tables.get(id)?.state === 'TRASHED');
        if (waiting.length === 0) {
          problem(
            `set aside as ${now.name} with no table of its drop in the trash to bring it back or purge it with ` +
              `(recorded for ${JSON.stringify(now.parkedFor.map((id) => `${id} ${stateOf(id)}`))}; members seen: ${members})`,
          );
        }
        return;
      }
      counts.live++;
      try {
        const ticked = await c.query<{ v: string }>('SELECT nextval($1::oid::regclass) AS v', [inc.sequenceOid]);
        const v = Number(ticked.rows[0]!.v);
        if (v <= inc.ticked) problem(`its sequence gave ${v}, though it had given ${inc.ticked} already: reset`);
      } catch (err) {
        problem(`its sequence cannot be ticked: ${(err as Error).message}`);
      }
      try {
        const d = await c.query<{ d: number }>(`SELECT ${qualified(now.name, FUNCTION)}(21) AS d`);
        if (d.rows[0]!.d !== 42) problem(`${now.name}.${FUNCTION}(21) answered ${d.rows[0]!.d}`);
      } catch (err) {
        problem(`its function cannot be called as ${now.name}.${FUNCTION}: ${(err as Error).message}`);
      }
      const base = tables.get(inc.viewTableId);
      if (base?.state === 'READY' && now.viewAt) {
        try {
          await c.query(`SELECT count(*) FROM ${qualified(now.viewAt.schema, now.viewAt.name)}`);
        } catch (err) {
          problem(
            `its view (on table ${inc.viewTableId}, READY) cannot be read as ${now.viewAt.schema}.${now.viewAt.name}: ${(err as Error).message}`,
          );
        }
      }
    });
  }
  // A namespace's drop answered, whose tables are all still in the trash from it: the schema is set aside on each node.
  if (opts.when === 'before the recalls') {
    for (const op of opts.ops) {
      if (op.request.kind !== 'trash' || op.request.namespace === undefined || op.outcome.kind !== 'ok') continue;
      const namespace = op.request.namespace;
      const answer = op.outcome.table;
      const ids = [answer.id, ...(answer.droppedWith ?? [])];
      const problem = (detail: string) => problems.push({ invariant: 'namespaces', detail: `${describeOp(op)}: ${detail}` });
      if (answer.namespace !== namespace) problem(`answered table ${answer.id} of namespace ${answer.namespace}`);
      if (Math.min(...ids) !== answer.id) problem(`answered table ${answer.id}, not the lowest id of ${JSON.stringify(ids)}`);
      const droppedAt = answer.droppedAt === null ? null : Date.parse(answer.droppedAt);
      const members = ids.map((id) => tables.get(id));
      const whole = members.every((t) => t?.state === 'TRASHED' && t.droppedAt === droppedAt);
      if (
        !whole ||
        opts.ops.some((o) => o.request.kind === 'undelete' && ids.includes(o.request.tableId) && couldActAfter(o, op.startedAt))
      )
        continue;
      counts.dropsWhole++;
      // (The name made again by a later call: a create in it, a recall into it.)
      const remade = opts.ops.some(
        (o) =>
          o.startedAt > op.startedAt &&
          o.outcome.kind !== 'rejected' &&
          ((o.request.kind === 'create' && o.request.table.startsWith(`${namespace}.`)) || o.request.kind === 'undelete'),
      );
      const nodes = new Set(members.flatMap((t) => t!.placement.map((p) => p.node)));
      for (const node of nodes) {
        await withNode(opts.nodes, node, async (c) => {
          const { rows } = await c.query<{ table_id: string; parked: string | null; name: string | null }>(
            `SELECT s.table_id, s.parked_schema->>'parked' AS parked,
                    (SELECT n.nspname FROM pg_namespace n WHERE n.nspname = s.parked_schema->>'parked') AS name
               FROM tablefate.shards s WHERE s.catalog_id = $1 AND s.table_id = ANY($2::int8[])`,
            [opts.catalogId, ids],
          );
          for (const r of rows) {
            if (r.parked === null) problem(`${node}: table ${r.table_id}, in the trash from it, has no schema set aside in its record`);
            else if (r.name === null)
              problem(`${node}: table ${r.table_id}'s record says ${r.parked} holds its schema, which is not there`);
          }
          const taken = await c.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [namespace]);
          if (taken.rows.length > 0 && !remade) {
            problem(
              `${node}: all of ${JSON.stringify(ids)} are in the trash from it, and a schema ${namespace} is there, no later call made it`,
            );
          }
        });
      }
    }
  }
  const drops = opts.ops.filter((op) => op.request.kind === 'trash' && op.request.namespace !== undefined);
  const judged = opts.ops.filter(
    (op) =>
      op.request.kind === 'trash' &&
      op.request.namespace !== undefined &&
      op.outcome.kind === 'rejected' &&
      op.outcome.type === 'HasDependentsError',
  );
  for (const op of judged) {
    if (op.outcome.kind !== 'rejected') continue;
    // The run makes no table by hand in its namespaces: a table tablefate was making or bringing back there meanwhile.
    if (!/still holds tables its drop does not take/.test(op.outcome.message)) {
      problems.push({
        invariant: 'namespaces',
        detail: `${describeOp(op)}: refused HasDependents, which its implied cascade takes: ${op.outcome.message}`,
      });
    }
  }
  return {
    problems,
    summary:
      `namespaces ${opts.when}: ${drops.length} drops of a namespace (${drops.filter((op) => op.outcome.kind === 'ok').length} answered, ` +
      `${judged.length} refused for a table not taken), ${opts.incarnations.length} schemas furnished (${counts.live} live, ` +
      `${counts.setAside} set aside, ${counts.gone} gone), ${counts.dropsWhole} drops whole in the trash`,
  };
}

/** Whether `table` is of the run's namespaces (its schema set aside with a drop of one). */
export const inRunNamespace = (table: Pick<TableRecord, 'namespace'>): boolean => NAMESPACES.includes(table.namespace);
