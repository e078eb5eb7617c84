import type { Pool, PoolClient } from 'pg';
import { HasDependentsError } from '../domain/errors';
import { ident } from '../catalog/pg-session';
import type { FamilyMember } from './postgres-dependents';
import { DEFAULT_DRAIN_TIMEOUT_MS, LOCK_NOT_AVAILABLE, tryLocksBriefly, withBriefLocks } from './postgres-drain';
import { areaOf, qualified, SHARDS, type LiveName, type ShardTableId } from './postgres-record';
import type { ShardTableLocation } from './postgres-audit';

/**
 * A single partition managed as a table of its own (issue 42). Its move into the trash detaches it from its
 * partitioned table, in the move's transaction, under the same brief lock tries as the table's (plain DETACH PARTITION
 * takes ACCESS EXCLUSIVE on the parent; DETACH ... CONCURRENTLY cannot run in a transaction block, so it cannot be
 * part of the move). Its recall attaches it again, in the recall's transaction, where the parent is live and its
 * bounds are free; otherwise it comes back beside it as a plain table, and says why.
 *
 * ATTACH PARTITION reads every row to prove they fit the bounds, unless a valid CHECK constraint of the table implies
 * them. So the drop adds one (`tablefate_partition_bound`, PostgreSQL's own partition constraint as text) NOT VALID,
 * before the DETACH, and validates it once the move has committed, in the trash, where the scan holds up no one (it
 * takes SHARE UPDATE EXCLUSIVE of a table nobody uses). The recall then attaches without reading the rows, and drops
 * the check.
 */

/** What a partition taken out of its partitioned table keeps of it in its record (`partition`). */
interface DetachedPartition {
  parentOid: number;
  /** The partitioned table's name when it was detached: what a note names it by once it is gone. */
  parent: LiveName;
  /** `FOR VALUES ...` or `DEFAULT`, as pg_get_expr(relpartbound) writes it. */
  bound: string;
  /** Whether it has the check of its bounds (a lone default partition has no partition constraint to state). */
  check: boolean;
  /** Its foreign keys that were its partitioned table's copies: the ATTACH makes them again. */
  inheritedKeys: string[];
  /** What its last recall said of it, said again by a recall made again. */
  recalled?: string;
}

export const BOUND_CHECK = 'tablefate_partition_bound';

/** The partitioned table a table is a partition of, by oid and name; null when it is none's. */
export async function parentOf(c: PoolClient, oid: number): Promise<(LiveName & { oid: number }) | null> {
  const { rows } = await c.query<LiveName & { oid: string }>(
    `SELECT p.oid::int8 AS oid, n.nspname AS schema, p.relname AS table
       FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class ch ON ch.oid = i.inhrelid AND ch.relispartition
       JOIN pg_catalog.pg_class p ON p.oid = i.inhparent JOIN pg_catalog.pg_namespace n ON n.oid = p.relnamespace
      WHERE i.inhrelid = $1`,
    [oid],
  );
  const row = rows[0];
  return row ? { oid: Number(row.oid), schema: row.schema, table: row.table } : null;
}

/**
 * Detaches the table (at `at`, under its lock and its parent's) from its partitioned table, recording the parent and
 * the bounds first, and the check that will let its recall attach it without a scan. Refused while other tables'
 * foreign keys reference its partitioned table: its rows may be theirs to reference, and DETACH would read theirs to
 * know. Answers the move's note; nothing when the table is no partition (its record's partition is forgotten).
 */
