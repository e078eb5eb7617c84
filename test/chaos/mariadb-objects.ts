import { setTimeout as sleep } from 'node:timers/promises';
import type { Connection } from 'mariadb';
import type { Catalog } from '../../catalog/catalog';
import type { TableInfo, TableRecord } from '../../domain/table';
import { OWN_DATABASE } from '../../storage/mariadb-record';
import { qualified } from '../../storage/mariadb-session';
import { identityOf } from './mariadb-rows';
import { WORKER_ACCOUNT, withMariadb, type MariadbNode } from './mariadb-servers';
import type { OpRecord } from './ops';
import type { Problem } from './problems';
import type { Random } from './random';
import { liveTableOf } from './rows';

/**
 * MariaDB's own objects on the tables under chaos (`--driver mariadb`): while the operations run, the user gives some
 * live tables, by plain SQL as root, a trigger (BEFORE INSERT, defined as the worker's account so that the worker may
 * make it again: mariadb-kept.ts) or another table's foreign key to it (a table of the user's own in the same database,
 * `chaos_ref_<n>`). Right after a create answers, and at random points on a READY table, or on one a drop is taking out of
 * the live area (its name still holds it while the drop drains it). The table's metadata lock is
 * held (LOCK TABLES ... WRITE) while it is made, and the table's InnoDB id read under it, so that the run knows which
 * of tablefate's tables (tablefate.shards) it is on.
 *
 * The driver takes them off on a drop (keys other tables hold only with cascade; without, the drop is refused
 * HasDependents) and puts them back on a recall: the checks (ObjectChecks) want each one on its table while the table is
 * live, off it and remembered by its record while it is in the trash, and back (a trigger firing again) after the
 * checker's recall.
 */

export type ObjectKind = 'trigger' | 'foreign key';

/** A trigger or a key the run made, on shard `shard` of table `tableId`. */
export interface MadeObject {
  /** Unique over the run: its names are made of it. */
  n: number;
  kind: ObjectKind;
  node: string;
  tableId: number;
  shard: number;
  /** The trigger's name, or the key's constraint name. */
  name: string;
  /** The database it was made in: the table's then (a trigger's), the child table's (a key's). */
  database: string;
  /** A trigger's statement, as made. */
  statement?: string;
  /** A key's table (the user's): it references the shard's table. */
  child?: { database: string; table: string };
  madeAt: number;
  /** Its statement's answer went unheard (a cut, a restart): it may be there or not, and is not judged. */
  uncertain?: true;
}

export interface ObjectStats {
  made: Record<ObjectKind, number>;
  /** Tries that made nothing, by reason. */
  missed: Map<string, number>;
}

const GROW_EVERY_MS: readonly [number, number] = [700, 2500];
const AFTER_CREATE_CHANCE = 0.5;
/** A table's shard has at most one trigger of the run's and two keys to it: simple families, many of them. */
const MOST: Record<ObjectKind, number> = { trigger: 1, 'foreign key': 2 };
const TRIGGER_CHANCE = 0.5;
/**
 * How often a turn aims at a table a drop is taking out of the live area (DRAINING, TRASHING), when there is one: its
 * name holds the live table until the drop renames it, and a user who does not know adds a trigger or a key just then.
 */
const LEAVING_CHANCE = 0.4;
/** Server errors that end the session under a statement (killed, shut down): whether it was made is not known. */
const SESSION_ENDED = new Set([1053, 1927]);

const reason = (err: unknown) => ((err as Error).message ?? String(err)).split('\n')[0]!.replace(/\d+/g, 'N').slice(0, 120);

type Target = Pick<TableInfo, 'id' | 'namespace' | 'name' | 'shards' | 'placement'>;

export class ObjectMaker {
  readonly objects: MadeObject[] = [];
  readonly stats: ObjectStats = { made: { trigger: 0, 'foreign key': 0 }, missed: new Map() };
  private next = 1;
  private stopped = false;
  private running: Promise<void> | undefined;
  private queue: Promise<void> = Promise.resolve();

