import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import type { Catalog } from '../../catalog/catalog';
import type { TableFateClient } from '../../client/client';
import type { TableRecord } from '../../domain/table';
import { describeOp } from './answers';
import type { Problem } from './problems';
import type { Random } from './random';
import { liveTableOf, PARTITION_SCHEMA, quoteIdent, type NodeDatabase, type RowLedger } from './rows';
import type { UnitHints } from './scenario';
import type { OpRecord } from './ops';

/**
 * Several tables as one under chaos (issue 42 item 7). The scenario drops 2 to 4 tables together now and then, and
 * recalls a table of such a drop with the others or alone (scenario.ts). Here, with the postgres driver:
 *
 * - UnitKeys: the user keys two live tables of one shard on the same node to each other by plain SQL (a column `ref_k<n>`
 *   of the child referencing the parent's id), so that a drop of one of them mostly takes the other along;
 * - PartitionLoad: a partitioned table of the user's (`chaos_p.events`, by ranges of id) on one node, two of whose
 *   leaves are adopted alone (`chaos_p.events_a`, `_b`), dropped and recalled by the scenario while a writer inserts rows
 *   through the partitioned table; a leaf purged is made again and adopted again.
 *
 * And the checks at rest: a drop together never split (unitsAtRest), each key between live tables present and
 * validated unless an answer said why not, each recalled leaf attached with its bounds unless its recall said it came
 * back beside (afterRecalls).
 */

const PARENT = 'events';
/** The leaves: the two adopted, and one the user keeps (rows of its bounds go there all the time). */
const LEAVES: ReadonlyArray<{ name: string; bound: string; adopted: boolean; first: number }> = [
  { name: 'events_a', bound: 'FOR VALUES FROM (MINVALUE) TO (1000000000)', adopted: true, first: 500_000_000 },
  { name: 'events_b', bound: 'FOR VALUES FROM (1000000000) TO (2000000000)', adopted: true, first: 1_000_000_000 },
  { name: 'events_c', bound: 'FOR VALUES FROM (2000000000) TO (MAXVALUE)', adopted: false, first: 2_000_000_000 },
];

const UNIQUE_VIOLATION = '23505';
const DUPLICATE_OBJECT = '42710';

/** A key the run made from one live table of tablefate's to another, on one node. */
export interface UnitKey {
  n: number;
  node: string;
  /** The key's name, on the child. */
  name: string;
  parentId: number;
  parentName: string;
  childId: number;
  childName: string;
  /** The child's oid (the key's conrelid). */
  childOid: number;
  madeAt: number;
}

/** One `pg` client per node, made again when its connection was lost. */
class Sessions {
  private readonly clients = new Map<string, Client>();
  constructor(
    private readonly nodes: readonly NodeDatabase[],
    private readonly app: string,
  ) {}

  async of(node: string): Promise<Client> {
    const known = this.clients.get(node);
    if (known) return known;
    const url = this.nodes.find((n) => n.node === node)?.url;
    if (!url) throw new Error(`no database for ${node}`);
    const client = new Client({ connectionString: url, application_name: this.app });
    client.on('error', () => this.clients.delete(node));
    await client.connect();
    this.clients.set(node, client);
    return client;
  }

  async failed(node: string, client: Client, err: unknown): Promise<void> {
    await client.query('ROLLBACK').catch(() => undefined);
    if ((err as { code?: string }).code === undefined) {
      this.clients.delete(node);
      await client.end().catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.clients.values()].map((c) => c.end().catch(() => undefined)));
    this.clients.clear();
  }
}

const nameOf = (t: { namespace: string; name: string }) => `${t.namespace}.${t.name}`;

/** How often the user keys two live tables to each other; how many keys at most a table has (either side). */
const KEY_EVERY_MS: readonly [number, number] = [1500, 4000];
const MOST_KEYS_PER_TABLE = 2;

