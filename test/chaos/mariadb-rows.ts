import { setTimeout as sleep } from 'node:timers/promises';
import type { Connection } from 'mariadb';
import type { Catalog } from '../../catalog/catalog';
import type { TableRecord } from '../../domain/table';
import { OWN_DATABASE } from '../../storage/mariadb-record';
import { qualified } from '../../storage/mariadb-session';
import { connectTo, WORKER_ACCOUNT, withMariadb, type MariadbNode } from './mariadb-servers';
import type { Random } from './random';
import { liveTableOf, RowLedger, type InsertStats } from './rows';

/**
 * The user's service of a MariaDB chaos run (rows.ts's, for MariaDB): while the operations run, plain sessions (as
 * root, not the worker's account) insert rows into the live tables the catalog says are READY, by their real names;
 * every row whose COMMIT was heard is written down with the table it went into. Which table that is, is asked of the
 * server in the same transaction: the INSERT holds the table's metadata lock until the COMMIT, so no rename can take
 * the name from it meanwhile; its InnoDB table id (the driver's identity of a table) is looked up in tablefate.shards.
 * A name that leads to no record is a table tablefate did not place (a user's): rolled back.
 */

const NO_SUCH_TABLE = 1146;
const NO_SUCH_DATABASE = 1049;

export class MariadbRowInserter {
  readonly ledger = new RowLedger();
  readonly stats: InsertStats = { committed: 0, noRelation: 0, notOurs: 0, uncertain: 0, otherErrors: new Map() };
  /** Ids from 1 up; the rows the run writes by hand (mariadb-user.ts) take ids far above. */
  private nextId = 1;
  private stopped = false;
  private running: Promise<void> | undefined;

  constructor(
    private readonly opts: {
      nodes: readonly MariadbNode[];
      catalog: Catalog;
      catalogId: string;
      rng: Random;
      lanes: number;
      /** Tables the inserter leaves alone (by namespace): none by default. */
      skip?: (table: TableRecord) => boolean;
    },
  ) {}