  constructor(private readonly o: { nodes: readonly MariadbNode[]; catalog: Catalog; catalogId: string; rng: Random }) {}

  /** A number for the next object's names (the hand-made table's take theirs here too). */
  nextNumber(): number {
    return this.next++;
  }

  start(): void {
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
    await this.queue;
  }

  /** A create answered: often an object at once, as the user who asked for the table would add one. */
  afterCreate(table: TableInfo): void {
    if (this.stopped || !this.o.rng.chance(AFTER_CREATE_CHANCE)) return;
    void this.serially(() => this.grow(table));
  }

  private serially(change: () => Promise<void>): Promise<void> {
    const done = this.queue.then(change).catch((err: unknown) => this.miss(err));
    this.queue = done;
    return done;
  }

  private miss(err: unknown): void {
    const why = reason(err);
    this.stats.missed.set(why, (this.stats.missed.get(why) ?? 0) + 1);
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      await sleep(this.o.rng.int(...GROW_EVERY_MS));
      if (this.stopped) return;
      const tables = await this.o.catalog.listTables({ includeTrashed: false }).catch(() => []);
      const ready = tables.filter((t) => t.state === 'READY');
      const leaving = tables.filter((t) => t.state === 'DRAINING' || t.state === 'TRASHING');
      const aim = leaving.length > 0 && this.o.rng.chance(LEAVING_CHANCE) ? leaving : ready;
      if (aim.length === 0) continue;
      const table = this.o.rng.pick(aim);
      await this.serially(() => this.grow({ ...table, shards: table.params.shards }));
    }
  }

  private async grow(table: Target): Promise<void> {
    const { rng } = this.o;
    const { shard, node } = rng.pick(table.placement);
    const has = (kind: ObjectKind) => this.objects.filter((x) => x.tableId === table.id && x.shard === shard && x.kind === kind).length;
    let kind: ObjectKind = rng.chance(TRIGGER_CHANCE) ? 'trigger' : 'foreign key';
    if (has(kind) >= MOST[kind]) kind = kind === 'trigger' ? 'foreign key' : 'trigger';
    if (has(kind) >= MOST[kind]) return;
    const live = liveTableOf({ ...table, params: { shards: table.shards } }, shard);
    const url = this.o.nodes.find((x) => x.node === node)!.rootUrl;
    const n = this.nextNumber();
    await withMariadb(url, (c) =>
      kind === 'trigger' ? this.trigger(c, n, node, live.schema, live.table) : this.key(c, n, node, live.schema, live.table),
    );
  }

  /** A BEFORE INSERT trigger that fills a missing `v` with its own name: the checker sees it fire. */
  private async trigger(c: Connection, n: number, node: string, database: string, table: string): Promise<void> {
    const name = `chaos_trg_${n}`;
    const statement = `SET NEW.v = IFNULL(NEW.v, '${name}')`;
    await this.underLock(c, [qualified(database, table)], database, table, node, async (on) => {
      const made: MadeObject = { n, kind: 'trigger', node, ...on, name, database, statement, madeAt: Date.now() };
      await this.making(made, () =>
        c.query(
          `CREATE DEFINER='${WORKER_ACCOUNT}'@'%' TRIGGER ${qualified(database, name)} BEFORE INSERT ON ${qualified(database, table)} FOR EACH ROW ${statement}`,
        ),
      );
    });
  }

  /** A table of the user's, `chaos_ref_<n>` beside the shard's table, with a key to it (made with checks off: no copy). */
  private async key(c: Connection, n: number, node: string, database: string, table: string): Promise<void> {
    const child = { database, table: `chaos_ref_${n}` };
    const name = `chaos_fk_${n}`;
    await c.query(`CREATE TABLE ${qualified(child.database, child.table)} (id BIGINT PRIMARY KEY, parent_id BIGINT)`);
    let made = false;
    try {
      await c.query('SET SESSION foreign_key_checks = 0');
      await this.underLock(c, [qualified(database, table), qualified(child.database, child.table)], database, table, node, async (on) => {
        const object: MadeObject = { n, kind: 'foreign key', node, ...on, name, database, child, madeAt: Date.now() };
        await this.making(object, () =>
          c.query(
            `ALTER TABLE ${qualified(child.database, child.table)} ADD CONSTRAINT ${name} FOREIGN KEY (parent_id) REFERENCES ${qualified(database, table)} (id)`,
          ),
        );
        made = true;
      });
    } finally {
      // (A table of no use, its key not made: gone again, as the user would clean up.)
      if (!made) await c.query(`DROP TABLE IF EXISTS ${qualified(child.database, child.table)}`).catch(() => undefined);
    }
  }

  /**
   * Runs `make` with the shard's table (and `others`) locked, the table's InnoDB id read under the lock and looked up in
   * tablefate.shards after: which table the object went on. Waits a second for the lock at most (a drop drains with
   * NOWAIT, and the user gives up rather than hold it up).
   */
  private async underLock(
    c: Connection,
    tables: string[],
    database: string,
    table: string,
    node: string,
    make: (on: { tableId: number; shard: number }) => Promise<void>,
  ): Promise<void> {
    await c.query('SET SESSION lock_wait_timeout = 1');
    await c.query(`LOCK TABLES ${tables.map((t) => `${t} WRITE`).join(', ')}`);
    let identity: number | null;
    try {
      identity = await identityOf(c, database, table);
    } catch (err) {
      await c.query('UNLOCK TABLES');
      throw err;
    }
    // (Under LOCK TABLES only the locked tables can be read: the record is read before, by identity, which no rename changes.)
    const [record] =
      identity === null
        ? []
        : await withMariadb(this.o.nodes.find((x) => x.node === node)!.rootUrl, (other) =>
            other.query<Array<{ table_id: number; shard: number }>>(
              `SELECT table_id, shard FROM ${OWN_DATABASE}.shards WHERE identity = ? AND catalog_id = ?`,
              [identity, this.o.catalogId],
            ),
          );
    try {
      if (!record) throw new Error(`${database}.${table} is no table tablefate placed (no record of InnoDB id ${String(identity)})`);
      await make({ tableId: Number(record.table_id), shard: record.shard });
    } finally {
      await c.query('UNLOCK TABLES').catch(() => undefined);
    }
  }

  /** Makes an object and writes it down; its answer unheard, written down as uncertain. */
  private async making(object: MadeObject, make: () => Promise<unknown>): Promise<void> {
    try {
      await make();
    } catch (err) {
      // (The server refused it: nothing was made. No answer, or the session ended under it: it may have been.)
      const errno = (err as { errno?: number }).errno;
      if (errno !== undefined && errno < 2000 && !SESSION_ENDED.has(errno)) throw err;
      this.objects.push({ ...object, uncertain: true });
      throw err;
    }
    this.objects.push(object);
    this.stats.made[object.kind]++;
  }
}

