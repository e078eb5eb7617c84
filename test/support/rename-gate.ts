import fs from 'node:fs';
import type { RenameOps } from '../../storage/rename-set';
import { waitFor } from './wait';
import { Harness } from './harness';

/**
 * A slow disk on demand, for the storage driver's renames (Harness `renameOps`): while the gate is held, every
 * rename waits at it; open lets them through. Every shard change (create, move, mark) ends in renames, so a held
 * gate keeps an operation running, half way, for as long as a test needs (keep it under the shard activities'
 * 20 s heartbeat timeout).
 */
export class RenameGate implements RenameOps {
  /** Renames waiting at the gate now. */
  waiting = 0;
  private held: { promise: Promise<void>; release: () => void } | undefined;

  hold(): void {
    if (this.held) return;
    let release!: () => void;
    const promise = new Promise<void>((resolve) => (release = resolve));
    this.held = { promise, release };
  }

  open(): void {
    const held = this.held;
    this.held = undefined;
    held?.release();
  }

  /** Resolves once an operation is stuck at the gate (so its workflow has started and is half way). */
  async someoneWaiting(): Promise<void> {
    await waitFor(
      () => Promise.resolve(this.waiting),
      (n) => n > 0,
      { what: 'a rename to wait at the gate', intervalMs: 20 },
    );
  }

  async rename(from: string, to: string): Promise<void> {
    if (this.held) {
      this.waiting++;
      try {
        await this.held.promise;
      } finally {
        this.waiting--;
      }
    }
    await fs.promises.rename(from, to);
  }
}

/**
 * Two harnesses on the shared server, for tests that need an operation held half way: one whose worker runs
 * at full speed, one whose storage renames wait at `gate`. Registers their start and close with jest.
 */
export function promptAndSlowHarnesses(gate: RenameGate): { prompt: () => Harness; slow: () => Harness } {
  let prompt: Harness | undefined;
  let slow: Harness | undefined;
  beforeAll(async () => {
    [prompt, slow] = await Promise.all([Harness.start(), Harness.start({ renameOps: gate })]);
  });
  afterAll(async () => {
    gate.open();
    await Promise.all([prompt?.close(), slow?.close()]);
  });
  return { prompt: () => prompt!, slow: () => slow! };
}

/**
 * A disk that breaks on demand: renames work until armed; then the second rename of a set fails with EIO, and so
 * does every roll-back, which leaves the set half renamed (the driver's fatal error).
 */
export class BreakingRenames implements RenameOps {
  armed = false;
  private calls = 0;
  async rename(from: string, to: string): Promise<void> {
    if (this.armed && ++this.calls >= 2) throw Object.assign(new Error(`EIO: injected failure renaming ${from}`), { code: 'EIO' });
    await fs.promises.rename(from, to);
  }
}
