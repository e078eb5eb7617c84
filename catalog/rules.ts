import type { TableName } from '../domain/names';
import type { TableState } from '../domain/states';
import type { TableRecord } from '../domain/table';
import type { Lease } from '../domain/leases';
import type { SettingRow } from '../domain/settings';
import {
  isBusy,
  type AcquireResult,
  type Catalog,
  type DrainResult,
  type DrainStart,
  type ExpiryChange,
  type HoldChange,
  type LeaseRequest,
  type SettingChange,
  type IsOwnerClosed,
  type ListOptions,
  type LockHolder,
  type LockOwner,
  type Outcome,
  type PrepareCreateRequest,
  type PrepareResult,
  type StepKey,
  type TransitionRequest,
  type TogetherRequest,
  type TruncateCommit,
} from './catalog';
import { journaled, unwrap } from './rules-journal';
import { changeLease } from './rules-leases';
import { busyHolder, busyHolderOf, sameOwner, tryLock } from './rules-locks';
import { changeExpiry, changeHold, commitTruncate, prepare, startDrain, transition } from './rules-tables';
import { RetryTransaction, type CatalogTx } from './tx';

/**
 * The catalog's rules, written once for every store: each call of the Catalog contract as a transaction (run again
 * when it meets a race), journaled under its step key (rules-journal.ts), and, for a call that takes a lock, the
 * take-over of a lock whose holder has closed (rules-locks.ts). What each call does to a table's record is in
 * rules-tables.ts, to a lease in rules-leases.ts. A store (sqlite.ts, postgres.ts) extends TransactionalCatalog with
 * its transactions and the row-level primitives of CatalogTx, and nothing else; no driver is imported by any of them.
 */

/** How many times a transaction is run when it meets a race it cannot settle, or its store aborts it (a deadlock). */
const MAX_ATTEMPTS = 5;

export abstract class TransactionalCatalog implements Catalog {
  abstract readonly id: string;
  abstract close(): Promise<void>;

  /** Runs `fn` once in a write transaction of its own: committed if `fn` resolves, rolled back if it throws. */
  protected abstract runTransaction<T>(fn: (tx: CatalogTx) => Promise<T>): Promise<T>;
  /** Runs `fn` outside any transaction: reads see what has committed, each write commits on its own. */
  protected abstract runOutside<T>(fn: (tx: CatalogTx) => Promise<T>): Promise<T>;
  /** Whether the store aborted a transaction that may simply run again (a deadlock, a serialization failure). */
  protected isTransient(_err: unknown): boolean {
    return false;
  }

  prepareCreate(req: PrepareCreateRequest, isOwnerClosed: IsOwnerClosed): Promise<PrepareResult> {
    return this.withTakeOver(isOwnerClosed, req.step, (tx) => prepare(tx, req)).then(({ result }) => unwrap(result));
  }

  transition(req: TransitionRequest): Promise<TableRecord> {
    return this.transaction((tx) => journaled(tx, req.step, () => transition(tx, req))).then(unwrap);
  }

  async changeTogether(reqs: readonly TogetherRequest[]): Promise<TableRecord[]> {
    // (A refusal of one is thrown inside the transaction: it takes the others back with it, their journal included, so
    // that the same call made again tries them all again.)
    return this.transaction(async (tx) => {
      const made: TableRecord[] = [];
      for (const req of reqs) {
        const changed =
          'transition' in req
            ? await journaled(tx, req.transition.step, () => transition(tx, req.transition))
            : await journaled(tx, req.commitTruncate.step, () => commitTruncate(tx, req.commitTruncate));
        made.push(unwrap(changed));
      }
      return made;
    });
  }

  async getTable(tableId: number, step?: StepKey): Promise<TableRecord | undefined> {
    if (!step) return this.runOutside((tx) => tx.tableById(tableId));
    const outcome = await this.transaction((tx) => journaled(tx, step, async () => (await tx.tableById(tableId)) ?? null));
    return unwrap(outcome) ?? undefined;
  }

  findByName(name: TableName): Promise<TableRecord | undefined> {
    return this.runOutside((tx) => tx.nameHolder(name));
  }

  findTrashed(name: TableName): Promise<TableRecord | undefined> {
    return this.runOutside((tx) => tx.newestTrashed(name));
  }

  listTables(opts: ListOptions): Promise<TableRecord[]> {
    return this.runOutside((tx) => tx.listTables(opts));
  }

  countByState(): Promise<Partial<Record<TableState, number>>> {
    return this.runOutside((tx) => tx.countByState());
  }

  acquireLock(resource: string, owner: LockOwner, now: number, isOwnerClosed: IsOwnerClosed, step?: StepKey): Promise<AcquireResult> {
    // A journaled acquire answers "acquired" even if the run has since released the lock (its later calls
    // are journaled too): re-taking it would let a run that already finished hold a table again.
    return this.withTakeOver(isOwnerClosed, step, (tx) => tryLock(tx, resource, owner, now)).then(({ result, tookOverFrom }) => {
      const acquired = unwrap(result);
      return isBusy(acquired) ? acquired : { acquired: true, tookOverFrom };
    });
  }

