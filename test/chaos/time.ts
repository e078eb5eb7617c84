import { setTimeout as sleep } from 'node:timers/promises';

/**
 * `promise`'s value, or 'timeout' after `ms`. The timer is cleared as soon as the promise settles: a pending
 * timer would keep a finished run (or jest) alive for the rest of its delay.
 */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  const abort = new AbortController();
  const timer = sleep(ms, 'timeout' as const, { signal: abort.signal }).catch(() => 'timeout' as const);
  try {
    return await Promise.race([promise, timer]);
  } finally {
    abort.abort();
  }
}
