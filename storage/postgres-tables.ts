import type { Pool, PoolClient, QueryConfig } from 'pg';
import {
  HasDependentsError,
  InvalidInputError,
  NameTakenError,
  ShardMissingError,
  TableBusyError,
  TableExistsError,
  TableNotFoundError,
} from '../domain/errors';
import { checkColumnDefinitions } from '../domain/columns';
import { checkWatch, type Watch } from './driver';
import { POSTGRES_OWN_SCHEMAS } from '../domain/deployment';
import { DEFAULT_DRAIN_TIMEOUT_SECONDS } from '../domain/limits';
import { ident, inPgTransaction } from '../catalog/pg-session';

/**
 * The moves of the PostgreSQL storage driver (issue 16), on one node: a shard is a real table that services query
 * directly while it is live (`<namespace>.<name>`, or `<name>_<shard>`), and that waits in tablefate's own schemas
 * while it is in the trash or garbage. Every move is one transaction of renames and `SET SCHEMA`: no row is
 * copied, and a move either happened whole or not at all (DDL is transactional in PostgreSQL).
 *
 * Identity: the node keeps, in `tablefate.shards`, the oid of every table tablefate placed and the schema and name it
 * gave it, written in the same transaction that made or moved it (before the DDL itself, so that the guard's event
 * trigger, storage/postgres-guard.ts, sees tablefate's own statements as expected). A table is tablefate's only while
 * its oid names a plain table under exactly that name: one dropped, renamed or moved by someone else (or an oid reused
 * after a dump and restore) is `ShardMissing`, and nothing is done to whatever is there.
 *
 * Names: indexes and owned sequences move with their table but keep their names, and those must be unique in a
 * schema: two trashed `orders` would both bring `orders_pkey`. A move out of the live schema renames them after the
 * shard (`<shard name>_i<k>`, `_q<k>`) and records the names they had; a move back gives them those names again,
 * unless another relation in the target schema has taken one meanwhile (the new `orders` made after the drop): then
 * that one is named after the table it now belongs to.
 *
 * Frozen in the trash: a table's own foreign keys to other tables would let those tables' cascades (and SET NULL)
 * rewrite its rows in the trash, and their RESTRICT refuse deletes naming a trashed table. So they are detached on the
 * way out of the live area (their definitions recorded) and put back on the way in: NOT VALID first, inside the move,
 * then validated after it (see `restoredKeys`).
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

/**
 * Where tablefate put the shard table (its record), or null when it placed none for it. `drift` says, when the table
 * is not there any more as tablefate left it, what is there instead.
 */
export interface ShardTableLocation {
  oid: number;
  area: TableArea;
  schema: string;
  table: string;
  drift?: string;
  /** With `drift`: nothing at all is under its oid any more (dropped outside tablefate). */
  gone?: boolean;
}

/** A shard table's record against what PostgreSQL has under its oid now (the doctor's look). */
export interface ShardTableAudit {
  tableId: number;
  shard: number;
  oid: number;
  expected: { schema: string; table: string; owner: string | null };
  /** What the oid names now, or null when it names nothing (dropped). */
  found: { schema: string; table: string; kind: string; owner: string } | null;
  /** Each way `found` differs from `expected`, in words; empty when the table is as tablefate left it. */
  differences: string[];
}

export const { own: OWN_SCHEMA, trash: TRASH_SCHEMA, garbage: GARBAGE_SCHEMA } = POSTGRES_OWN_SCHEMAS;
const AREA_SCHEMAS: Record<Exclude<TableArea, 'live'>, string> = { trash: TRASH_SCHEMA, garbage: GARBAGE_SCHEMA };
const SHARDS = `"${OWN_SCHEMA}"."shards"`;

/** A trash (or purge) refused because objects outside the table depend on it: they would follow it into the trash, or strand its purge. */
function hasDependents(table: string, dependents: readonly string[], what: string): HasDependentsError {
  return new HasDependentsError(`${table} cannot be ${what} while others depend on it: ${dependents.join(', ')}; drop them first`);
}

/** A session that held the table while a move drained it. */
export interface TableHolder {
  pid: number;
  user: string | null;
  applicationName: string;
  /** When its transaction began (or its query, outside one); null when PostgreSQL does not say. */
  since: Date | null;
}

/** A move that could not have the table to itself before its drain deadline: other sessions kept it, each named. */
function tableBusy(table: string, drainTimeoutMs: number, holders: readonly TableHolder[]): TableBusyError {
  const named = holders.map(
    (h) => `pid ${h.pid} (user ${h.user ?? '?'}, application "${h.applicationName}", since ${h.since?.toISOString() ?? '?'})`,
  );
  return new TableBusyError(
    `${table} is still in use after ${drainTimeoutMs} ms of waiting: ` +
      (named.length > 0 ? `held by ${named.join(', ')}` : 'its holders had just let it go'),
  );
}

export interface MoveOptions {
  /** How long a move may wait for the sessions that use the table to let it go. */
  drainTimeoutMs?: number;
  /** Hears every try (an activity heartbeats); aborted, the wait stops with its reason. */
  watch?: Watch;
}

/** What a move did beyond the move: foreign keys it could not put back as they were (recall only). */
export interface MoveOutcome {
  notes: string[];
}

