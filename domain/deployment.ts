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

/** The variables every part (worker, SDK, command line) reads: where the state is, which Temporal to talk to. */
export const connectionEnvSchema = z.object({
  TABLEFATE_HOME: z.string().min(1).default(DEFAULT_HOME),
  /** The catalog: `postgres://user:pass@host:port/db`, or a SQLite file path; the SQLite file under the home by default. */
  TABLEFATE_CATALOG_URL: z.string().min(1).optional(),
  TEMPORAL_ADDRESS: z.string().min(1).default(DEFAULT_TEMPORAL_ADDRESS),
  TEMPORAL_NAMESPACE: z.string().min(1).default(DEFAULT_TEMPORAL_NAMESPACE),
});

/** Parses the environment with `schema`, once; a bad value is an InvalidInputError naming every variable at fault. */
export function parseEnv<S extends z.ZodType>(schema: S, env: Record<string, string | undefined>): z.output<S> {
  const parsed = schema.safeParse(env);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
  throw new InvalidInputError(`invalid configuration: ${problems}`);
}
