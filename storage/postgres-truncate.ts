import type { Pool, PoolClient } from 'pg';
import type { ReferencingTable } from './driver';
import { PermanentStorageError } from './errors';
import { locateAll, type ShardTableLocation } from './postgres-audit';
import { lockNamed, tryLocksBriefly, withBriefLocks, type MoveOptions } from './postgres-drain';
import { lockParents } from './postgres-foreign-keys';
import { moveIn, moveOut, type MoveAttempt } from './postgres-move-locked';
import type { MoveOutcome } from './postgres-moves';
import { lockShards } from './postgres-node';
import { describeShard, missing, parkedName, qualified, SHARDS, TRASH_SCHEMA, type LiveName, type ShardTableId } from './postgres-record';
import { companionsOfAll, parkSteps } from './postgres-names';
import { describePointers, readPointers, repointStatements, type Pointers } from './postgres-repoint';
import { StepPlan } from './postgres-steps';
import { makeTwins, parkedStatistics, planTwin, type TwinPlan } from './postgres-twin';

/**
 * A truncate into the trash on one node (StorageDriver.truncateShard), in one transaction after a drop's drain: the
 * table, with its rows, indexes and sequences, moves into the trash as a drop moves it, under the trash entry's identity
 * (`into`: its record is the entry's from then on), and an empty twin of it (postgres-twin.ts) takes its name, recorded
 * as the shard's. No row is copied. A reader or writer of the table waits for the one lock, then finds the twin, as after
 * PostgreSQL's own TRUNCATE, and so do the views, view rules, policies and defaults that pointed at the table: they stay
 * where they are, and are pointed at the twin (postgres-repoint.ts). What no twin could stand in for (a materialized view
 * on the table, another table's key to it, a partition) is refused before anything changes (planTwin), named.
 *
 * A cascade (`TRUNCATE ... CASCADE`) truncates the tables whose keys reference the table with it, in the same
 * transaction: each moves into the trash with its own keys detached (a table frozen in the trash, as after a drop), and
 * the twins' keys point at one another.
 */

/** The shard's trash entry: the same shard, of the table `into`. */
const entryOf = (id: ShardTableId, into: number): ShardTableId => ({ ...id, tableId: into });

const freshAttempt = (attempt: number): MoveAttempt => ({ attempt, cascade: false, ensured: new Set(), unparked: new Set() });

/** A shard table a truncate empties, and the trash entry its rows go to. */
export interface TruncateOf {
  id: ShardTableId;
  into: number;
}

/**
 * Truncates each live shard table `id` into the trash as the same shard of its `into`, in one transaction: tables
 * truncated as one (a cascade), whose keys to one another refuse nothing and are made again between their twins. Made
 * already (the entry is recorded: a truncate made again after a crash before its caller heard it) is success, and the
 * table at the shard's name (the twin, written to since, maybe) is left alone: a truncate never empties a table twice.
 * Answers each table's outcome, in the order asked.
 */
