import { createHash } from 'node:crypto';
import type { Pool, PoolConnection } from 'mariadb';
import { ShardMissingError } from '../domain/errors';
import { MARIADB_OWN_DATABASES } from '../domain/deployment';
import { identityAt, innodbNameOf } from './mariadb-identity';
import { ident, qualified } from './mariadb-session';
import type { KeptObjects } from './mariadb-kept';
import { HIDDEN_PREFIX, type Place } from './mariadb-place';

/**
 * The record of a MariaDB storage node: which shard each table tablefate placed there is, what it is (its identity,
 * mariadb-identity.ts), where it is (the live area, the trash, the garbage, under which name) and what was taken off it
 * while it is out of the live area (its triggers and foreign keys, mariadb-kept.ts). It is the table `tablefate.shards`.
 *
 * MariaDB commits every DDL statement on its own, so no move is one transaction: a move writes where it is going
 * (`moving_to`) before each rename, and what it took off (`kept`) before it takes it off. `locate` then finds the
 * table after a crash at any point: where the record says, or where it was going; and each step is safe to run again.
 */

export const { own: OWN_DATABASE, trash: TRASH_DATABASE, garbage: GARBAGE_DATABASE } = MARIADB_OWN_DATABASES;
export type TableArea = 'live' | 'trash' | 'garbage';
export const AREA_DATABASES: Record<Exclude<TableArea, 'live'>, string> = { trash: TRASH_DATABASE, garbage: GARBAGE_DATABASE };
export const SHARDS = qualified(OWN_DATABASE, 'shards');

/** Which shard of which table of which catalog. */
export interface ShardTableId {
  catalogId: string;
  tableId: number;
  shard: number;
}

export type { Place };

/** Where a move is going, written before its rename. */
export interface Destination extends Place {
  area: TableArea;
}

/** The shard's table as its record has it, once found where the record (or the move under way) says. */
export interface Located extends Destination {
  identity: number;
  adopted: boolean;
  /** What was taken off it for its stay out of the live area, to be put back on its way in; null when nothing is. */
  kept: KeptObjects | null;
}

/** The shard's name outside the live area: of its identity in tablefate only, so that nothing collides there. */
export function parkedName(id: ShardTableId): string {
  return `c${id.catalogId.replace(/[^a-zA-Z0-9]/g, '').slice(0, 16)}_t${id.tableId}_s${id.shard}`;
}

/** The name a table takes in its live database for the moment its triggers and keys are taken off or put back. */
export function hiddenName(id: ShardTableId): string {
  return `${HIDDEN_PREFIX}${parkedName(id)}`;
}

export const describeShard = (id: ShardTableId) => `table ${id.tableId} shard ${id.shard} of catalog ${id.catalogId}`;

export const missing = (id: ShardTableId, why: string) =>
  new ShardMissingError(`${describeShard(id)}: ${why}; nothing was changed (tablefate doctor lists what differs)`);

/** Makes tablefate's databases and its record on the node (idempotent). */
export async function prepareRecord(pool: Pool): Promise<void> {
  for (const database of [OWN_DATABASE, TRASH_DATABASE, GARBAGE_DATABASE]) {
    await pool.query(`CREATE DATABASE IF NOT EXISTS ${ident(database)} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`);
  }
  await pool.query(`CREATE TABLE IF NOT EXISTS ${SHARDS} (
    catalog_id VARCHAR(64) NOT NULL,
    table_id BIGINT NOT NULL,
    shard INT NOT NULL,
    identity BIGINT NOT NULL,
    area VARCHAR(8) NOT NULL,
    database_name VARCHAR(64) NOT NULL,
    table_name VARCHAR(64) NOT NULL,
    moving_to LONGTEXT NULL,
    kept LONGTEXT NULL,
    adopted BOOLEAN NOT NULL DEFAULT FALSE,
    notes LONGTEXT NULL,
    changed_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (catalog_id, table_id, shard)
  ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`);
}

