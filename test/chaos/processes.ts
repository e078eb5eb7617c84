import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Connection } from '@temporalio/client';
import { DevServer } from '../../servers/dev-server';
import { findTemporalCli } from '../../servers/go-tools';
import { TemporalCluster } from '../../servers/cluster';
import { TASK_QUEUE } from '../../worker/config';
import { within } from './time';
import { BIN, PROJECT_ROOT } from '../support/cli';

/**
 * The processes a chaos run owns, and the only ways it touches them: a `tablefate worker` child started as an
 * operator would, and a Temporal server (a dev server, or a cluster's history processes) that can be crashed and brought
 * back on the same ports and database.
 */

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

// Every worker child still running; killed when this process exits in any way that runs 'exit' handlers
// (an error, process.exit, the end of the event loop), so a failed run never leaves a worker behind.
const liveChildren = new Set<ChildProcess>();
let exitHookInstalled = false;

function killLiveChildren(): void {
  for (const child of liveChildren) child.kill('SIGKILL');
}

/** One `node bin/tablefate.js worker` process; its stdout and stderr are appended to a log file. */
export class WorkerProcess {
  readonly exited: Promise<Exit>;
  private exit: Exit | undefined;

  private constructor(private readonly child: ChildProcess) {
    this.exited = new Promise<Exit>((resolve) => {
      child.once('error', () => {
        this.exit = { code: null, signal: null };
        resolve(this.exit);
      });
      child.once('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve(this.exit);
      });
    }).finally(() => liveChildren.delete(child));
  }

  /** Starts `tablefate <args>` (a worker by default), its output appended to `logFile`. */
  static spawn(env: NodeJS.ProcessEnv, logFile: string, args: readonly string[] = ['worker']): WorkerProcess {
    if (!exitHookInstalled) {
      process.on('exit', killLiveChildren);
      exitHookInstalled = true;
    }
    fs.appendFileSync(logFile, `--- ${new Date().toISOString()} tablefate ${args.join(' ')} starting\n`);
    // The child writes straight into the file: no pipe of ours to drain, nothing lost when it is killed.
    const fd = fs.openSync(logFile, 'a');
    try {
      const child = spawn(process.execPath, [BIN, ...args], { cwd: PROJECT_ROOT, env, stdio: ['ignore', fd, fd] });
      liveChildren.add(child);
      return new WorkerProcess(child);
    } finally {
      fs.closeSync(fd);
    }
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** How it ended, or undefined while it runs. */
  get exitStatus(): Exit | undefined {
    return this.exit;
  }

  kill(signal: NodeJS.Signals): void {
    if (!this.exit) this.child.kill(signal);
  }

  /** SIGINT (the worker shuts down cleanly), then SIGKILL if it is still there after `graceMs`. */
  async stop(graceMs = 10_000): Promise<Exit> {
    if (this.exit) return this.exit;
    this.kill('SIGINT');
    if ((await within(this.exited, graceMs)) === 'timeout') this.kill('SIGKILL');
    return this.exited;
  }
}

/** Which queue a process polls: tablefate's for workflows (a worker), or a storage node's for activities. */
export type PolledQueue = { name: string; kind: 'workflow' | 'activity' };

/**
 * Whether `pid` polls `queue` (tablefate's workflow queue by default). A worker says nothing when it is ready at
 * log level warn; the server knows who polls, and the SDK's default identity begins with the process id.
 */
export async function workerPolls(
  admin: Connection,
  namespace: string,
  pid: number,
  queue: PolledQueue = { name: TASK_QUEUE, kind: 'workflow' },
): Promise<boolean> {
  try {
    const described = await admin.withDeadline(Date.now() + 3000, () =>
      admin.workflowService.describeTaskQueue({
        namespace,
        taskQueue: { name: queue.name },
        // TaskQueueType: 1 workflow, 2 activity (the proto enum, which the client does not re-export).
        taskQueueType: queue.kind === 'activity' ? 2 : 1,
      }),
    );
    return (described.pollers ?? []).some((poller) => poller.identity?.startsWith(`${pid}@`) ?? false);
  } catch {
    // The server is down or restarting: not known to poll yet.
    return false;
  }
}

