import path from 'node:path';
import { z } from 'zod';
import { DEFAULT_HOME, DEFAULT_TEMPORAL_ADDRESS, DEFAULT_TEMPORAL_NAMESPACE } from '../domain/deployment';
import { InvalidInputError } from '../domain/errors';

/** What a client needs of the environment: where the catalog is and which Temporal server to talk to. */
export interface ClientConfig {
  /** State directory ($TABLEFATE_HOME), absolute: the catalog is `catalog.sqlite` in it. */
  home: string;
  temporalAddress: string;
  temporalNamespace: string;
}

const envSchema = z.object({
  TABLEFATE_HOME: z.string().min(1).default(DEFAULT_HOME),
  TEMPORAL_ADDRESS: z.string().min(1).default(DEFAULT_TEMPORAL_ADDRESS),
  TEMPORAL_NAMESPACE: z.string().min(1).default(DEFAULT_TEMPORAL_NAMESPACE),
});

/**
 * Reads TABLEFATE_HOME, TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE (the worker's configuration is a superset of
 * this one; the SDK reads only these). A bad value is an InvalidInputError naming the variable.
 */
export function loadClientConfig(env: NodeJS.ProcessEnv = process.env): ClientConfig {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new InvalidInputError(`invalid configuration: ${problems}`);
  }
  return {
    home: path.resolve(parsed.data.TABLEFATE_HOME),
    temporalAddress: parsed.data.TEMPORAL_ADDRESS,
    temporalNamespace: parsed.data.TEMPORAL_NAMESPACE,
  };
}