export class UnitKeys {
  readonly keys: UnitKey[] = [];
  /** Tries that made nothing, by reason. */
  readonly missed = new Map<string, number>();
  private next = 1;
  private stopped = false;
  private running: Promise<void> | undefined;
  private readonly sessions: Sessions;

  constructor(private readonly opts: { nodes: readonly NodeDatabase[]; catalog: Catalog; catalogId: string; rng: Random }) {
    this.sessions = new Sessions(opts.nodes, 'chaos unit keys');
  }

  start(): void {
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
    await this.sessions.close();
  }

  /** The names keyed to `table` by a key the run made whose two tables are READY now under the names they had then. */
  keyedTo(table: TableRecord, live: readonly TableRecord[]): string[] {
    const ready = new Map(live.filter((t) => t.state === 'READY').map((t) => [t.id, nameOf(t)]));
    const names = new Set<string>();
    for (const k of this.keys) {
      if (k.parentId === table.id && ready.get(k.childId) === k.childName) names.add(k.childName);
      if (k.childId === table.id && ready.get(k.parentId) === k.parentName) names.add(k.parentName);
    }
    return [...names];
  }

  private async loop(): Promise<void> {
    const { rng, catalog } = this.opts;
    while (!this.stopped) {
      await sleep(rng.int(...KEY_EVERY_MS));
      if (this.stopped) return;
      const ready = (await catalog.listTables({ includeTrashed: false }).catch(() => [])).filter(
        (t) => t.state === 'READY' && t.params.shards === 1 && t.namespace !== PARTITION_SCHEMA,
      );
      const keysOf = (id: number) => this.keys.filter((k) => k.parentId === id || k.childId === id).length;
      const pairs: Array<[TableRecord, TableRecord]> = [];
      for (const a of ready) {
        for (const b of ready) {
          if (a.id === b.id || a.placement[0]!.node !== b.placement[0]!.node) continue;
          if (keysOf(a.id) >= MOST_KEYS_PER_TABLE || keysOf(b.id) >= MOST_KEYS_PER_TABLE) continue;
          if (this.keys.some((k) => (k.parentId === a.id && k.childId === b.id) || (k.parentId === b.id && k.childId === a.id))) continue;
          pairs.push([a, b]);
        }
      }
      if (pairs.length === 0) {
        this.miss('no two live tables of one shard on one node');
        continue;
      }
      const [parent, child] = rng.pick(pairs);
      await this.key(parent, child).catch((err: unknown) => this.miss(err));
    }
  }

  /** `child.ref_k<n>` referencing `parent.id`, made in one transaction that checks, under its locks, whose tables they are. */
  private async key(parent: TableRecord, child: TableRecord): Promise<void> {
    const node = parent.placement[0]!.node;
    const n = this.next++;
    const p = liveTableOf(parent, 0);
    const c = liveTableOf(child, 0);
    const name = `${c.table}_k${n}_fkey`.slice(0, 63);
    const client = await this.sessions.of(node);
    let committing: UnitKey | undefined;
    try {
      await client.query('BEGIN');
      await client.query("SET LOCAL lock_timeout = '1s'");
      await client.query(
        `ALTER TABLE ${quoteIdent(c.schema)}.${quoteIdent(c.table)} ADD COLUMN ${quoteIdent(`ref_k${n}`)} bigint ` +
          `CONSTRAINT ${quoteIdent(name)} REFERENCES ${quoteIdent(p.schema)}.${quoteIdent(p.table)} (id)`,
      );
      const owners = await client.query<{ table_id: string; oid: string }>(
        'SELECT table_id, table_oid::int8 AS oid FROM tablefate.shards WHERE table_oid IN (to_regclass($1), to_regclass($2)) AND catalog_id = $3',
        [`${quoteIdent(p.schema)}.${quoteIdent(p.table)}`, `${quoteIdent(c.schema)}.${quoteIdent(c.table)}`, this.opts.catalogId],
      );
      const ids = owners.rows.map((r) => Number(r.table_id));
      if (!ids.includes(parent.id) || !ids.includes(child.id)) {
        await client.query('ROLLBACK');
        this.miss('a name is another table by now');
        return;
      }
      const childOid = Number(owners.rows.find((r) => Number(r.table_id) === child.id)!.oid);
      committing = {
        n,
        node,
        name,
        parentId: parent.id,
        parentName: nameOf(parent),
        childId: child.id,
        childName: nameOf(child),
        childOid,
        madeAt: Date.now(),
      };
      await client.query('COMMIT');
      this.keys.push(committing);
    } catch (err) {
      // A COMMIT unheard: the key may be there; written down all the same (a drop refused for it is then explained).
      if (committing) this.keys.push(committing);
      await this.sessions.failed(node, client, err);
      this.miss(err);
    }
  }

