import { setTimeout as sleep } from 'node:timers/promises';
import type { Connection } from '@temporalio/client';
import { workerPolls, WorkerProcess, type ChaosServer, type Exit } from './processes';
import type { Random } from './random';

/**
 * Keeps one `tablefate worker` running and, while unleashed, SIGKILLs it at seeded random moments (some right
 * after an operation starts), restarting it after a short pause; on request it crashes the dev server and
 * brings it back on the same port and db file.
 */

export interface MonkeyOptions {
  rng: Random;
  server: ChaosServer;
  /** A connection to the server, to see whether a worker polls yet. */
  admin: Connection;
  namespace: string;
  workerEnv: NodeJS.ProcessEnv;
  workerLog: string;
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
    const timer = Number.isFinite(ms) ? sleep(ms, undefined, { signal: abort.signal }).catch(() => undefined) : new Promise<void>(() => undefined);
    return Promise.race([woken, timer, alsoOn.then(() => undefined)]).finally(() => {
      abort.abort();
      this.waiter = undefined;
    });
  }
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
  };
  private mode: Mode = 'calm';
  private worker: WorkerProcess | undefined;
  /** The current worker polls (from its first poll until it exits). */
  private workerUp = false;
  private killRequested = false;
  private readonly wakeup = new Wakeup();
  private readonly killTimers = new Set<NodeJS.Timeout>();
  private supervisor: Promise<void> | undefined;
  /** Bumped on every server crash; a worker that saw it change lived through server trouble. */
  private serverEpoch = 0;
  private serverDown = false;
  /** serverEpoch when the current worker started. */
  private workerEpoch = 0;

  /** Separate streams: how many operations start is up to the clients' timing, and must not shift the lifetimes. */
  private readonly lifetimes: Random;
  private readonly opStartKills: Random;

  constructor(private readonly opts: MonkeyOptions) {
    this.lifetimes = opts.rng.fork('lifetimes');
    this.opStartKills = opts.rng.fork('op-start-kills');
  }

  /** Starts the supervisor, calm, and waits until a worker polls (its catalog file exists from then on). */
  async startFirstWorker(): Promise<void> {
    this.supervisor ??= this.supervise();
    if (!(await this.untilWorkerUp(this.opts.readyTimeoutMs * 2))) {
      throw new Error(`no tablefate worker came up within ${(this.opts.readyTimeoutMs * 2) / 1000} s; see ${this.opts.workerLog}`);
    }
  }

  /** From now on, kill workers. */
  unleash(): void {
    this.mode = 'chaos';
    this.wakeup.wake();
  }

  /** Stops killing; resolves true once a worker polls again (false if none does within `timeoutMs`). */
  async calm(timeoutMs: number): Promise<boolean> {
    this.mode = 'calm';
    for (const timer of this.killTimers) clearTimeout(timer);
    this.killTimers.clear();
    this.wakeup.wake();
    return this.untilWorkerUp(timeoutMs);
  }

  /** What the run did to the worker of this identity (`<pid>@<host>`, the SDK's default), if anything. */
  fateOf(identity: string): string {
    const killed = this.stats.killedAt.get(Number(identity.split('@')[0]));
    return killed === undefined ? '' : ` (a worker we SIGKILLed at ${new Date(killed).toISOString()})`;
  }

  /** Told by a client as an operation starts: sometimes kill the worker while that operation is under way. */
  onOperationStarted(): void {
    if (this.mode !== 'chaos' || !this.workerUp || !this.opStartKills.chance(this.opts.killOnOpStartChance)) return;
    const timer = setTimeout(() => {
      this.killTimers.delete(timer);
      if (this.mode !== 'chaos' || !this.workerUp) return;
      this.killRequested = true;
      this.wakeup.wake();
    }, this.opStartKills.int(0, 400));
    this.killTimers.add(timer);
  }

  /** SIGKILLs the dev server, leaves it dead a moment, and starts it again on the same port and db file. */
  async restartServer(): Promise<void> {
    const downtime = this.opts.rng.between(...this.opts.serverDowntimeMs);
    this.serverEpoch++;
    this.serverDown = true;
    try {
      this.opts.log(`dev server: SIGKILL (down for ${(downtime / 1000).toFixed(1)} s)`);
      await this.opts.server.crash();
      await sleep(downtime);
      const started = Date.now();
      await this.opts.server.bringUp();
      this.stats.serverRestarts++;
      this.opts.log(`dev server: up again on ${this.opts.server.address} after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    } finally {
      this.serverDown = false;
    }
  }

  /** Stops the supervisor and the worker (SIGINT, then SIGKILL). Safe to call more than once. */
  async stop(): Promise<void> {
    this.mode = 'stopped';
    for (const timer of this.killTimers) clearTimeout(timer);
    this.killTimers.clear();
    this.wakeup.wake();
    await this.supervisor;
    await this.worker?.stop();
  }

  // A method, not a field comparison: TypeScript would narrow `mode` across the awaits that change it.
  private stopped(): boolean {
    return this.mode === 'stopped';
  }

  private async untilWorkerUp(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.workerUp) return true;
      if (this.mode === 'stopped') return false;
      await sleep(100);
    }
    return this.workerUp;
  }

  private spawnWorker(): WorkerProcess {
    const worker = WorkerProcess.spawn(this.opts.workerEnv, this.opts.workerLog);
    this.stats.workerStarts++;
    this.workerEpoch = this.serverEpoch;
    void worker.exited.then(() => {
      if (this.worker === worker) this.workerUp = false;
    });
    return worker;
  }

  /** An exit we did not cause, with whether the server gave the worker a reason for it. */
  private recordExit(worker: WorkerProcess): void {
    const exit = worker.exitStatus!;
    const serverTrouble = this.serverDown || this.serverEpoch !== this.workerEpoch;
    this.stats.workerExits.push({ ...exit, serverTrouble });
    this.opts.log(
      `worker ${worker.pid ?? '?'} exited on its own (code ${String(exit.code)}, signal ${String(exit.signal)})` +
        (serverTrouble ? ' while the server was in trouble' : ''),
    );
  }

  /** Polls the server until `worker` polls, exits, the timeout passes, or the run stops. */
  private async awaitReady(worker: WorkerProcess): Promise<boolean> {
    const deadline = Date.now() + this.opts.readyTimeoutMs;
    while (Date.now() < deadline && this.mode !== 'stopped' && !worker.exitStatus) {
      if (worker.pid !== undefined && (await workerPolls(this.opts.admin, this.opts.namespace, worker.pid))) return true;
      await Promise.race([sleep(200), worker.exited]);
    }
    return false;
  }

  private async supervise(): Promise<void> {
    let exitsInARow = 0;
    while (this.mode !== 'stopped') {
      const worker = this.worker && !this.worker.exitStatus ? this.worker : (this.worker = this.spawnWorker());
      if (!this.workerUp) {
        const ready = await this.awaitReady(worker);
        if (this.stopped()) return;
        if (worker.exitStatus) {
          this.recordExit(worker);
          // Exits in a row (the server is down, say): back off, up to 4 s.
          await sleep(Math.min(4000, 250 * 2 ** exitsInARow++));
          continue;
        }
        if (!ready) {
          // Stuck starting (it happens when the server vanished under it): start another.
          this.stats.workersNeverReady++;
          this.opts.log(`worker ${worker.pid ?? '?'} did not poll within ${this.opts.readyTimeoutMs / 1000} s; replacing it`);
          worker.kill('SIGKILL');
          await worker.exited;
          continue;
        }
        this.workerUp = true;
        exitsInARow = 0;
      }

      this.killRequested = false;
      const lifetime = this.mode === 'chaos' ? this.lifetimes.between(...this.opts.killAfterReadyMs) : Infinity;
      const waitStarted = Date.now();
      await this.wakeup.wait(lifetime, worker.exited);
      if (worker.exitStatus) {
        this.recordExit(worker);
        continue;
      }
      if (this.mode !== 'chaos') continue;
      const onOpStart = this.killRequested;
      const due = Date.now() - waitStarted >= lifetime - 5;
      if (!onOpStart && !due) continue; // woken by a mode change that ended up back at chaos
      this.workerUp = false;
      worker.kill('SIGKILL');
      await worker.exited;
      this.stats.workerKills++;
      if (worker.pid !== undefined) this.stats.killedAt.set(worker.pid, Date.now());
      if (onOpStart) this.stats.killsOnOpStart++;
      this.opts.log(`worker ${worker.pid ?? '?'} SIGKILLed${onOpStart ? ' right after an operation started' : ''}`);
      await sleep(this.lifetimes.between(...this.opts.restartPauseMs));
    }
  }
}
