import type { Pool, PoolClient } from 'pg';
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
import { makeTwin, parkedStatistics, planTwin } from './postgres-twin';

/**
 * A truncate into the trash on one node (StorageDriver.truncateShard), in one transaction after a drop's drain: the
 * table, with its rows, indexes and sequences, moves into the trash as a drop moves it, under the trash entry's identity
 * (`into`: its record is the entry's from then on), and an empty twin of it (postgres-twin.ts) takes its name, recorded
 * as the shard's. No row is copied. A reader or writer of the table waits for the one lock, then finds the twin, as after
 * PostgreSQL's own TRUNCATE, and so do the views, view rules, policies and defaults that pointed at the table: they stay
 * where they are, and are pointed at the twin (postgres-repoint.ts). What no twin could stand in for (a materialized view
 * on the table, another table's key to it, a partition) is refused before anything changes (planTwin), named.
 */

/** The shard's trash entry: the same shard, of the table `into`. */
const entryOf = (id: ShardTableId, into: number): ShardTableId => ({ ...id, tableId: into });

const freshAttempt = (attempt: number): MoveAttempt => ({ attempt, cascade: false, ensured: new Set(), unparked: new Set() });

/**
 * Truncates the live shard table `id` into the trash as the same shard of table `into`. Made already (the entry is
 * recorded: a truncate made again after a crash before its caller heard it) is success, and the table at the shard's name
 * (the twin, written to since, maybe) is left alone: a truncate never empties a table twice.
 */
export async function truncateTable(pool: Pool, id: ShardTableId, into: number, options: MoveOptions): Promise<MoveOutcome> {
  const entry = entryOf(id, into);
  return withBriefLocks(pool, id, options, async (c, attempt) => {
    await lockShards(c, [id, entry]);
    await tryLocksBriefly(c);
    const [placed, made] = await locateAll(c, [id, entry]);
    if (made) return { notes: [] };
    const at = liveTable(id, placed ?? null);
    // Its parents first, as a drop takes them (a writer of both holds the parent while it waits for the table).
    if (at.hasKeys) await lockParents(c, at.oid, attempt);
    await lockNamed(c, [qualified(at.schema, at.table)]);
    const locked = liveTable(id, (await locateAll(c, [id]))[0] ?? null);
    if (locked.oid !== at.oid) throw missing(id, 'it changed while this truncate waited for it');
    // Read under the lock, which keeps the table as it is until the commit; refused, nothing has changed.
    const twin = await planTwin(c, locked.oid);
    await c.query(`UPDATE ${SHARDS} SET table_id = $4 WHERE catalog_id = $1 AND table_id = $2 AND shard = $3`, [
      id.catalogId,
      id.tableId,
      id.shard,
      into,
    ]);
    // What points at the table stays where it is: the twin's making points it at the twin.
    const moved = await moveOut(c, [{ move: { id: entry }, at: locked, staying: twin.pointers.staying }], 'trash', freshAttempt(attempt));
    const original = { schema: TRASH_SCHEMA, table: parkedName(entry) };
    await makeTwin(c, twin, original);
    // The names its statistics objects had, which the twin's took: kept beside its companions', for its recall.
    const statistics = parkedStatistics(twin, original);
    if (Object.keys(statistics).length > 0)
      await c.query(`UPDATE ${SHARDS} SET live_names = coalesce(live_names, '{}') || $2::jsonb WHERE table_oid = $1`, [
        locked.oid,
        JSON.stringify(statistics),
      ]);
    await recordTwin(c, id, { schema: twin.schema, table: twin.table });
    return { notes: [...[...moved.values()].flatMap((m) => m.notes), ...repointedNote(twin.pointers, 'its empty twin')] };
  });
}

/**
 * Whether the live shard table `id` could be truncated into `into` now (StorageDriver.checkTruncate): refused as
 * truncateTable would refuse it, under no lock and changing nothing. Made already passes.
 */
export async function checkTruncateTable(pool: Pool, id: ShardTableId, into: number): Promise<void> {
  const c = await pool.connect();
  try {
    const [placed, made] = await locateAll(c, [id, entryOf(id, into)]);
    if (made) return;
    await planTwin(c, liveTable(id, placed ?? null).oid);
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