export async function truncateTables(pool: Pool, truncates: readonly TruncateOf[], options: MoveOptions): Promise<MoveOutcome[]> {
  const ids = truncates.map(({ id }) => id);
  const entries = truncates.map(({ id, into }) => entryOf(id, into));
  return withBriefLocks(pool, ids[0]!, options, async (c, attempt) => {
    await lockShards(c, [...ids, ...entries]);
    await tryLocksBriefly(c);
    const found = await locateAll(c, [...ids, ...entries]);
    const todo = truncates.flatMap((truncate, i) =>
      found[ids.length + i] ? [] : [{ truncate, at: liveTable(truncate.id, found[i] ?? null) }],
    );
    const outcomes = new Map<TruncateOf, MoveOutcome>(truncates.map((truncate) => [truncate, { notes: [] }]));
    if (todo.length === 0) return truncates.map((truncate) => outcomes.get(truncate)!);
    const family = new Set(todo.map(({ at }) => at.oid));
    // Their parents first, as a drop takes them (a writer of both holds the parent while it waits for the table).
    for (const { at } of todo) if (at.hasKeys) await lockParents(c, at.oid, attempt);
    await lockNamed(
      c,
      todo.map(({ at }) => qualified(at.schema, at.table)),
    );
    const again = await locateAll(
      c,
      todo.map(({ truncate }) => truncate.id),
    );
    const locked = todo.map(({ truncate, at }, i) => {
      const now = liveTable(truncate.id, again[i] ?? null);
      if (now.oid !== at.oid) throw missing(truncate.id, 'it changed while this truncate waited for it');
      return { truncate, at: now };
    });
    // Read under the lock, which keeps each table as it is until the commit; refused, nothing has changed.
    const plans: TwinPlan[] = [];
    for (const { at } of locked) plans.push(await planTwin(c, at.oid, family));
    for (const { truncate } of locked) {
      const { id, into } = truncate;
      await c.query(`UPDATE ${SHARDS} SET table_id = $4 WHERE catalog_id = $1 AND table_id = $2 AND shard = $3`, [
        id.catalogId,
        id.tableId,
        id.shard,
        into,
      ]);
    }
    // What points at a table stays where it is: the twin's making points it at the twin.
    const leaving = locked.map(({ truncate, at }, i) => ({
      move: { id: entryOf(truncate.id, truncate.into) },
      at,
      staying: plans[i]!.pointers.staying,
    }));
    const moved = await moveOut(c, leaving, 'trash', freshAttempt(attempt));
    const originals = locked.map(({ truncate }) => ({ schema: TRASH_SCHEMA, table: parkedName(entryOf(truncate.id, truncate.into)) }));
    await makeTwins(
      c,
      plans.map((plan, i) => ({ plan, original: originals[i]! })),
    );
    for (const [i, { truncate, at }] of locked.entries()) {
      const twin = plans[i]!;
      // The names its statistics objects had, which the twin's took: kept beside its companions', for its recall.
      const statistics = parkedStatistics(twin, originals[i]!);
      if (Object.keys(statistics).length > 0)
        await c.query(`UPDATE ${SHARDS} SET live_names = coalesce(live_names, '{}') || $2::jsonb WHERE table_oid = $1`, [
          at.oid,
          JSON.stringify(statistics),
        ]);
      await recordTwin(c, truncate.id, { schema: twin.schema, table: twin.table });
      const notes = moved.get(leaving[i]!.move)?.notes ?? [];
      outcomes.set(truncate, { notes: [...notes, ...repointedNote(twin.pointers, 'its empty twin')] });
    }
    return truncates.map((truncate) => outcomes.get(truncate)!);
  });
}

/**
 * Whether the live shard table `id` could be truncated into `into` now (StorageDriver.checkTruncate): refused as
 * truncateTables would refuse it, under no lock and changing nothing. `withTables`: the tablefate tables truncated with
 * it, whose shard tables' keys to it refuse nothing. Made already passes.
 */
export async function checkTruncateTable(pool: Pool, id: ShardTableId, into: number, withTables: readonly number[] = []): Promise<void> {
  const c = await pool.connect();
  try {
    const [placed, made] = await locateAll(c, [id, entryOf(id, into)]);
    if (made) return;
    const family = new Set<number>();
    if (withTables.length > 0) {
      const { rows } = await c.query<{ oid: string }>(
        `SELECT table_oid::int8 AS oid FROM ${SHARDS} WHERE catalog_id = $1 AND table_id = ANY ($2::int8[])`,
        [id.catalogId, withTables],
      );
      for (const row of rows) family.add(Number(row.oid));
    }
    await planTwin(c, liveTable(id, placed ?? null).oid, family);
  } finally {
    c.release();
  }
}

/**
 * A truncate taken back (StorageDriver.untruncateShard): the trash entry's table live again as the shard, with its rows,
 * as a recall brings it back, what points at the twin pointed at it again, and the twin dropped. Refused, nothing
 * changed, once a row was written to the twin (those rows are kept), or while something no table could take over from
 * the twin points at it (a materialized view made on it since, another table's key to it). No entry in the trash is
 * success: the truncate was never made, or is taken back already.
 */