/** Whether the node has tablefate's record (prepareRecord made it). */
export async function hasRecord(pool: Pool): Promise<boolean> {
  const rows = await pool.execute<unknown[]>('SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?', [
    OWN_DATABASE,
    'shards',
  ]);
  return rows.length > 0;
}

/**
 * Holds the shard's turn on the node for `work`: two changes of one shard (a retried activity beside the one it
 * replaced) never interleave their steps. A named lock of the session's, which DDL's commits do not release.
 */
export async function withShardTurn<T>(pool: Pool, id: ShardTableId, work: (c: PoolConnection) => Promise<T>): Promise<T> {
  const name = `tablefate_${createHash('sha256').update(`${id.catalogId}/${id.tableId}/${id.shard}`).digest('hex').slice(0, 40)}`;
  const c = await pool.getConnection();
  try {
    const got = await c.execute<Array<{ got: number | null }>>('SELECT GET_LOCK(?, 30) AS got', [name]);
    if (got[0]?.got !== 1) throw Object.assign(new Error(`${describeShard(id)} is being changed by another session`), { errno: 1205 });
    try {
      return await work(c);
    } finally {
      await c.execute('SELECT RELEASE_LOCK(?)', [name]);
    }
  } finally {
    await c.release();
  }
}

interface RecordRow {
  identity: number;
  area: TableArea;
  database_name: string;
  table_name: string;
  moving_to: string | null;
  kept: string | null;
  adopted: number;
}

const KEY = 'catalog_id = ? AND table_id = ? AND shard = ?';
const keyOf = (id: ShardTableId) => [id.catalogId, id.tableId, id.shard];

/** Writes a new record of the shard's table at `at`, or takes the one there (a create run again). */
export async function record(c: PoolConnection, id: ShardTableId, at: Destination, identity: number, adopted: boolean): Promise<void> {
  await c.execute(
    `INSERT INTO ${SHARDS} (catalog_id, table_id, shard, identity, area, database_name, table_name, adopted)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)
     ON DUPLICATE KEY UPDATE identity = VALUES(identity), area = VALUES(area), database_name = VALUES(database_name),
       table_name = VALUES(table_name), adopted = VALUES(adopted), moving_to = NULL, kept = NULL, changed_at = CURRENT_TIMESTAMP(3)`,
    [...keyOf(id), identity, at.area, at.database, at.table, adopted],
  );
}

/** Forgets the shard's table. */
export async function forget(c: PoolConnection | Pool, id: ShardTableId): Promise<void> {
  await c.execute(`DELETE FROM ${SHARDS} WHERE ${KEY}`, keyOf(id));
}

/**
 * A change of the shard's record, in one statement: where its table is now (`at`), where it is going (`movingTo`, said
 * before each rename; null once there) and what was taken off it (`kept`; null: nothing is).
 */
export interface RecordChange {
  at?: Destination;
  movingTo?: Destination | null;
  kept?: KeptObjects | null;
}

export async function writeRecord(c: PoolConnection, id: ShardTableId, change: RecordChange): Promise<void> {
  const sets: string[] = [];
  const values: unknown[] = [];
  const json = (value: object | null) => (value === null ? null : JSON.stringify(value));
  if (change.at) {
    sets.push('area = ?, database_name = ?, table_name = ?, changed_at = CURRENT_TIMESTAMP(3)');
    values.push(change.at.area, change.at.database, change.at.table);
  }
  if (change.movingTo !== undefined) {
    sets.push('moving_to = ?');
    values.push(json(change.movingTo));
  }
  if (change.kept !== undefined) {
    sets.push('kept = ?');
    values.push(json(change.kept));
  }
  if (sets.length === 0) return;
  await c.execute(`UPDATE ${SHARDS} SET ${sets.join(', ')} WHERE ${KEY}`, [...values, ...keyOf(id)]);
}

