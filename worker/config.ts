import path from 'node:path';
import { z } from 'zod';

/** The task queue every tablefate worker polls and every client starts on. */
export const TASK_QUEUE = 'tablefate';

const envSchema = z.object({
  TABLEFATE_HOME: z.string().min(1).default('.tablefate'),
  TEMPORAL_ADDRESS: z.string().min(1).default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TABLEFATE_DEFAULT_RETENTION_SECONDS: z.coerce.number().int().nonnegative().default(7 * 24 * 3600),
  TABLEFATE_STORAGE_NODES: z.coerce.number().int().min(1).max(64).default(3),
  TABLEFATE_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export interface Config {
  /** State directory: catalog, storage nodes, dev-server db, cached Temporal CLI. Absolute. */
  home: string;
  temporalAddress: string;
  temporalNamespace: string;
  /** Retention of a trashed table when the request names none (Pegasus: 7 days). */
  defaultRetentionSeconds: number;
  storageNodes: number;
  logLevel: z.infer<typeof envSchema>['TABLEFATE_LOG_LEVEL'];
}

/** Reads the configuration from the environment; a bad value fails here, once, with the variable's name. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid configuration: ${problems}`);
  }
  const e = parsed.data;
  return {
    home: path.resolve(e.TABLEFATE_HOME),
    temporalAddress: e.TEMPORAL_ADDRESS,
    temporalNamespace: e.TEMPORAL_NAMESPACE,
    defaultRetentionSeconds: e.TABLEFATE_DEFAULT_RETENTION_SECONDS,
    storageNodes: e.TABLEFATE_STORAGE_NODES,
    logLevel: e.TABLEFATE_LOG_LEVEL,
  };
}

/** Where each part keeps its files under the state directory: one place, so paths are never guessed. */
export function statePaths(home: string) {
  return {
    catalog: path.join(home, 'catalog.sqlite'),
    storage: path.join(home, 'storage'),
    temporalDb: path.join(home, 'temporal.db'),
    temporalLog: path.join(home, 'temporal.log'),
    bin: path.join(home, 'bin'),
  };
}
