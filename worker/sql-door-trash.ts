import type { Pool } from 'pg';
import { POSTGRES_OWN_SCHEMAS } from '../domain/deployment';
import { toTableInfo, type TableInfo, type TableRecord } from '../domain/table';

const OWN = POSTGRES_OWN_SCHEMAS.own;
/** How old the copy of a table may grow before it is read again: what a retention or hold changed elsewhere waits. */
const FRESH_SECONDS = 60;
/** Tables one pass reads at most from the catalog. */
const BATCH = 100;

/**
 * The SQL door's copy of what the catalog says of each table in a node's trash (tablefate.sql_trash), which the trash
 * view (`tablefate_sql.trash`) shows beside what the node itself knows of it (owner, size). A table is read again from
 * the catalog when its copy is missing, when its shards moved since (a drop again after a recall), while it is on its way
 * (not TRASHED yet), and at least every FRESH_SECONDS; a table gone from the trash loses its copy. A table the door has
 * just changed is copied from its answer before its caller hears it (answered), so that the caller reads its own change.
 */
export class TrashCopy {
  constructor(
    private readonly pool: Pool,
    private readonly catalogId: string,
    private readonly tableOf: (tableId: number) => Promise<TableRecord | null>,
  ) {}

  /** Brings the copy up to date. */
  async refresh(): Promise<void> {
    const { rows } = await this.pool.query<{ table_id: string }>(
      `SELECT DISTINCT s.table_id FROM ${OWN}.shards s
         JOIN pg_catalog.pg_class c ON c.oid = s.table_oid
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace AND n.nspname = $2
         LEFT JOIN ${OWN}.sql_trash t ON t.catalog_id = s.catalog_id AND t.table_id = s.table_id
        WHERE s.catalog_id = $1
          AND (t.table_id IS NULL OR t.state <> 'TRASHED' OR t.synced_at < s.changed_at
               OR t.synced_at < pg_catalog.clock_timestamp() - pg_catalog.make_interval(secs => $3))
        LIMIT ${BATCH}`,
      [this.catalogId, POSTGRES_OWN_SCHEMAS.trash, FRESH_SECONDS],
    );
    for (const { table_id } of rows) {
      const table = await this.tableOf(Number(table_id));
      if (table) await this.write(toTableInfo(table));
    }
    await this.pool.query(
      `DELETE FROM ${OWN}.sql_trash t WHERE t.catalog_id = $1 AND NOT EXISTS (
         SELECT 1 FROM ${OWN}.shards s
           JOIN pg_catalog.pg_class c ON c.oid = s.table_oid
           JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace AND n.nspname = $2
          WHERE s.catalog_id = t.catalog_id AND s.table_id = t.table_id)`,
      [this.catalogId, POSTGRES_OWN_SCHEMAS.trash],
    );
  }

  /** Takes a table as an operation of the door's has just answered it: the door does so before its caller hears it. */
  async answered(table: TableInfo): Promise<void> {
    if (table.state === 'TRASHED') await this.write(table);
    else await this.pool.query(`DELETE FROM ${OWN}.sql_trash WHERE catalog_id = $1 AND table_id = $2`, [this.catalogId, table.id]);
  }

  private async write(table: TableInfo): Promise<void> {
    await this.pool.query(
      `INSERT INTO ${OWN}.sql_trash AS t (catalog_id, table_id, namespace, name, state, dropped_at, expires_at, held_since,
                                          hold_reason, dropped_by, family, synced_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, pg_catalog.clock_timestamp())
       ON CONFLICT (catalog_id, table_id) DO UPDATE SET namespace = EXCLUDED.namespace, name = EXCLUDED.name,
         state = EXCLUDED.state, dropped_at = EXCLUDED.dropped_at, expires_at = EXCLUDED.expires_at,
         held_since = EXCLUDED.held_since, hold_reason = EXCLUDED.hold_reason, dropped_by = EXCLUDED.dropped_by,
         family = EXCLUDED.family, synced_at = EXCLUDED.synced_at`,
      [
        this.catalogId,
        table.id,
        table.namespace,
        table.name,
        table.state,
        table.droppedAt,
        table.expireAt,
        table.hold?.since ?? null,
        table.hold?.reason ?? null,
        table.droppedBy,
        table.family ? JSON.stringify(table.family) : null,
      ],
    );
  }
}