  start(): void {
    this.running = Promise.all(Array.from({ length: this.opts.lanes }, (_, k) => this.lane(k))).then(() => undefined);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  private async lane(k: number): Promise<void> {
    const rng = this.opts.rng.fork(`mariadb-inserter-${k}`);
    const sessions = new Map<string, Connection>();
    try {
      while (!this.stopped) {
        const ready = (await this.opts.catalog.listTables({ includeTrashed: false }).catch(() => [])).filter(
          (t) => t.state === 'READY' && !(this.opts.skip?.(t) ?? false),
        );
        if (ready.length === 0) {
          await sleep(100);
          continue;
        }
        for (let i = 0; i < 5 && !this.stopped; i++) {
          const table = rng.pick(ready);
          const placement = rng.pick(table.placement);
          await this.insertOne(sessions, `inserter-${k}`, table, placement.shard, placement.node, rng);
          await sleep(rng.int(5, 40));
        }
      }
    } finally {
      await Promise.all([...sessions.values()].map((c) => c.end().catch(() => c.destroy())));
    }
  }

  /** A session on `node`, made again after one was lost (a cut, the server's restart). */
  private async sessionOf(sessions: Map<string, Connection>, node: string): Promise<Connection> {
    const known = sessions.get(node);
    if (known?.isValid()) return known;
    sessions.delete(node);
    const url = this.opts.nodes.find((n) => n.node === node)?.rootUrl;
    if (!url) throw new Error(`no server for ${node}`);
    const c = await connectTo(url);
    // A user's service waits a moment for a busy table, no longer: a drop that drains it must not wait on us for long.
    await c.query('SET SESSION lock_wait_timeout = 2, innodb_lock_wait_timeout = 2');
    c.on('error', () => sessions.delete(node));
    sessions.set(node, c);
    return c;
  }

  private async insertOne(
    sessions: Map<string, Connection>,
    lane: string,
    table: TableRecord,
    shard: number,
    node: string,
    rng: Random,
  ): Promise<void> {
    const id = this.nextId++;
    const live = liveTableOf(table, shard);
    const startedAt = Date.now();
    let c: Connection;
    try {
      c = await this.sessionOf(sessions, node);
    } catch (err) {
      this.countError(err);
      return;
    }
    let committing = false;
    try {
      await c.query('START TRANSACTION');
      await c.query(`INSERT INTO ${qualified(live.schema, live.table)} (id, client, v) VALUES (?, ?, ?)`, [
        id,
        lane,
        `row ${id} for ${table.namespace}.${table.name} #${table.id} s${shard} ${rng.int(0, 1e9)}`,
      ]);
      // Whose table this is, under the metadata lock the INSERT holds: no move can rename it before the COMMIT.
      const identity = await identityOf(c, live.schema, live.table);
      const owner =
        identity === null
          ? []
          : await c.query<Array<{ table_id: number; shard: number }>>(
              `SELECT table_id, shard FROM ${OWN_DATABASE}.shards WHERE identity = ? AND catalog_id = ?`,
              [identity, this.opts.catalogId],
            );
      const found = owner[0];
      if (!found || identity === null) {
        // Not a table tablefate placed (a user's table under that name): the chaos never writes to those.
        await c.query('ROLLBACK');
        this.stats.notOurs++;
        return;
      }
      committing = true;
      await c.query('COMMIT');
      this.ledger.add({ id, tableId: Number(found.table_id), shard: found.shard, node, at: Date.now(), startedAt, oid: identity });
      this.stats.committed++;
    } catch (err) {
      if (committing) {
        this.ledger.uncertain.add(id);
        this.stats.uncertain++;
      }
      await c.query('ROLLBACK').catch(() => undefined);
      const errno = (err as { errno?: number }).errno;
      if (errno === NO_SUCH_TABLE || errno === NO_SUCH_DATABASE) this.stats.noRelation++;
      else this.countError(err);
      if (!c.isValid()) {
        sessions.delete(node);
        c.destroy();
      }
    }
  }

  private countError(err: unknown): void {
    const message = (err as Error).message?.split('\n')[0]?.replace(/\d+/g, 'N') ?? String(err);
    this.stats.otherErrors.set(message, (this.stats.otherErrors.get(message) ?? 0) + 1);
  }
}

/**
 * The InnoDB table id of `database`.`table` (names of the run are letters, digits and `_`: InnoDB names them as they
 * are), or null when no InnoDB table bears the name. Reading it takes PROCESS (root has it).
 */
export async function identityOf(c: Connection, database: string, table: string): Promise<number | null> {
  const rows = await c.query<Array<{ id: number }>>('SELECT TABLE_ID AS id FROM information_schema.INNODB_SYS_TABLES WHERE NAME = ?', [
    `${database}/${table}`,
  ]);
  return rows[0] === undefined ? null : Number(rows[0].id);
}

/**
 * Cuts the worker's storage sessions now and then (KILL CONNECTION on every session of its account, as a lost
 * connection or a DBA's kill would): a lost connection is a transient storage error, and the operation it hit must go
 * on or end compensated, never hang.
 */
export class MariadbConnectionCutter {
  cuts = 0;
  private stopped = false;
  private running: Promise<void> | undefined;
  private wake: (() => void) | undefined;

  constructor(
    private readonly nodes: readonly MariadbNode[],
    private readonly rng: Random,
    private readonly everyMs: readonly [number, number],
  ) {}

  start(): void {
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.rng.int(...this.everyMs));
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      if (this.stopped) return;
      for (const node of this.nodes) {
        try {
          await withMariadb(node.rootUrl, async (c) => {
            const sessions = await c.query<Array<{ id: number }>>('SELECT ID AS id FROM information_schema.PROCESSLIST WHERE USER = ?', [
              WORKER_ACCOUNT,
            ]);
            for (const { id } of sessions) {
              // (Gone meanwhile: nothing to cut.)
              await c.query(`KILL CONNECTION ${Number(id)}`).then(
                () => this.cuts++,
                () => undefined,
              );
            }
          });
        } catch {
          // The server is down (a restart of the run's) or the checker's own session failed: the next turn tries again.
        }
      }
    }
  }
}
