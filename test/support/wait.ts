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
