import { ApplicationFailure } from '@temporalio/common';
import type { PrepareResult } from '../catalog/catalog';
import type { CallScope, ShardChange, ShardRef } from '../domain/contracts';
import type { Lease } from '../domain/leases';
import { lockFor, STORAGE_STOPPED_HERE } from '../domain/operations';
import {
  groupOf,
  mayJoinCall,
  shardsOfRun,
  undoable,
  valueOf,
  type CatalogChange,
  type EndOfTrash,
  type GroupMember,
  type Operation,
  type Progress,
  type Readiness,
  type Step,
  type StepContext,
  type StepsAnswer,
  type StepsCall,
  type TrashBegun,
  type Verdict,
} from '../domain/steps';
import type { TableRecord } from '../domain/table';
import type { LockAttempt } from './scope';
import type { ShardsHereAnswer } from './storage';
import type { TrashCommitted } from './trash-runs';

/**
 * One table's share of a change made on several tables at once (StepParts.changeTogether), journaled under `step`: a
 * change that cannot be taken back (a drop's commit, a recall's).
 */
export interface TogetherChange {
  step: string;
  tableId: number;
  change: Extract<CatalogChange, { kind: 'transition' | 'commitTrash' }>;
}

/** The operations a worker runs, by name: the step lists the workflows run (workflows/operations.ts). */
export type OperationRegistry = Readonly<Record<string, Operation<never>>>;

/** The catalog calls and the shard call a step is made of, each journaled under the key it is given (`step`). */
export interface StepParts {
  tryLock(input: CallScope & { lock: string; readTable?: number; now?: number }): Promise<LockAttempt>;
  transition(
    input: CallScope &
      Omit<Extract<CatalogChange, { kind: 'transition' }>, 'kind'> & { tableId: number; now: number; releaseLocks?: boolean },
  ): Promise<TableRecord>;
  prepareCreate(
    input: CallScope & { namespace: string; name: string; params: TableRecord['params']; lock: string; takeLock?: boolean; now: number },
  ): Promise<PrepareResult>;
  startDrain(
    input: CallScope & {
      tableId: number;
      now: number;
      expectName?: { namespace: string; name: string };
      takeLock?: boolean;
      droppedWith?: number[];
      truncate?: boolean;
    },
  ): Promise<{ table: TableRecord; leases: Lease[] } | { busy: string }>;
  commitTrash(
    input: CallScope & Omit<Extract<CatalogChange, { kind: 'commitTrash' }>, 'kind'> & { now: number; releaseLocks?: boolean },
  ): Promise<TrashCommitted>;
  changeHold(
    input: CallScope & {
      tableId: number;
      hold: { reason: string | null; since: number } | null;
      expectName?: { namespace: string; name: string };
      releaseLocks?: boolean;
    },
  ): Promise<TableRecord>;
  liveLeases(input: CallScope & { tableId: number; now: number }): Promise<Lease[]>;
  changeTogether(input: CallScope & { now: number; changes: TogetherChange[] }): Promise<TableRecord[]>;
  changeShardsHere(input: CallScope & { change: ShardChange; shards: ShardRef[] }): Promise<ShardsHereAnswer>;
  /** Releases every lock the calling run holds. */
  releaseLocks(input: CallScope): Promise<void>;
}

export interface StepsHereDeps {
  operations: OperationRegistry;
  parts: StepParts;
  /** The storage nodes this worker serves (their shards are changed in the call; the others' on their nodes' queues). */
  served: readonly string[];
  /** Starts the expiry run of the trash a table has just entered (activities/trash-runs.ts): starting twice is harmless. */
  beginTrash: (table: TableRecord, begun: TrashBegun, catalogId: string | undefined) => Promise<unknown>;
  /** Tells the expiry run of a table's trash that the trash is over (activities/trash-runs.ts): telling twice is harmless. */
  endTrash: (tableId: number, end: EndOfTrash, catalogId: string | undefined) => Promise<unknown>;
}

/** The calls to the runs that wait on a table's trash (`beginsTrash`, `endsTrash`). */
type TrashRuns = Pick<StepsHereDeps, 'beginTrash' | 'endTrash'>;

/** What a catalog change answered: the table, a busy lock, or (a create found made) the end of the operation. */
type Changed = { table: TableRecord; locked?: true; leases?: Lease[] } | { busy: string } | { finished: TableRecord };