  private miss(err: unknown): void {
    const reason = typeof err === 'string' ? err : ((err as Error).message ?? String(err)).split('\n')[0]!.slice(0, 100);
    this.missed.set(reason, (this.missed.get(reason) ?? 0) + 1);
  }
}

/** An adoption of a leaf by the run: which, its oid, its bounds then. */
export interface AdoptedLeaf {
  tableId: number;
  name: string;
  node: string;
  oid: number;
  bound: string;
  at: number;
}

export interface PartitionStats {
  adopted: number;
  remade: number;
  rowsCommitted: number;
  /** Inserts through the partitioned table refused: no partition for the row (its leaf in the trash), or another reason. */
  refused: Map<string, number>;
}

/** How often the writer inserts a row through the partitioned table; how often the loop looks for a leaf to make again. */
const WRITE_EVERY_MS: readonly [number, number] = [20, 80];
const REMAKE_EVERY_MS = 3000;

export class PartitionLoad {
  readonly adopted: AdoptedLeaf[] = [];
  readonly stats: PartitionStats = { adopted: 0, remade: 0, rowsCommitted: 0, refused: new Map() };
  private readonly next = new Map(LEAVES.map((l) => [l.name, l.first]));
  private stopped = false;
  private running: Promise<void>[] = [];
  /** The writer's sessions, and the remaking's (never one session for both: their transactions would mix). */
  private readonly sessions: Sessions;
  private readonly remakeSessions: Sessions;
  private readonly url: string;

  constructor(
    private readonly opts: {
      node: NodeDatabase;
      nodes: readonly NodeDatabase[];
      sdk: TableFateClient;
      catalog: Catalog;
      catalogId: string;
      ledger: RowLedger;
      rng: Random;
    },
  ) {
    this.sessions = new Sessions(opts.nodes, 'chaos partitions');
    this.remakeSessions = new Sessions(opts.nodes, 'chaos partitions remake');
    this.url = opts.node.url;
  }

  /** The user's partitioned table, its leaves with a few rows, and the two leaves adopted alone. */
  async setUp(): Promise<void> {
    const client = new Client({ connectionString: this.url, application_name: 'chaos partitions setup' });
    await client.connect();
    try {
      const parent = `${quoteIdent(PARTITION_SCHEMA)}.${quoteIdent(PARENT)}`;
      await client.query(`CREATE SCHEMA ${quoteIdent(PARTITION_SCHEMA)}`);
      await client.query(`CREATE TABLE ${parent} (id bigint PRIMARY KEY, client text NOT NULL, v text) PARTITION BY RANGE (id)`);
      for (const leaf of LEAVES) {
        await client.query(`CREATE TABLE ${quoteIdent(PARTITION_SCHEMA)}.${quoteIdent(leaf.name)} PARTITION OF ${parent} ${leaf.bound}`);
      }
    } finally {
      await client.end();
    }
    for (const leaf of LEAVES.filter((l) => l.adopted)) await this.adopt(leaf.name);
  }

