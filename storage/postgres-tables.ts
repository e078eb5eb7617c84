import type { Pool, PoolClient } from 'pg';
import {
  HasDependentsError as DependentsRefusal,
  InvalidInputError,
  NameTakenError,
  TableBusyError as BusyRefusal,
  TableExistsError,
  TableNotFoundError,
} from '../domain/errors';
import { checkWatch, type Watch } from './driver';
import { PermanentStorageError } from './errors';
import { POSTGRES_OWN_SCHEMAS } from '../domain/deployment';
import { inPgTransaction } from '../catalog/pg-session';

/**
 * The moves of the PostgreSQL storage driver (issue 16), on one node: a shard is a real table that services query
 * directly while it is live (`<namespace>.<name>`, or `<name>_<shard>`), and that waits in tablefate's own schemas
 * while it is in the trash or garbage. Every move is one transaction of renames and `SET SCHEMA`: no row is
 * copied, and a move either happened whole or not at all (DDL is transactional in PostgreSQL).
 *
 * Identity: the node keeps, in `tablefate.shards`, the oid of every table tablefate placed, written in the same
 * transaction that made it. An oid survives renames and schema moves, so a table is found by it wherever it is, and
 * a table someone else made under a tablefate name (another oid) is never touched.
 *
 * Names: indexes and owned sequences move with their table but keep their names, and those must be unique in a
 * schema: two trashed `orders` would both bring `orders_pkey`. A move out of the live schema renames them after the
 * shard (`<shard name>_i<k>`, `_q<k>`) and records the names they had; a move back gives them those names again,
 * unless another relation in the target schema has taken one meanwhile (the new `orders` made after the drop): then
 * that one is named after the table it now belongs to.
 */

/** Which shard of which table of which catalog. */
export interface ShardTableId {
  catalogId: string;
  tableId: number;
  shard: number;
}

/** Where a live shard table is: its schema (the tablefate namespace) and its name. */
export interface LiveName {
  schema: string;
  table: string;
}

export type TableArea = 'live' | 'trash' | 'garbage';

/** The table's columns: definitions as inside `CREATE TABLE (...)` (checked by domain/columns.ts), or another table's structure. */
export type TableDefinition = { columns: string } | { like: string };

/** Where a shard table is now, or null when tablefate placed none for it (or it was dropped). */
export interface ShardTableLocation {
  oid: number;
  area: TableArea;
  schema: string;
  table: string;
}

export const { own: OWN_SCHEMA, trash: TRASH_SCHEMA, garbage: GARBAGE_SCHEMA } = POSTGRES_OWN_SCHEMAS;
const AREA_SCHEMAS: Record<Exclude<TableArea, 'live'>, string> = { trash: TRASH_SCHEMA, garbage: GARBAGE_SCHEMA };

/** The shard's table is not where tablefate put it (dropped or moved by someone else): nothing is done to whatever is there. */
export class NotOurTableError extends PermanentStorageError {
  override readonly name: string = 'NotOurTableError';
}

/** A trash refused because views or other tables' foreign keys depend on the table: they would follow it into the trash. */
export class HasDependentsError extends DependentsRefusal {
  constructor(
    table: string,
    readonly dependents: readonly string[],
  ) {
    super(`${table} cannot be trashed while others depend on it: ${dependents.join(', ')}; drop them or their foreign keys first`);
  }
}

/** A session that held the table while a move drained it. */
export interface TableHolder {
  pid: number;
  user: string | null;
  applicationName: string;
  /** When its transaction began (or its query, outside one); null when PostgreSQL does not say. */
  since: Date | null;
}

/** A move that could not have the table to itself before its drain deadline: other sessions kept it. */
export class TableBusyError extends BusyRefusal {
  constructor(
    table: string,
    drainTimeoutMs: number,
    readonly holders: readonly TableHolder[],
  ) {
    const named = holders.map(
      (h) => `pid ${h.pid} (user ${h.user ?? '?'}, application "${h.applicationName}", since ${h.since?.toISOString() ?? '?'})`,
    );
    super(
      `${table} is still in use after ${drainTimeoutMs} ms of waiting: ` +
        (named.length > 0 ? `held by ${named.join(', ')}` : 'its holders had just let it go'),
    );
  }
}

