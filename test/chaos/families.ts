import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import type { TableInfo } from '../../domain/table';
import { liveTableOf, quoteIdent, type NodeChaosDeps } from './rows';

/**
 * Families under chaos (postgres driver; issue 42, `drop --cascade`): while the operations run, the user gives some
 * live tables dependents by plain SQL on the table's node, as anyone would: a view on the table, a view on that view,
 * a materialized view with an index, and a live table of the run's own (`chaos_dep.t<n>`, never tablefate's) with a
 * foreign key to the table and now and then a row-level security policy that reads it. Right after a create answers,
 * and at random points on a READY table. Each one is written down with the table it depends on, asked of PostgreSQL in
 * the transaction that made it (the row of `tablefate.shards` of the table the name held then), so that the checks at
 * the end (family-checks.ts) know where each must be: live with its READY table, in the trash with its TRASHED one,
 * gone with its purged one. Now and then a row whose key matches nothing is written into a `chaos_dep` table: while
 * its parent is in the trash the key is detached and the row goes in, and the parent's recall must leave the key back
 * NOT VALID and say so.
 */

export type DependentKind = 'view' | 'materialized view' | 'foreign key' | 'policy';

/** A dependent the run made, on the shard table of `tableId` and `shard`. */
export interface Dependent {
  /** Unique over the run: its names are made of it, so no two meet. */
  n: number;
  kind: DependentKind;
  node: string;
  /** A view's oid; for a foreign key or a policy, the oid of the run's own live table that holds it. */
  oid: number;
  schema: string;
  name: string;
  /** A key's or a policy's name; a materialized view's unique index. */
  part?: string;
  tableId: number;
  shard: number;
  /** The table's tablefate name when it was made: a key or a policy names it by its live name then. */
  tableName: string;
  /** 1: reads the table; 2: reads such a view. */
  depth: number;
  /** Just before its COMMIT: a drop that saw it answered after this. */
  madeAt: number;
  /** Its COMMIT went unheard: it may be there or not, and is not judged. */
  uncertain?: true;
}

export interface FamilyStats {
  made: Record<DependentKind, number>;
  viewsOnViews: number;
  /** Tries that made nothing, by reason (the name had no table any more, a lock not had in time, ...). */
  missed: Map<string, number>;
  /** Rows that match no parent: refused by the key, or committed while the key was detached. */
  orphans: { committed: number; refused: number };
}

/** How often the user adds something to a READY table; how often a create's answer is followed by a dependent at once. */
const GROW_EVERY_MS: readonly [number, number] = [400, 1800];
const AFTER_CREATE_CHANCE = 0.6;
/** A family of a few: a drop has several kinds to take along, and a run many families. */
const MOST_PER_TABLE = 5;
/**
 * Of the loop's turns, how many write a row that matches no parent, rather than a dependent: few, since each one leaves
 * its key NOT VALID for good once its parent was in the trash, and a key validated is what a recall promises otherwise.
 */
const ORPHAN_CHANCE = 0.06;
/**
 * How often a turn aims at a table a drop is taking out of the live area (DRAINING, TRASHING), or a truncate is emptying
 * (TRUNCATING), when there is one: its name still holds the live table until the move commits, and a user who does not
 * know adds a view just then (a truncate that meets it must be refused, nothing changed).
 */
const LEAVING_CHANCE = 0.5;
/** Of the dependents made, how often a view on one of the table's views (depth 2) when it has one. */
const VIEW_ON_VIEW_CHANCE = 0.35;
const KIND_WEIGHTS = { view: 5, 'materialized view': 2, 'foreign key': 4 } as const;
/** How often a `chaos_dep` table also gets a policy that reads the table. */
const POLICY_CHANCE = 0.3;
/**
 * The user's transaction waits a moment for a busy table, no longer (a drop that drains it must not wait on it for
 * long), and sometimes does more before its COMMIT: a drop that meets it waits, or goes on without what it makes.
 */
