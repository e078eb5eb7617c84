import type { Pool, PoolClient } from 'pg';
import { mustApply, type Migration } from './migrations';
import { ident, inPgTransaction, type Queryable } from './pg-session';

/**
 * How a schema of tablefate's on PostgreSQL is migrated (migrations.ts decides what is applied): the catalog's tables,
 * and the record each storage node keeps of the tables tablefate placed there. A schema's version is the highest
 * version in its migrations table. Each migration runs in a transaction of its own that takes the schema's advisory
 * lock first: of two processes starting together, the second waits for the first's migration to commit, then finds it
 * applied.
 */
export interface PgMigrations {
  /** The schema whose names a migration's SQL (written once, never edited) writes bare: first in its search_path. */
  schema: string;
  /** The table that records the versions applied, qualified. */
  versions: string;
  migrations: readonly Migration[];
  /** How an error names the schema (the catalog's by default). */
  what?: string;
  /** Serializes this schema's migrators: taken first in each migration's transaction. */
  lock: (c: PoolClient) => Promise<unknown>;
  /**
   * The version of a schema made before its versions were recorded (its objects there, no version in the table), read
   * under the lock; 0 when none of it is there. Throws when what is there is not what any version made.
   */
  unversioned?: (c: PoolClient) => Promise<number>;
}

/** The last migration applied (0: none). */
export async function appliedVersion(q: Queryable, versions: string): Promise<number> {
  const { rows } = await q.query<{ version: number | null }>(`SELECT pg_catalog.max(version) AS version FROM ${versions}`);
  return rows[0]?.version ?? 0;
}

/** Applies the migrations the schema has not had, in order, each in a transaction of its own. */
export async function migrate(pool: Pool, m: PgMigrations): Promise<void> {
  for (const migration of m.migrations) {
    await inPgTransaction(pool, async (c) => {
      await m.lock(c);
      await c.query(`CREATE TABLE IF NOT EXISTS ${m.versions} (version INT PRIMARY KEY, applied_at BIGINT NOT NULL)`);
      let current = await appliedVersion(c, m.versions);
      if (current === 0 && m.unversioned) current = await recordUnversioned(c, m, await m.unversioned(c));
      if (!mustApply(migration, current, m.migrations, m.what)) return;
      await c.query(`SELECT pg_catalog.set_config('search_path', $1, true)`, [`${ident(m.schema)}, pg_catalog, pg_temp`]);
      await c.query(migration.sql);
      await c.query(`INSERT INTO ${m.versions} (version, applied_at) VALUES ($1, $2)`, [migration.version, Date.now()]);
    });
  }
}

/** Records a schema found at `version` without its versions as having had every migration up to it. */
async function recordUnversioned(c: PoolClient, m: PgMigrations, version: number): Promise<number> {
  for (const migration of m.migrations.filter((k) => k.version <= version)) {
    await c.query(`INSERT INTO ${m.versions} (version, applied_at) VALUES ($1, $2)`, [migration.version, Date.now()]);
  }
  return version;
}