export interface MoveOptions {
  /** How long a move may wait for the sessions that use the table to let it go. */
  drainTimeoutMs?: number;
  /** Hears every try (an activity heartbeats); aborted, the wait stops with its reason. */
  watch?: Watch;
}

export const DEFAULT_DRAIN_TIMEOUT_MS = 60_000;
// Each try queues an ACCESS EXCLUSIVE request that every later reader of the table waits behind: keep it short.
const LOCK_TRY = '100ms';
const FIRST_PAUSE_MS = 50;
const LONGEST_PAUSE_MS = 1_000;
const LOCK_NOT_AVAILABLE = '55P03';

/** Quotes an identifier, always: a name is never SQL. */
export const ident = (name: string): string => `"${name.replace(/"/g, '""')}"`;
const qualified = (schema: string, table: string) => `${ident(schema)}.${ident(table)}`;

/** The shard's name outside the live schema: derived from its identity only, so that nothing collides there. */
export function parkedName(id: ShardTableId): string {
  return `c${id.catalogId.replace(/[^a-zA-Z0-9]/g, '').slice(0, 16)}_t${id.tableId}_s${id.shard}`;
}

/** The area a schema stands for: tablefate's own two, or any other (a user's namespace) for live. */
const areaOf = (schema: string): TableArea => (schema === TRASH_SCHEMA ? 'trash' : schema === GARBAGE_SCHEMA ? 'garbage' : 'live');

export class PostgresTables {
  constructor(private readonly pool: Pool) {}

  /** Makes tablefate's own schemas and its record of the tables it placed (idempotent). */
  async prepare(): Promise<void> {
    await this.inTransaction(async (c) => {
      // Two workers preparing one node at once must not both create: one waits for the other's transaction.
      await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', ['tablefate.prepare']);
      for (const schema of [OWN_SCHEMA, TRASH_SCHEMA, GARBAGE_SCHEMA]) await ensureSchema(c, schema);
      await c.query(
        `CREATE TABLE IF NOT EXISTS ${qualified(OWN_SCHEMA, 'shards')} (
           table_oid oid PRIMARY KEY,
           catalog_id text NOT NULL,
           table_id bigint NOT NULL,
           shard integer NOT NULL,
           live_names jsonb,
           changed_at timestamptz NOT NULL DEFAULT now(),
           UNIQUE (catalog_id, table_id, shard))`,
      );
    });
  }

  /** Where the shard table is, found by the oid recorded when it was made. */
  async locate(id: ShardTableId, client?: PoolClient): Promise<ShardTableLocation | null> {
    const { rows } = await (client ?? this.pool).query<{ oid: number; schema: string; table: string }>(
      `SELECT s.table_oid::int8 AS oid, n.nspname AS schema, c.relname AS table
         FROM ${qualified(OWN_SCHEMA, 'shards')} s
         JOIN pg_class c ON c.oid = s.table_oid
         JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE s.catalog_id = $1 AND s.table_id = $2 AND s.shard = $3`,
      [id.catalogId, id.tableId, id.shard],
    );
    const row = rows[0];
    if (!row) return null;
    const area = areaOf(row.schema);
    return { oid: Number(row.oid), area, schema: row.schema, table: row.table };
  }

