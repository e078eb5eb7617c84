import { TransportError } from '@temporalio/worker';
import { CatalogNotFoundError } from '../domain/errors';
import { CatalogBehindError } from '../catalog/migrations';
import type { Logger } from './logger';

/** How often a process still waiting for what it needs says so again. */
const SAY_AGAIN_MS = 30_000;

/**
 * Tries `attempt` until it succeeds, as long as its failure is one that time cures: `waitsFor` names what it waits for
 * (undefined: a failure for good, thrown). Says so at once, then every 30 s, so that a service started before what it
 * needs (the Temporal server, PostgreSQL, the catalog a worker makes) waits for it instead of exiting. Resolves
 * undefined once `stop` settles (Ctrl-C while waiting).
 */
export async function untilAvailable<T>(
  attempt: () => Promise<T>,
  waitsFor: (err: unknown) => string | undefined,
  logger: Logger,
  stop: Promise<unknown>,
): Promise<T | undefined> {
  let stopped = false;
  void stop.finally(() => (stopped = true));
  let saidAt = -Infinity;
  for (let pause = 250; !stopped; pause = Math.min(pause * 2, 2_000)) {
    try {
      return await attempt();
    } catch (err) {
      const what = waitsFor(err);
      if (what === undefined) throw err;
      if (Date.now() - saidAt >= SAY_AGAIN_MS) {
        logger.warn({ reason: err instanceof Error ? err.message : String(err) }, `waiting for ${what}`);
        saidAt = Date.now();
      }
    }
    await Promise.race([new Promise((resolve) => setTimeout(resolve, pause)), stop]);
  }
  return undefined;
}

/** The Temporal server does not answer yet (nothing listens, or it is starting). */
export function temporalNotUp(address: string) {
  return (err: unknown): string | undefined => (err instanceof TransportError ? `the Temporal server at ${address}` : undefined);
}

/** PostgreSQL error codes and socket errors that mean "not up yet": refused, starting, shutting down, too many clients. */
const NOT_UP_YET = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', '57P03', '57P01', '53300']);

/**
 * The catalog cannot be opened yet: its database does not answer, or (for a reader, which never makes or migrates it)
 * no worker has made it yet, or one is migrating it to this version now.
 */
export function catalogNotReady(where: string) {
  return (err: unknown): string | undefined => {
    if (err instanceof CatalogNotFoundError) return `the catalog at ${where}, which the first \`tablefate worker\` makes`;
    if (err instanceof CatalogBehindError) return `the catalog at ${where} to be migrated by a \`tablefate worker\` of this version`;
    const code = (err as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && NOT_UP_YET.has(code)) return `the catalog's database at ${where}`;
    return undefined;
  };
}
