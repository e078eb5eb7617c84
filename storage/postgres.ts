import { createHash } from 'node:crypto';
import type { Pool } from 'pg';
import { ident, newPool } from '../catalog/pg-session';
import { liveShardName } from '../domain/names';
import {
  checkWatch,
  type SetListing,
  type ShardArea,
  type ChangeNotes,
  type ReferencingTable,
  type ShardRef,
  type ShardReport,
  type StorageArea,
  type StorageDriver,
  type Watch,
} from './driver';
import { ServerNodes } from './server-nodes';
import { InvalidShardRefError, PermanentStorageError, StorageIoError } from './errors';
import { domainError, InvalidInputError, isDomainErrorType, TableFateError } from '../domain/errors';
import type { TableDefinition } from './postgres-create';
import { admitLeaving, dependentsOf, familyNotes } from './postgres-dependents';
import { refuseManagedPartitions, wouldDetach } from './postgres-partition';
import { missing, SHARDS, type LiveName, type ShardTableId } from './postgres-record';
import { PostgresTables } from './postgres-tables';

/**
 * The PostgreSQL storage driver: each storage node is a PostgreSQL database, and a shard is a real table there that
 * services query directly while it is live (see postgres-tables.ts for how it moves). Its live name is the table's:
 * `<namespace>.<name>` for a table of one shard, `<namespace>.<name>_<shard>` for each of several.
 */
/** SQLSTATE classes another attempt cannot fix: bad data, integrity, syntax or access, dependent objects, invalid schema. */
const PERMANENT_CLASSES = new Set(['0A', '22', '23', '2B', '3F', '42', '44']);
const INSUFFICIENT_PRIVILEGE = '42501';

const sqlState = (err: unknown): string | undefined => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
};

/**
 * A PostgreSQL error as storage/errors.ts classifies storage's: a SQLSTATE of a permanent class (a permission refused,
 * a relation that is not there) ends the operation, compensated; any other (a lost connection, a deadlock, the server
 * shutting down) is tried again. Errors that already say what they are pass as they are.
 */
function classified(err: unknown, op: string, ref: ShardRef): unknown {
  const code = sqlState(err);
  if (code === undefined || err instanceof TableFateError) return err;
  if (PERMANENT_CLASSES.has(code.slice(0, 2))) {
    return new PermanentStorageError(`${op} of ${describe(ref)} failed: ${(err as Error).message} (SQLSTATE ${code})`, { cause: err });
  }
  return new StorageIoError(op, `shard ${ref.shard} of table ${ref.tableId}`, ref.node, err);
}

/**
 * The storage sessions are the worker's own, on a database its users share. `search_path` is PostgreSQL's catalog alone
 * (then pg_temp, last, where nothing is looked up first): a function, operator or type a user made in `public` can
 * never stand in for a built-in one in our statements. Strings are read as domain/columns.ts reads a table's definition
 * (`standard_conforming_strings`, whatever the database or role says). A statement runs 5 minutes at most; a transaction left idle by
 * a stalled worker (after its LOCK TABLE, say) is ended after a minute instead of holding a live table for hours; and
 * keepalives, both ways, find a peer that is gone (a worker's host lost mid-transaction) in about a minute. Every
 * statement is planned once for any values (`plan_cache_mode`): each looks things up by key in PostgreSQL's catalog or
 * tablefate's record, where the values change no plan, and PostgreSQL would otherwise plan a prepared statement anew
 * on each of its first five runs in a session, and one taking an array (tables moved as one) on every run: some 3 ms
 * of a move's 4 to find what depends on its tables.
 */
export const STORAGE_SESSION = {
  options:
    '-c search_path=pg_catalog,pg_temp -c standard_conforming_strings=on -c plan_cache_mode=force_generic_plan -c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3',
  statement_timeout: 5 * 60_000,
  idle_in_transaction_session_timeout: 60_000,
  keepAlive: true,
  keepAliveInitialDelayMillis: 30_000,
  connectionTimeoutMillis: 15_000,
};

export class PostgresStorage implements StorageDriver {
  readonly nodes: readonly string[];
  private readonly servers: ServerNodes<{ pool: Pool; tables: PostgresTables }>;

  /** `urls`: each node's connection url; `catalogId`: whose shards these are (two catalogs may share a database). */
  constructor(
    readonly urls: ReadonlyArray<{ node: string; url: string }>,
    private readonly catalogId: string,
  ) {
    this.nodes = urls.map((u) => u.node);
    this.servers = new ServerNodes(
      urls.map(({ node, url }) => {
        const pool = newPool({ connectionString: url, max: 4, application_name: `tablefate storage ${node}`, ...STORAGE_SESSION });
        return { node, handle: { pool, tables: new PostgresTables(pool) } };
      }),
      (node) => node.tables.prepare(),
    );
  }

