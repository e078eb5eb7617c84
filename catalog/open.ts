import { CatalogNotFoundError } from '../domain/errors';
import { catalogPath } from '../domain/deployment';
import type { Catalog } from './catalog';
import { redactUrl } from '../domain/deployment';

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

/**
 * Opens the catalog at `location`; a worker's first open creates it (and migrates a PostgreSQL schema). Each kind's
 * code is loaded when a catalog of that kind is opened: a command on the SQLite catalog never loads pg (some 20 ms).
 */
export async function openCatalog(location: CatalogLocation, opts: OpenCatalogOptions = {}): Promise<Catalog> {
  /* eslint-disable @typescript-eslint/no-require-imports -- lazy loading (a require: tsx's CommonJS hook, which import() bypasses) */
  if (location.kind === 'postgres') return (require('./postgres') as typeof import('./postgres')).PostgresCatalog.open(location.url, opts);
  return new (require('./sqlite') as typeof import('./sqlite')).SqliteCatalog(location.file, opts);
  /* eslint-enable @typescript-eslint/no-require-imports */
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
