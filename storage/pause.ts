/** Waits `ms`, or less if `signal` aborts meanwhile (the next checkWatch says why). */
export function pauseUnlessAborted(ms: number, signal: AbortSignal | undefined): Promise<void> {
  // An abort that came during the last try has fired already: no event would wake us.
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
