/**
 * Where the pieces of one tablefate deployment meet: the task queue workers poll and clients start on, and
 * where the catalog lives under the state directory. The one source of truth for both, shared by the worker
 * and the SDK (which must not import worker code). Pure: no Node built-ins.
 */
import { z } from 'zod';
import { InvalidInputError } from './errors';

/** The task queue every tablefate worker polls and every client starts its operations on. */
export const TASK_QUEUE = 'tablefate';

/** The catalog's file name under the state directory ($TABLEFATE_HOME). */
export const CATALOG_FILE = 'catalog.sqlite';

/** Defaults of the environment both sides read (see README, Configuration). */
export const DEFAULT_HOME = '.tablefate';
export const DEFAULT_TEMPORAL_ADDRESS = '127.0.0.1:7233';
export const DEFAULT_TEMPORAL_NAMESPACE = 'default';

/** The catalog file of the state directory `home` (an absolute path in, an absolute path out). */
export function catalogPath(home: string): string {
  return /[/\\]$/.test(home) ? `${home}${CATALOG_FILE}` : `${home}/${CATALOG_FILE}`;
}

/** The storage drivers: a shard as files under the state directory, or as a real PostgreSQL table. */
export const STORAGE_DRIVERS = ['files', 'postgres', 'mariadb'] as const;
export type StorageDriverName = (typeof STORAGE_DRIVERS)[number];

/** Whether the driver's shards are real tables of a database (PostgreSQL, MariaDB): a definition of columns, adopt, cascade. */
export const keepsRealTables = (driver: StorageDriverName) => driver !== 'files';

/**
 * The schemas the PostgreSQL driver keeps for itself on every node: its record of the tables it placed, the trash, and
 * the garbage a purge drops. No tablefate namespace may be one of them (a table made there would pass for trashed).
 */
export const POSTGRES_OWN_SCHEMAS = {
  own: 'tablefate',
  trash: 'tablefate_trash',
  garbage: 'tablefate_garbage',
  /** The guard's event-trigger functions (storage/postgres-guard.ts), apart from the others so that dropping them cannot take the guard. */
  guard: 'tablefate_guard',
  /** The SQL door's procedures and views, the one schema of tablefate's a caller is granted (storage/postgres-door-sql.ts). */
  door: 'tablefate_sql',
} as const;

/**
 * The databases the MariaDB driver keeps for itself on every node: its record of the tables it placed, the trash, and the
 * garbage a purge drops. No tablefate namespace may be one of them, nor one of MariaDB's own.
 */
export const MARIADB_OWN_DATABASES = { own: 'tablefate', trash: 'tablefate_trash', garbage: 'tablefate_garbage' } as const;
const MARIADB_SYSTEM_DATABASES = new Set(['mysql', 'information_schema', 'performance_schema', 'sys']);

/** MariaDB's longest name of a database or table, in characters. */
export const MARIADB_MAX_NAME_CHARS = 64;

/** Why MariaDB cannot hold `name` as a database's or a table's name (too long, a character of four UTF-8 bytes), or undefined. */
export function mariadbNameProblem(name: string): string | undefined {
  const chars = [...name];
  if (chars.length > MARIADB_MAX_NAME_CHARS) return `name "${name}" is over MariaDB's ${MARIADB_MAX_NAME_CHARS} characters`;
  if (chars.some((ch) => ch.codePointAt(0)! > 0xffff))
    return `name "${name}" has a character MariaDB's names cannot hold (four bytes in UTF-8)`;
  return undefined;
}

/** Why a namespace cannot be a database of live tables with the MariaDB driver, or undefined if it can. */
export function reservedDatabaseReason(namespace: string): string | undefined {
  if ((Object.values(MARIADB_OWN_DATABASES) as string[]).includes(namespace)) return `database ${namespace} is tablefate's own`;
  if (MARIADB_SYSTEM_DATABASES.has(namespace.toLowerCase())) return `database ${namespace} is MariaDB's own`;
  return undefined;
}

/**
 * Why a namespace cannot be a schema of live tables with the PostgreSQL driver, or undefined if it can: tablefate's
 * own schemas, and PostgreSQL's (`pg_*`: the catalogs, TOAST, other sessions' temporary tables; information_schema).
 */
