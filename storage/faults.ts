import { PermanentStorageError } from './errors';

export type StorageOp = 'createShard' | 'dropShard' | 'moveShard' | 'truncateShard' | 'untruncateShard' | 'markGarbage' | 'deleteGarbage';

export interface Fault {
  op: StorageOp;
  /** Unset matches any table. */
  tableId?: number;
  /** Unset matches any shard. */
  shard?: number;
  kind: 'permanent' | 'transient';
  /** How many matching calls fail; unset means every one until clear(). */
  times?: number;
}

interface ArmedFault extends Fault {
  remaining: number;
}

/**
 * Lets tests and chaos runs make storage calls fail on purpose. Off (empty) by default, so production code
 * can call check() unconditionally.
 */
export class FaultInjector {
  private armed: ArmedFault[] = [];

  inject(fault: Fault): void {
    const times = fault.times ?? Number.POSITIVE_INFINITY;
    if (!(times >= 1) || (Number.isFinite(times) && !Number.isInteger(times))) {
      throw new RangeError(`fault times must be a positive integer, got ${String(fault.times)}`);
    }
    this.armed.push({ ...fault, remaining: times });
  }

  clear(): void {
    this.armed = [];
  }

  /** How many armed faults have not been used up yet. */
  pending(): number {
    return this.armed.length;
  }

  /** Throws if an armed fault matches; the first matching fault, in injection order, is the one used up. */
  check(op: StorageOp, ref: { tableId: number; shard: number }): void {
    const fault = this.armed.find(
      (f) => f.op === op && (f.tableId === undefined || f.tableId === ref.tableId) && (f.shard === undefined || f.shard === ref.shard),
    );
    if (!fault) return;
    fault.remaining -= 1;
    if (fault.remaining <= 0) this.armed = this.armed.filter((f) => f !== fault);
    const where = `${op} of table ${ref.tableId} shard ${ref.shard}`;
    if (fault.kind === 'permanent') throw new PermanentStorageError(`injected permanent fault on ${where}`);
    throw new Error(`injected transient fault on ${where}`);
  }
}