  /** Every shard table of `catalogId` on this node, where it is and when it last moved (the reconciler's view). */
  async list(catalogId: string): Promise<Array<{ tableId: number; shard: number; area: TableArea; changedAt: number }>> {
    const { rows } = await this.pool.query<{ table_id: string; shard: number; schema: string; changed_at: Date }>(
      `SELECT s.table_id, s.shard, n.nspname AS schema, s.changed_at
         FROM ${qualified(OWN_SCHEMA, 'shards')} s
         JOIN pg_class c ON c.oid = s.table_oid
         JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE s.catalog_id = $1
        ORDER BY s.table_id, s.shard`,
      [catalogId],
    );
    return rows.map((r) => ({ tableId: Number(r.table_id), shard: r.shard, area: areaOf(r.schema), changedAt: r.changed_at.getTime() }));
  }

  /**
   * Makes the live shard table `live` with `definition`, and records it as this shard's, in one transaction. Made
   * already (a retry), it is found and left as it is. A table of that name that is not this shard's is refused.
   */
  async create(id: ShardTableId, live: LiveName, definition: TableDefinition): Promise<void> {
    await this.inTransaction(async (c) => {
      await this.lockShard(c, id);
      if (await this.locate(id, c)) return;
      await this.refuseStranger(c, live);
      await ensureSchema(c, live.schema);
      const body = 'columns' in definition ? definition.columns : `LIKE ${likeSource(definition.like)} INCLUDING ALL`;
      await c.query({ text: `CREATE TABLE ${qualified(live.schema, live.table)} (${body})`, values: [] });
      await c.query(
        `INSERT INTO ${qualified(OWN_SCHEMA, 'shards')} (table_oid, catalog_id, table_id, shard)
         VALUES (to_regclass($1)::oid, $2, $3, $4)`,
        [qualified(live.schema, live.table), id.catalogId, id.tableId, id.shard],
      );
    });
  }

  /**
   * Records the table that already exists at `live` as this shard's (an adopt), in one transaction: from then on it is
   * found by its oid, as a table tablefate made. Recorded already (a retry) is success. Refused, with nothing changed:
   * no such table; one tablefate records already; and what a move could not carry whole or at all: a view or anything
   * else that is not a plain table, a partitioned table or a partition, a table in an inheritance tree, a temporary
   * table, a table the worker's role may not alter.
   */
  async adopt(id: ShardTableId, live: LiveName): Promise<void> {
    await this.inTransaction(async (c) => {
      await this.lockShard(c, id);
      if (await this.locate(id, c)) return;
      const name = `${live.schema}.${live.table}`;
      const { rows } = await c.query<{
        oid: string;
        kind: string;
        persistence: string;
        partition: boolean;
        inherits: boolean;
        owner: string;
        may_alter: boolean;
        catalog_id: string | null;
        table_id: string | null;
      }>(
        `SELECT c.oid::int8 AS oid, c.relkind AS kind, c.relpersistence AS persistence, c.relispartition AS partition,
                EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = c.oid OR inhparent = c.oid) AS inherits,
                pg_get_userbyid(c.relowner) AS owner, pg_has_role(current_user, c.relowner, 'USAGE') AS may_alter,
                s.catalog_id, s.table_id
           FROM pg_class c LEFT JOIN ${qualified(OWN_SCHEMA, 'shards')} s ON s.table_oid = c.oid
          WHERE c.oid = to_regclass($1)`,
        [qualified(live.schema, live.table)],
      );
      const found = rows[0];
      if (!found) throw new TableNotFoundError(`there is no table ${name} to adopt`);
      if (found.catalog_id !== null)
        throw new TableExistsError(`${name} is managed by tablefate already (catalog ${found.catalog_id}, table ${found.table_id})`);
      const refusal = adoptRefusal(found);
      if (refusal) throw new InvalidInputError(`${name} cannot be adopted: ${refusal}`);
      await c.query(`INSERT INTO ${qualified(OWN_SCHEMA, 'shards')} (table_oid, catalog_id, table_id, shard) VALUES ($1, $2, $3, $4)`, [
        found.oid,
        id.catalogId,
        id.tableId,
        id.shard,
      ]);
    });
  }

