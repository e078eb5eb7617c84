/** Polls `probe` until it returns a value that `done` accepts, or fails after `timeoutMs` with the last value. */
export async function waitFor<T>(
  probe: () => Promise<T>,
  done: (value: T) => boolean,
  opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${opts.what ?? 'a condition'}; last value: ${JSON.stringify(value)}`);
    }
    await sleep(opts.intervalMs ?? 200);
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** What `promise` rejects with; a promise that resolves is the failure (the test expected an error). */
export const failureOf = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    (value) => {
      throw new Error(`expected a failure, got ${JSON.stringify(value)}`);
    },
    (err: unknown) => err,
  );

/**
 * Resolves once the wall clock is past `instantMs` (ms since the epoch): for a test that must act after a boundary it
 * computed (an expiry, a lease's end, a grace period), waiting for exactly that boundary and no fixed time. The
 * worker, the server and the test share this machine's clock.
 */
export async function untilPast(instantMs: number): Promise<void> {
  while (Date.now() <= instantMs) await sleep(instantMs - Date.now() + 1);
}
