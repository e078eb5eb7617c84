import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import type { Catalog } from '../../catalog/catalog';
import type { TableRecord } from '../../domain/table';
import type { Random } from './random';

/**
 * The user's service of a PostgreSQL chaos run: while the operations run, plain `pg` clients insert rows into the
 * live tables the catalog says are READY, by their real names, as any service would; every row whose INSERT
 * committed is written down with the table it went into. The checks then ask that each of those rows is still in
 * its table, wherever the table is now (see tables.ts).
 */

/** The columns every table of a PostgreSQL chaos run is created with (and the user's own tables have). */
/** The schema of the user's partitioned table whose leaves the run adopts alone (units.ts). */
export const PARTITION_SCHEMA = 'chaos_p';

export const CHAOS_COLUMNS = 'id bigint primary key, client text not null, v text';

/** A storage node's database, as the run reaches it. */
export interface NodeDatabase {
  node: string;
  url: string;
}

/** Quotes an identifier (every name the run puts into SQL text goes through this). */
export const quoteIdent = (name: string): string => `"${name.replace(/"/g, '""')}"`;

/** The real table of one shard while it is live: `<namespace>.<name>`, or `<namespace>.<name>_<shard>` of several. */
export function liveTableOf(table: Pick<TableRecord, 'namespace' | 'name' | 'params'>, shard: number): { schema: string; table: string } {
  return { schema: table.namespace, table: table.params.shards === 1 ? table.name : `${table.name}_${shard}` };
}

/** A row seen committed: its id (unique over the run) and the shard table it went into. */
export interface CommittedRow {
  id: number;
  tableId: number;
  shard: number;
  node: string;
  /** When its COMMIT was heard: it was committed before. */
  at: number;
  /**
   * When its transaction began: it was committed after. A truncate (issue 43) moves the table's rows of before it into
   * the trash, and those of after it go into the empty twin: the two times say on which side a row was.
   */
  startedAt?: number;
  /** The relation it went into (its `tableoid`): one relation is one side of every truncate, and OIDs only grow. */
  oid?: number;
}

export interface InsertStats {
  committed: number;
  /** Inserts into a name with no table at that moment (just dropped, not made yet): normal, nothing recorded. */
  noRelation: number;
  /** Inserts that reached a table tablefate did not place (a user's): rolled back, so it stays untouched. */
  notOurs: number;
  /** Commits whose outcome the client never heard (its connection was cut): the row may be there or not. */
  uncertain: number;
  /** Every other failure, by message (a lock timeout while a move drains the table, ...). */
  otherErrors: Map<string, number>;
}

const UNDEFINED_TABLE = '42P01';
const UNDEFINED_SCHEMA = '3F000';

/** The rows seen committed, by table, and the ids whose commit nobody heard of. */
export class RowLedger {
  private readonly rows = new Map<number, CommittedRow>();
  readonly uncertain = new Set<number>();

  add(row: CommittedRow): void {
    this.rows.set(row.id, row);
  }

  get(id: number): CommittedRow | undefined {
    return this.rows.get(id);
  }

  /** The rows seen committed into table `tableId`, by shard. */
  ofTable(tableId: number): Map<number, CommittedRow[]> {
    const byShard = new Map<number, CommittedRow[]>();
    for (const row of this.rows.values()) {
      if (row.tableId !== tableId) continue;
      byShard.set(row.shard, [...(byShard.get(row.shard) ?? []), row]);
    }
    return byShard;
  }

  /** Every row seen committed. */
  all(): IterableIterator<CommittedRow> {
    return this.rows.values();
  }

  get size(): number {
    return this.rows.size;
  }
}

/**
 * `lanes` loops, each with a connection to every node, inserting one row at a time into a random shard of a random
 * READY table, until stopped. The table a row went into is asked of PostgreSQL in the same transaction (the row's
 * `tableoid`, looked up in tablefate.shards): the catalog's view may be a moment old, and the name may already be
 * another table's.
 */
/** What a chaos helper that works on the user's tables needs: the nodes' databases, the catalog, and its randomness. */
export interface NodeChaosDeps {
  nodes: readonly NodeDatabase[];
  catalog: Catalog;
  catalogId: string;
  rng: Random;
}

export class RowInserter {
  readonly ledger = new RowLedger();
  readonly stats: InsertStats = { committed: 0, noRelation: 0, notOurs: 0, uncertain: 0, otherErrors: new Map() };
  private nextId = 1;
  private stopped = false;
  private running: Promise<void> | undefined;