/**
 * The worker's half of the executor (workflows/execute.ts is the other): one local activity that runs an operation's
 * steps from where its run stands, as far as one call may, and answers where the run stands then. It goes on from step
 * to step until a step needs the workflow (a lock to wait for, leases to drain, shards of nodes served elsewhere), a
 * check ends or refuses the operation, a step fails, the call has changed as many shards of a step as one call may, or
 * the next step may not share the call (`mayJoinCall`: a cancel must find everything undoable). Backwards, it runs the
 * undos of the steps begun, the last first.
 *
 * Each part of each step (the lock, a change, a step's shards) is journaled under the call's key and the part's name, so
 * that the same call made again (a retry, or a workflow task lost after the call ran) answers what it answered the first
 * time and changes nothing twice. A failure for good is answered rather than thrown, with where the run stands, so that
 * the workflow knows what to take back.
 */
export function createStepsHere({ operations, parts, served, beginTrash, endTrash }: StepsHereDeps) {
  const servedHere = new Set(served);

  async function runStepsHere(call: StepsCall): Promise<StepsAnswer> {
    // (The registry holds operations of every input type; each is handed the input its own workflow was started with.)
    const operation = operations[call.operation] as unknown as Operation<unknown> | undefined;
    if (!operation) throw ApplicationFailure.nonRetryable(`this worker runs no operation named ${call.operation}`, 'UnknownOperation');
    const run = new RunHere(operation, call, parts, servedHere, { beginTrash, endTrash });
    let answer: StepsAnswer;
    try {
      answer = call.direction === 'forward' ? await run.forward() : await run.back();
    } catch (err) {
      // A failure for good is the step's (its undo runs); a transient one is retried by the local activity's policy.
      if (!(err instanceof ApplicationFailure && err.nonRetryable)) throw err;
      if (err.type === 'UnknownOperation') throw err;
      answer = run.answer({ kind: 'failed', type: err.type ?? 'Error', message: err.message });
    }
    await run.delivered();
    return answer;
  }
  return { runStepsHere };
}

/** One call's run through the steps. */
class RunHere {
  private progress: Progress;
  private readonly notes: string[] = [];
  private readonly scope: CallScope;
  /** What the call asked of the trash's runs (`beginsTrash`, `endsTrash`), on its way while the call goes on. */
  private readonly sent: Array<{ what: string; sending: Promise<unknown> }> = [];

  constructor(
    private readonly operation: Operation<unknown>,
    private readonly call: StepsCall,
    private readonly parts: StepParts,
    private readonly served: ReadonlySet<string>,
    private readonly trashRuns: TrashRuns,
  ) {
    this.progress = structuredClone(call.progress);
    this.scope = { catalogId: call.catalogId };
    if (!this.progress.group && operation.tables) {
      const group = groupOf(operation.tables(call.input));
      if (group) this.progress.group = group;
    }
  }

  private get steps(): ReadonlyArray<Step<unknown>> {
    return this.operation.steps;
  }

  /** The key a part of the call is journaled under. */
  private key(part: string): CallScope {
    return { ...this.scope, step: `${this.call.call}/${part}` };
  }

  /** What a step knows, of the run's table, or of `member` (a run over several tables makes each change on each). */
  private context(member?: GroupMember): StepContext<unknown> {
    const { lockedAt } = this.progress;
    const { checked, table } = member ?? this.progress;
    const said = [...(this.call.said ?? []), ...this.notes];
    const tableId = member?.id ?? this.operation.tables?.(this.call.input)[0];
    const leases = member ? this.progress.leases.filter((lease) => lease.tableId === member.id) : this.progress.leases;
    return {
      input: this.call.input,
      checked,
      ...(table ? { table } : {}),
      lockedAt,
      now: this.call.now,
      leases,
      said,
      ...(tableId !== undefined ? { tableId } : {}),
      ...(this.progress.group ? { group: this.progress.group.map((m) => m.table ?? m.checked) } : {}),
    };
  }

  /** The tables a step is made on, each once: a run over several, each of them; a run over one, its table (undefined). */
  private members(): Array<GroupMember | undefined> {
    return this.progress.group ?? [undefined];
  }

