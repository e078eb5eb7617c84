/** A bench's samples: how an operation is timed, and how its times are read. */

/** The value at percentile `p` (0-100) of `values`, as each bench reports p50 and p90. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Runs `fn`, adding how long it took (ms) to `samples`, and answers what it answered. */
export async function timed<T>(samples: number[], fn: () => Promise<T>): Promise<T> {
  const start = process.hrtime.bigint();
  const result = await fn();
  samples.push(Number(process.hrtime.bigint() - start) / 1e6);
  return result;
}
