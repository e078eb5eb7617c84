import type { Pool, PoolClient } from 'pg';
import { audit, listPlaced, locate, type ShardTableAudit, type ShardTableLocation } from './postgres-audit';
import { adoptTable, createTable, releaseTable, type TableDefinition } from './postgres-create';
import type { MoveOptions } from './postgres-drain';
import { dropTable, moveTable, moveTables, type MoveOutcome } from './postgres-moves';
import type { LiveName, ShardTableId, TableArea, TableMove } from './postgres-record';
import { prepareRecord } from './postgres-record-schema';
import type { ReferencingTable } from './driver';
import { checkTruncateTable, referencingTables, truncateTables, untruncateTable, type TruncateOf } from './postgres-truncate';

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
 * Each part in a file of its own: the record's vocabulary (postgres-record.ts) and schema (postgres-record-schema.ts);
 * the record against what PostgreSQL has (postgres-audit.ts); create and adopt (postgres-create.ts); moves and drops
 * (postgres-moves.ts), with the names a table and its companions take (postgres-names.ts), what keeps a table from
 * leaving the live area (postgres-dependents.ts), its foreign keys detached in the trash (postgres-foreign-keys.ts) and
 * the drain before each (postgres-drain.ts).
 */
export class PostgresTables {
  constructor(private readonly pool: Pool) {}

  /** Makes tablefate's own schemas and its record of the tables it placed (idempotent), brought to this code's version. */
  prepare(): Promise<void> {
    return prepareRecord(this.pool);
  }

  /** Where tablefate put the shard table, from its record, and whether it is still there (see ShardTableLocation). */
  locate(id: ShardTableId, client?: PoolClient): Promise<ShardTableLocation | null> {
    return locate(client ?? this.pool, id);
  }

  /** Every shard table of `catalogId` on this node that is where tablefate put it, and when it last moved (the reconciler's view). */
  list(catalogId: string): Promise<Array<{ tableId: number; shard: number; area: TableArea; changedAt: number }>> {
    return listPlaced(this.pool, catalogId);
  }

  /** Every shard table of `catalogId` on this node against what PostgreSQL has under its oid (the doctor's look). */
  audit(catalogId: string): Promise<ShardTableAudit[]> {
    return audit(this.pool, catalogId);
  }

  /** Makes the live shard table and records it (see createTable). */
  create(id: ShardTableId, live: LiveName, definition: TableDefinition): Promise<void> {
    return createTable(this.pool, id, live, definition);
  }

  /** Records the table already at `live` as this shard's (see adoptTable). */
  adopt(id: ShardTableId, live: LiveName): Promise<void> {
    return adoptTable(this.pool, id, live);
  }

  /** Forgets the shard's table without touching it (an adopt taken back: the table was there before tablefate). */
  release(id: ShardTableId): Promise<void> {
    return releaseTable(this.pool, id);
  }

  /** Moves the shard table to `to` (to the live area: under `live`), after draining it (see moveTable). */
  move(id: ShardTableId, to: TableArea, live?: LiveName, options: MoveOptions = {}): Promise<MoveOutcome> {
    return moveTable(this.pool, id, to, live, options);
  }

  /** Moves several shard tables to `to` in one transaction, after draining them (see moveTables). */
  moveTogether(moves: readonly TableMove[], to: TableArea, options: MoveOptions = {}): Promise<MoveOutcome[]> {
    return moveTables(this.pool, moves, to, options);
  }

  /**
   * Truncates each live shard table into the trash as the same shard of its `into`, empty twins in their places, in one
   * transaction (see truncateTables).
   */
  truncate(truncates: readonly TruncateOf[], options: MoveOptions = {}): Promise<MoveOutcome[]> {
    return truncateTables(this.pool, truncates, options);
  }

  /** Refuses what a truncate of the shard table into `into` would refuse now, changing nothing (see checkTruncateTable). */
  checkTruncate(id: ShardTableId, into: number, withTables: readonly number[] = []): Promise<void> {
    return checkTruncateTable(this.pool, id, into, withTables);
  }

  /** The tables whose keys reference the shard tables, transitively: a cascade truncate's family (see referencingTables). */
  referencing(ids: readonly ShardTableId[]): Promise<ReferencingTable[]> {
    return referencingTables(this.pool, ids);
  }

  /** Takes a truncate back while its twin is empty (see untruncateTable). */
  untruncate(id: ShardTableId, into: number, options: MoveOptions = {}): Promise<MoveOutcome> {
    return untruncateTable(this.pool, id, into, options);
  }

  /** Drops the shard table and forgets it (see dropTable). */
  drop(id: ShardTableId, options: MoveOptions = {}): Promise<void> {
    return dropTable(this.pool, id, options);
  }

  /** The table's bytes as PostgreSQL counts them: heap, indexes and TOAST (0 when it is not where tablefate put it). */
  async bytes(id: ShardTableId): Promise<number> {
    const at = await this.locate(id);
    if (!at || at.drift) return 0;
    // (A partitioned table holds nothing itself: its bytes are its partitions'.)
    const { rows } = await this.pool.query<{ bytes: string }>(
      `SELECT pg_catalog.pg_total_relation_size($1::pg_catalog.regclass) + coalesce((
                SELECT pg_catalog.sum(pg_catalog.pg_total_relation_size(relid)) FROM pg_catalog.pg_partition_tree($1::pg_catalog.regclass)
                 WHERE relid OPERATOR(pg_catalog.<>) $1::pg_catalog.regclass), 0) AS bytes`,
      [at.oid],
    );
    return Number(rows[0]!.bytes);
  }
}
