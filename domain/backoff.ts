/**
 * How a workflow paces a try it repeats (waiting for a busy table, purging at an expiry that keeps failing): tries
 * back off from `firstMs` by half again each time up to `maxMs`, and after `attemptsPerRun` tries the run continues
 * as new, so that its history stays short however long it keeps trying.
 */
export interface Backoff {
  firstMs: number;
  maxMs: number;
  attemptsPerRun: number;
}

/** The pause after the `tries`-th failed try (1 for the first). */
export function pauseAfter(backoff: Backoff, tries: number): number {
  return Math.min(backoff.firstMs * 1.5 ** (tries - 1), backoff.maxMs);
}

/** How an operation waits while another holds its table. */
export type LockWaitPolicy = Backoff;

/** About 100 tries per run: some 600 history events, 7 to 8 minutes of waiting. */
export const DEFAULT_LOCK_WAIT: LockWaitPolicy = { firstMs: 100, maxMs: 5_000, attemptsPerRun: 100 };

/**
 * How a trash's expiry tries again when its purge fails (a storage node down, say): from 10 s up to every 10
 * minutes, 20 tries a run (about two hours), for as long as it takes.
 */
export const DEFAULT_EXPIRY_RETRY: Backoff = { firstMs: 10_000, maxMs: 600_000, attemptsPerRun: 20 };
