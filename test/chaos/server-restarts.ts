import type { ChaosMonkey } from './monkey';

/** The Temporal server's crashes during a chaos run's operations, paced by how many have been answered. */

/** Resolves waiters once enough operations have been answered (or the operations are over). */
export class Progress {
  private done = 0;
  private finished = false;
  private readonly waiters: Array<{ count: number; resolve: () => void }> = [];

  set(done: number): void {
    this.done = done;
    this.release();
  }

  finish(): void {
    this.finished = true;
    this.release();
  }

  reached(count: number): Promise<void> {
    return new Promise((resolve) => {
      this.waiters.push({ count, resolve });
      this.release();
    });
  }

  private release(): void {
    for (const waiter of this.waiters.splice(0)) {
      if (this.finished || this.done >= waiter.count) waiter.resolve();
      else this.waiters.push(waiter);
    }
  }
}

/** Crashes and restarts the server `count` times, spread evenly over the operations; resolves with what failed. */
export async function restartServerDuringOps(
  monkey: ChaosMonkey,
  progress: Progress,
  ops: number,
  count: number,
  signal: AbortSignal,
): Promise<Error | undefined> {
  try {
    for (let i = 1; i <= count && !signal.aborted; i++) {
      await progress.reached(Math.ceil((ops * i) / (count + 1)));
      if (!signal.aborted) await monkey.restartServer();
    }
    return undefined;
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}