/** A port that was free a moment ago; the server keeps it across restarts, so clients need not be told. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const RESTART_ATTEMPTS = 5;

/** The Temporal server of a run, as the monkey crashes it: all of it (a dev server), or one process of a cluster. */
export interface ChaosTemporal {
  readonly address: string;
  /** The log to read after a run (the dev server's, or the cluster's frontend's). */
  readonly logFile: string;
  /** What `crash` kills, for the report: `dev server`, `history processes`. */
  readonly crashes: string;
  /** SIGKILLs it (or one of its processes); resolves with what was killed. */
  crash(): Promise<string>;
  /** Starts again what the last crash killed, on the same ports and database. */
  bringUp(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A Temporal cluster of the run's own (servers/cluster.ts, as `tablefate cluster up` makes it) on PostgreSQL server
 * `postgresUrl`, in databases of its own: a crash SIGKILLs one history process, the history processes in turn.
 */
export class ChaosCluster implements ChaosTemporal {
  readonly crashes = 'history processes';
  private crashed: string | undefined;
  private next = 0;

  private constructor(private readonly cluster: TemporalCluster) {}

  static async start(stateDir: string, postgresUrl: string, log: (line: string) => void): Promise<ChaosCluster> {
    const suffix = path
      .basename(stateDir)
      .replace(/[^a-z0-9]/gi, '')
      .toLowerCase();
    const cluster = await TemporalCluster.up({
      stateDir: path.join(stateDir, 'temporal'),
      toolDir: path.join(PROJECT_ROOT, '.tablefate'),
      postgresUrl,
      databaseNames: { history: `temporal_${suffix}`, visibility: `temporal_visibility_${suffix}` },
      headless: true,
      historyProcesses: 2,
      log,
    });
    return new ChaosCluster(cluster);
  }

  get address(): string {
    return this.cluster.address;
  }

  get logFile(): string {
    return this.cluster.logOf('frontend');
  }

  private get histories(): string[] {
    return this.cluster.processNames.filter((name) => name.startsWith('history-'));
  }

  async crash(): Promise<string> {
    const victim = this.histories[this.next++ % this.histories.length]!;
    await this.cluster.kill(victim, 'SIGKILL');
    this.crashed = victim;
    return victim;
  }

  async bringUp(): Promise<void> {
    if (this.crashed) await this.cluster.restart(this.crashed);
    this.crashed = undefined;
  }

  async stop(): Promise<void> {
    await this.cluster.down();
  }
}

/** A headless Temporal dev server of the run's own, on a fixed port and db file so that it can be crashed and restarted. */
export class ChaosServer implements ChaosTemporal {
  readonly crashes = 'dev server';
  private server: DevServer | undefined;

  private constructor(
    private readonly stateDir: string,
    private readonly cliPath: string,
    readonly port: number,
    private readonly log: (line: string) => void,
  ) {}

  /** Finds the CLI ($TEMPORAL_CLI_PATH first, then the project's cached copy) and starts the server. */
  static async start(stateDir: string, log: (line: string) => void): Promise<ChaosServer> {
    const cliPath = await findTemporalCli({ stateDir: path.join(PROJECT_ROOT, '.tablefate'), log });
    const server = new ChaosServer(stateDir, cliPath, await freePort(), log);
    await server.bringUp();
    return server;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get dbFile(): string {
    return path.join(this.stateDir, 'temporal.db');
  }

  get logFile(): string {
    return path.join(this.stateDir, 'temporal.log');
  }

  get running(): boolean {
    return this.server?.running ?? false;
  }

  /** SIGKILL, as a crash would: no chance to flush or to tell anyone. */
  async crash(): Promise<string> {
    const server = this.server;
    this.server = undefined;
    if (server?.running) process.kill(server.pid, 'SIGKILL');
    await server?.stop();
    return 'dev server';
  }

  /** Starts it again on the same port and db file (after a crash, the port may take a moment to be released). */
  async bringUp(): Promise<void> {
    if (this.server?.running) return;
    for (let attempt = 1; ; attempt++) {
      try {
        this.server = await DevServer.start({
          stateDir: this.stateDir,
          dbFile: this.dbFile,
          logFile: this.logFile,
          port: this.port,
          headless: true,
          namespace: 'default',
          cliPath: this.cliPath,
          log: this.log,
        });
        return;
      } catch (err) {
        if (attempt >= RESTART_ATTEMPTS) throw err;
        this.log(`dev server did not start (attempt ${attempt}): ${(err as Error).message.split('\n')[0]}; trying again`);
        await sleep(1000 * attempt);
      }
    }
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    await server?.stop();
  }
}