  /** Forgets the shard's table without touching it (an adopt taken back: the table was there before tablefate). */
  async release(id: ShardTableId): Promise<void> {
    await this.pool.query(`DELETE FROM ${qualified(OWN_SCHEMA, 'shards')} WHERE catalog_id = $1 AND table_id = $2 AND shard = $3`, [
      id.catalogId,
      id.tableId,
      id.shard,
    ]);
  }

  /**
   * Moves the shard table to `to` (to the live area: under `live`), in one transaction. Already there is success.
   * Out of the live area its indexes and sequences take names derived from the shard, and the names they had are
   * recorded; back in, they take those again. A table out of the live area is refused while views or other tables'
   * foreign keys depend on it.
   *
   * The move waits until no other transaction holds the table, asking for it briefly and trying again on a backoff
   * (a request left queued would hold up every reader that comes after it), up to `drainTimeoutMs`.
   */
  async move(id: ShardTableId, to: TableArea, live?: LiveName, options: MoveOptions = {}): Promise<void> {
    const drainTimeoutMs = options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS;
    const deadline = Date.now() + drainTimeoutMs;
    for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, LONGEST_PAUSE_MS)) {
      checkWatch(options.watch);
      try {
        await this.inTransaction((c) => this.moveOnce(c, id, to, live));
        return;
      } catch (err) {
        if ((err as { code?: unknown }).code !== LOCK_NOT_AVAILABLE) throw err;
      }
      const left = deadline - Date.now();
      if (left <= 0) throw await this.busy(id, drainTimeoutMs);
      await pauseUnlessAborted(Math.min(pause, left), options.watch?.signal);
    }
  }

  private async moveOnce(c: PoolClient, id: ShardTableId, to: TableArea, live: LiveName | undefined): Promise<void> {
    await this.lockShard(c, id);
    const found = await this.locate(id, c);
    if (!found) throw new NotOurTableError(`no table of ${describe(id)} is on this node`);
    if (isThere(found, to, live)) return;
    // Set after the shard lock: two moves of one shard wait for each other as before; only the table's lock is tried briefly.
    await c.query(`SET LOCAL lock_timeout = '${LOCK_TRY}'`);
    await c.query(`LOCK TABLE ${qualified(found.schema, found.table)} IN ACCESS EXCLUSIVE MODE`);
    // Found again under the lock: a user may have renamed the table while we waited for it.
    const at = await this.locate(id, c);
    if (!at || at.oid !== found.oid || at.schema !== found.schema || at.table !== found.table)
      throw new NotOurTableError(`${describe(id)} was moved by someone else while this move waited for it`);
    // Checked under the lock, which keeps new views and foreign keys off the table until the move commits.
    if (at.area === 'live' && to !== 'live') await refuseDependents(c, at);
    const parked = parkedName(id);
    if (to === 'live') {
      if (!live) throw new Error('a move to the live area needs the live name');
      await this.refuseStranger(c, live);
      await ensureSchema(c, live.schema);
      if (at.area === 'live') await this.park(c, id, at);
      const from = at.area === 'live' ? { schema: at.schema, table: parked } : at;
      if (from.schema !== live.schema) await c.query(`ALTER TABLE ${qualified(from.schema, from.table)} SET SCHEMA ${ident(live.schema)}`);
      await c.query(`ALTER TABLE ${qualified(live.schema, from.table)} RENAME TO ${ident(live.table)}`);
      await this.unpark(c, id, live);
    } else {
      if (at.area === 'live') await this.park(c, id, at);
      await c.query(`ALTER TABLE ${qualified(at.schema, at.area === 'live' ? parked : at.table)} SET SCHEMA ${ident(AREA_SCHEMAS[to])}`);
    }
    // When it last moved: the reconciler leaves a table no catalog accounts for alone for a grace period from then.
    await c.query(`UPDATE ${qualified(OWN_SCHEMA, 'shards')} SET changed_at = now() WHERE table_oid = $1`, [at.oid]);
  }

  /** The error of a drain that ran out of time, naming the sessions holding the table now (ours excluded). */
  private async busy(id: ShardTableId, drainTimeoutMs: number): Promise<TableBusyError> {
    const at = await this.locate(id);
    if (!at) return new TableBusyError(describe(id), drainTimeoutMs, []);
    const { rows } = await this.pool.query<{ pid: number; user: string | null; application_name: string; since: Date | null }>(
      `SELECT DISTINCT ON (a.pid) a.pid, a.usename AS user, a.application_name, coalesce(a.xact_start, a.query_start) AS since
         FROM pg_locks l
         JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'relation' AND l.relation = $1 AND l.granted
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.pid <> pg_backend_pid()
        ORDER BY a.pid`,
      [at.oid],
    );
    const holders = rows.map((r) => ({ pid: r.pid, user: r.user, applicationName: r.application_name, since: r.since }));
    return new TableBusyError(`${at.schema}.${at.table}`, drainTimeoutMs, holders);
  }

  /** Drops the shard table wherever it is, and its record. None is success. */
  async drop(id: ShardTableId): Promise<void> {
    await this.inTransaction(async (c) => {
      await this.lockShard(c, id);
      const at = await this.locate(id, c);
      if (at) await c.query(`DROP TABLE ${qualified(at.schema, at.table)}`);
      await c.query(`DELETE FROM ${qualified(OWN_SCHEMA, 'shards')} WHERE catalog_id = $1 AND table_id = $2 AND shard = $3`, [
        id.catalogId,
        id.tableId,
        id.shard,
      ]);
    });
  }

  /** The table's bytes as PostgreSQL counts them: heap, indexes and TOAST. */
  async bytes(id: ShardTableId): Promise<number> {
    const at = await this.locate(id);
    if (!at) return 0;
    const { rows } = await this.pool.query<{ bytes: string }>('SELECT pg_total_relation_size($1::oid) AS bytes', [at.oid]);
    return Number(rows[0]!.bytes);
  }

  /**
   * Renames the live table's indexes and owned sequences, then the table, after the shard, recording the names they
   * had (kept from an earlier park if the table is only being moved between live names).
   */
  private async park(c: PoolClient, id: ShardTableId, at: ShardTableLocation): Promise<void> {
    const parked = parkedName(id);
    const companions = await companionsOf(c, at.oid);
    const names: Record<string, string> = { table: at.table };
    for (const [k, rel] of companions.entries()) {
      const derived = `${parked}_${rel.kind === 'S' ? 'q' : 'i'}${k}`;
      names[derived] = rel.name;
      await c.query(`ALTER ${rel.kind === 'S' ? 'SEQUENCE' : 'INDEX'} ${qualified(at.schema, rel.name)} RENAME TO ${ident(derived)}`);
    }
    await c.query(`ALTER TABLE ${qualified(at.schema, at.table)} RENAME TO ${ident(parked)}`);
    await c.query(`UPDATE ${qualified(OWN_SCHEMA, 'shards')} SET live_names = $2 WHERE table_oid = $1`, [at.oid, JSON.stringify(names)]);
  }

  /** Gives the companions in `live.schema` back the names recorded when they were parked (or names after the table). */
  private async unpark(c: PoolClient, id: ShardTableId, live: LiveName): Promise<void> {
    const at = (await this.locate(id, c))!;
    const { rows } = await c.query<{ live_names: Record<string, string> | null }>(
      `SELECT live_names FROM ${qualified(OWN_SCHEMA, 'shards')} WHERE table_oid = $1`,
      [at.oid],
    );
    const names = rows[0]?.live_names ?? {};
    for (const rel of await companionsOf(c, at.oid)) {
      const original = names[rel.name];
      if (original === undefined) continue;
      const wanted = (await isTaken(c, live.schema, original))
        ? await freeName(c, live.schema, renamedAfter(original, names.table, live.table))
        : original;
      await c.query(`ALTER ${rel.kind === 'S' ? 'SEQUENCE' : 'INDEX'} ${qualified(live.schema, rel.name)} RENAME TO ${ident(wanted)}`);
    }
  }

  /** A relation already at `live` (a user's table, or another shard tablefate placed): never touched, the change refused. */
  private async refuseStranger(c: PoolClient, live: LiveName): Promise<void> {
    const { rows } = await c.query<{ ours: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM ${qualified(OWN_SCHEMA, 'shards')} WHERE table_oid = to_regclass($1)::oid) AS ours
        WHERE to_regclass($1) IS NOT NULL`,
      [qualified(live.schema, live.table)],
    );
    if (!rows[0]) return;
    const whose = rows[0].ours ? "another table's shard" : 'a table tablefate did not place';
    throw new NameTakenError(`${live.schema}.${live.table} is taken: ${whose} is there`);
  }

  /** One change of a shard at a time on this node, across workers: a transaction-scoped advisory lock. */
  private async lockShard(c: PoolClient, id: ShardTableId): Promise<void> {
    await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`tablefate:${describe(id)}`]);
  }

  private inTransaction<T>(fn: (c: PoolClient) => Promise<T>): Promise<T> {
    // Strings read as domain/columns.ts reads them.
    return inPgTransaction(this.pool, fn, ['SET LOCAL standard_conforming_strings = on']);
  }
}

/** Why a relation found at an adopted name cannot be tablefate's table, or undefined if it can. */
function adoptRefusal(r: { kind: string; persistence: string; partition: boolean; inherits: boolean; owner: string; may_alter: boolean }) {
  const KINDS: Record<string, string> = { v: 'a view', m: 'a materialized view', f: 'a foreign table', S: 'a sequence', i: 'an index' };
  if (r.kind === 'p') return 'it is a partitioned table (its partitions would not move with it)';
  if (r.kind !== 'r') return `it is ${KINDS[r.kind] ?? 'not a table'}`;
  if (r.partition) return 'it is a partition of another table';
  if (r.inherits) return 'it inherits from another table or has tables inheriting from it';
  if (r.persistence === 't') return 'it is a temporary table';
  if (!r.may_alter) return `it is owned by ${r.owner}, and the worker's role is not a member of that role (it could not move the table)`;
  return undefined;
}