  async holdsLock(resource: string, owner: LockOwner): Promise<boolean> {
    const holder = await this.runOutside((tx) => tx.lockHolder(resource));
    return holder !== undefined && sameOwner(holder, owner);
  }

  stepOutcome(step: StepKey): Promise<Outcome<unknown> | undefined> {
    return this.runOutside((tx) => tx.stepOutcome(step));
  }

  recordStep(step: StepKey, outcome: Outcome<unknown>): Promise<void> {
    return this.runOutside((tx) => tx.recordStep(step, outcome));
  }

  releaseLocks(owner: LockOwner): Promise<void> {
    // In a transaction: deleting several lock rows at once may meet a prepare in a deadlock, and is then run again.
    return this.transaction((tx) => tx.deleteLocksOf(owner));
  }

  listLocks(): Promise<LockHolder[]> {
    return this.runOutside((tx) => tx.listLocks());
  }

  pruneJournal(before: number): Promise<number> {
    return this.runOutside((tx) => tx.pruneJournal(before));
  }

  async listSettings(step?: StepKey): Promise<SettingRow[]> {
    if (!step) return this.runOutside((tx) => tx.settingRows());
    return unwrap(await this.transaction((tx) => journaled(tx, step, () => tx.settingRows())));
  }

  async listLeases(opts: { tableId?: number; now: number }, step?: StepKey): Promise<Lease[]> {
    if (!step) return this.runOutside((tx) => tx.liveLeases(opts));
    return unwrap(await this.transaction((tx) => journaled(tx, step, () => tx.liveLeases(opts))));
  }

  changeSetting(req: SettingChange): Promise<SettingRow[]> {
    return this.transaction((tx) =>
      journaled(tx, req.step, async () => {
        if (req.value === undefined) await tx.deleteSetting(req.key, req.namespace);
        else await tx.upsertSetting({ key: req.key, namespace: req.namespace, value: req.value, updatedAt: req.now });
        return tx.settingRows();
      }),
    ).then(unwrap);
  }

  changeHold(req: HoldChange): Promise<TableRecord> {
    return this.transaction((tx) => journaled(tx, req.step, () => changeHold(tx, req))).then(unwrap);
  }

  changeExpiry(req: ExpiryChange): Promise<TableRecord> {
    return this.transaction((tx) => journaled(tx, req.step, () => changeExpiry(tx, req))).then(unwrap);
  }

  startDrain(req: DrainStart, isOwnerClosed: IsOwnerClosed): Promise<DrainResult> {
    return this.withTakeOver(isOwnerClosed, req.step, (tx) => startDrain(tx, req)).then(({ result }) => unwrap(result));
  }

  commitTruncate(req: TruncateCommit): Promise<TableRecord> {
    return this.transaction((tx) => journaled(tx, req.step, () => commitTruncate(tx, req))).then(unwrap);
  }

  changeLease(req: LeaseRequest): Promise<Lease> {
    return this.transaction((tx) => journaled(tx, req.step, () => changeLease(tx, req))).then(unwrap);
  }

  pruneLeases(before: number): Promise<number> {
    return this.runOutside((tx) => tx.pruneLeases(before));
  }

  /**
   * Runs `fn` in a transaction, and again (a few times, after a short random pause) when it met a race it could
   * not settle or the store aborted it for one. Any other error is thrown.
   */
  private async transaction<T>(fn: (tx: CatalogTx) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.runTransaction(fn);
      } catch (err) {
        if (attempt >= MAX_ATTEMPTS || !(err instanceof RetryTransaction || this.isTransient(err))) throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));
    }
  }

  /**
   * Runs `attempt` (a call that takes a lock, and may find it busy) in a transaction, journaled under `step` (a busy
   * answer is not final: its claim is withdrawn), and, while the holder it reports has closed without releasing (a
   * terminated workflow, say), takes that lock over and tries again. The holder's status is asked outside any
   * transaction: it is a call to the Temporal server.
   */
  private async withTakeOver<T extends object>(
    isOwnerClosed: IsOwnerClosed,
    step: StepKey | undefined,
    attempt: (tx: CatalogTx) => Promise<T>,
  ): Promise<{ result: Outcome<T>; tookOverFrom: LockHolder | null }> {
    let tookOverFrom: LockHolder | null = null;
    for (;;) {
      const result = await this.transaction((tx) =>
        journaled(
          tx,
          step,
          () => attempt(tx),
          (answer) => busyHolderOf(answer) === undefined,
        ),
      );
      const holder = busyHolder(result);
      if (!holder || !(await isOwnerClosed(holder))) return { result, tookOverFrom };
      // Unless it changed hands meanwhile: then the next attempt sees the new holder.
      if (await this.runOutside((tx) => tx.deleteLock(holder))) tookOverFrom = holder;
    }
  }
}