export function reservedSchemaReason(namespace: string): string | undefined {
  if ((Object.values(POSTGRES_OWN_SCHEMAS) as string[]).includes(namespace)) return `schema ${namespace} is tablefate's own`;
  if (namespace.startsWith('pg_') || namespace === 'information_schema') return `schema ${namespace} is PostgreSQL's own`;
  return undefined;
}

/** The variables every part (worker, SDK, command line) reads: where the state is, which Temporal to talk to. */
export const connectionEnvSchema = z.object({
  TABLEFATE_HOME: z.string().min(1).default(DEFAULT_HOME),
  /** The catalog: `postgres://user:pass@host:port/db`, or a SQLite file path; the SQLite file under the home by default. */
  TABLEFATE_CATALOG_URL: z.string().min(1).optional(),
  TEMPORAL_ADDRESS: z.string().min(1).default(DEFAULT_TEMPORAL_ADDRESS),
  TEMPORAL_NAMESPACE: z.string().min(1).default(DEFAULT_TEMPORAL_NAMESPACE),
  /**
   * What a shard is: a set of files under the home (`files`), a real table in a PostgreSQL database (`postgres`), or a
   * real InnoDB table of a MariaDB server (`mariadb`).
   */
  TABLEFATE_STORAGE_DRIVER: z.enum(STORAGE_DRIVERS).default('files'),
  /** postgres and mariadb drivers: one connection url per storage node, node-0 first, comma-separated (never echoed: passwords). */
  TABLEFATE_STORAGE_URLS: z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (raw === undefined) return [];
      const urls = raw.split(',').map((u) => u.trim());
      urls.forEach((url, i) => {
        if (!/^(postgres(ql)?|mariadb|mysql):\/\/[^\s]+$/.test(url)) {
          ctx.addIssue({ code: 'custom', message: `entry ${i + 1} is not a postgres:// or mariadb:// url` });
        }
      });
      return urls;
    }),
});

/** `url` without its password (and as it was if it is no url), for messages, logs and errors. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    // libpq takes a password as a query parameter too (`?password=`), and pg reads it there.
    const inQuery = [...parsed.searchParams.keys()].filter((key) => /^password$/i.test(key));
    if (!parsed.password && inQuery.length === 0) return url;
    parsed.password = '';
    for (const key of inQuery) parsed.searchParams.set(key, 'REDACTED');
    return parsed.toString();
  } catch {
    return url.replace(/^([a-z]+:\/\/[^:@/]*):[^@]*@/i, '$1@').replace(/([?&]password=)[^&]*/gi, '$1REDACTED');
  }
}

/**
 * The storage driver and its nodes' urls, checked together: the postgres driver needs one url per node, and urls
 * without it are a mistake worth saying. A bad pair is an InvalidInputError naming the variables (never a url).
 */
export function storageOf(e: { TABLEFATE_STORAGE_DRIVER: StorageDriverName; TABLEFATE_STORAGE_URLS: string[] }): {
  driver: StorageDriverName;
  urls: string[];
} {
  const { TABLEFATE_STORAGE_DRIVER: driver, TABLEFATE_STORAGE_URLS: urls } = e;
  if (driver !== 'files' && urls.length === 0) {
    throw new InvalidInputError(`invalid configuration: TABLEFATE_STORAGE_URLS: the ${driver} driver needs one url per storage node`);
  }
  if (driver === 'files' && urls.length > 0) {
    throw new InvalidInputError(
      'invalid configuration: TABLEFATE_STORAGE_URLS: is for the postgres and mariadb drivers (TABLEFATE_STORAGE_DRIVER=postgres or mariadb)',
    );
  }
  const scheme = driver === 'mariadb' ? /^(mariadb|mysql):/ : /^postgres(ql)?:/;
  const stranger = urls.findIndex((url) => !scheme.test(url));
  if (driver !== 'files' && stranger >= 0) {
    throw new InvalidInputError(
      `invalid configuration: TABLEFATE_STORAGE_URLS: entry ${stranger + 1} is not a ${driver === 'mariadb' ? 'mariadb://' : 'postgres://'} url, as the ${driver} driver needs`,
    );
  }
  return { driver, urls };
}

/** Parses the environment with `schema`, once; a bad value is an InvalidInputError naming every variable at fault. */
export function parseEnv<S extends z.ZodType>(schema: S, env: Record<string, string | undefined>): z.output<S> {
  const parsed = schema.safeParse(env);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
  throw new InvalidInputError(`invalid configuration: ${problems}`);
}
