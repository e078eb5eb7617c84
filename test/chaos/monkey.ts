import { setTimeout as sleep } from 'node:timers/promises';
import type { Connection } from '@temporalio/client';
import { workerPolls, WorkerProcess, type ChaosTemporal, type Exit, type PolledQueue } from './processes';
import type { Random } from './random';
import { TASK_QUEUE } from '../../worker/config';

/**
 * Keeps tablefate's processes running (by default one `tablefate worker`), each in a slot of its own, and, while
 * unleashed, SIGKILLs those it may kill at seeded random moments (some right after an operation starts: then a
 * random one of those that poll), restarting each after a short pause; on request it crashes the Temporal server (a
 * dev server, or one history process of a cluster) and brings it back on the same ports and database.
 */

/** One process the monkey keeps running: `tablefate <args>`, ready once it polls `queue`. */
export interface ProcessSpec {
  /** How the log and the stats name it (`worker`, `node-1`). */
  name: string;
  args: readonly string[];
  queue: PolledQueue;
  /** Whether the monkey kills it. */
  killable: boolean;
  /** An orchestrating worker (runs workflows): operations need one of these up. */
  orchestrates: boolean;
}

/** `count` orchestrating workers, `tablefate worker [...args]`, every one of them killable. */
export function workerSpecs(count: number, args: readonly string[] = ['worker']): ProcessSpec[] {
  return Array.from({ length: count }, () => ({
    name: 'worker',
    args,
    queue: { name: TASK_QUEUE, kind: 'workflow' as const },
    killable: true,
    orchestrates: true,
  }));
}

export interface MonkeyOptions {
  rng: Random;
  server: ChaosTemporal;
  /** A connection to the server, to see whether a worker polls yet. */
  admin: Connection;
  namespace: string;
  workerEnv: NodeJS.ProcessEnv;
  /** Shared by all the workers (each start is marked in it). */
  workerLog: string;
  /** The processes to keep running (same env: same home, same catalog); the first orchestrates. Default: one worker. */
  processes?: readonly ProcessSpec[];
  /** A worker lives this long after it starts polling before it is killed. */
  killAfterReadyMs: readonly [number, number];
  /** Pause between a kill and the next start. */
  restartPauseMs: readonly [number, number];
  /** Probability that an operation's start is followed, within 400 ms, by a kill. */
  killOnOpStartChance: number;
  /** How long the server stays dead in a restart. */
  serverDowntimeMs: readonly [number, number];
  /** A worker not polling after this long is given up on: killed and replaced (not counted as a kill). */
  readyTimeoutMs: number;
  log: (line: string) => void;
}

export interface WorkerExit extends Exit {
  /** Whether the server was down (or restarted) during the worker's life: then an exit is expected. */
  serverTrouble: boolean;
}

export interface MonkeyStats {
  workerStarts: number;
  workerKills: number;
  /** Of the kills, those that followed an operation's start. */
  killsOnOpStart: number;
  /** Workers that ended without being killed by us. */
  workerExits: WorkerExit[];
  /** Workers that did not poll within the ready timeout. */
  workersNeverReady: number;
  serverRestarts: number;
  /** When each worker we killed died (epoch ms), by pid: tells a stuck activity's worker apart from a live one. */
  killedAt: Map<number, number>;
  /** Kills by process name (`worker`, `node-0`). */
  killsOf: Record<string, number>;
  /** What each server restart killed, in order (`dev server`, or a cluster's `history-1`...). */
  serverKills: string[];
}

type Mode = 'calm' | 'chaos' | 'stopped';

/** Interrupts the supervisor's waits: a mode change or a kill request. A wake with no one waiting is dropped. */
class Wakeup {
  private waiter: (() => void) | undefined;

  wake(): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.();
  }

  wait(ms: number, alsoOn: Promise<unknown>): Promise<void> {
    const abort = new AbortController();
    const woken = new Promise<void>((resolve) => (this.waiter = resolve));
    const timer = Number.isFinite(ms)
      ? sleep(ms, undefined, { signal: abort.signal }).catch(() => undefined)
      : new Promise<void>(() => undefined);
    return Promise.race([woken, timer, alsoOn.then(() => undefined)]).finally(() => {
      abort.abort();
      this.waiter = undefined;
    });
  }
}

/** One worker's place: the process in it now, and what its supervisor knows and is told about it. */
class Slot {
  worker: WorkerProcess | undefined;
  /** The current worker polls (from its first poll until it exits). */
  up = false;
  killRequested = false;
  readonly wakeup = new Wakeup();
  /** serverEpoch when the current worker started. */
  epoch = 0;

  constructor(
    readonly index: number,
    readonly spec: ProcessSpec,
    /** This slot's own stream of lifetimes and restart pauses. */
    readonly lifetimes: Random,
  ) {}
}