  /** Makes the shard's table from its definition, or, for an adopted table, records the table already at its name. */
  createShard(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guard('createShard', ref, async () => {
      checkWatch(watch);
      if (ref.table?.params.adopt) {
        await (await this.tablesOf(ref)).adopt(this.idOf(ref), liveNameOf(ref)).catch((err: unknown) => {
          throw err instanceof TableFateError && isDomainErrorType(err.type)
            ? domainError(err.type, `${err.message} (on ${ref.node})`)
            : err;
        });
        return;
      }
      const definition = definitionOf(ref);
      try {
        await (await this.tablesOf(ref)).create(this.idOf(ref), liveNameOf(ref), definition);
      } catch (err) {
        // A definition PostgreSQL refuses (a type it does not know, a --like table this node lacks) is the request's fault.
        if (sqlState(err)?.startsWith('42') && sqlState(err) !== INSUFFICIENT_PRIVILEGE) {
          const what = 'like' in definition ? `like ${definition.like}` : 'the column definitions';
          throw new InvalidInputError(`${what}: ${(err as Error).message} (on ${ref.node})`);
        }
        throw err;
      }
    });
  }

  /** Create's compensation: drops the table it made; an adopted table is only forgotten, left as it was before the adopt. */
  dropShard(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guard('dropShard', ref, async () => {
      checkWatch(watch);
      // A node without tablefate's record holds no shard table of it (a create refused there, say, for want of CREATE
      // on the database): nothing to drop or forget, and no need to be able to make the record first.
      const pool = this.servers.handleOf(ref.node)?.pool;
      if (pool && !(await hasRecord(pool))) return;
      const tables = await this.tablesOf(ref);
      if (ref.table?.params.adopt) await tables.release(this.idOf(ref));
      else await tables.drop(this.idOf(ref), { watch });
    });
  }

  async moveShard(
    ref: ShardRef,
    from: ShardArea,
    to: ShardArea,
    watch?: Watch,
    opts: { drainTimeoutMs?: number; cascade?: boolean } = {},
  ): Promise<ChangeNotes> {
    return this.moveShards([ref], from, to, watch, opts);
  }

  /** Several shard tables of one node, moved in one transaction (see moveTables): tables dropped or recalled as one. */
  async moveShards(
    refs: readonly ShardRef[],
    _from: ShardArea,
    to: ShardArea,
    watch?: Watch,
    opts: { drainTimeoutMs?: number; cascade?: boolean; namespace?: string } = {},
  ): Promise<ChangeNotes> {
    const first = refs[0];
    if (!first) return [];
    if (refs.some((ref) => ref.node !== first.node)) throw new InvalidShardRefError('shards moved together must be of one node');
    let notes: ChangeNotes = [];
    await this.guard('moveShard', first, async () => {
      checkWatch(watch);
      const moves = refs.map((ref) => ({ ref, id: this.idOf(ref), live: to === 'live' ? liveNameOf(ref) : undefined }));
      const outcomes = await (await this.tablesOf(first)).moveTogether(moves, to, { watch, ...opts });
      notes = moves.flatMap((move, i) => this.named(move.ref, outcomes[i]!.notes, move.live));
    });
    return notes;
  }

  /** The live shard table into the trash as the same shard of `into`, an empty twin at its name (postgres-truncate.ts). */
  truncateShard(ref: ShardRef, into: number, watch?: Watch, opts: { drainTimeoutMs?: number } = {}): Promise<ChangeNotes> {
    return this.truncateShards([{ shard: ref, into }], watch, opts);
  }

  /** Several shard tables of one node truncated in one transaction, each into its entry: tables truncated as one. */
  async truncateShards(
    truncates: ReadonlyArray<{ shard: ShardRef; into: number }>,
    watch?: Watch,
    opts: { drainTimeoutMs?: number } = {},
  ): Promise<ChangeNotes> {
    const first = truncates[0]?.shard;
    if (!first) return [];
    if (truncates.some(({ shard }) => shard.node !== first.node))
      throw new InvalidShardRefError('shards truncated together must be of one node');
    let notes: ChangeNotes = [];
    await this.guard('truncateShard', first, async () => {
      checkWatch(watch);
      const asked = truncates.map(({ shard, into }) => ({ id: this.idOf(shard), into }));
      const outcomes = await (await this.tablesOf(first)).truncate(asked, { watch, ...opts });
      notes = truncates.flatMap(({ shard }, i) => this.named(shard, outcomes[i]!.notes));
    });
    return notes;
  }

  /** Refuses what a truncate of the shard would refuse now, changing nothing (postgres-truncate.ts). */
  checkTruncate(ref: ShardRef, into: number, withTables: readonly number[] = []): Promise<void> {
    return this.guard('checkTruncate', ref, async () => {
      await (await this.tablesOf(ref)).checkTruncate(this.idOf(ref), into, withTables);
    });
  }

