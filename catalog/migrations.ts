/**
 * What every schema of tablefate's shares, both catalog stores' and the record each PostgreSQL storage node keeps
 * (storage/postgres-record-schema.ts): a schema is an ordered list of migrations, each applied once per database, in
 * order, in a transaction of its own that also records its version (PostgreSQL: a migrations table, see
 * pg-migrations.ts; SQLite: `PRAGMA user_version`). A migration, once released, is never edited: a change is a new one
 * at the end, and no statement relies on `IF NOT EXISTS` to pass over an object that already exists (it could be an
 * older version of it). Each store runs the list its own way (SQLite synchronously, as its catalog opens in a
 * constructor); the decisions are made here.
 */

export interface Migration {
  version: number;
  description: string;
  sql: string;
}

const CATALOG_SCHEMA = "the catalog's schema";

/** The schema version this code needs: the last migration's. */
export const latestVersion = (migrations: readonly Migration[]) => migrations[migrations.length - 1]!.version;

/**
 * Whether a writer applies `migration` to a catalog at version `current` (read in the migration's own
 * transaction, after any other writer's migration committed). A catalog newer than this code is refused, named
 * as `what` (another schema migrated this way names itself).
 */
export function mustApply(migration: Migration, current: number, migrations: readonly Migration[], what = CATALOG_SCHEMA): boolean {
  refuseNewer(current, migrations, what);
  return current < migration.version;
}

/** A catalog whose schema is behind this code, met by a reader: a worker of this version migrates it (it may be doing so now). */
export class CatalogBehindError extends Error {
  override readonly name = 'CatalogBehindError';
}

/** For readers, who never migrate: the catalog must be at this code's version. */
export function assertCurrent(current: number, migrations: readonly Migration[]): void {
  refuseNewer(current, migrations, CATALOG_SCHEMA);
  const missing = migrations.filter((m) => m.version > current).map((m) => m.version);
  if (missing.length > 0) {
    throw new CatalogBehindError(
      `its schema lacks migrations ${missing.join(', ')}: start a worker of this tablefate version to apply them`,
    );
  }
}

function refuseNewer(current: number, migrations: readonly Migration[], what: string): void {
  const latest = latestVersion(migrations);
  if (current > latest) {
    throw new Error(`${what} is at version ${current}, newer than this tablefate knows (${latest}): upgrade tablefate`);
  }
}
