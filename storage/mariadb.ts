import { createHash } from 'node:crypto';
import type { Pool } from 'mariadb';
import { InvalidInputError, TableFateError, domainError, isDomainErrorType } from '../domain/errors';
import { liveShardName } from '../domain/names';
import { mariadbNameProblem } from '../domain/deployment';
import {
  checkWatch,
  type ChangeNotes,
  type SetListing,
  type ShardArea,
  type ShardRef,
  type ShardReport,
  type StorageArea,
  type StorageDriver,
  type Watch,
} from './driver';
import { InvalidShardRefError } from './errors';
import { ServerNodes } from './server-nodes';
import { adoptTable, createTable, type TableDefinition } from './mariadb-create';
import { dropTable, moveTable } from './mariadb-moves';
import {
  driftOf,
  forget,
  hasRecord,
  locate,
  prepareRecord,
  recordedTables,
  withShardTurn,
  type Place,
  type ShardTableId,
} from './mariadb-record';
import { identityAt } from './mariadb-identity';
import { classifiedMariadb, describeRef, mariadbPool, qualified } from './mariadb-session';
import { OWN_DATABASE } from './mariadb-record';

/**
 * The MariaDB storage driver: each storage node is a MariaDB server, a namespace is a database there, and a shard is a
 * real InnoDB table that services query directly while it is live: `<namespace>.<name>` for a table of one shard,
 * `<namespace>.<name>_<shard>` for each of several. See mariadb-moves.ts for how it moves, mariadb-record.ts for how the
 * node remembers it, and docs/mariadb.md for what a DBA sees.
 */
export class MariadbStorage implements StorageDriver {
  readonly nodes: readonly string[];
  private readonly servers: ServerNodes<Pool>;

  /**
   * `urls`: each node's server (`mariadb://user:password@host:port/`); `catalogId`: whose shards these are;
   * `afterStatement`: hears each statement of a move once the server took it (crash-point tests).
   */
  constructor(
    readonly urls: ReadonlyArray<{ node: string; url: string }>,
    private readonly catalogId: string,
    private readonly afterStatement?: (statement: string) => void,
  ) {
    this.nodes = urls.map((u) => u.node);
    this.servers = new ServerNodes(
      urls.map(({ node, url }) => ({ node, handle: mariadbPool(url, node) })),
      prepareRecord,
    );
  }

  /** Makes the shard's table from its definition, or, for an adopted table, records the table already at its name. */
  createShard(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guard('createShard', ref, async (pool) => {
      checkWatch(watch);
      const live = liveNameOf(ref);
      await withShardTurn(pool, this.idOf(ref), async (c) => {
        if (ref.table?.params.adopt) {
          await adoptTable(c, pool, this.idOf(ref), live).catch((err: unknown) => {
            throw err instanceof TableFateError && isDomainErrorType(err.type)
              ? domainError(err.type, `${err.message} (on ${ref.node})`)
              : err;
          });
          return;
        }
        await createTable(c, pool, this.idOf(ref), live, definitionOf(ref), ref.node, this.heard());
      });
    });
  }

  /** Create's compensation: drops the table it made; an adopted table is only forgotten, left as it was before the adopt. */
  dropShard(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guard('dropShard', ref, async (pool) => {
      checkWatch(watch);
      if (!(await hasRecord(pool))) return;
      if (ref.table?.params.adopt) await forget(pool, this.idOf(ref));
      else await dropTable(pool, this.idOf(ref), { watch, ...this.heard() });
    });
  }

  moveShard(
    ref: ShardRef,
    _from: ShardArea,
    to: ShardArea,
    watch?: Watch,
    opts: { drainTimeoutMs?: number; cascade?: boolean } = {},
  ): Promise<ChangeNotes> {
    return this.moveOne(ref, to, watch, opts);
  }

  private async moveOne(
    ref: ShardRef,
    to: ShardArea,
    watch: Watch | undefined,
    opts: { drainTimeoutMs?: number; cascade?: boolean; with?: readonly Place[] },
  ): Promise<ChangeNotes> {
    let notes: ChangeNotes = [];
    await this.guard('moveShard', ref, async (pool) => {
      checkWatch(watch);
      const live = to === 'live' ? liveNameOf(ref) : undefined;
      notes = this.named(ref, await moveTable(pool, this.idOf(ref), to, live, { watch, ...opts, ...this.heard() }), live);
    });
    return notes;
  }

  /**
   * Several shard tables of one node, as one drop or recall: moved one after another (MariaDB has no transaction for
   * DDL), the keys among them refusing nothing. A crash between two leaves some moved, which the next attempt finds.
   */
  async moveShards(
    refs: readonly ShardRef[],
    _from: ShardArea,
    to: ShardArea,
    watch?: Watch,
    opts: { drainTimeoutMs?: number; cascade?: boolean } = {},
  ): Promise<ChangeNotes> {
    const places = refs.flatMap((ref) => (ref.table ? [liveNameOf(ref)] : []));
    const notes: ChangeNotes = [];
    for (const ref of to === 'live' ? await this.inRecallOrder(refs) : refs) {
      const own = ref.table ? liveNameOf(ref) : undefined;
      const others = places.filter((p) => p.database !== own?.database || p.table !== own?.table);
      notes.push(...(await this.moveOne(ref, to, watch, { ...opts, with: others })));
    }
    return notes;
  }