export class ChaosMonkey {
  readonly stats: MonkeyStats = {
    workerStarts: 0,
    workerKills: 0,
    killsOnOpStart: 0,
    workerExits: [],
    workersNeverReady: 0,
    serverRestarts: 0,
    killedAt: new Map(),
    killsOf: {},
    serverKills: [],
  };
  private mode: Mode = 'calm';
  private readonly slots: Slot[];
  private readonly killTimers = new Set<NodeJS.Timeout>();
  private readonly supervisors: Array<Promise<void>> = [];
  /** Bumped on every server crash; a worker that saw it change lived through server trouble. */
  private serverEpoch = 0;
  private serverDown = false;

  /** Separate streams: how many operations start is up to the clients' timing, and must not shift the lifetimes. */
  private readonly opStartKills: Random;

  constructor(private readonly opts: MonkeyOptions) {
    // Slot 0 draws from the stream the single worker always drew from: one worker replays as before.
    this.slots = (opts.processes ?? workerSpecs(1)).map(
      (spec, i) => new Slot(i, spec, opts.rng.fork(i === 0 ? 'lifetimes' : `lifetimes-${i}`)),
    );
    this.opStartKills = opts.rng.fork('op-start-kills');
  }

  /** Some orchestrating worker polls now. */
  private get workerUp(): boolean {
    return this.slots.some((slot) => slot.up && slot.spec.orchestrates);
  }

  /** Every process polls now. */
  private get allUp(): boolean {
    return this.slots.every((slot) => slot.up);
  }

  private wakeAll(): void {
    for (const slot of this.slots) slot.wakeup.wake();
  }

  /**
   * Starts the first slot's supervisor, calm, and waits until its worker polls (the catalog exists from then on);
   * then the other slots'.
   */
  async startFirstWorker(): Promise<void> {
    if (this.supervisors.length > 0) return;
    this.supervisors.push(this.supervise(this.slots[0]!));
    if (!(await this.untilWorkerUp(this.opts.readyTimeoutMs * 2))) {
      throw new Error(`no tablefate worker came up within ${(this.opts.readyTimeoutMs * 2) / 1000} s; see ${this.opts.workerLog}`);
    }
    for (const slot of this.slots.slice(1)) this.supervisors.push(this.supervise(slot));
  }

  /** From now on, kill workers. */
  unleash(): void {
    this.mode = 'chaos';
    this.wakeAll();
  }

  /** Stops killing; resolves true once every process polls again (false if they do not within `timeoutMs`). */
  async calm(timeoutMs: number): Promise<boolean> {
    this.mode = 'calm';
    for (const timer of this.killTimers) clearTimeout(timer);
    this.killTimers.clear();
    this.wakeAll();
    return this.until(() => this.allUp, timeoutMs);
  }

  /** What the run did to the worker of this identity (`<pid>@<host>`, the SDK's default), if anything. */
  fateOf(identity: string): string {
    const killed = this.stats.killedAt.get(Number(identity.split('@')[0]));
    return killed === undefined ? '' : ` (a worker we SIGKILLed at ${new Date(killed).toISOString()})`;
  }

  /** Told by a client as an operation starts: sometimes kill a worker while that operation is under way. */
  onOperationStarted(): void {
    if (this.mode !== 'chaos' || !this.workerUp || !this.opStartKills.chance(this.opts.killOnOpStartChance)) return;
    const delay = this.opStartKills.int(0, 400);
    // Which of the workers up then: drawn now, so that the stream does not depend on when the timer fires.
    const which = this.slots.length > 1 ? this.opStartKills.next() : 0;
    const timer = setTimeout(() => {
      this.killTimers.delete(timer);
      const up = this.slots.filter((slot) => slot.up && slot.spec.killable);
      if (this.mode !== 'chaos' || up.length === 0) return;
      const slot = up[Math.floor(which * up.length)]!;
      slot.killRequested = true;
      slot.wakeup.wake();
    }, delay);
    this.killTimers.add(timer);
  }