/** The indexes and owned sequences (serial and identity) of a table, in a stable order. */
async function companionsOf(c: PoolClient, oid: number): Promise<Array<{ name: string; kind: 'i' | 'S' }>> {
  const { rows } = await c.query<{ name: string; kind: 'i' | 'S' }>(
    `SELECT rel.relname AS name, rel.relkind AS kind FROM pg_class rel
      WHERE rel.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = $1)
         OR rel.oid IN (SELECT objid FROM pg_depend
                         WHERE refobjid = $1 AND classid = 'pg_class'::regclass AND deptype IN ('a', 'i')
                           AND (SELECT relkind FROM pg_class WHERE oid = objid) = 'S')
      ORDER BY rel.relkind, rel.relname`,
    [oid],
  );
  return rows;
}

/**
 * Creates `schema` unless it is there. PostgreSQL checks CREATE on the database before it looks whether the schema
 * exists, even for `CREATE SCHEMA IF NOT EXISTS`: a worker given schemas made beforehand, and no CREATE on the
 * database, would be refused every time.
 */
async function ensureSchema(c: PoolClient, schema: string): Promise<void> {
  // Two transactions making one schema at once would both try, and the second fail on pg_namespace's unique index: the
  // second waits here for the first to commit, then finds the schema made.
  await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`tablefate:schema:${schema}`]);
  const { rows } = await c.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
  if (rows.length === 0) await c.query(`CREATE SCHEMA IF NOT EXISTS ${ident(schema)}`);
}