export const DEFAULT_DRAIN_TIMEOUT_MS = DEFAULT_DRAIN_TIMEOUT_SECONDS * 1000;
// Each try queues an ACCESS EXCLUSIVE request that every later reader of the table waits behind: keep it short.
const LOCK_TRY = '100ms';
const FIRST_PAUSE_MS = 50;
const LONGEST_PAUSE_MS = 1_000;
const LOCK_NOT_AVAILABLE = '55P03';

const qualified = (schema: string, table: string) => `${ident(schema)}.${ident(table)}`;

/** The shard's name outside the live schema: derived from its identity only, so that nothing collides there. */
export function parkedName(id: ShardTableId): string {
  return `c${id.catalogId.replace(/[^a-zA-Z0-9]/g, '').slice(0, 16)}_t${id.tableId}_s${id.shard}`;
}

/** The area a schema stands for: tablefate's own two, or any other (a user's namespace) for live. */
const areaOf = (schema: string): TableArea => (schema === TRASH_SCHEMA ? 'trash' : schema === GARBAGE_SCHEMA ? 'garbage' : 'live');

/** A foreign key of the table's own to another table, as detached on its way into the trash. */
interface DetachedKey {
  name: string;
  definition: string;
}

export class PostgresTables {
  constructor(private readonly pool: Pool) {}

  /** Makes tablefate's own schemas and its record of the tables it placed (idempotent), the record's later columns too. */
  async prepare(): Promise<void> {
    await this.inTransaction(async (c) => {
      // Two workers preparing one node at once must not both create: one waits for the other's transaction.
      await c.query('SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1))', ['tablefate.prepare']);
      for (const schema of [OWN_SCHEMA, TRASH_SCHEMA, GARBAGE_SCHEMA]) await ensureSchema(c, schema);
      await c.query(
        `CREATE TABLE IF NOT EXISTS ${SHARDS} (
           table_oid oid PRIMARY KEY,
           catalog_id text NOT NULL,
           table_id bigint NOT NULL,
           shard integer NOT NULL,
           live_names jsonb,
           changed_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
           UNIQUE (catalog_id, table_id, shard))`,
      );
      // Added by issue 29 (identity by name, foreign keys detached in the trash): a record made before gets them, its
      // table's name now taken as the one tablefate gave it. Looked for first: ALTER TABLE would lock the record.
      const { rows } = await c.query<{ n: string }>(
        `SELECT pg_catalog.count(*) AS n FROM pg_catalog.pg_attribute
          WHERE attrelid = $1::pg_catalog.regclass AND attname = 'foreign_keys' AND NOT attisdropped`,
        [SHARDS],
      );
      if (Number(rows[0]!.n) === 0) {
        await c.query(
          `ALTER TABLE ${SHARDS} ADD COLUMN IF NOT EXISTS schema_name text, ADD COLUMN IF NOT EXISTS table_name text,
             ADD COLUMN IF NOT EXISTS owner_name text, ADD COLUMN IF NOT EXISTS foreign_keys jsonb,
             ADD COLUMN IF NOT EXISTS notes jsonb`,
        );
        await c.query(
          `UPDATE ${SHARDS} s SET schema_name = n.nspname, table_name = c.relname, owner_name = pg_catalog.pg_get_userbyid(c.relowner)
             FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE c.oid = s.table_oid AND s.schema_name IS NULL`,
        );
      }
    });
  }

  /** Where tablefate put the shard table, from its record, and whether it is still there (see ShardTableLocation). */
  async locate(id: ShardTableId, client?: PoolClient): Promise<ShardTableLocation | null> {
    const { rows } = await (client ?? this.pool).query<AuditRow>(
      `${AUDIT_SELECT} WHERE s.catalog_id = $1 AND s.table_id = $2 AND s.shard = $3`,
      [id.catalogId, id.tableId, id.shard],
    );
    const row = rows[0];
    if (!row) return null;
    const differences = differencesOf(row);
    return {
      oid: Number(row.oid),
      area: areaOf(row.schema_name),
      schema: row.schema_name,
      table: row.table_name,
      ...(differences.some((d) => d.fatal) ? { drift: differences.map((d) => d.text).join('; '), gone: row.found_schema === null } : {}),
    };
  }

  /** Every shard table of `catalogId` on this node that is where tablefate put it, and when it last moved (the reconciler's view). */
  async list(catalogId: string): Promise<Array<{ tableId: number; shard: number; area: TableArea; changedAt: number }>> {
    const { rows } = await this.pool.query<AuditRow & { changed_at: Date }>(
      `${AUDIT_SELECT} WHERE s.catalog_id = $1 ORDER BY s.table_id, s.shard`,
      [catalogId],
    );
    return rows
      .filter((r) => !differencesOf(r).some((d) => d.fatal))
      .map((r) => ({ tableId: Number(r.table_id), shard: r.shard, area: areaOf(r.schema_name), changedAt: r.changed_at.getTime() }));
  }

  /** Every shard table of `catalogId` on this node against what PostgreSQL has under its oid (the doctor's look). */
  async audit(catalogId: string): Promise<ShardTableAudit[]> {
    const { rows } = await this.pool.query<AuditRow>(`${AUDIT_SELECT} WHERE s.catalog_id = $1 ORDER BY s.table_id, s.shard`, [catalogId]);
    return rows.map((r) => ({
      tableId: Number(r.table_id),
      shard: r.shard,
      oid: Number(r.oid),
      expected: { schema: r.schema_name, table: r.table_name, owner: r.owner_name },
      found: r.found_schema === null ? null : { schema: r.found_schema, table: r.found_table!, kind: r.kind!, owner: r.owner! },
      differences: differencesOf(r).map((d) => d.text),
    }));
  }

