import { Context } from '@temporalio/activity';

/** How often an activity that cannot beat step by step says it is alive: well inside the shortest heartbeat timeout. */
const BEAT_EVERY_MS = 1000;

/**
 * Runs `work` while telling the server, every second, that this attempt's worker is alive: a read of unknown length
 * (a survey of the whole catalog) then keeps a short heartbeat timeout, so that an attempt lost with its worker is tried
 * again within seconds instead of at the end of its start-to-close timeout, while a slow one that is alive runs on.
 */
export async function heartbeating<T>(work: () => Promise<T>): Promise<T> {
  const context = Context.current();
  context.heartbeat();
  const timer = setInterval(() => context.heartbeat(), BEAT_EVERY_MS);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