  start(): void {
    this.running = [this.write(), this.remake()];
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.running);
    await this.sessions.close();
    await this.remakeSessions.close();
  }

  /** The adopted leaves' names. */
  names(): string[] {
    return LEAVES.filter((l) => l.adopted).map((l) => `${PARTITION_SCHEMA}.${l.name}`);
  }

  private async adopt(name: string): Promise<void> {
    const table = await this.opts.sdk.adopt({ table: `${PARTITION_SCHEMA}.${name}` }, { timeoutMs: 60_000 });
    const client = new Client({ connectionString: this.url, application_name: 'chaos partitions adopt' });
    await client.connect();
    try {
      const found = await client.query<{ oid: string; bound: string | null }>(
        'SELECT c.oid::int8 AS oid, pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_class c WHERE c.oid = to_regclass($1)',
        [`${PARTITION_SCHEMA}.${name}`],
      );
      const row = found.rows[0]!;
      this.adopted.push({
        tableId: table.id,
        name: `${PARTITION_SCHEMA}.${name}`,
        node: this.opts.node.node,
        oid: Number(row.oid),
        bound: row.bound ?? '',
        at: Date.now(),
      });
      this.stats.adopted++;
    } finally {
      await client.end();
    }
  }

  /** Rows through the partitioned table, each into one leaf's bounds; written down when the leaf is an adopted table's. */
  private async write(): Promise<void> {
    const { rng, node, catalogId, ledger } = this.opts;
    while (!this.stopped) {
      await sleep(rng.int(...WRITE_EVERY_MS));
      const leaf = rng.pick(LEAVES);
      const id = this.next.get(leaf.name)!;
      this.next.set(leaf.name, id + 1);
      let client: Client;
      try {
        client = await this.sessions.of(node.node);
      } catch (err) {
        this.refuse(err);
        continue;
      }
      let committing = false;
      try {
        await client.query('BEGIN');
        await client.query("SET LOCAL lock_timeout = '2s'");
        const inserted = await client.query<{ oid: string }>(
          `INSERT INTO ${quoteIdent(PARTITION_SCHEMA)}.${quoteIdent(PARENT)} (id, client, v) VALUES ($1, 'partition writer', $2) ` +
            'RETURNING tableoid::int8 AS oid',
          [id, `row ${id} through ${PARENT}`],
        );
        const owner = await client.query<{ table_id: string; shard: number }>(
          'SELECT table_id, shard FROM tablefate.shards WHERE table_oid = $1 AND catalog_id = $2',
          [inserted.rows[0]!.oid, catalogId],
        );
        const found = owner.rows[0];
        if (!found) {
          // The user's own leaf (events_c, or one made again and not adopted yet): rows the checks do not follow.
          await client.query(leaf.adopted ? 'ROLLBACK' : 'COMMIT');
          continue;
        }
        committing = true;
        await client.query('COMMIT');
        ledger.add({ id, tableId: Number(found.table_id), shard: found.shard, node: node.node, at: Date.now() });
        this.stats.rowsCommitted++;
      } catch (err) {
        if (committing) ledger.uncertain.add(id);
        await this.sessions.failed(node.node, client, err);
        this.refuse(err);
      }
    }
  }

  /** A leaf gone (purged) is made again in its place and adopted again, as the user would. */
  private async remake(): Promise<void> {
    while (!this.stopped) {
      await sleep(REMAKE_EVERY_MS);
      if (this.stopped) return;
      const held = await this.opts.catalog.listTables({ includeTrashed: true }).catch(() => undefined);
      if (!held) continue;
      for (const leaf of LEAVES.filter((l) => l.adopted)) {
        // Only a leaf purged: one in the trash (or on its way there, or back) holds its name, and comes back in its place.
        if (held.some((t) => t.state !== 'PURGED' && t.namespace === PARTITION_SCHEMA && t.name === leaf.name)) continue;
        let client: Client | undefined;
        try {
          client = await this.remakeSessions.of(this.opts.node.node);
          const there = await client.query<{ oid: string | null }>('SELECT to_regclass($1)::int8 AS oid', [
            `${PARTITION_SCHEMA}.${leaf.name}`,
          ]);
          if (there.rows[0]!.oid !== null) continue;
          await client.query(
            `CREATE TABLE ${quoteIdent(PARTITION_SCHEMA)}.${quoteIdent(leaf.name)} PARTITION OF ` +
              `${quoteIdent(PARTITION_SCHEMA)}.${quoteIdent(PARENT)} ${leaf.bound}`,
          );
          this.stats.remade++;
          await this.adopt(leaf.name);
        } catch (err) {
          // Its bounds taken by a leaf come back beside and recalled into place meanwhile, a name the trash holds: later.
          if (client) await this.remakeSessions.failed(this.opts.node.node, client, err);
          this.refuse(err);
        }
      }
    }
  }

  private refuse(err: unknown): void {
    const code = (err as { code?: string }).code;
    if (code === UNIQUE_VIOLATION || code === DUPLICATE_OBJECT) return;
    const reason = ((err as Error).message ?? String(err)).split('\n')[0]!.replace(/\d+/g, 'N').slice(0, 100);
    this.stats.refused.set(reason, (this.stats.refused.get(reason) ?? 0) + 1);
  }
}