export async function detachPartition(c: PoolClient, at: ShardTableLocation, what: string): Promise<string[]> {
  const { parent } = at;
  if (at.partitionRecorded) await c.query(`UPDATE ${SHARDS} SET partition = NULL, partition_of = NULL WHERE table_oid = $1`, [at.oid]);
  if (!parent) return [];
  await refuseReferenced(c, at, parent, what);
  const { rows } = await c.query<{ bound: string; constraint: string | null; inherited: string[] }>(
    `SELECT pg_catalog.pg_get_expr(c.relpartbound, c.oid) AS bound, pg_catalog.pg_get_partition_constraintdef(c.oid) AS constraint,
            ARRAY(SELECT conname::text FROM pg_catalog.pg_constraint WHERE conrelid = c.oid AND contype = 'f' AND conparentid <> 0
                   ORDER BY conname) AS inherited
       FROM pg_catalog.pg_class c WHERE c.oid = $1`,
    [at.oid],
  );
  const { bound, constraint, inherited } = rows[0]!;
  const partition: DetachedPartition = {
    parentOid: parent.oid,
    parent: { schema: parent.schema, table: parent.table },
    bound,
    check: constraint !== null,
    inheritedKeys: inherited,
  };
  await c.query(`UPDATE ${SHARDS} SET partition = $2 WHERE table_oid = $1`, [at.oid, JSON.stringify(partition)]);
  const table = qualified(at.schema, at.table);
  // Added while it is still a partition: PostgreSQL's own text of its partition constraint, NOT VALID (no scan here).
  if (constraint !== null) await c.query(`ALTER TABLE ${table} ADD CONSTRAINT ${ident(BOUND_CHECK)} CHECK (${constraint}) NOT VALID`);
  await c.query(`ALTER TABLE ${qualified(parent.schema, parent.table)} DETACH PARTITION ${table}`);
  return [detachedNote(partition)];
}

/** What a drop of the table would say of its partitioned table (a dry run), or refuse; nothing when it is no partition. */
export async function wouldDetach(c: PoolClient, at: LiveName & { oid: number }): Promise<string[]> {
  const parent = await parentOf(c, at.oid);
  if (!parent) return [];
  await refuseReferenced(c, at, parent, 'trashed');
  const { rows } = await c.query<{ bound: string }>(
    'SELECT pg_catalog.pg_get_expr(relpartbound, oid) AS bound FROM pg_catalog.pg_class WHERE oid = $1',
    [at.oid],
  );
  return [`would detach from ${parent.schema}.${parent.table} (${rows[0]!.bound}) until its recall`];
}

async function refuseReferenced(c: PoolClient, at: LiveName, parent: LiveName & { oid: number }, what: string): Promise<void> {
  const { rows } = await c.query<{ said: string }>(
    `SELECT pg_catalog.format('foreign key %s of %s references its partitioned table', con.conname, con.conrelid::pg_catalog.regclass) AS said
       FROM pg_catalog.pg_constraint con WHERE con.contype = 'f' AND con.confrelid = $1 AND con.conparentid = 0 ORDER BY 1`,
    [parent.oid],
  );
  if (rows.length > 0)
    throw new HasDependentsError(
      `${at.schema}.${at.table} cannot be ${what} alone while others may reference its rows: ${rows.map((r) => r.said).join(', ')}; ` +
        `drop the foreign key first, or drop ${parent.schema}.${parent.table} whole`,
    );
}

/**
 * Validates the check of each detached partition's bounds among `ids` (shard tables of one catalog, found in one
 * statement), if it is not valid yet: after a drop's move has committed (or
 * before a recall's, if a crash came first), in a transaction of its own. It reads the table, which is in the trash,
 * and takes SHARE UPDATE EXCLUSIVE of it: no one waits. A validation that fails leaves the check NOT VALID: the
 * recall's ATTACH then reads the rows itself.
 */