/** A trigger or a key as the node holds it now. */
export interface TriggerSeen {
  database: string;
  name: string;
  table: string;
  statement: string;
}
export interface KeySeen {
  database: string;
  table: string;
  name: string;
  referencedDatabase: string;
  referencedTable: string;
}

/** What a shard's record keeps of what was taken off its table (mariadb-kept.ts's KeptObjects, the names only). */
export interface KeptNames {
  triggers: string[];
  referencing: string[];
}

/** The run's objects on a node, as it holds them now. */
export interface Seen {
  triggers: TriggerSeen[];
  keys: KeySeen[];
}

/** Where the run's objects are on a node: its triggers and keys named chaos_*. */
export async function objectsOn(url: string): Promise<Seen> {
  return withMariadb(url, async (c) => ({
    triggers: await c.query<TriggerSeen[]>(
      `SELECT TRIGGER_SCHEMA AS \`database\`, TRIGGER_NAME AS name, EVENT_OBJECT_TABLE AS \`table\`, ACTION_STATEMENT AS statement
         FROM information_schema.TRIGGERS WHERE TRIGGER_NAME LIKE 'chaos\\_trg\\_%'`,
    ),
    keys: await c.query<KeySeen[]>(
      `SELECT TABLE_SCHEMA AS \`database\`, TABLE_NAME AS \`table\`, CONSTRAINT_NAME AS name,
              REFERENCED_TABLE_SCHEMA AS referencedDatabase, REFERENCED_TABLE_NAME AS referencedTable
         FROM information_schema.KEY_COLUMN_USAGE
        WHERE REFERENCED_TABLE_NAME IS NOT NULL AND CONSTRAINT_NAME LIKE 'chaos\\_fk\\_%'`,
    ),
  }));
}