  /**
   * Makes the live shard table `live` with `definition`, and records it as this shard's, in one transaction. Made
   * already (a retry), it is found and left as it is. A table of that name that is not this shard's is refused.
   *
   * The column definitions are checked here, where they run, whoever started the create (domain/columns.ts), and the
   * statement goes through the extended protocol, which PostgreSQL refuses to hold a second statement. Names in them
   * resolve in PostgreSQL's own catalog and then the table's schema only: a function or type that a user placed in
   * `public` to catch an unqualified name is never found (write `public.x` to mean it).
   */
  async create(id: ShardTableId, live: LiveName, definition: TableDefinition): Promise<void> {
    if ('columns' in definition && definition.columns !== '') {
      const check = checkColumnDefinitions(definition.columns);
      if (!check.ok) throw new InvalidInputError(check.reason);
    }
    await this.inTransaction(async (c) => {
      await this.lockShard(c, id);
      if (await this.madeAlready(c, id)) return;
      await this.refuseStranger(c, live);
      await ensureSchema(c, live.schema);
      const body = 'columns' in definition ? definition.columns : `LIKE ${likeSource(definition.like)} INCLUDING ALL`;
      await c.query({
        text: "SELECT pg_catalog.set_config('search_path', $1, true)",
        values: [`pg_catalog, ${ident(live.schema)}, pg_temp`],
      });
      // (pg sends a query without values through the simple protocol, unless told: that one would run a second statement.)
      await c.query({ text: `CREATE TABLE ${qualified(live.schema, live.table)} (${body})`, queryMode: 'extended' } as QueryConfig);
      await c.query("SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true)");
      const made = await c.query<{ oid: string; kind: string; persistence: string; parents: string; owner: string }>(
        `SELECT c.oid::int8 AS oid, c.relkind AS kind, c.relpersistence AS persistence, c.relowner::regrole::text AS owner,
                (SELECT pg_catalog.count(*) FROM pg_catalog.pg_inherits i WHERE i.inhrelid = c.oid) AS parents
           FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass($1)`,
        [qualified(live.schema, live.table)],
      );
      const table = made.rows[0];
      // Whatever the text said, what was made must be one plain, permanent table of its own, or nothing is kept.
      if (!table || table.kind !== 'r' || table.persistence !== 'p' || Number(table.parents) > 0)
        throw new InvalidInputError(`the definition of ${live.schema}.${live.table} did not make one plain table; nothing was kept`);
      await c.query(
        `INSERT INTO ${SHARDS} (table_oid, catalog_id, table_id, shard, schema_name, table_name, owner_name)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [table.oid, id.catalogId, id.tableId, id.shard, live.schema, live.table, table.owner],
      );
    });
  }

  /** Whether the shard's table was made (or adopted) already: a retry. Made, then dropped or moved by hand, is ShardMissing. */
  private async madeAlready(c: PoolClient, id: ShardTableId): Promise<boolean> {
    const placed = await this.locate(id, c);
    if (placed?.drift) throw missing(id, placed.drift);
    return placed !== null;
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
      if (await this.madeAlready(c, id)) return;
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
                EXISTS (SELECT 1 FROM pg_catalog.pg_inherits WHERE inhrelid = c.oid OR inhparent = c.oid) AS inherits,
                pg_catalog.pg_get_userbyid(c.relowner) AS owner, pg_catalog.pg_has_role(current_user, c.relowner, 'USAGE') AS may_alter,
                s.catalog_id, s.table_id
           FROM pg_catalog.pg_class c LEFT JOIN ${SHARDS} s ON s.table_oid = c.oid
          WHERE c.oid = pg_catalog.to_regclass($1)`,
        [qualified(live.schema, live.table)],
      );
      const found = rows[0];
      if (!found) throw new TableNotFoundError(`there is no table ${name} to adopt`);
      if (found.catalog_id !== null)
        throw new TableExistsError(`${name} is managed by tablefate already (catalog ${found.catalog_id}, table ${found.table_id})`);
      const refusal = adoptRefusal(found);
      if (refusal) throw new InvalidInputError(`${name} cannot be adopted: ${refusal}`);
      await c.query(
        `INSERT INTO ${SHARDS} (table_oid, catalog_id, table_id, shard, schema_name, table_name, owner_name) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [found.oid, id.catalogId, id.tableId, id.shard, live.schema, live.table, found.owner],
      );
    });
  }

  /** Forgets the shard's table without touching it (an adopt taken back: the table was there before tablefate). */
  async release(id: ShardTableId): Promise<void> {
    await this.pool.query(`DELETE FROM ${SHARDS} WHERE catalog_id = $1 AND table_id = $2 AND shard = $3`, [
      id.catalogId,
      id.tableId,
      id.shard,
    ]);
  }

  /**
   * Moves the shard table to `to` (to the live area: under `live`), in one transaction. Already there, by tablefate's
   * record, is success: a move taken back after the table was found missing has nothing to take back. Out of the live
   * area its indexes and sequences take names derived from the shard, and the names they had are recorded; back in,
   * they take those again. A table out of the live area is refused while others depend on it (see refuseDependents),
   * and its foreign keys to other tables are detached; back in, they are put back.
   *
   * The move waits until no other transaction holds the table, asking for it briefly and trying again on a backoff
   * (a request left queued would hold up every reader that comes after it), up to `drainTimeoutMs`.
   */
  async move(id: ShardTableId, to: TableArea, live?: LiveName, options: MoveOptions = {}): Promise<MoveOutcome> {
    const restored = await this.withBriefLocks(id, options, (c, attempt) => this.moveOnce(c, id, to, live, attempt));
    const notes = await this.validateKeys(id, restored);
    // Kept where the doctor reads them, until the table's next move.
    if (notes.length > 0)
      await this.pool.query(`UPDATE ${SHARDS} SET notes = $4 WHERE catalog_id = $1 AND table_id = $2 AND shard = $3`, [
        id.catalogId,
        id.tableId,
        id.shard,
        JSON.stringify(notes),
      ]);
    return { notes };
  }

  private async moveOnce(
    c: PoolClient,
    id: ShardTableId,
    to: TableArea,
    live: LiveName | undefined,
    attempt: number,
  ): Promise<DetachedKey[]> {
    await this.lockShard(c, id);
    const placed = await this.locate(id, c);
    if (!placed) throw missing(id, 'tablefate placed no table for it on this node');
    if (isThere(placed, to, live)) return [];
    // A purge of a table dropped by hand has nothing left to move: its delete forgets the record.
    if (placed.gone && to === 'garbage') return [];
    if (placed.drift) throw missing(id, placed.drift);
    // Set after the shard lock: two moves of one shard wait for each other as before; only the table's lock is tried briefly.
    await c.query(`SET LOCAL lock_timeout = '${LOCK_TRY}'`);
    // Out of the live area its keys are detached, which locks their parents: those first. A writer of both (an UPDATE of
    // the parent, then an INSERT here) would otherwise hold the parent while it waits for the table behind this move, and
    // this move wait for the parent: each try would run out, however short the writers' transactions.
    if (placed.area === 'live' && to !== 'live') await lockParents(c, placed.oid, attempt);
    await c.query(`LOCK TABLE ${qualified(placed.schema, placed.table)} IN ACCESS EXCLUSIVE MODE`);
    // Found again under the lock: a user may have renamed the table while we waited for it.
    const at = await this.locate(id, c);
    if (!at || at.drift || at.oid !== placed.oid) throw missing(id, at?.drift ?? 'it changed while this move waited for it');
    // Checked under the lock, which keeps new dependents off the table until the move commits.
    if (to !== 'live') await refuseDependents(c, at, to === 'garbage' ? 'purged' : 'trashed');
    if (at.area === 'live' && to !== 'live') await this.detachKeys(c, at);
    const parked = parkedName(id);
    let restored: DetachedKey[] = [];
    if (to === 'live') {
      if (!live) throw new Error('a move to the live area needs the live name');
      await this.refuseStranger(c, live);
      await ensureSchema(c, live.schema);
      if (at.area === 'live') await this.park(c, id, at);
      const from = at.area === 'live' ? { schema: at.schema, table: parked } : at;
      if (from.schema !== live.schema) await this.relocate(c, at.oid, from, { schema: live.schema, table: from.table });
      await this.relocate(c, at.oid, { schema: live.schema, table: from.table }, live);
      await this.unpark(c, id, live);
      if (at.area !== 'live') restored = await this.restoreKeys(c, at.oid, live);
    } else {
      if (at.area === 'live') await this.park(c, id, at);
      const from = { schema: at.schema, table: at.area === 'live' ? parked : at.table };
      await this.relocate(c, at.oid, from, { schema: AREA_SCHEMAS[to], table: from.table });
    }
    // When it last moved: the reconciler leaves a table no catalog accounts for alone for a grace period from then.
    await c.query(`UPDATE ${SHARDS} SET changed_at = pg_catalog.now(), notes = NULL WHERE table_oid = $1`, [at.oid]);
    return restored;
  }

  /**
   * Renames the table or sets its schema, the record first: the guard's trigger, at the end of the statement, then finds
   * the table where tablefate says it is.
   */
  private async relocate(c: PoolClient, oid: number, from: LiveName, to: LiveName): Promise<void> {
    await c.query(`UPDATE ${SHARDS} SET schema_name = $2, table_name = $3 WHERE table_oid = $1`, [oid, to.schema, to.table]);
    if (from.schema !== to.schema) await c.query(`ALTER TABLE ${qualified(from.schema, from.table)} SET SCHEMA ${ident(to.schema)}`);
    else if (from.table !== to.table) await c.query(`ALTER TABLE ${qualified(from.schema, from.table)} RENAME TO ${ident(to.table)}`);
  }

  /** Detaches the table's foreign keys to other tables, recording their definitions (kept from an earlier detach). */
  private async detachKeys(c: PoolClient, at: ShardTableLocation): Promise<void> {
    const { rows } = await c.query<DetachedKey>(
      `SELECT conname AS name, pg_catalog.pg_get_constraintdef(oid) AS definition FROM pg_catalog.pg_constraint
        WHERE conrelid = $1 AND contype = 'f' AND confrelid <> $1 AND conparentid = 0 ORDER BY conname`,
      [at.oid],
    );
    if (rows.length === 0) return;
    await c.query(`UPDATE ${SHARDS} SET foreign_keys = $2 WHERE table_oid = $1`, [at.oid, JSON.stringify(rows)]);
    for (const key of rows) await c.query(`ALTER TABLE ${qualified(at.schema, at.table)} DROP CONSTRAINT ${ident(key.name)}`);
  }

  /**
   * Puts back the foreign keys detached on the way into the trash, NOT VALID (checked for new rows at once, the old ones
   * not read here, so that a recall stays a rename however big the table). One that cannot be put back at all (its
   * parent is gone) is left out and said. Answers those to validate once the move has committed.
   */
  private async restoreKeys(c: PoolClient, oid: number, live: LiveName): Promise<DetachedKey[]> {
    const { rows } = await c.query<{ foreign_keys: DetachedKey[] | null }>(`SELECT foreign_keys FROM ${SHARDS} WHERE table_oid = $1`, [
      oid,
    ]);
    const keys = rows[0]?.foreign_keys ?? [];
    const restored: DetachedKey[] = [];
    for (const key of keys) {
      const notValid = /\bNOT VALID$/.test(key.definition) ? '' : ' NOT VALID';
      await c.query('SAVEPOINT tablefate_key');
      try {
        await c.query(`ALTER TABLE ${qualified(live.schema, live.table)} ADD CONSTRAINT ${ident(key.name)} ${key.definition}${notValid}`);
        await c.query('RELEASE SAVEPOINT tablefate_key');
        restored.push(key);
      } catch (err) {
        // A lock not had at once is the move's to wait for (it tries again); anything else is this key's.
        if ((err as { code?: unknown }).code === LOCK_NOT_AVAILABLE) throw err;
        await c.query('ROLLBACK TO SAVEPOINT tablefate_key');
        restored.push({ name: key.name, definition: `!${(err as Error).message}` });
      }
    }
    if (keys.length > 0) await c.query(`UPDATE ${SHARDS} SET foreign_keys = NULL WHERE table_oid = $1`, [oid]);
    return restored;
  }

  /**
   * Validates the foreign keys a recall put back. One whose parent rows are gone (deleted while the table was in the
   * trash) stays NOT VALID: enforced for new rows, the old ones kept as they are, and said.
   */
  private async validateKeys(id: ShardTableId, keys: DetachedKey[]): Promise<string[]> {
    const notes: string[] = [];
    for (const key of keys) {
      if (key.definition.startsWith('!')) {
        notes.push(`foreign key ${key.name} was not put back: ${key.definition.slice(1)}`);
        continue;
      }
      if (/\bNOT VALID$/.test(key.definition)) continue;
      try {
        await this.withBriefLocks(id, { drainTimeoutMs: DEFAULT_DRAIN_TIMEOUT_MS }, async (c) => {
          const at = await this.locate(id, c);
          if (!at || at.drift) return;
          await c.query(`SET LOCAL lock_timeout = '${LOCK_TRY}'`);
          await c.query(`ALTER TABLE ${qualified(at.schema, at.table)} VALIDATE CONSTRAINT ${ident(key.name)}`);
        });
      } catch (err) {
        notes.push(`foreign key ${key.name} is back NOT VALID, its old rows kept as they were: ${(err as Error).message}`);
      }
    }
    return notes;
  }

  /**
   * Runs `change` in a transaction of its own until it is not refused a lock (`lock_timeout`, 55P03), pausing on a
   * backoff between tries, up to `drainTimeoutMs`: then TableBusy, naming who holds the table.
   */
  private async withBriefLocks<T>(
    id: ShardTableId,
    options: MoveOptions,
    change: (c: PoolClient, attempt: number) => Promise<T>,
  ): Promise<T> {
    const drainTimeoutMs = options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS;
    const deadline = Date.now() + drainTimeoutMs;
    for (let pause = FIRST_PAUSE_MS, attempt = 0; ; pause = Math.min(pause * 2, LONGEST_PAUSE_MS), attempt++) {
      checkWatch(options.watch);
      try {
        return await this.inTransaction((c) => change(c, attempt));
      } catch (err) {
        if ((err as { code?: unknown }).code !== LOCK_NOT_AVAILABLE) throw err;
      }
      const left = deadline - Date.now();
      if (left <= 0) throw await this.busy(id, drainTimeoutMs);
      await pauseUnlessAborted(Math.min(pause, left), options.watch?.signal);
    }
  }

  /** The error of a drain that ran out of time, naming the sessions holding the table now (ours excluded). */
  private async busy(id: ShardTableId, drainTimeoutMs: number): Promise<TableBusyError> {
    const at = await this.locate(id);
    if (!at) return tableBusy(describe(id), drainTimeoutMs, []);
    const { rows } = await this.pool.query<{ pid: number; user: string | null; application_name: string; since: Date | null }>(
      `SELECT DISTINCT ON (a.pid) a.pid, a.usename AS user, a.application_name, coalesce(a.xact_start, a.query_start) AS since
         FROM pg_catalog.pg_locks l
         JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'relation' AND l.granted
          -- The table, and the parents its foreign keys lock (a drop removes their triggers).
          AND l.relation IN (SELECT $1::oid UNION SELECT confrelid FROM pg_catalog.pg_constraint WHERE conrelid = $1 AND contype = 'f')
          AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
          AND l.pid <> pg_catalog.pg_backend_pid()
        ORDER BY a.pid`,
      [at.oid],
    );
    const holders = rows.map((r) => ({ pid: r.pid, user: r.user, applicationName: r.application_name, since: r.since }));
    return tableBusy(`${at.schema}.${at.table}`, drainTimeoutMs, holders);
  }

  /**
   * Drops the shard table, and its record (first: the guard's trigger then lets the drop through). None is success; so
   * is a table dropped by someone else. One renamed or moved by someone else is not tablefate's to drop: its record is
   * forgotten and the table left where it is. The drop asks for its locks briefly and tries again, as a move does, so
   * that readers of the table (and of a parent its purge must touch) never queue behind it.
   */
  async drop(id: ShardTableId, options: MoveOptions = {}): Promise<void> {
    await this.withBriefLocks(id, options, async (c) => {
      await this.lockShard(c, id);
      const at = await this.locate(id, c);
      await c.query(`DELETE FROM ${SHARDS} WHERE catalog_id = $1 AND table_id = $2 AND shard = $3`, [id.catalogId, id.tableId, id.shard]);
      if (!at || at.drift) return;
      await c.query(`SET LOCAL lock_timeout = '${LOCK_TRY}'`);
      await c.query(`DROP TABLE ${qualified(at.schema, at.table)}`);
    });
  }

  /** The table's bytes as PostgreSQL counts them: heap, indexes and TOAST (0 when it is not where tablefate put it). */
  async bytes(id: ShardTableId): Promise<number> {
    const at = await this.locate(id);
    if (!at || at.drift) return 0;
    const { rows } = await this.pool.query<{ bytes: string }>(
      'SELECT pg_catalog.pg_total_relation_size($1::pg_catalog.regclass) AS bytes',
      [at.oid],
    );
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
      await c.query(`ALTER ${rel.kind === 'S' ? 'SEQUENCE' : 'INDEX'} ${qualified(rel.schema, rel.name)} RENAME TO ${ident(derived)}`);
    }
    await c.query(`UPDATE ${SHARDS} SET live_names = $2 WHERE table_oid = $1`, [at.oid, JSON.stringify(names)]);
    await this.relocate(c, at.oid, at, { schema: at.schema, table: parked });
  }

  /** Gives the companions in `live.schema` back the names recorded when they were parked (or names after the table). */
  private async unpark(c: PoolClient, id: ShardTableId, live: LiveName): Promise<void> {
    const at = (await this.locate(id, c))!;
    const { rows } = await c.query<{ live_names: Record<string, string> | null }>(`SELECT live_names FROM ${SHARDS} WHERE table_oid = $1`, [
      at.oid,
    ]);
    const names = rows[0]?.live_names ?? {};
    for (const rel of await companionsOf(c, at.oid)) {
      const original = names[rel.name];
      if (original === undefined) continue;
      const wanted = (await isTaken(c, rel.schema, original))
        ? await freeName(c, rel.schema, renamedAfter(original, names.table, live.table))
        : original;
      await c.query(`ALTER ${rel.kind === 'S' ? 'SEQUENCE' : 'INDEX'} ${qualified(rel.schema, rel.name)} RENAME TO ${ident(wanted)}`);
    }
  }

  /** A relation already at `live` (a user's table, or another shard tablefate placed): never touched, the change refused. */
  private async refuseStranger(c: PoolClient, live: LiveName): Promise<void> {
    const { rows } = await c.query<{ ours: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM ${SHARDS} WHERE table_oid = pg_catalog.to_regclass($1)::oid) AS ours
        WHERE pg_catalog.to_regclass($1) IS NOT NULL`,
      [qualified(live.schema, live.table)],
    );
    if (!rows[0]) return;
    const whose = rows[0].ours ? "another table's shard" : 'a table tablefate did not place';
    throw new NameTakenError(`${live.schema}.${live.table} is taken: ${whose} is there`);
  }

  /** One change of a shard at a time on this node, across workers: a transaction-scoped advisory lock. */
  private async lockShard(c: PoolClient, id: ShardTableId): Promise<void> {
    await c.query('SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1))', [`tablefate:${describe(id)}`]);
  }

  private inTransaction<T>(fn: (c: PoolClient) => Promise<T>): Promise<T> {
    // Strings read as domain/columns.ts reads them.
    return inPgTransaction(this.pool, fn, ['SET LOCAL standard_conforming_strings = on']);
  }
}

/** A record joined to what its oid names now. */
interface AuditRow {
  oid: string;
  table_id: string;
  shard: number;
  schema_name: string;
  table_name: string;
  owner_name: string | null;
  notes: string[] | null;
  found_schema: string | null;
  found_table: string | null;
  kind: string | null;
  owner: string | null;
}

const AUDIT_SELECT = `
  SELECT s.table_oid::int8 AS oid, s.table_id, s.shard, s.owner_name, s.notes, s.changed_at,
         -- (A record written without its names, by hand, takes the table's as they are.)
         coalesce(s.schema_name, n.nspname, '?') AS schema_name, coalesce(s.table_name, c.relname, '?') AS table_name,
         n.nspname AS found_schema, c.relname AS found_table, c.relkind::text AS kind, pg_catalog.pg_get_userbyid(c.relowner) AS owner
    FROM ${SHARDS} s
    LEFT JOIN pg_catalog.pg_class c ON c.oid = s.table_oid
    LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace`;

/** How what PostgreSQL has differs from the record; `fatal` when the table is not tablefate's to touch any more. */
function differencesOf(r: AuditRow): Array<{ text: string; fatal: boolean }> {
  const was = `${r.schema_name}.${r.table_name}`;
  if (r.found_schema === null) return [{ text: `${was} was dropped outside tablefate`, fatal: true }];
  if (r.kind !== 'r')
    return [{ text: `${was}'s oid ${r.oid} now names a ${RELATION_KINDS[r.kind!] ?? 'relation'}, not its table`, fatal: true }];
  const out: Array<{ text: string; fatal: boolean }> = [];
  if (r.found_schema !== r.schema_name)
    out.push({ text: `${was} was moved outside tablefate to schema ${r.found_schema} (as ${r.found_table})`, fatal: true });
  else if (r.found_table !== r.table_name)
    out.push({ text: `${was} was renamed outside tablefate to ${r.found_schema}.${r.found_table}`, fatal: true });
  if (r.owner_name !== null && r.owner !== r.owner_name)
    out.push({ text: `${was}'s owner was changed outside tablefate from ${r.owner_name} to ${r.owner}`, fatal: false });
  for (const note of r.notes ?? []) out.push({ text: `${was}: ${note}`, fatal: false });
  return out;
}

const RELATION_KINDS: Record<string, string> = {
  v: 'view',
  m: 'materialized view',
  f: 'foreign table',
  S: 'sequence',
  i: 'index',
  p: 'partitioned table',
  c: 'composite type',
  t: 'TOAST table',
  I: 'partitioned index',
};

const missing = (id: ShardTableId, why: string) =>
  new ShardMissingError(`${describe(id)}: ${why}; nothing was changed (tablefate doctor lists what differs)`);

/** Why a relation found at an adopted name cannot be tablefate's table, or undefined if it can. */
function adoptRefusal(r: { kind: string; persistence: string; partition: boolean; inherits: boolean; owner: string; may_alter: boolean }) {
  if (r.kind === 'p') return 'it is a partitioned table (its partitions would not move with it)';
  if (r.kind !== 'r') return `it is a ${RELATION_KINDS[r.kind] ?? 'relation that is not a table'}`;
  if (r.partition) return 'it is a partition of another table';
  if (r.inherits) return 'it inherits from another table or has tables inheriting from it';
  if (r.persistence === 't') return 'it is a temporary table';
  if (!r.may_alter) return `it is owned by ${r.owner}, and the worker's role is not a member of that role (it could not move the table)`;
  return undefined;
}

/** The indexes and owned sequences (serial and identity) of a table, in a stable order (PostgreSQL keeps both in the table's schema). */
async function companionsOf(c: PoolClient, oid: number): Promise<Array<{ schema: string; name: string; kind: 'i' | 'S' }>> {
  const { rows } = await c.query<{ schema: string; name: string; kind: 'i' | 'S' }>(
    `SELECT n.nspname AS schema, rel.relname AS name, rel.relkind AS kind
       FROM pg_catalog.pg_class rel JOIN pg_catalog.pg_namespace n ON n.oid = rel.relnamespace
      WHERE rel.oid IN (SELECT indexrelid FROM pg_catalog.pg_index WHERE indrelid = $1)
         OR rel.oid IN (SELECT objid FROM pg_catalog.pg_depend
                         WHERE refobjid = $1 AND classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND deptype IN ('a', 'i')
                           AND (SELECT relkind FROM pg_catalog.pg_class WHERE oid = objid) = 'S')
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
  await c.query('SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1))', [`tablefate:schema:${schema}`]);
  const { rows } = await c.query('SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1', [schema]);
  if (rows.length === 0) await c.query(`CREATE SCHEMA IF NOT EXISTS ${ident(schema)}`);
}

/** Whether tablefate's record puts the table in `to` already (under `live`, for the live area). */
function isThere(at: ShardTableLocation, to: TableArea, live: LiveName | undefined): boolean {
  if (to === 'live') return at.area === 'live' && at.schema === live?.schema && at.table === live.table;
  return at.schema === AREA_SCHEMAS[to];
}

/**
 * Refuses while anything outside the table depends on it, its row type (and that type's array) or its owned sequences,
 * as PostgreSQL itself records it (pg_depend): views and materialized views, other tables' foreign keys, defaults,
 * row-level security policies and columns of its row type, functions with SQL-standard bodies or of its row type, tables
 * that inherit from it. They point at it by oid, so they would follow it into the trash (a view would go on reading its
 * rows there, a default on calling its sequence), and its purge could not drop it without them. What belongs to the
 * table itself (its indexes, constraints, defaults, triggers, policies, rules, statistics, publication memberships)
 * moves with it. And a table that inherits from another, or is its partition, would leave its rows in the parent's.
 */
async function refuseDependents(c: PoolClient, at: ShardTableLocation, what: string): Promise<void> {
  const { rows } = await c.query<{ dependent: string }>(
    `WITH own AS (
       SELECT 'pg_catalog.pg_class'::pg_catalog.regclass::oid AS classid, $1::oid AS objid
       UNION ALL
       SELECT 'pg_catalog.pg_type'::pg_catalog.regclass::oid, t.oid FROM pg_catalog.pg_class c
         JOIN pg_catalog.pg_type t ON t.oid IN (c.reltype, (SELECT typarray FROM pg_catalog.pg_type WHERE oid = c.reltype))
        WHERE c.oid = $1
       UNION ALL
       SELECT 'pg_catalog.pg_class'::pg_catalog.regclass::oid, d.objid FROM pg_catalog.pg_depend d
         JOIN pg_catalog.pg_class s ON s.oid = d.objid AND s.relkind = 'S'
        WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
          AND d.refobjid = $1 AND d.deptype IN ('a', 'i')
     ), parts AS (
       SELECT 'pg_catalog.pg_class'::pg_catalog.regclass::oid AS classid, indexrelid AS objid FROM pg_catalog.pg_index WHERE indrelid = $1
       UNION ALL SELECT 'pg_catalog.pg_attrdef'::pg_catalog.regclass::oid, oid FROM pg_catalog.pg_attrdef WHERE adrelid = $1
       UNION ALL SELECT 'pg_catalog.pg_constraint'::pg_catalog.regclass::oid, oid FROM pg_catalog.pg_constraint WHERE conrelid = $1
       UNION ALL SELECT 'pg_catalog.pg_trigger'::pg_catalog.regclass::oid, oid FROM pg_catalog.pg_trigger WHERE tgrelid = $1
       UNION ALL SELECT 'pg_catalog.pg_policy'::pg_catalog.regclass::oid, oid FROM pg_catalog.pg_policy WHERE polrelid = $1
       UNION ALL SELECT 'pg_catalog.pg_rewrite'::pg_catalog.regclass::oid, oid FROM pg_catalog.pg_rewrite WHERE ev_class = $1
       UNION ALL SELECT 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass::oid, oid FROM pg_catalog.pg_statistic_ext WHERE stxrelid = $1
       UNION ALL SELECT 'pg_catalog.pg_publication_rel'::pg_catalog.regclass::oid, oid FROM pg_catalog.pg_publication_rel WHERE prrelid = $1
       UNION ALL SELECT classid, objid FROM own
     )
     SELECT DISTINCT CASE WHEN r.ev_class IS NOT NULL
                          THEN pg_catalog.pg_describe_object('pg_catalog.pg_class'::pg_catalog.regclass, r.ev_class, 0)
                          ELSE pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid) END AS dependent
       FROM pg_catalog.pg_depend d JOIN own o ON o.classid = d.refclassid AND o.objid = d.refobjid
       -- A view depends through its rewrite rule: named as the view.
       LEFT JOIN pg_catalog.pg_rewrite r ON d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass AND r.oid = d.objid
      WHERE d.deptype IN ('n', 'a')
        AND NOT EXISTS (SELECT 1 FROM parts p WHERE p.classid = d.classid AND p.objid = d.objid)
     UNION
     SELECT pg_catalog.format('%s (%s)', pg_catalog.pg_describe_object('pg_catalog.pg_class'::pg_catalog.regclass, i.inhparent, 0),
                              'it inherits from it or is its partition')
       FROM pg_catalog.pg_inherits i WHERE i.inhrelid = $1
     ORDER BY 1`,
    [at.oid],
  );
  if (rows.length > 0)
    throw hasDependents(
      `${at.schema}.${at.table}`,
      rows.map((r) => r.dependent),
      what,
    );
}

/**
 * Locks the other tables the table's foreign keys reference, as dropping the keys will (their triggers go: ACCESS
 * EXCLUSIVE). Writers take several parents in an order of their own (pgbench: accounts, tellers, branches), and while
 * this holds one and waits for the next, a writer holding that one may queue behind it: the try runs out. Once this
 * holds the table every such writer takes first, none is under way and the rest come free. So each try starts from
 * another parent (`attempt`, in turn), and one in a few finds the writers' first.
 */
async function lockParents(c: PoolClient, oid: number, attempt: number): Promise<void> {
  const { rows } = await c.query<{ name: string }>(
    `SELECT pg_catalog.format('%I.%I', n.nspname, p.relname) AS name
       FROM pg_catalog.pg_class p JOIN pg_catalog.pg_namespace n ON n.oid = p.relnamespace
      WHERE p.oid IN (SELECT confrelid FROM pg_catalog.pg_constraint WHERE conrelid = $1 AND contype = 'f' AND confrelid <> $1)
      ORDER BY p.oid`,
    [oid],
  );
  if (rows.length === 0) return;
  const first = attempt % rows.length;
  const inTurn = [...rows.slice(first), ...rows.slice(0, first)].map((r) => r.name);
  await c.query(`LOCK TABLE ${inTurn.join(', ')} IN ACCESS EXCLUSIVE MODE`);
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
  const { rows } = await c.query('SELECT 1 FROM pg_catalog.pg_class WHERE relnamespace = $1::pg_catalog.regnamespace AND relname = $2', [
    ident(schema),
    name,
  ]);
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
  if (parts.length !== 2 || parts.some((p) => p === '')) throw new InvalidInputError(`--like takes schema.table, not "${source}"`);
  return qualified(parts[0]!, parts[1]!);
}

const describe = (id: ShardTableId) => `table ${id.tableId} shard ${id.shard} of catalog ${id.catalogId}`;