export async function validateBoundChecks(pool: Pool, ids: readonly ShardTableId[]): Promise<void> {
  if (ids.length === 0) return;
  const { rows } = await pool.query<LiveName & { table_id: string; shard: number }>(
    `SELECT s.table_id, s.shard, s.schema_name AS schema, s.table_name AS table FROM ${SHARDS} s
       JOIN ROWS FROM (pg_catalog.unnest($2::int8[]), pg_catalog.unnest($3::int4[])) AS asked(table_id, shard) ON asked.table_id = s.table_id AND asked.shard = s.shard
       JOIN pg_catalog.pg_constraint con ON con.conrelid = s.table_oid AND con.conname = $4 AND NOT con.convalidated
      WHERE s.catalog_id = $1 AND s.partition IS NOT NULL`,
    [ids[0]!.catalogId, ids.map((id) => id.tableId), ids.map((id) => id.shard), BOUND_CHECK],
  );
  for (const at of rows) {
    const id = { catalogId: ids[0]!.catalogId, tableId: Number(at.table_id), shard: at.shard };
    await withBriefLocks(pool, id, { drainTimeoutMs: DEFAULT_DRAIN_TIMEOUT_MS }, async (c) => {
      await tryLocksBriefly(c);
      await c.query(`ALTER TABLE ${qualified(at.schema, at.table)} VALIDATE CONSTRAINT ${ident(BOUND_CHECK)}`);
    }).catch(() => undefined);
  }
}

/**
 * Attaches the table, just moved back live at `live`, to its partitioned table again, in the recall's transaction:
 * where that table is live (the same oid, still partitioned) and the bounds are free. The valid check implies the
 * bounds, so the ATTACH does not read the rows (a default partition of the parent is read, to prove it holds none of
 * them). Otherwise the table stays beside it, plain, and a note says why. The check goes either way.
 */
export async function restorePartition(c: PoolClient, oid: number, live: LiveName): Promise<string[]> {
  const { rows } = await c.query<{ partition: DetachedPartition | null }>(`SELECT partition FROM ${SHARDS} WHERE table_oid = $1`, [oid]);
  const partition = rows[0]?.partition;
  if (!partition) return [];
  const table = qualified(live.schema, live.table);
  const dropCheck = async () => {
    if (partition.check) await c.query(`ALTER TABLE ${table} DROP CONSTRAINT IF EXISTS ${ident(BOUND_CHECK)}`);
  };
  const parentName = `${partition.parent.schema}.${partition.parent.table}`;
  const { rows: found } = await c.query<LiveName & { kind: string }>(
    `SELECT n.nspname AS schema, p.relname AS table, p.relkind::text AS kind FROM pg_catalog.pg_class p
       JOIN pg_catalog.pg_namespace n ON n.oid = p.relnamespace WHERE p.oid = $1`,
    [partition.parentOid],
  );
  const parent = found[0];
  let why: string | undefined;
  if (!parent || parent.kind !== 'p') why = `its partitioned table ${parentName} was dropped while it was in the trash`;
  else if (areaOf(parent.schema) !== 'live') why = `its partitioned table ${parentName} is in tablefate's ${areaOf(parent.schema)}`;
  else {
    await c.query('SAVEPOINT tablefate_partition');
    try {
      // The record first: the guard then finds the table attached where tablefate says.
      await c.query(`UPDATE ${SHARDS} SET partition_of = $2 WHERE table_oid = $1`, [oid, partition.parentOid]);
      await c.query(`ALTER TABLE ${qualified(parent.schema, parent.table)} ATTACH PARTITION ${table} ${partition.bound}`);
      await dropCheck();
      // Its partitioned table's foreign keys came back with the ATTACH: they are not the recall's to put back.
      await c.query(
        `UPDATE ${SHARDS} SET partition = NULL, foreign_keys = (SELECT pg_catalog.jsonb_agg(k) FROM pg_catalog.jsonb_array_elements(foreign_keys) k
                                                              WHERE NOT (k->>'name' = ANY ($2::text[])))
          WHERE table_oid = $1`,
        [oid, partition.inheritedKeys],
      );
      await c.query('RELEASE SAVEPOINT tablefate_partition');
      return [];
    } catch (err) {
      // A lock not had at once is the move's to wait for (it tries again); anything else is this table's.
      if ((err as { code?: unknown }).code === LOCK_NOT_AVAILABLE) throw err;
      await c.query('ROLLBACK TO SAVEPOINT tablefate_partition');
      why = await takenBy(c, err as Error, partition, `${parent.schema}.${parent.table}`);
    }
  }
  await dropCheck();
  const note = `came back detached, beside ${parentName}: ${why}`;
  await c.query(`UPDATE ${SHARDS} SET partition = $2 WHERE table_oid = $1`, [oid, JSON.stringify({ ...partition, recalled: note })]);
  return [note];
}