export const describeObject = (x: MadeObject) => `${x.kind} ${x.database}.${x.name} (made on shard ${x.shard} on ${x.node})`;

/** The object as the node holds it, if it does. */
function foundOf(x: MadeObject, on: Seen): TriggerSeen | KeySeen | undefined {
  return x.kind === 'trigger'
    ? on.triggers.find((s) => s.name === x.name && s.database === x.database)
    : on.keys.find((s) => s.name === x.name && s.database === x.child?.database && s.table === x.child.table);
}

/** What is wrong with an object of a table live as `live`: gone, or not on it as made; undefined when it is on it. */
export function notOnLive(x: MadeObject, live: { schema: string; table: string }, on: Seen): string | undefined {
  const found = foundOf(x, on);
  const what = describeObject(x);
  if (!found) return `${what} is gone, while the table is live as ${live.schema}.${live.table}`;
  if ('statement' in found) {
    if (found.database !== live.schema || found.table !== live.table || found.statement !== x.statement)
      return `${what} is on ${found.database}.${found.table} (${found.statement}), not on ${live.schema}.${live.table} as made`;
  } else if (found.referencedDatabase !== live.schema || found.referencedTable !== live.table) {
    return `${what} references ${found.referencedDatabase}.${found.referencedTable}, not the table live as ${live.schema}.${live.table}`;
  }
  return undefined;
}

/**
 * Whether `trigger` fires on the table live as `live`: a row without `v`, in a transaction taken back (the trigger fills
 * it, and nothing stays). Undefined when it does; else what it did.
 */
export async function triggerDoesNotFire(
  url: string,
  trigger: MadeObject,
  live: { schema: string; table: string },
): Promise<string | undefined> {
  const table = qualified(live.schema, live.table);
  const v = await withMariadb(url, async (c) => {
    await c.query('SET SESSION lock_wait_timeout = 2, innodb_lock_wait_timeout = 2');
    await c.query('START TRANSACTION');
    try {
      await c.query(`INSERT INTO ${table} (id, client, v) VALUES (?, 'the checker', NULL)`, [-trigger.n]);
      const [row] = await c.query<Array<{ v: string | null }>>(`SELECT v FROM ${table} WHERE id = ?`, [-trigger.n]);
      return row?.v ?? null;
    } finally {
      await c.query('ROLLBACK');
    }
  });
  return v === trigger.name ? undefined : `trigger ${trigger.name} is on ${live.schema}.${live.table} but did not fire (v ${String(v)})`;
}

/**
 * The run's objects judged against where their tables are: on a live table, each one on it (a key on its child,
 * referencing the table's live name); on a trashed or purged one, none of them anywhere, and (trashed) each remembered
 * by the shard's record to be put back. And each drop refused HasDependents had a key to refuse it for.
 */
export class ObjectChecks {
  constructor(
    private readonly o: {
      nodes: readonly MariadbNode[];
      objects: readonly MadeObject[];
      ops: readonly OpRecord[];
      /** What the record of a shard keeps, by `<node>/<tableId>/<shard>`. */
      kept: (node: string, tableId: number, shard: number) => KeptNames | undefined;
    },
  ) {}

  /** How many were judged, for the summary. */
  judged = 0;
  fired = 0;