const LOCK_TIMEOUT = '1s';
const LINGER_CHANCE = 0.3;
const LINGER_MS: readonly [number, number] = [10, 150];

export const DEPENDENT_SCHEMA = 'chaos_dep';
const UNDEFINED_TABLE = '42P01';
const FOREIGN_KEY_VIOLATION = '23503';

const qualified = (schema: string, name: string) => `${quoteIdent(schema)}.${quoteIdent(name)}`;

/** A READY table as the catalog or a create's answer has it. */
type Target = Pick<TableInfo, 'id' | 'namespace' | 'name' | 'shards' | 'placement'>;

/** What a try made, before its COMMIT; or why it made nothing. */
type Made = Array<Omit<Dependent, 'madeAt' | 'node'>> | { nothing: string };

export class FamilyMaker {
  readonly dependents: Dependent[] = [];
  /** `<node>/<oid>` of each `chaos_dep` table with a row committed that matches no parent. */
  readonly orphaned = new Set<string>();
  readonly stats: FamilyStats = {
    made: { view: 0, 'materialized view': 0, 'foreign key': 0, policy: 0 },
    viewsOnViews: 0,
    missed: new Map(),
    orphans: { committed: 0, refused: 0 },
  };
  private next = 1;
  private stopped = false;
  private running: Promise<void> | undefined;
  /** One change at a time: the loop's and those that follow a create's answer. */
  private queue: Promise<void> = Promise.resolve();
  private readonly clients = new Map<string, Client>();

  constructor(private readonly opts: NodeChaosDeps) {}

  start(): void {
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
    await this.queue;
    await Promise.all([...this.clients.values()].map((c) => c.end().catch(() => undefined)));
    this.clients.clear();
  }

  /** A create answered: often a dependent at once, as the user who asked for the table would add one. Does not wait for it. */
  afterCreate(table: TableInfo): void {
    if (this.stopped || !this.opts.rng.chance(AFTER_CREATE_CHANCE)) return;
    void this.serially(() => this.grow(table));
  }

  private serially(change: () => Promise<void>): Promise<void> {
    const done = this.queue.then(change).catch((err: unknown) => this.miss(err));
    this.queue = done;
    return done;
  }

  private async loop(): Promise<void> {
    const { rng, catalog } = this.opts;
    while (!this.stopped) {
      await sleep(rng.int(...GROW_EVERY_MS));
      if (this.stopped) return;
      if (rng.chance(ORPHAN_CHANCE)) {
        await this.serially(() => this.writeOrphan());
        continue;
      }
      const live = await catalog.listTables({ includeTrashed: false }).catch(() => []);
      const ready = live.filter((t) => t.state === 'READY');
      const leaving = live.filter((t) => t.state === 'DRAINING' || t.state === 'TRASHING' || t.state === 'TRUNCATING');
      const aimed = leaving.length > 0 && rng.chance(LEAVING_CHANCE) ? leaving : ready;
      if (aimed.length === 0) continue;
      const table = rng.pick(aimed);
      await this.serially(() => this.grow({ ...table, shards: table.params.shards }));
    }
  }

