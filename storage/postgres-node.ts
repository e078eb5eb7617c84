import type { Pool, PoolClient } from 'pg';
import { ident, inPgTransaction } from '../catalog/pg-session';
import { describeShard, type ShardTableId } from './postgres-record';

/** How the PostgreSQL driver's changes run on a node: each in a transaction, one change of a shard at a time. */

export function inNodeTransaction<T>(pool: Pool, fn: (c: PoolClient) => Promise<T>): Promise<T> {
  // (Strings are read as domain/columns.ts reads them: the storage sessions' own setting, STORAGE_SESSION in postgres.ts.)
  return inPgTransaction(pool, fn);
}

/** Of two workers preparing one node at once (its record, its SQL door), the second waits for the first's transaction. */
export async function lockPrepare(c: PoolClient): Promise<void> {
  await c.query('SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1))', ['tablefate.prepare']);
}

/** One change of a shard at a time on this node, across workers: a transaction-scoped advisory lock. */
export function lockShard(c: PoolClient, id: ShardTableId): Promise<void> {
  return lockShards(c, [id]);
}

/**
 * Several shards' locks (tables moved as one), in one statement, in table and shard order: two changes of shards in
 * common never wait for each other in a circle. (The function scan yields the array's elements in order, and each
 * row's lock is taken as the row is.)
 */
export async function lockShards(c: PoolClient, ids: readonly ShardTableId[]): Promise<void> {
  const keys = [...ids].sort((a, b) => a.tableId - b.tableId || a.shard - b.shard).map((id) => `tablefate:${describeShard(id)}`);
  await c.query('SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(k)) FROM pg_catalog.unnest($1::text[]) AS k', [keys]);
}

/**
 * Creates `schema` unless it is there. PostgreSQL checks CREATE on the database before it looks whether the schema
 * exists, even for `CREATE SCHEMA IF NOT EXISTS`: a worker given schemas made beforehand, and no CREATE on the
 * database, would be refused every time.
 */
export async function ensureSchema(c: PoolClient, schema: string): Promise<void> {
  // Two transactions making one schema at once would both try, and the second fail on pg_namespace's unique index: the
  // second waits here for the first to commit, then finds the schema made.
  await c.query('SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1))', [`tablefate:schema:${schema}`]);
  const { rows } = await c.query('SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1', [schema]);
  if (rows.length === 0) await c.query(`CREATE SCHEMA IF NOT EXISTS ${ident(schema)}`);
}