/** The hints the scenario reads (keyed tables go together; adopted leaves are aimed at now and then). */
export function unitHints(keys: UnitKeys | undefined, partitions: PartitionLoad | undefined, catalog: Catalog): UnitHints {
  let live: TableRecord[] = [];
  let readAt = 0;
  const refresh = () => {
    if (Date.now() - readAt < 500) return;
    readAt = Date.now();
    void catalog
      .listTables({ includeTrashed: false })
      .then((tables) => (live = tables))
      .catch(() => undefined);
  };
  return {
    keyedTo: (table) => {
      refresh();
      return keys ? keys.keyedTo(table, live) : [];
    },
    partitions: () => partitions?.names() ?? [],
  };
}

/** Whether `op` may have acted after time `t` (rejected: never). */
const mayActAfter = (op: OpRecord, t: number) => op.outcome.kind !== 'rejected' && (op.outcome.kind !== 'ok' || op.endedAt > t);

/**
 * At rest, before the checker recalls anything: each drop of several tables as one is whole. A table in the trash
 * from such a drop finds each of the others it names in the trash with the same droppedAt, naming it back; or gone
 * since (purged: by a purge, or at its expiry); or out of that drop by a recall of that one alone (or a recall of it
 * under another name, alone) the run called. Any other way is a drop split, by a crash or a race.
 */
export function unitsAtRest(tables: readonly TableRecord[], ops: readonly OpRecord[]): { problems: Problem[]; units: number } {
  const problems: Problem[] = [];
  const byId = new Map(tables.map((t) => [t.id, t]));
  const seen = new Set<string>();
  for (const t of tables) {
    if (t.state !== 'TRASHED' || !t.droppedWith || t.droppedWith.length === 0) continue;
    seen.add([t.id, ...t.droppedWith].sort((a, b) => a - b).join(','));
    for (const id of t.droppedWith) {
      const mate = byId.get(id);
      const label = `table ${t.id} (${nameOf(t)}), in the trash since ${new Date(t.droppedAt!).toISOString()} with ${t.droppedWith.join(', ')}`;
      if (!mate) {
        problems.push({ invariant: 'units', detail: `${label}: table ${id} is not in the catalog` });
        continue;
      }
      if (mate.state === 'PURGED') continue;
      const together = mate.state === 'TRASHED' && mate.droppedAt === t.droppedAt && (mate.droppedWith ?? []).includes(t.id);
      if (together) continue;
      const alone = ops.filter(
        (op) => op.request.kind === 'undelete' && op.request.tableId === id && op.request.alone === true && mayActAfter(op, t.droppedAt!),
      );
      if (alone.length > 0) continue;
      problems.push({
        invariant: 'units',
        detail:
          `${label}: table ${id} (${nameOf(mate)}) is ${mate.state}` +
          (mate.state === 'TRASHED'
            ? ` since ${new Date(mate.droppedAt!).toISOString()} with ${JSON.stringify(mate.droppedWith ?? [])}`
            : '') +
          ', and no recall of it alone was called: the drop is split',
      });
    }
  }
  // A drop together answered: its tables went as one (one droppedAt), as far as later calls leave them.
  for (const op of ops) {
    if (op.request.kind !== 'trash' || !op.request.together || op.outcome.kind !== 'ok') continue;
    const answer = op.outcome.table;
    const expected = op.request.together.length;
    if ((answer.droppedWith ?? []).length !== expected) {
      problems.push({
        invariant: 'units',
        detail: `${describeOp(op)}: answered table ${answer.id} TRASHED with droppedWith ${JSON.stringify(answer.droppedWith ?? null)}, not ${expected} others`,
      });
    }
  }
  return { problems, units: seen.size };
}