  /**
   * SIGKILLs the server (a dev server; one history process of a cluster), leaves it dead a moment, and starts it
   * again on the same ports and database.
   */
  async restartServer(): Promise<void> {
    const downtime = this.opts.rng.between(...this.opts.serverDowntimeMs);
    this.serverEpoch++;
    this.serverDown = true;
    try {
      const killed = await this.opts.server.crash();
      this.stats.serverKills.push(killed);
      this.opts.log(`${killed}: SIGKILL (down for ${(downtime / 1000).toFixed(1)} s)`);
      await sleep(downtime);
      const started = Date.now();
      await this.opts.server.bringUp();
      this.stats.serverRestarts++;
      this.opts.log(`${killed}: up again after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    } finally {
      this.serverDown = false;
    }
  }

  /** Stops the supervisors and the workers (SIGINT, then SIGKILL). Safe to call more than once. */
  async stop(): Promise<void> {
    this.mode = 'stopped';
    for (const timer of this.killTimers) clearTimeout(timer);
    this.killTimers.clear();
    this.wakeAll();
    await Promise.all(this.supervisors);
    await Promise.all(this.slots.flatMap((slot) => (slot.worker ? [slot.worker.stop()] : [])));
  }

  // A method, not a field comparison: TypeScript would narrow `mode` across the awaits that change it.
  private stopped(): boolean {
    return this.mode === 'stopped';
  }

  private untilWorkerUp(timeoutMs: number): Promise<boolean> {
    return this.until(() => this.workerUp, timeoutMs);
  }

  private async until(condition: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (condition()) return true;
      if (this.mode === 'stopped') return false;
      await sleep(100);
    }
    return condition();
  }

  /** How the log names a process: with its slot when there are several. */
  private nameOf(slot: Slot, worker: WorkerProcess): string {
    return `${slot.spec.name} ${this.slots.length > 1 ? `${slot.index}/` : ''}${worker.pid ?? '?'}`;
  }

  private spawnWorker(slot: Slot): WorkerProcess {
    const worker = WorkerProcess.spawn(this.opts.workerEnv, this.opts.workerLog, slot.spec.args);
    this.stats.workerStarts++;
    slot.epoch = this.serverEpoch;
    void worker.exited.then(() => {
      if (slot.worker === worker) slot.up = false;
    });
    return worker;
  }

  /** An exit we did not cause, with whether the server gave the worker a reason for it. */
  private recordExit(slot: Slot, worker: WorkerProcess): void {
    const exit = worker.exitStatus!;
    const serverTrouble = this.serverDown || this.serverEpoch !== slot.epoch;
    this.stats.workerExits.push({ ...exit, serverTrouble });
    this.opts.log(
      `${this.nameOf(slot, worker)} exited on its own (code ${String(exit.code)}, signal ${String(exit.signal)})` +
        (serverTrouble ? ' while the server was in trouble' : ''),
    );
  }

  /** Polls the server until `worker` polls, exits, the timeout passes, or the run stops. */
  private async awaitReady(slot: Slot, worker: WorkerProcess): Promise<boolean> {
    const deadline = Date.now() + this.opts.readyTimeoutMs;
    while (Date.now() < deadline && this.mode !== 'stopped' && !worker.exitStatus) {
      if (worker.pid !== undefined && (await workerPolls(this.opts.admin, this.opts.namespace, worker.pid, slot.spec.queue))) return true;
      await Promise.race([sleep(200), worker.exited]);
    }
    return false;
  }

  private async supervise(slot: Slot): Promise<void> {
    let exitsInARow = 0;
    while (this.mode !== 'stopped') {
      const worker = slot.worker && !slot.worker.exitStatus ? slot.worker : (slot.worker = this.spawnWorker(slot));
      if (!slot.up) {
        const ready = await this.awaitReady(slot, worker);
        if (this.stopped()) return;
        if (worker.exitStatus) {
          this.recordExit(slot, worker);
          // Exits in a row (the server is down, say): back off, up to 4 s.
          await sleep(Math.min(4000, 250 * 2 ** exitsInARow++));
          continue;
        }
        if (!ready) {
          // Stuck starting (it happens when the server vanished under it): start another.
          this.stats.workersNeverReady++;
          this.opts.log(`${this.nameOf(slot, worker)} did not poll within ${this.opts.readyTimeoutMs / 1000} s; replacing it`);
          worker.kill('SIGKILL');
          await worker.exited;
          continue;
        }
        slot.up = true;
        exitsInARow = 0;
      }

      slot.killRequested = false;
      const lifetime = this.mode === 'chaos' && slot.spec.killable ? slot.lifetimes.between(...this.opts.killAfterReadyMs) : Infinity;
      const waitStarted = Date.now();
      await slot.wakeup.wait(lifetime, worker.exited);
      if (worker.exitStatus) {
        this.recordExit(slot, worker);
        continue;
      }
      if (this.mode !== 'chaos') continue;
      const onOpStart = slot.killRequested;
      const due = Date.now() - waitStarted >= lifetime - 5;
      if (!onOpStart && !due) continue; // woken by a mode change that ended up back at chaos
      slot.up = false;
      worker.kill('SIGKILL');
      await worker.exited;
      this.stats.workerKills++;
      this.stats.killsOf[slot.spec.name] = (this.stats.killsOf[slot.spec.name] ?? 0) + 1;
      if (worker.pid !== undefined) this.stats.killedAt.set(worker.pid, Date.now());
      if (onOpStart) this.stats.killsOnOpStart++;
      this.opts.log(`${this.nameOf(slot, worker)} SIGKILLed${onOpStart ? ' right after an operation started' : ''}`);
      await sleep(slot.lifetimes.between(...this.opts.restartPauseMs));
    }
  }
}
