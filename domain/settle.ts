/**
 * Runs `fn` on every item at once and settles only when every one has, then throws the first failure, if any.
 * Shard changes use it: they are independent and idempotent, and an undo must never race a change still running.
 */
export async function settleAll<T, R = void>(items: readonly T[], fn: (item: T) => Promise<R>): Promise<R[]> {
  const results = await Promise.allSettled(items.map(fn));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<R>).value);
}