/** Whether the table is in `to` already (under `live`, for the live area). */
function isThere(at: ShardTableLocation, to: TableArea, live: LiveName | undefined): boolean {
  if (to === 'live') return at.area === 'live' && at.schema === live?.schema && at.table === live.table;
  return at.schema === AREA_SCHEMAS[to];
}

/**
 * Views and materialized views (through their rewrite rules), other tables' foreign keys, and the tables of its
 * inheritance tree (children, or the parent it is a partition of) that the table is bound to: they point at it by oid,
 * so they would follow it into the trash (a parent would go on reading its rows there), and its purge would have to
 * drop them.
 */
async function refuseDependents(c: PoolClient, at: ShardTableLocation): Promise<void> {
  const { rows } = await c.query<{ schema: string; name: string; what: string }>(
    `SELECT DISTINCT n.nspname AS schema, v.relname AS name,
            CASE v.relkind WHEN 'm' THEN 'materialized view' ELSE 'view' END AS what
       FROM pg_depend d
       JOIN pg_rewrite r ON r.oid = d.objid
       JOIN pg_class v ON v.oid = r.ev_class
       JOIN pg_namespace n ON n.oid = v.relnamespace
      WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass AND d.refobjid = $1 AND v.oid <> $1
     UNION ALL
     SELECT n.nspname, t.relname, format('foreign key %s', con.conname)
       FROM pg_constraint con
       JOIN pg_class t ON t.oid = con.conrelid
       JOIN pg_namespace n ON n.oid = t.relnamespace
      WHERE con.contype = 'f' AND con.confrelid = $1 AND con.conrelid <> $1 AND con.conparentid = 0
     UNION ALL
     SELECT n.nspname, t.relname,
            CASE WHEN i.inhparent = $1 THEN 'inherits from it' ELSE 'its parent: it inherits from it or is its partition' END
       FROM pg_inherits i
       JOIN pg_class t ON t.oid = CASE WHEN i.inhparent = $1 THEN i.inhrelid ELSE i.inhparent END
       JOIN pg_namespace n ON n.oid = t.relnamespace
      WHERE $1 IN (i.inhparent, i.inhrelid)
     ORDER BY 1, 2, 3`,
    [at.oid],
  );
  if (rows.length > 0)
    throw new HasDependentsError(
      `${at.schema}.${at.table}`,
      rows.map((r) => `${r.schema}.${r.name} (${r.what})`),
    );
}