  /**
   * Waits for what the call asked of the trash's runs: the call answers once each is done, and one that failed fails the
   * call, which is made again (its parts journaled, the start or the message made again).
   */
  async delivered(): Promise<void> {
    await Promise.all(
      this.sent.map(({ what, sending }) =>
        sending.catch((err: unknown) => {
          throw new Error(`${what}: ${String(err)}`);
        }),
      ),
    );
  }

  answer(outcome: StepsAnswer['outcome']): StepsAnswer {
    return { progress: this.progress, notes: this.notes, outcome };
  }

  /** Ends the operation here, its locks released (nothing it began is left to take back). */
  private async end(outcome: StepsAnswer['outcome']): Promise<StepsAnswer> {
    if (this.progress.holdsLocks && this.progress.begun.length === 0) {
      await this.parts.releaseLocks(this.scope);
      this.progress.holdsLocks = false;
    }
    return this.answer(outcome);
  }

  async forward(): Promise<StepsAnswer> {
    const { operation, call } = this;
    let ranSomething = false;
    const { group } = this.progress;
    if (group && !this.progress.locked) {
      // A run over several tables takes their locks before anything, one by one in id order, reading each under its own.
      this.progress.holdsLocks = true;
      for (const member of group) {
        const lock = { ...this.key(`lock.${member.id}`), lock: lockFor.table(member.id), readTable: member.id, now: call.now };
        const attempt = await this.parts.tryLock(lock);
        if (!attempt.acquired) return this.answer({ kind: 'busy', holder: attempt.holder });
        member.checked = attempt.table ?? null;
        if (member.checked) member.table = member.checked;
        else delete member.table;
        if (member === group[0]) this.progress.lockedAt = attempt.readAt ?? call.now;
      }
      Object.assign(this.progress, { locked: true, checked: group[0]!.checked });
      if (group[0]!.table) this.progress.table = group[0]!.table;
    } else if (operation.lockTable && !this.progress.locked) {
      this.progress.holdsLocks = true;
      const tableId = operation.lockTable(call.input);
      const attempt = await this.parts.tryLock({ ...this.key('lock'), lock: lockFor.table(tableId), readTable: tableId, now: call.now });
      if (!attempt.acquired) return this.answer({ kind: 'busy', holder: attempt.holder });
      const table = attempt.table ?? null;
      Object.assign(this.progress, { locked: true, checked: table, lockedAt: attempt.readAt ?? call.now });
      if (table) this.progress.table = table;
    }
    while (this.progress.step < this.steps.length) {
      const index = this.progress.step;
      const step = this.steps[index]!;
      const fresh = !this.progress.changed && this.progress.shardsDone.length === 0;
      if (fresh && ranSomething && !mayJoinCall(step, this.progress)) return this.answer({ kind: 'goOn' });
      if (fresh && step.check) {
        const verdict = this.verdictOf(step.check);
        if ('refuse' in verdict) return this.end({ kind: 'failed', type: verdict.refuse.type, message: verdict.refuse.message });
        if ('finish' in verdict) return this.end({ kind: 'finished', why: verdict.finish });
        if ('forward' in verdict) this.progress.forwardOnly = true;
        this.moveTo(index + 1);
        ranSomething = true;
        continue;
      }
      if (fresh && step.waitsForLeases) {
        const readiness = await this.readiness(step.waitsForLeases, index);
        if ('refuse' in readiness) return this.answer({ kind: 'failed', type: readiness.refuse.type, message: readiness.refuse.message });
        if ('waitMs' in readiness) return this.answer({ kind: 'wait', ms: readiness.waitMs, why: readiness.why });
      }
      // From a point of no return on, nothing before it is taken back, and the run only goes forward.
      if (fresh && step.pointOfNoReturn) Object.assign(this.progress, { begun: [], forwardOnly: true });
      if (!this.progress.changed && this.progress.group && step.change !== undefined && !undoable(step)) {
        // A change that cannot be taken back, on several tables: on all of them at once, or on none. Once it is made,
        // nothing before it may be taken back either (the tables would be left half in, half out): the run goes forward.
        if (await this.changeTogether(step.change, index)) Object.assign(this.progress, { begun: [], forwardOnly: true });
        this.progress.changed = true;
        ranSomething = true;
      }
      if (!this.progress.changed) {
        const members = this.members();
        const group = this.progress.group !== undefined;
        // A run over several tables holds all their locks: the change is made on each side by side, and may be made on some
        // before it fails on one, so the step counts as begun first (its undo finds those it never changed as they were).
        if (group && undoable(step) && !this.progress.forwardOnly && !this.progress.begun.includes(index)) this.progress.begun.push(index);
        const settled = await Promise.allSettled(
          members.map(async (member) => {
            const change = step.change === undefined ? undefined : valueOf(step.change, this.context(member));
            if (!change) return undefined;
            // The operation's last change releases its locks, unless shards follow it: they change under the locks. (A run
            // over several releases them once every change is made, at its end.)
            const last = !group && index === this.steps.length - 1 && !step.shards && !step.checkShards;
            const changed = await this.make(change, member ? `${index}.change.${member.id}` : `${index}.change`, last, member);
            if (member && 'table' in changed && !member.changed?.includes(index)) member.changed = [...(member.changed ?? []), index];
            return changed;
          }),
        );
        const refused = settled.find((outcome) => outcome.status === 'rejected');
        if (refused) throw refused.reason;
        const made = settled.map((outcome) => (outcome as PromiseFulfilledResult<Changed | undefined>).value);
        const busy = made.find((changed) => changed && 'busy' in changed);
        if (busy && 'busy' in busy) return this.answer({ kind: 'busy', holder: busy.busy });
        const finished = made.find((changed) => changed && 'finished' in changed);
        if (finished && 'finished' in finished) {
          this.progress.table = finished.finished;
          return this.end({ kind: 'finished', why: 'found made already' });
        }
        this.progress.changed = true;
        ranSomething = true;
        if (undoable(step) && !this.progress.forwardOnly && !this.progress.begun.includes(index)) this.progress.begun.push(index);
        for (const member of members) this.tellTrashRuns(step, member);
      }
      // (A step's reads of its shards, `checkShards`, go the way its changes would: a call's share at a time, each node's
      // on its queue when this worker does not serve it.)
      const onShards = step.shards ?? step.checkShards;
      if (onShards) {
        const left = await this.changeShards(valueOf(onShards, this.context()), `${index}.shards`, this.progress.shardsDone);
        if (left) return left;
        ranSomething = true;
      }
      this.moveTo(index + 1);
    }
    // (Held still when the last step changed shards after its change.)
    if (this.progress.holdsLocks) {
      await this.parts.releaseLocks(this.scope);
      this.progress.holdsLocks = false;
    }
    return this.answer({ kind: 'done' });
  }

