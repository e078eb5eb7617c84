import path from 'node:path';
import type { z } from 'zod';
import { connectionEnvSchema, parseEnv, storageOf, type StorageDriverName } from '../domain/deployment';
import { temporalSecurity, temporalSecurityEnvSchema, type TemporalSecurity } from './connection';

/** The variables a client reads. */
export const clientEnvSchema = connectionEnvSchema.extend(temporalSecurityEnvSchema.shape);

/** What a client needs of the environment: where the catalog is and which Temporal server to talk to. */
export interface ClientConfig {
  /** State directory ($TABLEFATE_HOME), absolute: the catalog is `catalog.sqlite` in it unless catalogUrl says otherwise. */
  home: string;
  /** TABLEFATE_CATALOG_URL: a PostgreSQL URL or a SQLite file path. */
  catalogUrl?: string;
  temporalAddress: string;
  temporalNamespace: string;
  /** TLS and API key for a secured Temporal server (secrets: never log this). */
  temporalSecurity: TemporalSecurity;
  /** TABLEFATE_STORAGE_DRIVER: what a shard is (the SDK refuses a definition of columns for files). */
  storageDriver: StorageDriverName;
  /** TABLEFATE_STORAGE_URLS: the postgres driver's nodes, node-0 first (secrets: log them through redactUrl only). */
  storageUrls: string[];
}

/**
 * Reads TABLEFATE_HOME, TABLEFATE_CATALOG_URL, TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE (the worker's configuration is a superset of
 * this one; the SDK reads only these). A bad value is an InvalidInputError naming the variable.
 */
export function loadClientConfig(env: NodeJS.ProcessEnv = process.env): ClientConfig {
  return clientConfigOf(parseEnv(clientEnvSchema, env));
}

/** The client's part of a parsed environment (the worker's configuration starts from it). */
export function clientConfigOf(e: z.output<typeof clientEnvSchema>): ClientConfig {
  return {
    home: path.resolve(e.TABLEFATE_HOME),
    catalogUrl: e.TABLEFATE_CATALOG_URL,
    temporalAddress: e.TEMPORAL_ADDRESS,
    temporalNamespace: e.TEMPORAL_NAMESPACE,
    temporalSecurity: temporalSecurity(e),
    ...storageConfigOf(e),
  };
}

function storageConfigOf(e: z.output<typeof clientEnvSchema>): Pick<ClientConfig, 'storageDriver' | 'storageUrls'> {
  const { driver, urls } = storageOf(e);
  return { storageDriver: driver, storageUrls: urls };
}