  /**
   * The tables of a recall of several, each after the tables its kept keys name: a key between two tables dropped as
   * one was taken off by whichever left first, and is put back by it, so that one comes back once the other is there.
   */
  private async inRecallOrder(refs: readonly ShardRef[]): Promise<ShardRef[]> {
    const found = await Promise.all(
      refs.map(async (ref) => {
        const at = await this.where(await this.ready(ref.node), ref);
        const kept = at && at.drift === undefined ? at.kept : null;
        const from = kept?.from ?? (ref.table ? liveNameOf(ref) : undefined);
        const names = new Set([
          ...(kept?.keys ?? []).flatMap((k) => (k.references ? [placeKey(k.references)] : [])),
          ...(kept?.referencing ?? []).map((k) => placeKey(k.on)),
        ]);
        return { ref, from: from ? placeKey(from) : undefined, names };
      }),
    );
    const ordered: ShardRef[] = [];
    const left = [...found];
    while (left.length > 0) {
      // The first whose named tables have all come back (or are none of these); in a circle, the first left.
      const waiting = new Set(left.flatMap((t) => (t.from ? [t.from] : [])));
      const next = left.findIndex((t) => ![...t.names].some((name) => name !== t.from && waiting.has(name)));
      ordered.push(left.splice(next < 0 ? 0 : next, 1)[0]!.ref);
    }
    return ordered;
  }

  /** Not made by this driver yet: refused before anything changes (docs/mariadb.md). */
  truncateShard(ref: ShardRef): Promise<void> {
    return Promise.reject(truncateRefused(ref));
  }

  /** Refuses every truncate, changing nothing (see truncateShard). */
  checkTruncate(ref: ShardRef): Promise<void> {
    return Promise.reject(truncateRefused(ref));
  }

  /** No truncate is ever made (see truncateShard): nothing to take back. */
  async untruncateShard(): Promise<void> {}

  markGarbage(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guard('markGarbage', ref, async (pool) => {
      checkWatch(watch);
      await moveTable(pool, this.idOf(ref), 'garbage', undefined, { watch, ...this.heard() });
    });
  }

  unmarkGarbage(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guard('unmarkGarbage', ref, async (pool) => {
      checkWatch(watch);
      await moveTable(pool, this.idOf(ref), 'trash', undefined, { watch, ...this.heard() });
    });
  }

  /** Drops the shard table if it is garbage; gone already is success. A table in any other area is not purge's to drop. */
  deleteGarbage(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guard('deleteGarbage', ref, async (pool) => {
      checkWatch(watch);
      const at = await this.where(pool, ref);
      if (at && at.drift === undefined && at.area !== 'garbage') {
        throw new InvalidShardRefError(`${describeRef(ref)} is in the ${at.area} area, not garbage: not deleted`);
      }
      await dropTable(pool, this.idOf(ref), { watch, ...this.heard() });
    });
  }

  async inspect(ref: ShardRef): Promise<ShardReport> {
    const pool = await this.ready(ref.node);
    const at = await this.where(pool, ref);
    const report = { tableId: ref.tableId, shard: ref.shard, node: ref.node };
    if (!at || at.drift !== undefined) return { ...report, area: null, bytes: 0, checksum: createHash('sha256').digest('hex') };
    // (CHECKSUM TABLE adds up a checksum of each row: the same rows give the same sum, in whatever order they sit.)
    const rows = await pool.query<Array<{ Checksum: number | null }>>(`CHECKSUM TABLE ${qualified(at.database, at.table)} EXTENDED`);
    return {
      ...report,
      area: at.area,
      bytes: await bytesOf(pool, at),
      checksum: createHash('sha256')
        .update(String(rows[0]?.Checksum ?? ''))
        .digest('hex'),
    };
  }

  /** The data and index bytes of each shard's table, as InnoDB estimates them; 0 when there is none. */
  async sizesOf(refs: readonly ShardRef[]): Promise<number[]> {
    return Promise.all(
      refs.map(async (ref) => {
        const pool = await this.ready(ref.node);
        const at = await this.where(pool, ref);
        return at && at.drift === undefined ? bytesOf(pool, at) : 0;
      }),
    );
  }