  /** At rest, before the checker's recalls. */
  async atRest(tables: readonly TableRecord[]): Promise<Problem[]> {
    const problems: Problem[] = [...this.refusals()];
    const seen = new Map<string, Seen>();
    for (const n of this.o.nodes) seen.set(n.node, await objectsOn(n.rootUrl));
    for (const t of tables) problems.push(...this.judge(t, seen, ''));
    return problems;
  }

  /** After the checker recalled `t`: each of its objects back on it, and each trigger firing. */
  async afterRecall(t: TableRecord): Promise<Problem[]> {
    const mine = this.of(t);
    if (mine.length === 0) return [];
    const seen = new Map<string, Seen>();
    for (const node of new Set(mine.map((x) => x.node)))
      seen.set(node, await objectsOn(this.o.nodes.find((n) => n.node === node)!.rootUrl));
    const problems = this.judge(t, seen, ' after its recall');
    for (const trigger of mine.filter((x) => x.kind === 'trigger' && !problems.some((p) => p.detail.includes(x.name)))) {
      const url = this.o.nodes.find((n) => n.node === trigger.node)!.rootUrl;
      const wrong = await triggerDoesNotFire(url, trigger, liveTableOf(t, trigger.shard));
      this.fired++;
      if (wrong) problems.push({ invariant: 'objects', detail: `table ${t.id} (${t.namespace}.${t.name}): ${wrong} after its recall` });
    }
    return problems;
  }

  private of(t: Pick<TableRecord, 'id'>): MadeObject[] {
    return this.o.objects.filter((x) => x.tableId === t.id && x.uncertain === undefined);
  }

  private judge(t: TableRecord, seen: Map<string, Seen>, when: string): Problem[] {
    const problems: Problem[] = [];
    const label = `table ${t.id} (${t.namespace}.${t.name}, ${t.state})`;
    const problem = (detail: string) => problems.push({ invariant: 'objects', detail: `${label}: ${detail}` });
    for (const x of this.of(t)) {
      const on = seen.get(x.node);
      if (!on) continue;
      this.judged++;
      const found = foundOf(x, on);
      const what = describeObject(x);
      if (t.state === 'READY') {
        const wrong = notOnLive(x, liveTableOf(t, x.shard), on);
        if (wrong) problem(`${wrong}${when}`);
      } else if (t.state === 'TRASHED' || t.state === 'PURGED') {
        if (found) problem(`${what} is still there (${JSON.stringify(found)}) while the table is ${t.state}`);
        const kept = t.state === 'TRASHED' ? this.o.kept(x.node, t.id, x.shard) : undefined;
        if (t.state === 'TRASHED' && !(x.kind === 'trigger' ? kept?.triggers : kept?.referencing)?.includes(x.name))
          problem(`${what} is not remembered by the shard's record (kept: ${JSON.stringify(kept ?? null)}): its recall cannot put it back`);
      }
    }
    return problems;
  }

  /** A drop refused HasDependents asked for no cascade, and a key of the run's was on its table then. */
  private refusals(): Problem[] {
    const problems: Problem[] = [];
    for (const op of this.o.ops) {
      if (op.request.kind !== 'trash' || op.outcome.kind !== 'rejected' || op.outcome.type !== 'HasDependentsError') continue;
      const detail = `op #${op.seq} drop of ${op.request.table} answered HasDependents (${op.outcome.message})`;
      if (op.request.cascade) problems.push({ invariant: 'objects', detail: `${detail}, but it asked for cascade` });
      // (Several tables, or a namespace: any of them may have had one.)
      else if (op.request.together === undefined && op.request.namespace === undefined) {
        const id = op.before?.id;
        const keyed = this.o.objects.some((x) => x.kind === 'foreign key' && x.tableId === id && x.madeAt <= op.endedAt);
        if (!keyed) problems.push({ invariant: 'objects', detail: `${detail}, but the run made no key to table ${String(id)} before` });
      }
    }
    return problems;
  }
}
