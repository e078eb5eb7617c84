import fs from 'node:fs';
import path from 'node:path';
import { parseShardFileName } from '../../storage/shard-files';
import type { RenameOps } from '../../storage/rename-set';
import { waitFor } from './wait';
import { Harness } from './harness';

/**
 * A slow disk on demand, for the storage driver's renames (Harness `renameOps`): while the gate is held, every
 * rename waits at it; open lets them through. Every shard change (create, move, mark) ends in renames, so a held
 * gate keeps an operation running, half way, for as long as a test needs (keep it under the shard activities'
 * 20 s heartbeat timeout).
 *
 * The gate knows whose renames wait: a harness's gate outlives its tests, and an operation an earlier test left
 * behind (a terminated run whose activity goes on, an abandoned call) can be at it when the next test holds it
 * again. A test therefore always waits for, and counts, the renames of its own table.
 */
export class RenameGate implements RenameOps {
  /** The table id of each rename waiting at the gate now (one entry per rename). */
  private readonly waitingTables: number[] = [];
  private held: { promise: Promise<void>; release: () => void; from: number } | undefined;

  /** Holds the renames of shard files from now on; `fromShard`: only those of shards numbered so or higher. */
  hold(fromShard = 0): void {
    if (this.held) return;
    let release!: () => void;
    const promise = new Promise<void>((resolve) => (release = resolve));
    this.held = { promise, release, from: fromShard };
  }

  open(): void {
    const held = this.held;
    this.held = undefined;
    held?.release();
  }

  /** How many renames of table `tableId`'s shard files wait at the gate now. */
  waiting(tableId: number): number {
    return this.waitingTables.filter((id) => id === tableId).length;
  }

  /** Resolves once a rename of table `tableId` is stuck at the gate (so its operation has started and is half way). */
  async someoneWaiting(tableId: number): Promise<void> {
    await waitFor(
      () => Promise.resolve(this.waiting(tableId)),
      (n) => n > 0,
      { what: `a rename of table ${tableId} to wait at the gate`, intervalMs: 20 },
    );
  }

  async rename(from: string, to: string): Promise<void> {
    if (this.held && shardOf(from, to).shard >= this.held.from) {
      const { tableId } = shardOf(from, to);
      this.waitingTables.push(tableId);
      try {
        await this.held.promise;
      } finally {
        this.waitingTables.splice(this.waitingTables.indexOf(tableId), 1);
      }
    }
    await fs.promises.rename(from, to);
  }
}

/** The shard whose file a rename moves (a create's temporary file has the shard's name only as its target). */
function shardOf(from: string, to: string): { tableId: number; shard: number } {
  const shard = parseShardFileName(path.basename(to)) ?? parseShardFileName(path.basename(from));
  if (!shard) throw new Error(`RenameGate: neither ${from} nor ${to} is a shard file`);
  return shard;
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
