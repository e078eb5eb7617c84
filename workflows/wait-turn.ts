import { continueAsNew, log, setCurrentDetails, sleep, workflowInfo } from '@temporalio/workflow';
import { DEFAULT_LOCK_WAIT, pauseAfter, type Backoff, type LockWaitPolicy } from '../domain/backoff';
import { reportLockWait } from './observe';

/** How a run waits its turn, and the input it starts over with when the wait outgrows one run's history. */
export interface Waiting {
  policy?: LockWaitPolicy;
  input: unknown;
}

/**
 * FATE's isReady, in workflow code: asks `attempt` until the answer names no holder, backing off on durable
 * timers. Each try costs a handful of history events, so past `attemptsPerRun` tries (or when the server
 * suggests it) the run continues as new with its own input: however long the holder keeps the table, no run's
 * history outgrows its bound. The new run starts the operation from the top, which every step is made for.
 */
export async function untilFree<T>(
  what: string,
  attempt: () => Promise<T>,
  holderOf: (answer: T) => string | undefined,
  waiting: Waiting,
): Promise<T> {
  const policy = waiting.policy ?? DEFAULT_LOCK_WAIT;
  const since = Date.now();
  for (let tries = 1; ; tries++) {
    const answer = await attempt();
    const holder = holderOf(answer);
    if (holder === undefined) {
      if (tries > 1) {
        setCurrentDetails('');
        reportLockWait((Date.now() - since) / 1000);
      }
      return answer;
    }
    if (tries === 1) {
      log.info('waiting for another operation to finish', { what, holder });
      setCurrentDetails(`waiting for ${what}, held by ${holder}`);
    }
    await pauseOrStartOver(policy, tries, waiting.input, {
      why: 'still waiting; continuing as new to keep the history short',
      about: { what, holder, tries },
      summary: `wait for ${what}, held by ${holder} (try ${tries})`,
    });
  }
}

/**
 * Between two tries of something a run repeats until it works (a lock another holds, a purge at expiry that fails): the
 * pause `policy` sets after the `tries`-th, on a durable timer; or, once the run has made its share of tries (or the
 * server suggests it), a new run with `input`, so that no run's history outgrows its bound however long it takes.
 */
export async function pauseOrStartOver(
  policy: Backoff,
  tries: number,
  input: unknown,
  say: { why: string; about: Record<string, unknown>; summary: string },
): Promise<void> {
  if (tries >= policy.attemptsPerRun || workflowInfo().continueAsNewSuggested) {
    log.info(say.why, say.about);
    await continueAsNew(input);
  }
  await sleep(pauseAfter(policy, tries), { summary: say.summary });
}