  /** Takes back the steps begun, the last first: each one's shards, then its catalog change. */
  async back(): Promise<StepsAnswer> {
    const { begun } = this.progress;
    while (begun.length > 0) {
      const index = begun.at(-1)!;
      const undo = this.steps[index]!.undo!;
      if (undo.shards) {
        const left = await this.changeShards(valueOf(undo.shards, this.context()), `${index}.undo-shards`, this.progress.undoneShards);
        if (left) return left;
      }
      if (undo.change) {
        const change = undo.change;
        // (A run over several takes the change back on the tables it made it on: one it failed on, or never reached, is as
        // it was, maybe another operation's since.)
        const made = this.members().filter((member) => !member || member.changed?.includes(index));
        const settled = await Promise.allSettled(
          made.map((member) =>
            this.make(valueOf(change, this.context(member)), member ? `${index}.undo.${member.id}` : `${index}.undo`, false, member),
          ),
        );
        const failed = settled.find((outcome) => outcome.status === 'rejected');
        if (failed) throw failed.reason;
      }
      begun.pop();
      this.progress.undoneShards = [];
    }
    return this.end({ kind: 'done' });
  }

  /**
   * Once a step's change is made on a table: starts the expiry of the trash the step began (`beginsTrash`), or tells the
   * expiry that its trash is over (`endsTrash`), on its way while the call goes on (its shards change meanwhile).
   */
  private tellTrashRuns(step: Step<unknown>, member: GroupMember | undefined): void {
    const context = this.context(member);
    const { catalogId } = this.call;
    const begun = step.beginsTrash?.(context);
    if (begun)
      this.send(
        `starting the expiry of table ${this.tableId(member)}'s trash`,
        this.trashRuns.beginTrash(context.table!, begun, catalogId),
      );
    const ends = step.endsTrash?.(context);
    if (ends)
      this.send("telling the trash's expiry that its trash is over", this.trashRuns.endTrash(this.tableId(member), ends, catalogId));
  }