  /** A cascade truncate's family on one node: the tables whose keys reference the shards' tables (postgres-truncate.ts). */
  async referencingTables(refs: readonly ShardRef[]): Promise<ReferencingTable[]> {
    const first = refs[0];
    if (!first) return [];
    let found: ReferencingTable[] = [];
    await this.guard('referencingTables', first, async () => {
      found = await (await this.tablesOf(first)).referencing(refs.map((ref) => this.idOf(ref)));
    });
    return found;
  }

  /** A truncate taken back while its twin is empty (postgres-truncate.ts). */
  untruncateShard(ref: ShardRef, into: number, watch?: Watch): Promise<void> {
    return this.guard('untruncateShard', ref, async () => {
      checkWatch(watch);
      await (await this.tablesOf(ref)).untruncate(this.idOf(ref), into, { watch });
    });
  }

  /**
   * A drop's dry run on one shard (StorageDriver.dependentsOf): what depends on its table now, sorted by the rules its
   * move out of the live area applies under its lock (`wouldTake`), read here without one; each note naming the table
   * as the move's notes do. A shard out of the live area already (a drop stopped half way) has nothing left to take.
   */
  async dependentsOf(ref: ShardRef, opts: { cascade?: boolean } = {}): Promise<ChangeNotes> {
    let notes: ChangeNotes = [];
    await this.guard('dependentsOf', ref, async () => {
      const tables = await this.tablesOf(ref);
      const id = this.idOf(ref);
      const at = await tables.locate(id);
      // (As the move finds it: ShardMissing for a table tablefate did not place here, or that is not where it put it.)
      if (!at) throw missing(id, 'tablefate placed no table for it on this node');
      if (at.drift) throw missing(id, at.drift);
      if (at.area !== 'live') return;
      const client = await this.servers.handleOf(ref.node)!.pool.connect();
      try {
        const found = await dependentsOf(client, at.oid);
        admitLeaving(found, `${at.schema}.${at.table}`, opts.cascade === true, 'trashed');
        await refuseManagedPartitions(client, found.members, `${at.schema}.${at.table}`, 'trashed');
        notes = this.named(ref, [...familyNotes(found, 'would'), ...(await wouldDetach(client, at))]);
      } finally {
        client.release();
      }
    });
    return notes;
  }

  markGarbage(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guard('markGarbage', ref, async () => {
      checkWatch(watch);
      await (await this.tablesOf(ref)).move(this.idOf(ref), 'garbage', undefined, { watch });
    });
  }

  unmarkGarbage(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guard('unmarkGarbage', ref, async () => {
      checkWatch(watch);
      await (await this.tablesOf(ref)).move(this.idOf(ref), 'trash', undefined, { watch });
    });
  }

  /** Drops the shard table if it is garbage; gone already is success. A table in any other area is not purge's to drop. */
  deleteGarbage(ref: ShardRef, watch?: Watch): Promise<void> {
    return this.guard('deleteGarbage', ref, async () => {
      checkWatch(watch);
      const tables = await this.tablesOf(ref);
      const at = await tables.locate(this.idOf(ref));
      if (!at) return;
      if (at.area !== 'garbage') throw new InvalidShardRefError(`${describe(ref)} is in the ${at.area} area, not garbage: not deleted`);
      // (Gone or moved by someone else since it became garbage, its record is forgotten and nothing else is touched.)
      await tables.drop(this.idOf(ref), { watch });
    });
  }

  async inspect(ref: ShardRef): Promise<ShardReport> {
    const tables = await this.tablesOf(ref);
    const at = await tables.locate(this.idOf(ref));
    const report = { tableId: ref.tableId, shard: ref.shard, node: ref.node };
    if (!at || at.drift) return { ...report, area: null, bytes: 0, checksum: createHash('sha256').digest('hex') };
    const pool = this.servers.handleOf(ref.node)!.pool;
    // The rows' content, in an order that does not depend on where they sit: the same rows give the same sum.
    const { rows } = await pool.query<{ sum: string | null }>(
      `SELECT string_agg(md5(t::text), '' ORDER BY md5(t::text)) AS sum FROM ${qualifiedOf(at)} t`,
    );
    const area = at.area === 'garbage' ? 'garbage' : at.area;
    return {
      ...report,
      area,
      bytes: await tables.bytes(this.idOf(ref)),
      checksum: createHash('sha256')
        .update(rows[0]?.sum ?? '')
        .digest('hex'),
    };
  }

  /** The total relation size of each shard's table (heap, indexes, TOAST), as PostgreSQL measures it; 0 when there is none. */
  async sizesOf(refs: readonly ShardRef[]): Promise<number[]> {
    return Promise.all(refs.map(async (ref) => (await this.tablesOf(ref)).bytes(this.idOf(ref))));
  }