  /** One more dependent of `table` (of one of its shards): a view, a view on one of its views, a materialized view or a key. */
  private async grow(table: Target): Promise<void> {
    const { rng } = this.opts;
    const own = this.dependents.filter((d) => d.tableId === table.id);
    if (own.length >= MOST_PER_TABLE) return;
    const { shard, node } = rng.pick(table.placement);
    const live = liveTableOf({ ...table, params: { shards: table.shards } }, shard);
    const tableName = `${table.namespace}.${table.name}`;
    const bases = own.filter(
      (d) => (d.kind === 'view' || d.kind === 'materialized view') && d.node === node && d.shard === shard && !d.uncertain,
    );
    const n = this.next++;
    const of = { n, tableId: table.id, shard, tableName };
    const linger = rng.chance(LINGER_CHANCE) ? rng.int(...LINGER_MS) : 0;
    if (bases.length > 0 && rng.chance(VIEW_ON_VIEW_CHANCE)) {
      const base = rng.pick(bases);
      const name = `${live.table}_w${n}`;
      await this.attempt(
        node,
        async (c) => {
          await c.query(`CREATE VIEW ${qualified(base.schema, name)} AS SELECT count(*) AS n FROM ${qualified(base.schema, base.name)}`);
          // The base view is the one the run made (a view never changes its table): its table's, then.
          if ((await oidOf(c, base.schema, base.name)) !== base.oid) return { nothing: 'the base view is another relation' };
          return [{ ...of, kind: 'view', oid: (await oidOf(c, base.schema, name))!, schema: base.schema, name, depth: base.depth + 1 }];
        },
        linger,
      );
      return;
    }
    const kind = rng.weighted(KIND_WEIGHTS);
    const policy = kind === 'foreign key' && rng.chance(POLICY_CHANCE);
    await this.attempt(
      node,
      async (c) => {
        const on = qualified(live.schema, live.table);
        let made: Made;
        if (kind === 'view') {
          const name = `${live.table}_v${n}`;
          await c.query(`CREATE VIEW ${qualified(live.schema, name)} AS SELECT id, client, v FROM ${on} WHERE id % 2 = 0`);
          made = [{ ...of, kind, oid: (await oidOf(c, live.schema, name))!, schema: live.schema, name, depth: 1 }];
        } else if (kind === 'materialized view') {
          const name = `${live.table}_m${n}`;
          const index = `${name}_by_client`;
          await c.query(
            `CREATE MATERIALIZED VIEW ${qualified(live.schema, name)} AS SELECT client, count(*) AS n FROM ${on} GROUP BY client`,
          );
          await c.query(`CREATE UNIQUE INDEX ${quoteIdent(index)} ON ${qualified(live.schema, name)} (client)`);
          made = [{ ...of, kind, oid: (await oidOf(c, live.schema, name))!, schema: live.schema, name, part: index, depth: 1 }];
        } else {
          const name = `t${n}`;
          const key = `${name}_ref_fkey`;
          const dep = qualified(DEPENDENT_SCHEMA, name);
          await c.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(DEPENDENT_SCHEMA)}`);
          await c.query(
            `CREATE TABLE ${dep} (id bigint PRIMARY KEY, ref bigint CONSTRAINT ${quoteIdent(key)} REFERENCES ${on} (id), note text)`,
          );
          await c.query(`INSERT INTO ${dep} (id, ref, note) SELECT id, id, 'child of ' || id FROM ${on} ORDER BY id LIMIT 3`);
          const oid = (await oidOf(c, DEPENDENT_SCHEMA, name))!;
          made = [{ ...of, kind, oid, schema: DEPENDENT_SCHEMA, name, part: key, depth: 1 }];
          if (policy) {
            const known = `${name}_known`;
            await c.query(`ALTER TABLE ${dep} ENABLE ROW LEVEL SECURITY`);
            await c.query(`CREATE POLICY ${quoteIdent(known)} ON ${dep} USING (ref IN (SELECT id FROM ${on}))`);
            made.push({ ...of, kind: 'policy', oid, schema: DEPENDENT_SCHEMA, name, part: known, depth: 1 });
          }
        }
        // Whose table the name held, under the lock the statements took on it: no move can change it before the COMMIT.
        const owner = await c.query<{ table_id: string; shard: number }>(
          'SELECT table_id, shard FROM tablefate.shards WHERE table_oid = to_regclass($1) AND catalog_id = $2',
          [on, this.opts.catalogId],
        );
        const found = owner.rows[0];
        if (!found) return { nothing: 'the name is a table tablefate did not place' };
        if (Number(found.table_id) !== table.id || found.shard !== shard) return { nothing: "the name is another table's by now" };
        return made;
      },
      linger,
    );
  }

  /** A row in one of the run's `chaos_dep` tables whose key matches no parent row: refused, unless the key is detached. */
  private async writeOrphan(): Promise<void> {
    const keys = this.dependents.filter((d) => d.kind === 'foreign key' && !d.uncertain);
    if (keys.length === 0) return;
    const key = this.opts.rng.pick(keys);
    const n = this.next++;
    const client = await this.clientOf(key.node);
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL lock_timeout = '${LOCK_TIMEOUT}'`);
      await client.query(`INSERT INTO ${qualified(key.schema, key.name)} (id, ref, note) VALUES ($1, $2, 'matches no parent')`, [
        1e12 + n,
        -n,
      ]);
      // Written down before the COMMIT: one whose COMMIT went unheard may be there, and explains a key left NOT VALID.
      this.orphaned.add(`${key.node}/${key.oid}`);
      await client.query('COMMIT');
      this.stats.orphans.committed++;
    } catch (err) {
      await this.endFailed(client, key.node, err);
      if ((err as { code?: string }).code === FOREIGN_KEY_VIOLATION) this.stats.orphans.refused++;
      else this.miss(err);
    }
  }

