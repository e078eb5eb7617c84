import net from 'node:net';
import { z } from 'zod';
import type { ClientConfig } from '../config/client';
import { keepsRealTables, parseEnv } from '../domain/deployment';
import { statePaths } from '../config/paths';

export { statePaths };
import { InvalidInputError } from '../domain/errors';
import { clientConfigOf, clientEnvSchema } from '../config/client';
import {
  DEFAULT_RETENTION_SECONDS,
  DEFAULT_STORAGE_RETRY_ATTEMPTS,
  MAX_RETENTION_SECONDS,
  MAX_STORAGE_NODES,
  MAX_STORAGE_RETRY_ATTEMPTS,
  MIN_RETENTION_SECONDS,
  DEFAULT_RECONCILE_SECONDS,
  MAX_RECONCILE_SECONDS,
  DEFAULT_ORPHAN_GRACE_SECONDS,
  MAX_ORPHAN_GRACE_SECONDS,
  DEFAULT_WORKFLOW_CACHE,
  MIN_WORKFLOW_CACHE,
  MAX_WORKFLOW_CACHE,
} from '../domain/limits';

/** The task queue every tablefate worker polls and every client starts on (domain/deployment.ts). */
export { TASK_QUEUE } from '../domain/deployment';

/**
 * A whole number from the environment, strictly: digits only, within bounds. Unset means the default; set
 * but empty, blank, signed, fractional, hex or exponent notation is an error, never 0 (z.coerce would turn
 * `TABLEFATE_DEFAULT_RETENTION_SECONDS=` into 0 and purge every default trash at once).
 */
function wholeNumber(fallback: number, min: number, max: number, unit = '') {
  const what = `a whole number${unit ? ` of ${unit}` : ''} from ${min} to ${max}`;
  return z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (raw === undefined) return fallback;
      const value = /^[0-9]+$/.test(raw) ? Number(raw) : Number.NaN;
      if (!Number.isSafeInteger(value) || value < min || value > max) {
        ctx.addIssue({ code: 'custom', message: `must be ${what}, got ${JSON.stringify(raw)}` });
        return z.NEVER;
      }
      return value;
    });
}

/** `host:port` for the metrics endpoint, or a clear refusal. */
export function parseMetricsAddress(value: string): string {
  const match = /^(.*):([0-9]{1,5})$/.exec(value);
  const host = match?.[1]?.replace(/^\[(.*)\]$/, '$1');
  const port = Number(match?.[2]);
  if (!match || !(port >= 1 && port <= 65535) || !(host === 'localhost' || net.isIP(host ?? '') !== 0)) {
    throw new InvalidInputError(
      `the metrics address must be host:port with an IP address or localhost as host (0.0.0.0:9464, 127.0.0.1:9464), not ${JSON.stringify(value)}`,
    );
  }
  return host === 'localhost' ? `127.0.0.1:${port}` : value;
}

const envSchema = clientEnvSchema.extend({
  TABLEFATE_DEFAULT_RETENTION_SECONDS: wholeNumber(DEFAULT_RETENTION_SECONDS, MIN_RETENTION_SECONDS, MAX_RETENTION_SECONDS, 'seconds'),
  TABLEFATE_STORAGE_NODES: wholeNumber(3, 1, MAX_STORAGE_NODES),
  TABLEFATE_STORAGE_RETRY_ATTEMPTS: wholeNumber(DEFAULT_STORAGE_RETRY_ATTEMPTS, 1, MAX_STORAGE_RETRY_ATTEMPTS),
  TABLEFATE_RECONCILE_SECONDS: wholeNumber(DEFAULT_RECONCILE_SECONDS, 0, MAX_RECONCILE_SECONDS, 'seconds'),
  TABLEFATE_ORPHAN_GRACE_SECONDS: wholeNumber(DEFAULT_ORPHAN_GRACE_SECONDS, 0, MAX_ORPHAN_GRACE_SECONDS, 'seconds'),
  TABLEFATE_WORKFLOW_CACHE: wholeNumber(DEFAULT_WORKFLOW_CACHE, MIN_WORKFLOW_CACHE, MAX_WORKFLOW_CACHE, 'workflow runs'),
  TABLEFATE_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  TABLEFATE_LOG_FORMAT: z.enum(['json', 'pretty']).optional(),
  TABLEFATE_METRICS_ADDRESS: z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (raw === undefined || raw === '') return undefined;
      try {
        return parseMetricsAddress(raw);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    }),
});

/** The worker's configuration: the client's (home: catalog, storage nodes, dev-server db, cached CLI), and more. */
export interface Config extends ClientConfig {
  /** Retention of a trashed table when the request names none (Pegasus: 7 days). */
  defaultRetentionSeconds: number;
  storageNodes: number;
  /** Attempts a storage activity gets for a transient fault before the operation ends (activities/failures.ts). */
  storageRetryAttempts: number;
  /** How often the reconcile schedule runs; 0: the worker creates no schedule. */
  reconcileSeconds: number;
  /** How long an orphan set is left alone before the reconciler collects it. */
  orphanGraceSeconds: number;
  /** How many workflow runs the orchestrating worker keeps in memory between their tasks. */
  workflowCache: number;
  logLevel: z.infer<typeof envSchema>['TABLEFATE_LOG_LEVEL'];
  /** JSON lines or readable ones; absent: readable on a terminal, JSON otherwise. */
  logFormat?: 'json' | 'pretty';
  /** Where the worker serves Prometheus metrics (host:port, `/metrics`); none when absent. */
  metricsAddress?: string;
}

/** Reads the configuration from the environment; a bad value fails here, once, with the variable's name. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const e = parseEnv(envSchema, env);
  const client = clientConfigOf(e);
  // With PostgreSQL (a database) or MariaDB (a server), a node is a url: as many nodes as urls, and a count that says otherwise is a mistake.
  if (
    keepsRealTables(client.storageDriver) &&
    env.TABLEFATE_STORAGE_NODES !== undefined &&
    e.TABLEFATE_STORAGE_NODES !== client.storageUrls.length
  ) {
    throw new InvalidInputError(
      `invalid configuration: TABLEFATE_STORAGE_NODES: is ${e.TABLEFATE_STORAGE_NODES}, but TABLEFATE_STORAGE_URLS names ${client.storageUrls.length} nodes`,
    );
  }
  return {
    ...client,
    defaultRetentionSeconds: e.TABLEFATE_DEFAULT_RETENTION_SECONDS,
    storageNodes: keepsRealTables(client.storageDriver) ? client.storageUrls.length : e.TABLEFATE_STORAGE_NODES,
    storageRetryAttempts: e.TABLEFATE_STORAGE_RETRY_ATTEMPTS,
    reconcileSeconds: e.TABLEFATE_RECONCILE_SECONDS,
    orphanGraceSeconds: e.TABLEFATE_ORPHAN_GRACE_SECONDS,
    workflowCache: e.TABLEFATE_WORKFLOW_CACHE,
    logLevel: e.TABLEFATE_LOG_LEVEL,
    ...(e.TABLEFATE_LOG_FORMAT ? { logFormat: e.TABLEFATE_LOG_FORMAT } : {}),
    ...(e.TABLEFATE_METRICS_ADDRESS ? { metricsAddress: e.TABLEFATE_METRICS_ADDRESS } : {}),
  };
}