/** Why an ATTACH was refused, in words: the partition that took the bounds, named, when PostgreSQL says which. */
async function takenBy(c: PoolClient, err: Error, partition: DetachedPartition, parent: string): Promise<string> {
  // PostgreSQL names the partition in its message, unqualified: found among the parent's own.
  const named = async (name: string) => {
    const { rows } = await c.query<{ name: string }>(
      `SELECT pg_catalog.format('%I.%I', n.nspname, ch.relname) AS name FROM pg_catalog.pg_inherits i
         JOIN pg_catalog.pg_class ch ON ch.oid = i.inhrelid JOIN pg_catalog.pg_namespace n ON n.oid = ch.relnamespace
        WHERE i.inhparent = $1 AND ch.relname = $2`,
      [partition.parentOid, name],
    );
    return rows[0]?.name ?? name;
  };
  const overlap = /would overlap partition "(.+)"$/.exec(err.message);
  if (overlap) return `its partition bounds ${partition.bound} of ${parent} are taken by ${await named(overlap[1]!)}`;
  const fallen = /default partition "(.+)" would be violated by some row$/.exec(err.message);
  if (fallen)
    return `rows of its partition bounds ${partition.bound} of ${parent} were written to the default partition ${await named(fallen[1]!)} meanwhile`;
  return `ATTACH PARTITION ... ${partition.bound} was refused: ${err.message}`;
}

/** What a move said of the partition, said again by the same move made again: its detach, or its recall's word. */
export async function recordedPartitionNotes(c: PoolClient, oid: number, to: 'live' | 'trash'): Promise<string[]> {
  const { rows } = await c.query<{ partition: DetachedPartition | null }>(`SELECT partition FROM ${SHARDS} WHERE table_oid = $1`, [oid]);
  const partition = rows[0]?.partition;
  if (!partition) return [];
  if (to === 'trash') return partition.recalled ? [] : [detachedNote(partition)];
  return partition.recalled ? [partition.recalled] : [];
}

/**
 * A partitioned table does not leave the live area with a partition that is a table tablefate manages of its own: its
 * record would be left behind. That one is dropped alone first (detached into the trash).
 */
export async function refuseManagedPartitions(c: PoolClient, members: readonly FamilyMember[], table: string, what: string): Promise<void> {
  const partitions = members.filter((m) => m.kind === 'partition');
  if (partitions.length === 0) return;
  const { rows } = await c.query<{ oid: string; table_id: string }>(
    `SELECT table_oid::int8 AS oid, table_id FROM ${SHARDS} WHERE table_oid = ANY ($1::pg_catalog.oid[]) ORDER BY table_id`,
    [partitions.map((m) => m.oid)],
  );
  if (rows.length === 0) return;
  const named = rows.map((r) => {
    const m = partitions.find((p) => p.oid === Number(r.oid))!;
    return `partition ${m.schema}.${m.name} (table ${r.table_id})`;
  });
  throw new HasDependentsError(
    `${table} cannot be ${what} while a partition of it is a table tablefate manages of its own: ${named.join(', ')}; ` +
      `drop that one first ("tablefate drop" detaches it into the trash, and its recall attaches it again)`,
  );
}

function detachedNote(partition: DetachedPartition): string {
  return `detached from ${partition.parent.schema}.${partition.parent.table} (${partition.bound}) until its recall`;
}
