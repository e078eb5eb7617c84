import { CatalogNotFoundError } from '../domain/errors';
import { catalogPath } from '../domain/deployment';
import type { Catalog } from './catalog';
import { PostgresCatalog } from './postgres';
import { redactUrl } from '../domain/deployment';
import { SqliteCatalog } from './sqlite';

/** Where a catalog lives: a SQLite file (the embedded default) or a PostgreSQL database. */
export type CatalogLocation = { kind: 'sqlite'; file: string } | { kind: 'postgres'; url: string };

/**
 * TABLEFATE_CATALOG_URL read: a `postgres://` (or `postgresql://`) URL is a PostgreSQL database; anything else
 * is a SQLite file path; unset, the SQLite file under the state directory `home`.
 */
export function catalogLocation(catalogUrl: string | undefined, home: string): CatalogLocation {
  if (catalogUrl === undefined) return { kind: 'sqlite', file: catalogPath(home) };
  if (/^postgres(ql)?:\/\//i.test(catalogUrl)) return { kind: 'postgres', url: catalogUrl };
  return { kind: 'sqlite', file: catalogUrl.replace(/^sqlite:(\/\/)?/i, '') };
}

/** The location for messages and logs: a URL's password is never shown. */
export function describeLocation(location: CatalogLocation): string {
  return location.kind === 'sqlite' ? location.file : redactUrl(location.url);
}

export interface OpenCatalogOptions {
  /** Readers (the SDK, the command line) never create a catalog: a missing one is CatalogNotFoundError. */
  mustExist?: boolean;
  /** Seeds the id counter of a new catalog (tests give each catalog its own id range). */
  firstTableId?: number;
}

/** Opens the catalog at `location`; a worker's first open creates it (and migrates a PostgreSQL schema). */
export async function openCatalog(location: CatalogLocation, opts: OpenCatalogOptions = {}): Promise<Catalog> {
  if (location.kind === 'postgres') return PostgresCatalog.open(location.url, opts);
  return new SqliteCatalog(location.file, opts);
}

/** Re-throws a missing catalog with what a reader should do about it; other errors pass unchanged. */
export function explainMissing(err: unknown, location: CatalogLocation, home: string): unknown {
  if (!(err instanceof CatalogNotFoundError)) return err;
  const where =
    location.kind === 'sqlite'
      ? `no tablefate catalog at ${location.file} (TABLEFATE_HOME=${home})`
      : `no tablefate catalog in ${describeLocation(location)}`;
  return new CatalogNotFoundError(
    `${where}; a worker makes it on its first start: point TABLEFATE_CATALOG_URL (or TABLEFATE_HOME) at the catalog ` +
      'of a worker, or start one with `tablefate worker` (or `tablefate dev`)',
    describeLocation(location),
  );
}