/** Waits `ms`, or less if `signal` aborts meanwhile (the next checkWatch says why). */
function pauseUnlessAborted(ms: number, signal: AbortSignal | undefined): Promise<void> {
  // An abort that came during the last try has fired already: no event would wake us.
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

async function isTaken(c: PoolClient, schema: string, name: string): Promise<boolean> {
  const { rows } = await c.query('SELECT 1 FROM pg_class WHERE relnamespace = $1::regnamespace AND relname = $2', [ident(schema), name]);
  return rows.length > 0;
}

/** `name`, or `name_2`, `name_3`... whichever is free in `schema`. */
async function freeName(c: PoolClient, schema: string, name: string): Promise<string> {
  for (let n = 1; ; n++) {
    const candidate = n === 1 ? name : `${name.slice(0, 60)}_${n}`;
    if (!(await isTaken(c, schema, candidate))) return candidate;
  }
}

/** An index or sequence name made after its table (`orders_pkey`), made after the table's new name (`orders2_pkey`). */
function renamedAfter(original: string, oldTable: string | undefined, newTable: string): string {
  return oldTable && original.startsWith(oldTable) ? `${newTable}${original.slice(oldTable.length)}`.slice(0, 63) : original;
}

/** `schema.table` as a LIKE source: each part quoted. */
function likeSource(source: string): string {
  const parts = source.split('.');
  if (parts.length !== 2 || parts.some((p) => p === '')) throw new Error(`--like takes schema.table, not "${source}"`);
  return qualified(parts[0]!, parts[1]!);
}

const describe = (id: ShardTableId) => `table ${id.tableId} shard ${id.shard} of catalog ${id.catalogId}`;