/** Keeps what a move said, where the doctor reads it, until the next move. */
export async function markNotes(c: PoolConnection | Pool, id: ShardTableId, notes: readonly string[]): Promise<void> {
  await c.execute(`UPDATE ${SHARDS} SET notes = ? WHERE ${KEY}`, [notes.length > 0 ? JSON.stringify(notes) : null, ...keyOf(id)]);
}

/**
 * Where the shard's table is: at its record's place with its identity, or (a move cut short after its rename) at the
 * place it was moving to, which the record then says. Null without a record; `drift` says how it differs when the
 * identity is at neither place (dropped, renamed, replaced or rebuilt outside tablefate), and nothing may be done to it.
 */
export async function locate(
  c: PoolConnection,
  pool: Pool,
  id: ShardTableId,
): Promise<(Located & { drift?: undefined }) | { drift: string } | null> {
  const rows = await c.execute<RecordRow[]>(
    `SELECT identity, area, database_name, table_name, moving_to, kept, adopted FROM ${SHARDS} WHERE ${KEY}`,
    keyOf(id),
  );
  const row = rows[0];
  if (!row) return null;
  const located = (at: Destination): Located => ({
    ...at,
    identity: row.identity,
    adopted: row.adopted === 1,
    kept: row.kept === null ? null : (JSON.parse(row.kept) as KeptObjects),
  });
  const recorded: Destination = { area: row.area, database: row.database_name, table: row.table_name };
  if ((await identityAt(c, pool, OWN_DATABASE, recorded.database, recorded.table)) === row.identity) {
    if (row.moving_to !== null) await writeRecord(c, id, { movingTo: null });
    return located(recorded);
  }
  if (row.moving_to !== null) {
    const to = JSON.parse(row.moving_to) as Destination;
    if ((await identityAt(c, pool, OWN_DATABASE, to.database, to.table)) === row.identity) {
      await writeRecord(c, id, { at: to, movingTo: null });
      return located(to);
    }
  }
  return { drift: await driftOf(c, row.identity, recorded) };
}

/** How the table of `identity` differs from its record's place, in words. */
export async function driftOf(c: PoolConnection | Pool, identity: number, recorded: Place): Promise<string> {
  const now = await innodbNameOf(c, identity);
  const was = `${recorded.database}.${recorded.table}`;
  if (now === null) return `${was} was dropped, or replaced or rebuilt (its InnoDB table id ${identity} is gone), outside tablefate`;
  // (A name of letters, digits and _ only is as InnoDB keeps it; another is shown in InnoDB's file-name encoding.)
  const named = now.includes('@') ? `${now} (as InnoDB names it)` : now.replace('/', '.');
  return `${was} was renamed outside tablefate: its InnoDB table id ${identity} is now ${named}`;
}

/** Every record row of `catalogId` on the node, as it was written (the reconciler's and the doctor's look). */
export async function recordedTables(
  pool: Pool,
  catalogId: string,
): Promise<
  Array<{
    tableId: number;
    shard: number;
    identity: number;
    at: Destination;
    movingTo: Destination | null;
    notes: string[];
    changedAt: number;
  }>
> {
  const rows = await pool.execute<Array<RecordRow & { table_id: number; shard: number; notes: string | null; changed_at: number }>>(
    `SELECT table_id, shard, identity, area, database_name, table_name, moving_to, kept, adopted, notes, UNIX_TIMESTAMP(changed_at) * 1000 AS changed_at FROM ${SHARDS} WHERE catalog_id = ?`,
    [catalogId],
  );
  return rows.map((r) => ({
    tableId: r.table_id,
    shard: r.shard,
    identity: r.identity,
    at: { area: r.area, database: r.database_name, table: r.table_name },
    movingTo: r.moving_to === null ? null : (JSON.parse(r.moving_to) as Destination),
    notes: r.notes === null ? [] : (JSON.parse(r.notes) as string[]),
    changedAt: Math.round(Number(r.changed_at)),
  }));
}