  /** Runs `statements` in a transaction of the node's, and writes down what they made once it is committed. */
  private async attempt(node: string, statements: (c: Client) => Promise<Made>, lingerMs = 0): Promise<void> {
    const client = await this.clientOf(node);
    let committing: Dependent[] | undefined;
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL lock_timeout = '${LOCK_TIMEOUT}'`);
      const made = await statements(client);
      if ('nothing' in made) {
        await client.query('ROLLBACK');
        this.count(made.nothing);
        return;
      }
      if (lingerMs > 0) await client.query('SELECT pg_sleep($1)', [lingerMs / 1000]);
      committing = made.map((d) => ({ ...d, node, madeAt: Date.now() }));
      await client.query('COMMIT');
      this.dependents.push(...committing);
      for (const d of committing) this.stats.made[d.kind]++;
      this.stats.viewsOnViews += committing.filter((d) => d.depth > 1).length;
    } catch (err) {
      if (committing) this.dependents.push(...committing.map((d): Dependent => ({ ...d, uncertain: true })));
      await this.endFailed(client, node, err);
      this.miss(err);
    }
  }

  private async endFailed(client: Client, node: string, err: unknown): Promise<void> {
    await client.query('ROLLBACK').catch(() => undefined);
    // No SQLSTATE: the connection itself failed; a new one next time.
    if ((err as { code?: string }).code === undefined) {
      this.clients.delete(node);
      await client.end().catch(() => undefined);
    }
  }

  private async clientOf(node: string): Promise<Client> {
    const known = this.clients.get(node);
    if (known) return known;
    const url = this.opts.nodes.find((n) => n.node === node)?.url;
    if (!url) throw new Error(`no database for ${node}`);
    const client = new Client({ connectionString: url, application_name: 'chaos families' });
    client.on('error', () => this.clients.delete(node));
    await client.connect();
    this.clients.set(node, client);
    return client;
  }

  private miss(err: unknown): void {
    const code = (err as { code?: string }).code;
    if (code === UNDEFINED_TABLE) return this.count('the name had no table (dropped meanwhile)');
    this.count((err as Error).message?.split('\n')[0]?.replace(/\d+/g, 'N') ?? String(err));
  }

  private count(reason: string): void {
    this.stats.missed.set(reason, (this.stats.missed.get(reason) ?? 0) + 1);
  }
}

async function oidOf(c: Client, schema: string, name: string): Promise<number | undefined> {
  const { rows } = await c.query<{ oid: string | null }>('SELECT to_regclass($1)::int8 AS oid', [qualified(schema, name)]);
  return rows[0]?.oid === null || rows[0]?.oid === undefined ? undefined : Number(rows[0].oid);
}