  constructor(private readonly opts: NodeChaosDeps & { lanes: number }) {}

  start(): void {
    this.running = Promise.all(Array.from({ length: this.opts.lanes }, (_, k) => this.lane(k))).then(() => undefined);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  private async lane(k: number): Promise<void> {
    const rng = this.opts.rng.fork(`inserter-${k}`);
    const clients = new Map<string, Client>();
    try {
      while (!this.stopped) {
        // (Not the leaves of the user's partitioned table: rows go there through it, each into its leaf's bounds, units.ts.)
        const ready = (await this.opts.catalog.listTables({ includeTrashed: false }).catch(() => [])).filter(
          (t) => t.state === 'READY' && t.namespace !== PARTITION_SCHEMA,
        );
        if (ready.length === 0) {
          await sleep(100);
          continue;
        }
        for (let i = 0; i < 5 && !this.stopped; i++) {
          const table = rng.pick(ready);
          const placement = rng.pick(table.placement);
          await this.insertOne(clients, `inserter-${k}`, table, placement.shard, placement.node, rng);
          await sleep(rng.int(5, 40));
        }
      }
    } finally {
      await Promise.all([...clients.values()].map((c) => c.end().catch(() => undefined)));
    }
  }

  /** A connection to `node`, made again after one was lost. */
  private async clientOf(clients: Map<string, Client>, node: string, lane: string): Promise<Client> {
    const known = clients.get(node);
    if (known) return known;
    const url = this.opts.nodes.find((n) => n.node === node)?.url;
    if (!url) throw new Error(`no database for ${node}`);
    const client = new Client({ connectionString: url, application_name: `chaos ${lane}` });
    // A connection that dies between queries is dropped and made again; it must not throw from an event.
    client.on('error', () => clients.delete(node));
    await client.connect();
    clients.set(node, client);
    return client;
  }

  private async insertOne(
    clients: Map<string, Client>,
    lane: string,
    table: TableRecord,
    shard: number,
    node: string,
    rng: Random,
  ): Promise<void> {
    const id = this.nextId++;
    const live = liveTableOf(table, shard);
    const startedAt = Date.now();
    let client: Client;
    try {
      client = await this.clientOf(clients, node, lane);
    } catch (err) {
      this.countError(err);
      return;
    }
    let committing = false;
    try {
      await client.query('BEGIN');
      // A user's service waits a moment for a busy table, no longer: a drop that drains it must not wait on us for long.
      await client.query("SET LOCAL lock_timeout = '2s'");
      const inserted = await client.query<{ oid: string }>(
        `INSERT INTO ${quoteIdent(live.schema)}.${quoteIdent(live.table)} (id, client, v) VALUES ($1, $2, $3) RETURNING tableoid::int8 AS oid`,
        [id, lane, `row ${id} for ${table.namespace}.${table.name} #${table.id} s${shard} ${rng.int(0, 1e9)}`],
      );
      // Whose table this is, under the row lock the INSERT holds: no move can change it before the commit.
      const owner = await client.query<{ table_id: string; shard: number }>(
        'SELECT table_id, shard FROM tablefate.shards WHERE table_oid = $1 AND catalog_id = $2',
        [inserted.rows[0]!.oid, this.opts.catalogId],
      );
      const found = owner.rows[0];
      if (!found) {
        // Not a table tablefate placed (a user's table under that name): the chaos never writes to those.
        await client.query('ROLLBACK');
        this.stats.notOurs++;
        return;
      }
      committing = true;
      await client.query('COMMIT');
      const oid = Number(inserted.rows[0]!.oid);
      this.ledger.add({ id, tableId: Number(found.table_id), shard: found.shard, node, at: Date.now(), startedAt, oid });
      this.stats.committed++;
    } catch (err) {
      if (committing) {
        this.ledger.uncertain.add(id);
        this.stats.uncertain++;
      }
      await client.query('ROLLBACK').catch(() => undefined);
      const code = (err as { code?: string }).code;
      if (code === UNDEFINED_TABLE || code === UNDEFINED_SCHEMA) this.stats.noRelation++;
      else this.countError(err);
      if (code === undefined) {
        // The connection itself failed (no SQLSTATE): make a new one next time.
        clients.delete(node);
        await client.end().catch(() => undefined);
      }
    }
  }

  private countError(err: unknown): void {
    const message = (err as Error).message?.split('\n')[0]?.replace(/\d+/g, 'N') ?? String(err);
    this.stats.otherErrors.set(message, (this.stats.otherErrors.get(message) ?? 0) + 1);
  }
}