  private send(what: string, sending: Promise<unknown>): void {
    // (Awaited by `delivered`; a call that fails before then is made again, and makes it again.)
    sending.catch(() => undefined);
    this.sent.push({ what, sending });
  }

  private moveTo(step: number): void {
    Object.assign(this.progress, { step, changed: false, shardsDone: [] });
  }

  /**
   * A check on each table of the run: the first refusal refuses the operation; it finishes only if it would on every
   * table, and goes forward only if it would on one (past a point of no return, on a table, there is no going back).
   */
  private verdictOf(check: NonNullable<Step<unknown>['check']>): Verdict {
    const verdicts = this.members().map((member) => check(this.context(member)));
    const refused = verdicts.find((v) => 'refuse' in v);
    if (refused) return refused;
    if (verdicts.every((v) => 'finish' in v)) return verdicts[0]!;
    return verdicts.some((v) => 'forward' in v) ? { forward: true } : { proceed: true };
  }

  /** Whether a step that waits for leases may run, on every table of the run (their leases read fresh). */
  private async readiness(waits: NonNullable<Step<unknown>['waitsForLeases']>, index: number): Promise<Readiness> {
    const { now } = this.call;
    const members = this.members();
    const leases = await Promise.all(
      members.map((member) =>
        this.parts.liveLeases({
          ...this.key(member ? `${index}.leases.${member.id}` : `${index}.leases`),
          tableId: this.tableId(member),
          now,
        }),
      ),
    );
    this.progress.leases = leases.flat();
    const each = members.map((member) => waits(this.context(member)));
    const refused = each.find((r) => 'refuse' in r);
    if (refused) return refused;
    const waiting = each.filter((r): r is Extract<Readiness, { waitMs: number }> => 'waitMs' in r);
    if (waiting.length === 0) return { ready: true };
    return { waitMs: Math.min(...waiting.map((r) => r.waitMs)), why: waiting.map((r) => r.why).join('; ') };
  }

  private tableId(member?: GroupMember): number {
    if (member) return member.id;
    const table = this.progress.table ?? this.progress.checked;
    if (!table) throw new Error(`operation ${this.operation.name} has no table yet at step ${this.progress.step}`);
    return table.id;
  }

  /**
   * Makes `change` on the table's shards not in `done` that this worker serves, up to a call's share, adding them to
   * `done`. Answers what the workflow must do next if shards are left (a next call, or the nodes' own workers), or
   * undefined once every shard is changed.
   */
  private async changeShards(asked: ShardChange, part: string, done: number[]): Promise<StepsAnswer | undefined> {
    // A move's shards of one node in a call go together (in one transaction, where its driver can): several tables'
    // dropped as one, and one table's too (a view reading two of its shards goes with the first, not beside it). So do a
    // truncate's of several tables (their keys to one another are made again between their twins).
    const together = asked.method === 'moveShard' || (asked.method === 'truncateShard' && this.progress.group !== undefined);
    const change: ShardChange = together ? { ...asked, together: true } : asked;
    const all = shardsOfRun(this.progress);
    const placeOf = (shard: ShardRef) => all.indexOf(shard);
    const left = all.filter((shard) => !done.includes(placeOf(shard)));
    if (left.length === 0) return undefined;
    const served = left.filter((shard) => this.served.has(shard.node));
    // (Several tables', or a namespace's, all at once, so that each node's go in one transaction; one table's a call's share
    // at a time, each call seen to progress and a cancel taken between.)
    const whole = this.progress.group !== undefined || (asked.method === 'moveShard' && asked.namespace !== undefined);
    const here = whole ? served : served.slice(0, this.call.shardsPerCall);
    if (here.length > 0) {
      try {
        const answer = await this.parts.changeShardsHere({ ...this.key(part), change, shards: here });
        this.notes.push(...answer.notes);
        done.push(...here.map(placeOf));
      } catch (err) {
        // This worker's storage stopped (fatal): every shard left goes to its node's queue, for a worker that serves it.
        if (!(err instanceof ApplicationFailure && err.type === STORAGE_STOPPED_HERE)) throw err;
        return this.answer({ kind: 'elsewhere', change, shards: left });
      }
    }
    const still = left.filter((shard) => !done.includes(placeOf(shard)));
    if (still.length === 0) return undefined;
    if (still.some((shard) => this.served.has(shard.node))) return this.answer({ kind: 'goOn' });
    return this.answer({ kind: 'elsewhere', change, shards: still });
  }

