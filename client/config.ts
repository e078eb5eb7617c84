import path from 'node:path';
import { connectionEnvSchema, parseEnv } from '../domain/deployment';

/** What a client needs of the environment: where the catalog is and which Temporal server to talk to. */
export interface ClientConfig {
  /** State directory ($TABLEFATE_HOME), absolute: the catalog is `catalog.sqlite` in it. */
  home: string;
  temporalAddress: string;
  temporalNamespace: string;
}

/**
 * Reads TABLEFATE_HOME, TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE (the worker's configuration is a superset of
 * this one; the SDK reads only these). A bad value is an InvalidInputError naming the variable.
 */
export function loadClientConfig(env: NodeJS.ProcessEnv = process.env): ClientConfig {
  const e = parseEnv(connectionEnvSchema, env);
  return { home: path.resolve(e.TABLEFATE_HOME), temporalAddress: e.TEMPORAL_ADDRESS, temporalNamespace: e.TEMPORAL_NAMESPACE };
}