  /**
   * The shard tables where tablefate put them, and (`shardTables`) every one its record names, each against what the
   * node holds under its oid now: the doctor reports those dropped, renamed, moved or given away outside tablefate,
   * which `sets` leaves out so that nothing acts on them.
   */
  async listSets(nodes: readonly string[] = this.nodes): Promise<SetListing> {
    const sets = [];
    const shardTables: NonNullable<SetListing['shardTables']> = [];
    for (const node of nodes) {
      const tables = await this.ready(node);
      const areas = new Map<string, StorageArea>();
      for (const found of await tables.list(this.catalogId)) {
        sets.push({ tableId: found.tableId, shard: found.shard, node, area: found.area, files: 3, changedAt: found.changedAt });
        areas.set(`${found.tableId}/${found.shard}`, found.area);
      }
      // Its area is the list's: none when the list left it out (not where its record says, or made since the list).
      for (const { tableId, shard, expected, differences } of await tables.audit(this.catalogId)) {
        const area = areas.get(`${tableId}/${shard}`) ?? null;
        shardTables.push({ tableId, shard, node, area, schema: expected.schema, table: expected.table, differences });
      }
    }
    return { sets, skippedNodes: [], shardTables };
  }

  /** Removes the shard's table if it is in `area`, through garbage; elsewhere it is left alone. */
  discardSet(ref: ShardRef, area: StorageArea, watch?: Watch): Promise<void> {
    return this.guard('discardSet', ref, async () => {
      checkWatch(watch);
      const tables = await this.tablesOf(ref);
      const at = await tables.locate(this.idOf(ref));
      if (!at || at.drift || at.area !== area) return;
      if (area !== 'garbage') await tables.move(this.idOf(ref), 'garbage', undefined, { watch });
      await tables.drop(this.idOf(ref), { watch });
    });
  }

  /** Runs a change, its PostgreSQL errors classified as storage's (see `classified`). */
  private async guard(op: string, ref: ShardRef, change: () => Promise<void>): Promise<void> {
    try {
      await change();
    } catch (err) {
      throw classified(err, op, ref);
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.servers.all().map((n) => n.pool.end()));
  }

  /** Each note naming the table as its users know it: where it is live (`live`, a move's way back in), or was. */
  private named(ref: ShardRef, notes: readonly string[], live?: LiveName): ChangeNotes {
    const named = live ?? (ref.table ? liveNameOf(ref) : undefined);
    return notes.map((note) => `${named ? `${named.schema}.${named.table}` : describe(ref)}: ${note}`);
  }

  /** Makes tablefate's schemas, record and SQL door on `node` (idempotent), as its first use would. */
  async prepareNode(node: string): Promise<void> {
    await this.ready(node);
  }

  private idOf(ref: ShardRef): ShardTableId {
    return { catalogId: this.catalogId, tableId: ref.tableId, shard: ref.shard };
  }

  private tablesOf(ref: ShardRef): Promise<PostgresTables> {
    return this.ready(ref.node);
  }

  /** The node's tables, its own schemas made on first use. */
  private async ready(node: string): Promise<PostgresTables> {
    return (await this.servers.ready(node)).tables;
  }
}

/** The shard's live table (domain/names.ts's rule), as the driver needs it: the table's name must come with the ref. */
export function liveNameOf(ref: ShardRef): LiveName {
  if (!ref.table) throw new InvalidShardRefError(`${describe(ref)}: the PostgreSQL driver needs the table's name`);
  const live = liveShardName(ref.table, ref.shard);
  // Checked by the client too; here as well, since PostgreSQL would cut a longer name short without a word.
  for (const name of [live.schema, live.table]) {
    if (Buffer.byteLength(name) > 63) throw new InvalidShardRefError(`${describe(ref)}: "${name}" is over PostgreSQL's 63 bytes`);
  }
  return live;
}

function definitionOf(ref: ShardRef): TableDefinition {
  const params = ref.table?.params;
  if (params?.like !== undefined) return { like: params.like };
  // No columns asked for: a table of none, to which its users add theirs.
  return { columns: params?.columns ?? '' };
}

/** Whether the node has tablefate's record of the tables it placed (prepare made it). */
async function hasRecord(pool: Pool): Promise<boolean> {
  const { rows } = await pool.query<{ there: boolean }>('SELECT to_regclass($1) IS NOT NULL AS there', [SHARDS]);
  return rows[0]?.there === true;
}

const qualifiedOf = (at: { schema: string; table: string }) => `${ident(at.schema)}.${ident(at.table)}`;
const describe = (ref: ShardRef) => `shard ${ref.shard} of table ${ref.tableId} on ${ref.node}`;