  /**
   * Makes `change` on every table of a run over several in one catalog call (StepParts.changeTogether); false when it
   * asks nothing of any of them.
   */
  private async changeTogether(change: NonNullable<Step<unknown>['change']>, index: number): Promise<boolean> {
    const made = this.members().flatMap((member) => {
      const asked = valueOf(change, this.context(member));
      if (!asked) return [];
      if (asked.kind !== 'transition' && asked.kind !== 'commitTrash')
        throw new Error(`a ${asked.kind} that cannot be taken back is not made on several tables at once`);
      return [{ member: member!, change: asked }];
    });
    if (made.length === 0) return false;
    const tables = await this.parts.changeTogether({
      ...this.key(`${index}.change`),
      now: this.call.now,
      changes: made.map(({ member, change: asked }) => ({
        step: `${this.call.call}/${index}.change.${member.id}`,
        tableId: member.id,
        change: asked,
      })),
    });
    made.forEach(({ member }, i) => {
      member.table = tables[i]!;
      member.changed = [...(member.changed ?? []), index];
      if (member === this.progress.group![0]) this.progress.table = tables[i]!;
    });
    for (const { member } of made) this.tellTrashRuns(this.steps[index]!, member);
    return true;
  }

  /** Makes a catalog change, journaled under `part`; the operation's last releases the run's locks with it. */
  private async make(change: CatalogChange, part: string, last: boolean, member?: GroupMember): Promise<Changed> {
    const { now } = this.call;
    const key = this.key(part);
    const releaseLocks = last ? { releaseLocks: true } : {};
    // (A change that takes locks may hold one even when it answers busy: the run releases what it holds on every way out.)
    if (change.kind === 'prepareCreate' || change.kind === 'startDrain' || change.kind === 'lock') this.progress.holdsLocks = true;
    let changed: Changed;
    switch (change.kind) {
      case 'transition': {
        const { kind: _kind, ...move } = change;
        changed = { table: await this.parts.transition({ ...key, ...move, tableId: this.tableId(member), now, ...releaseLocks }) };
        break;
      }
      case 'prepareCreate': {
        const prepared = await this.parts.prepareCreate({
          ...key,
          ...change.table,
          params: change.params,
          lock: change.nameLock,
          takeLock: true,
          now,
        });
        changed =
          prepared.outcome === 'busy'
            ? { busy: prepared.holder.workflowId }
            : prepared.outcome === 'exists'
              ? { finished: prepared.table }
              : { table: prepared.table, locked: true };
        break;
      }
      case 'startDrain': {
        const { kind: _kind, ...drain } = change;
        const drop = await this.parts.startDrain({ ...key, ...drain, now, takeLock: true });
        changed = 'busy' in drop ? drop : { table: drop.table, leases: drop.leases, locked: true };
        break;
      }
      case 'commitTrash':
        changed = { table: await this.parts.commitTrash({ ...key, ...withoutKind(change), now, ...releaseLocks }) };
        break;
      case 'changeHold':
        changed = { table: await this.parts.changeHold({ ...key, ...withoutKind(change), ...releaseLocks }) };
        break;
      case 'lock': {
        const attempt = await this.parts.tryLock({ ...key, lock: change.lock });
        changed = attempt.acquired ? { table: this.progress.table! } : { busy: attempt.holder };
        break;
      }
    }
    if ('table' in changed) {
      if (member) member.table = changed.table;
      const first = !member || member === this.progress.group![0];
      if (first) this.progress.table = changed.table;
      if (changed.leases)
        this.progress.leases = member
          ? [...this.progress.leases.filter((l) => l.tableId !== member.id), ...changed.leases]
          : changed.leases;
      if (changed.locked && first) this.progress.lockedAt = now;
      if (last) this.progress.holdsLocks = false;
    }
    return changed;
  }
}

const withoutKind = <T extends { kind: string }>({ kind: _kind, ...rest }: T): Omit<T, 'kind'> => rest;