export async function untruncateTable(pool: Pool, id: ShardTableId, into: number, options: MoveOptions): Promise<MoveOutcome> {
  const entry = entryOf(id, into);
  return withBriefLocks(pool, id, options, async (c, attempt) => {
    await lockShards(c, [id, entry]);
    await tryLocksBriefly(c);
    const [placed, trashed] = await locateAll(c, [id, entry]);
    if (!trashed) return { notes: [] };
    if (trashed.drift) throw missing(entry, trashed.drift);
    if (trashed.area !== 'trash') {
      throw new PermanentStorageError(`${describeShard(entry)} is in the ${trashed.area}, not the trash: its truncate is not taken back`);
    }
    const twin = liveTable(id, placed ?? null);
    await lockNamed(c, [qualified(twin.schema, twin.table)]);
    const { rows } = await c.query<{ written: boolean }>(`SELECT EXISTS (SELECT FROM ${qualified(twin.schema, twin.table)}) AS written`);
    if (rows[0]!.written) {
      throw new PermanentStorageError(
        `${twin.schema}.${twin.table} has rows written since its truncate: the truncate is not taken back, and both are kept ` +
          `(its truncated rows in the trash, ${describeShard(entry)})`,
      );
    }
    // What points at the twin (made so by the truncate, or since) is pointed at the table again, once it is back.
    const { pointers, keys, cannot } = await readPointers(c, twin.oid);
    if (keys.length + cannot.length > 0) {
      throw new PermanentStorageError(
        `${twin.schema}.${twin.table}'s truncate is not taken back: ${[...keys.map((key) => `${key} references it`), ...cannot].join('; ')}`,
      );
    }
    // The twin steps aside first, with its indexes and sequences (as a live table does before it moves), so that the
    // table comes back to their names; it is dropped once nothing points at it. Its record goes before the drop: the guard
    // then sees the DROP as tablefate's.
    const parking = parkSteps(id, twin, (await companionsOfAll(c, [twin.oid])).get(twin.oid)!);
    const plan = new StepPlan();
    plan.add(parking.steps);
    await plan.apply(c);
    // Its statistics objects too, which hold the table's names: dropped now (they would go with it).
    const { rows: statistics } = await c.query<LiveName>(
      `SELECT n.nspname AS schema, x.stxname AS table FROM pg_catalog.pg_statistic_ext x
         JOIN pg_catalog.pg_namespace n ON n.oid = x.stxnamespace WHERE x.stxrelid = $1`,
      [twin.oid],
    );
    for (const st of statistics) await c.query(`DROP STATISTICS ${qualified(st.schema, st.table)}`);
    await c.query(`DELETE FROM ${SHARDS} WHERE catalog_id = $1 AND table_id = $2 AND shard = $3`, [id.catalogId, id.tableId, id.shard]);
    await c.query(`UPDATE ${SHARDS} SET table_id = $2 WHERE catalog_id = $1 AND table_id = $3 AND shard = $4`, [
      id.catalogId,
      id.tableId,
      into,
      id.shard,
    ]);
    const back = (await locateAll(c, [id]))[0]!;
    const moved = await moveIn(c, [{ move: { id, live: { schema: twin.schema, table: twin.table } }, at: back }], freshAttempt(attempt));
    const repoint = repointStatements(pointers);
    if (repoint.length > 0) await c.query(repoint.join(';\n'));
    await c.query(`DROP TABLE ${qualified(twin.schema, parkedName(id))}`);
    return { notes: [...[...moved.values()].flatMap((m) => m.notes), ...repointedNote(pointers, 'the table again')] };
  });
}

/** What was pointed at the table that took the name (`at`), said once. */
function repointedNote(pointers: Pointers, at: string): string[] {
  const pointed = describePointers(pointers);
  return pointed.length > 0 ? [`pointed at ${at}: ${pointed.join(', ')}`] : [];
}