  /**
   * The shard tables where tablefate put them, and (`shardTables`) every one its record names, each against what the
   * node holds under its identity now: the doctor reports those dropped, renamed, replaced or rebuilt outside tablefate.
   */
  async listSets(nodes: readonly string[] = this.nodes): Promise<SetListing> {
    const sets = [];
    const shardTables: NonNullable<SetListing['shardTables']> = [];
    for (const node of nodes) {
      const pool = await this.ready(node);
      for (const row of await recordedTables(pool, this.catalogId)) {
        let at = row.at;
        let differences: string[] = [];
        const here = await identityAt(pool, pool, OWN_DATABASE, at.database, at.table);
        if (here !== row.identity) {
          const there = row.movingTo ? await identityAt(pool, pool, OWN_DATABASE, row.movingTo.database, row.movingTo.table) : null;
          if (row.movingTo && there === row.identity) at = row.movingTo;
          else differences = [await driftOf(pool, row.identity, at)];
        }
        const area: StorageArea | null = differences.length === 0 ? at.area : null;
        if (area) sets.push({ tableId: row.tableId, shard: row.shard, node, area, files: 3, changedAt: row.changedAt });
        shardTables.push({
          tableId: row.tableId,
          shard: row.shard,
          node,
          area,
          schema: at.database,
          table: at.table,
          differences: [...differences, ...row.notes],
        });
      }
    }
    return { sets, skippedNodes: [], shardTables };
  }

  /** Removes the shard's table if it is in `area`, through garbage; elsewhere it is left alone. */
  discardSet(ref: ShardRef, area: StorageArea, watch?: Watch): Promise<void> {
    return this.guard('discardSet', ref, async (pool) => {
      checkWatch(watch);
      const at = await this.where(pool, ref);
      if (!at || at.drift !== undefined || at.area !== area) return;
      if (area !== 'garbage') await moveTable(pool, this.idOf(ref), 'garbage', undefined, { watch, ...this.heard() });
      await dropTable(pool, this.idOf(ref), { watch, ...this.heard() });
    });
  }

  async close(): Promise<void> {
    await Promise.all(this.servers.all().map((pool) => pool.end()));
  }

  /** Makes tablefate's databases and record on `node` (idempotent), as its first use would. */
  async prepareNode(node: string): Promise<void> {
    await this.ready(node);
  }

  /** Where the shard's table is, read under its turn (a move cut short is resolved as its record says). */
  private where(pool: Pool, ref: ShardRef) {
    return withShardTurn(pool, this.idOf(ref), (c) => locate(c, pool, this.idOf(ref)));
  }

  /** Runs a change on the shard's node, its MariaDB errors classified as storage's. */
  private async guard(op: string, ref: ShardRef, change: (pool: Pool) => Promise<void>): Promise<void> {
    try {
      await change(await this.ready(ref.node));
    } catch (err) {
      throw classifiedMariadb(err, op, ref);
    }
  }

  /** Each note naming the table as its users know it: where it is live (`live`, a move's way back in), or was. */
  private named(ref: ShardRef, notes: readonly string[], live?: Place): ChangeNotes {
    const named = live ?? (ref.table ? liveNameOf(ref) : undefined);
    return notes.map((note) => `${named ? `${named.database}.${named.table}` : describeRef(ref)}: ${note}`);
  }

  /** The move options that let `afterStatement` hear a move. */
  private heard(): { afterStatement?: (statement: string) => void } {
    return this.afterStatement ? { afterStatement: this.afterStatement } : {};
  }

  private idOf(ref: ShardRef): ShardTableId {
    return { catalogId: this.catalogId, tableId: ref.tableId, shard: ref.shard };
  }

  /** The node's pool, tablefate's databases and record made on first use. */
  private ready(node: string): Promise<Pool> {
    return this.servers.ready(node);
  }
}

/** The shard's live table (domain/names.ts's rule), as a database and a name. */
export function liveNameOf(ref: ShardRef): Place {
  if (!ref.table) throw new InvalidShardRefError(`${describeRef(ref)}: the MariaDB driver needs the table's name`);
  const live = liveShardName(ref.table, ref.shard);
  for (const name of [live.schema, live.table]) {
    const problem = mariadbNameProblem(name);
    if (problem) throw new InvalidShardRefError(`${describeRef(ref)}: ${problem}`);
  }

  return { database: live.schema, table: live.table };
}

const placeKey = (place: Place) => `${place.database}\u0000${place.table}`;

function definitionOf(ref: ShardRef): TableDefinition {
  const params = ref.table?.params;
  if (params?.like !== undefined) return { like: params.like };
  return { columns: params?.columns ?? '' };
}

/** The data and index bytes InnoDB counts for the table (its partitions' together). */
async function bytesOf(pool: Pool, at: Place): Promise<number> {
  const rows = await pool.execute<Array<{ bytes: number | null }>>(
    'SELECT DATA_LENGTH + INDEX_LENGTH AS bytes FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?',
    [at.database, at.table],
  );
  return Number(rows[0]?.bytes ?? 0);
}

const truncateRefused = (ref: ShardRef) =>
  new InvalidInputError(`${describeRef(ref)}: the MariaDB driver does not truncate into the trash yet; nothing was changed`);