/** The notes every answer the run got about table `id` carries, the checker's recalls' too. */
function notesOf(ops: readonly OpRecord[], recallNotes: ReadonlyMap<number, readonly string[]>, ids: readonly number[]): string[] {
  const notes: string[] = [];
  for (const op of ops) if (op.outcome.kind === 'ok') notes.push(...(op.outcome.table.notes ?? []));
  for (const id of ids) notes.push(...(recallNotes.get(id) ?? []));
  return notes;
}

interface KeyLook {
  conname: string;
  conrelid: string;
  confrelid: string;
  convalidated: boolean;
}

/**
 * After the checker recalled every trashed table: each key the run made between two tables now READY under the names
 * they had then is on the child, references the parent, validated, unless an answer (a recall's, a drop's) said why
 * not; and each adopted leaf READY is attached to the partitioned table with its bounds, unless a recall of it said it
 * came back beside (or named it anew).
 */
export async function afterRecalls(opts: {
  keys: readonly UnitKey[];
  leaves: readonly AdoptedLeaf[];
  nodes: readonly NodeDatabase[];
  catalog: Catalog;
  ops: readonly OpRecord[];
  recallNotes: ReadonlyMap<number, readonly string[]>;
}): Promise<{ problems: Problem[]; summary: string }> {
  const problems: Problem[] = [];
  const counts = { keysJudged: 0, keysExplained: 0, leavesAttached: 0, leavesBeside: 0 };
  const tables = new Map((await opts.catalog.listTables({ includeTrashed: true })).map((t) => [t.id, t]));
  const withNode = async <T>(node: string, use: (c: Client) => Promise<T>): Promise<T> => {
    const c = new Client({ connectionString: opts.nodes.find((n) => n.node === node)!.url, application_name: 'chaos unit checks' });
    await c.connect();
    try {
      return await use(c);
    } finally {
      await c.end();
    }
  };
  for (const k of opts.keys) {
    const parent = tables.get(k.parentId);
    const child = tables.get(k.childId);
    if (parent?.state !== 'READY' || child?.state !== 'READY') continue;
    if (nameOf(parent) !== k.parentName || nameOf(child) !== k.childName) continue;
    counts.keysJudged++;
    const p = liveTableOf(parent, 0);
    const c = liveTableOf(child, 0);
    const found = await withNode(k.node, async (client) => {
      const { rows } = await client.query<KeyLook>(
        `SELECT conname, conrelid::int8 AS conrelid, confrelid::int8 AS confrelid, convalidated FROM pg_constraint
          WHERE conname = $1 AND contype = 'f' AND conrelid = to_regclass($2)`,
        [k.name, `${quoteIdent(c.schema)}.${quoteIdent(c.table)}`],
      );
      const parentOid = await client.query<{ oid: string | null }>('SELECT to_regclass($1)::int8 AS oid', [
        `${quoteIdent(p.schema)}.${quoteIdent(p.table)}`,
      ]);
      return { key: rows[0], parentOid: parentOid.rows[0]!.oid };
    });
    let wrong: string | undefined;
    if (!found.key) wrong = 'absent';
    else if (found.key.confrelid !== found.parentOid)
      wrong = `references oid ${found.key.confrelid}, not ${k.parentName}'s (${String(found.parentOid)})`;
    else if (!found.key.convalidated) wrong = 'NOT VALID';
    if (!wrong) continue;
    const said = notesOf(opts.ops, opts.recallNotes, [k.parentId, k.childId]).filter((n) => n.includes(k.name));
    if (said.length > 0) {
      counts.keysExplained++;
      continue;
    }
    problems.push({
      invariant: 'units',
      detail:
        `${k.node}: foreign key ${k.name} of ${k.childName} (table ${k.childId}) to ${k.parentName} (table ${k.parentId}), made at ` +
        `${new Date(k.madeAt).toISOString()}: both tables READY, and the key is ${wrong}; no answer says why`,
    });
  }
  for (const leaf of opts.leaves) {
    const t = tables.get(leaf.tableId);
    if (t?.state !== 'READY') continue;
    const recalls = opts.ops.filter(
      (op) => op.request.kind === 'undelete' && op.request.tableId === leaf.tableId && op.outcome.kind !== 'rejected',
    );
    // (A recall of a table dropped with it answers for it too: its notes name it.)
    const said = notesOf(opts.ops, opts.recallNotes, [leaf.tableId]).filter(
      (n) => n.startsWith(`${leaf.name}:`) || (opts.recallNotes.get(leaf.tableId) ?? []).includes(n),
    );
    const renamed = recalls.some((op) => op.request.kind === 'undelete' && op.request.newName !== undefined);
    // An answer unheard may have said it: a recall without an answer leaves the leaf unjudged if it is not in place.
    const unheard = recalls.some((op) => op.outcome.kind !== 'ok');
    const attachment = await withNode(leaf.node, async (client) => {
      const { rows } = await client.query<{ parent: string | null; bound: string | null }>(
        `SELECT (SELECT inhparent::regclass::text FROM pg_inherits WHERE inhrelid = c.oid) AS parent,
                pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_class c WHERE c.oid = $1`,
        [leaf.oid],
      );
      return rows[0];
    });
    const beside = said.some((n) => n.includes('beside'));
    if (attachment?.parent === `${PARTITION_SCHEMA}.${PARENT}` && attachment.bound === leaf.bound) {
      counts.leavesAttached++;
      if (beside) {
        problems.push({
          invariant: 'partitions',
          detail: `${leaf.name} (table ${leaf.tableId}) is attached in its place, though a recall said it came back beside: ${JSON.stringify(said)}`,
        });
      }
      continue;
    }
    counts.leavesBeside++;
    if (beside || renamed || unheard) continue;
    problems.push({
      invariant: 'partitions',
      detail:
        `${leaf.name} (table ${leaf.tableId}, oid ${leaf.oid}, adopted with ${leaf.bound}) is READY as ${nameOf(t)}, ` +
        `attached to ${String(attachment?.parent ?? null)} with ${String(attachment?.bound ?? null)}, ` +
        `and no recall of it said it came back beside (${recalls.length} recalls, the checker's notes ${JSON.stringify(opts.recallNotes.get(leaf.tableId) ?? [])})`,
    });
  }
  return {
    problems,
    summary:
      `units: ${opts.keys.length} keys made between tables (${counts.keysJudged} judged with both READY, ${counts.keysExplained} ` +
      `explained by an answer), ${opts.leaves.length} leaves adopted (${counts.leavesAttached} attached in place at the end, ` +
      `${counts.leavesBeside} not)`,
  };
}