/** The shard's table as a truncate takes it: where its record says, in the live area. */
function liveTable(id: ShardTableId, at: ShardTableLocation | null): ShardTableLocation {
  if (!at) throw missing(id, 'tablefate placed no table for it on this node');
  if (at.drift) throw missing(id, at.drift);
  if (at.area !== 'live')
    throw new PermanentStorageError(`${describeShard(id)} is in the ${at.area}, not live: there is nothing to truncate`);
  return at;
}

/** The twin recorded as the shard's live table, by its oid, as a create records the table it made. */
async function recordTwin(c: PoolClient, id: ShardTableId, live: LiveName): Promise<void> {
  await c.query(
    `INSERT INTO ${SHARDS} (table_oid, catalog_id, table_id, shard, schema_name, table_name, owner_name)
     SELECT c.oid, $2, $3, $4, $5, $6, c.relowner::pg_catalog.regrole::text FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass($1)`,
    [qualified(live.schema, live.table), id.catalogId, id.tableId, id.shard, live.schema, live.table],
  );
}

/**
 * A recursive query's part (after `WITH RECURSIVE asked(table_oid) AS (...), `): `family(child, key, parent)`, each
 * foreign key (by name) of a table (`child`) to one of the tables `asked` holds, or to such a child in turn; a table's key
 * to itself is none. A partitioned table's key counts once, on the partitioned table.
 */
export const REFERENCING = `family(child, key, parent) AS (
       SELECT k.conrelid, k.conname, k.confrelid FROM pg_catalog.pg_constraint k
        WHERE k.contype = 'f' AND k.conparentid = 0 AND k.conrelid <> k.confrelid AND k.confrelid IN (SELECT table_oid FROM asked)
       UNION
       SELECT k.conrelid, k.conname, k.confrelid FROM pg_catalog.pg_constraint k JOIN family f ON k.confrelid = f.child
        WHERE k.contype = 'f' AND k.conparentid = 0 AND k.conrelid <> k.confrelid
     )`;

/**
 * A cascade truncate's family on this node (StorageDriver.referencingTables): the tables whose foreign keys reference one
 * of the shard tables `ids`, and theirs in turn, each with the tablefate table it is a shard of, if any. A read under no
 * lock: the truncate reads the keys again under its locks, and refuses one of a table it does not truncate.
 */
export async function referencingTables(pool: Pool, ids: readonly ShardTableId[]): Promise<ReferencingTable[]> {
  if (ids.length === 0) return [];
  const { rows } = await pool.query<{ name: string; table_id: string | null; key: string; parent: string }>(
    `WITH RECURSIVE asked AS (
       SELECT s.table_oid FROM ${SHARDS} s
         JOIN ROWS FROM (pg_catalog.unnest($2::int8[]), pg_catalog.unnest($3::int4[])) AS a(table_id, shard)
           ON a.table_id = s.table_id AND a.shard = s.shard
        WHERE s.catalog_id = $1
     ), ${REFERENCING}
     SELECT pg_catalog.format('%I.%I', cn.nspname, c.relname) AS name, r.table_id::int8 AS table_id, f.key,
            pg_catalog.format('%I.%I', pn.nspname, p.relname) AS parent
       FROM family f
       JOIN pg_catalog.pg_class c ON c.oid = f.child JOIN pg_catalog.pg_namespace cn ON cn.oid = c.relnamespace
       JOIN pg_catalog.pg_class p ON p.oid = f.parent JOIN pg_catalog.pg_namespace pn ON pn.oid = p.relnamespace
       LEFT JOIN ${SHARDS} r ON r.table_oid = f.child AND r.catalog_id = $1
      WHERE f.child NOT IN (SELECT table_oid FROM asked)
      ORDER BY 1, 3`,
    [ids[0]!.catalogId, ids.map((id) => id.tableId), ids.map((id) => id.shard)],
  );
  return rows.map((row) => ({
    name: row.name,
    ...(row.table_id === null ? {} : { tableId: Number(row.table_id) }),
    key: `${row.key} references ${row.parent}`,
  }));
}
