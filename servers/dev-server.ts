import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import { statePaths } from '../config/paths';
import { registerSearchAttributes } from './search-attributes';
import { ensureNexusEndpoint } from './nexus-endpoint';
import { NEXUS_ENDPOINT } from '../domain/contract';
import { TASK_QUEUE } from '../domain/deployment';
import { findTemporalCli } from './go-tools';
import {
  assertPortFree,
  describeExit,
  freePorts,
  HOST,
  logTail,
  LOG_TAIL_LINES,
  spawnServer,
  tcpAccepts,
  type ServerExit,
} from './local-host';

const STOP_GRACE_MS = 10_000;

export interface DevServerOptions {
  /** State directory: default db and log location, and where the CLI is cached. */
  stateDir: string;
  /** The server's SQLite file; kept across restarts. Default `statePaths(stateDir).temporalDb`. */
  dbFile?: string;
  /** gRPC port; default a free one. */
  port?: number;
  /** Web UI port; default a free one. Unused when headless. */
  uiPort?: number;
  /** No Web UI. */
  headless?: boolean;
  /** Namespace to create (if missing) and register the search attributes in. Default `default`. */
  namespace?: string;
  /** Where the server's stdout and stderr are appended. Default `statePaths(stateDir).temporalLog`. */
  logFile?: string;
  /** How long to wait for the server to answer. Default 60 s. */
  readyTimeoutMs?: number;
  /** The CLI binary; default found with `findTemporalCli({ stateDir })`. */
  cliPath?: string;
  /** Progress messages (default: stderr). */
  log?: (line: string) => void;
  /** The server's dynamic configuration (`--dynamic-config-value`); EMBEDDED_DYNAMIC_CONFIG by default. */
  dynamicConfig?: Readonly<Record<string, number | string | boolean>>;
  /**
   * One partition per task queue (ONE_PARTITION) where the state allows it (taskQueuePartitions); default true. False:
   * Temporal's four.
   */
  onePartition?: boolean;
}

/**
 * What the embedded server changes from Temporal's defaults. Its history service polls its transfer, timer and
 * visibility queues at most 20 times a second by default, so every task (a workflow or activity task to dispatch,
 * a timer that fired) waits about 30 ms to be loaded: the larger part of a short workflow's time on one host.
 * Polling them at up to 1000/s costs nothing measurable when idle (see docs/performance.md).
 */
export const EMBEDDED_DYNAMIC_CONFIG: Readonly<Record<string, number>> = {
  'history.transferProcessorMaxPollRPS': 1000,
  'history.timerProcessorMaxPollRPS': 1000,
  'history.visibilityProcessorMaxPollRPS': 1000,
};

/**
 * One partition per task queue, instead of Temporal's four. Partitions spread a queue's load over matching hosts; with
 * the few pollers of a tablefate worker a task could wait seconds in a partition no poller was on (traced: a create's
 * first workflow task 2.4 s in the queue while the 31 others of its batch took 1 s; docs/performance.md).
 */
export const ONE_PARTITION: Readonly<Record<string, number>> = {
  'matching.numTaskqueueReadPartitions': 1,
  'matching.numTaskqueueWritePartitions': 1,
};

/**
 * Whether the server on `dbFile` may run with one partition per task queue: a new state may (and is marked so, beside
 * the database); a state made before, with four, keeps four, since the tasks it holds in partitions 1 to 3 would never
 * be read again with one.
 */
export async function taskQueuePartitions(dbFile: string): Promise<1 | 4> {
  const marker = `${dbFile}.partitions`;
  const marked = await fs.promises.readFile(marker, 'utf8').catch(() => undefined);
  if (marked !== undefined) return marked.trim() === '1' ? 1 : 4;
  if (fs.existsSync(dbFile)) return 4;
  await fs.promises.writeFile(marker, '1\n');
  return 1;
}

/** The server could not bind a port: another process took it. */
class PortInUseError extends Error {}

/** A Temporal dev server (`temporal server start-dev`) run as a child process. */
export class DevServer {
  /** `127.0.0.1:<port>`, the gRPC address clients and workers connect to. */
  readonly address: string;
  /** The Web UI, or null when headless. */
  readonly uiUrl: string | null;
  readonly dbFile: string;
  readonly logFile: string;
  readonly namespace: string;
  readonly pid: number;
  /** How long the start took until the server answered and the search attributes were in place. */
  readonly startMs: number;

  private readonly child: ChildProcess;
  private readonly exited: Promise<ServerExit>;
  private stopping: Promise<void> | null = null;
  private readonly killOnExit: () => void;

  private constructor(init: {
    address: string;
    uiUrl: string | null;
    dbFile: string;
    logFile: string;
    namespace: string;
    child: ChildProcess;
    exited: Promise<ServerExit>;
    killOnExit: () => void;
    startMs: number;
  }) {
    this.address = init.address;
    this.uiUrl = init.uiUrl;
    this.dbFile = init.dbFile;
    this.logFile = init.logFile;
    this.namespace = init.namespace;
    this.child = init.child;
    this.pid = init.child.pid!;
    this.exited = init.exited;
    this.killOnExit = init.killOnExit;
    this.startMs = init.startMs;
  }

  /**
   * Starts the server, waits until it answers, and registers the search attributes.
   * If it exits early or does not answer in time, it is killed and the error carries the tail of its log.
   */
  static async start(opts: DevServerOptions): Promise<DevServer> {
    const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
    const paths = statePaths(opts.stateDir);
    const cli = opts.cliPath ?? (await findTemporalCli({ stateDir: opts.stateDir, log }));
    const dbFile = path.resolve(opts.dbFile ?? paths.temporalDb);
    const logFile = path.resolve(opts.logFile ?? paths.temporalLog);
    await fs.promises.mkdir(path.dirname(dbFile), { recursive: true });
    await fs.promises.mkdir(path.dirname(logFile), { recursive: true });

    // Ports we picked can be taken by someone else before the server binds them: then try again with new ones.
    const picksPorts = opts.port === undefined || (!opts.headless && opts.uiPort === undefined);
    for (let attempt = 1; ; attempt++) {
      try {
        return await DevServer.startOnce(opts, cli, dbFile, logFile);
      } catch (err) {
        if (!picksPorts || attempt >= 3 || !(err instanceof PortInUseError)) throw err;
        log(`Temporal dev server: a port was taken meanwhile; retrying on other ports`);
      }
    }
  }

  private static async startOnce(opts: DevServerOptions, cli: string, dbFile: string, logFile: string): Promise<DevServer> {
    const started = Date.now();
    const headless = opts.headless ?? false;
    const namespace = opts.namespace ?? 'default';
    const readyTimeoutMs = opts.readyTimeoutMs ?? 60_000;
    const [pickedPort, pickedUiPort] = await freePorts(2);
    const port = opts.port ?? pickedPort!;
    const uiPort = headless ? null : (opts.uiPort ?? pickedUiPort!);
    const address = `${HOST}:${port}`;
    if (opts.port !== undefined) await assertPortFree(port, 'gRPC port', 'the Temporal dev server');
    if (uiPort !== null && opts.uiPort !== undefined) await assertPortFree(uiPort, 'UI port', 'the Temporal dev server');

    // --http-port and --metrics-port default to random free ports, so two servers never collide on them.
    const args = ['server', 'start-dev', '--db-filename', dbFile, '--ip', HOST, '--port', String(port)];
    if (uiPort === null) args.push('--headless');
    else args.push('--ui-port', String(uiPort));
    args.push('--namespace', namespace, '--log-level', 'warn');
    const partitions = opts.onePartition === false ? 4 : await taskQueuePartitions(dbFile);
    const dynamicConfig = { ...(partitions === 1 ? ONE_PARTITION : {}), ...(opts.dynamicConfig ?? EMBEDDED_DYNAMIC_CONFIG) };
    for (const [key, value] of Object.entries(dynamicConfig)) {
      args.push('--dynamic-config-value', `${key}=${JSON.stringify(value)}`);
    }

    // Remember where this run's output begins, so errors show this run's lines only.
    const logStart = await fs.promises.stat(logFile).then(
      (s) => s.size,
      () => 0,
    );
    await fs.promises.appendFile(logFile, `--- ${new Date().toISOString()} ${cli} ${args.join(' ')}\n`);
    const { child, exited, killOnExit } = spawnServer(cli, args, logFile);

    const fail = async (reason: string, exit: ServerExit | null): Promise<never> => {
      if (!exit) {
        child.kill('SIGKILL');
        await exited;
      }
      // The whole of this start's log, not only its tail: a Go panic's cause is its first line, and the goroutine
      // dump after it pushes that line out of any short tail.
      const written = await logTail(logFile, logStart, Number.MAX_SAFE_INTEGER);
      const tail = written.split('\n').slice(-LOG_TAIL_LINES).join('\n');
      const cause = written.split('\n').find((line) => /^panic:|address already in use/i.test(line));
      const message =
        `Temporal dev server (${cli}, ${address}, db ${dbFile}) ${reason}` +
        (cause && !tail.includes(cause) ? `: ${cause.trim()}` : '') +
        `.\nLast lines of its log ${logFile}:\n${tail}`;
      throw /address already in use/i.test(written) && exit ? new PortInUseError(message) : new Error(message);
    };

    const state: { exit: ServerExit | null } = { exit: null };
    void exited.then((e) => (state.exit = e));
    const deadline = started + readyTimeoutMs;
    let lastError = 'no answer';
    let connection: Connection | null = null;
    while (!connection) {
      if (state.exit) return fail(describeExit(state.exit), state.exit);
      const remaining = deadline - Date.now();
      if (remaining <= 0) return fail(`did not answer within ${readyTimeoutMs} ms (last error: ${lastError})`, null);
      // A plain TCP connect first: cheap, and it fails at once while the port is closed, whereas a gRPC
      // channel backs off for a second or more after a refused connection.
      if (!(await tcpAccepts(port))) {
        lastError = `nothing listens on ${address} yet`;
        await Promise.race([sleep(50), exited]);
        continue;
      }
      let attempt: Connection | null = null;
      try {
        attempt = await Connection.connect({ address, connectTimeout: Math.min(5000, Math.max(remaining, 100)) });
        const probe = attempt;
        await probe.withDeadline(Date.now() + Math.min(5000, Math.max(remaining, 100)), () =>
          probe.workflowService.describeNamespace({ namespace }),
        );
        connection = attempt;
      } catch (err) {
        lastError = (err as Error).message;
        await attempt?.close().catch(() => undefined);
        await Promise.race([sleep(100), exited]);
      }
    }

    try {
      await registerSearchAttributes(connection, namespace);
      // The contract's calls as Nexus operations, for workflows of any namespace: routed to the worker's queue.
      await ensureNexusEndpoint(
        connection,
        { name: NEXUS_ENDPOINT, namespace, taskQueue: TASK_QUEUE },
        { timeoutMs: Math.max(1000, deadline - Date.now()) },
      );
    } catch (err) {
      return fail(`answered, but registering the search attributes or the Nexus endpoint failed: ${(err as Error).message}`, state.exit);
    } finally {
      await connection.close().catch(() => undefined);
    }

    // A server that failed to bind exits at once; don't mistake another server on the port for ours.
    if (state.exit) return fail(describeExit(state.exit), state.exit);

    return new DevServer({
      address,
      uiUrl: uiPort === null ? null : `http://${HOST}:${uiPort}`,
      dbFile,
      logFile,
      namespace,
      child,
      exited,
      killOnExit,
      startMs: Date.now() - started,
    });
  }

  /** Whether the server process is still running. */
  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** SIGTERM, then SIGKILL if it has not exited within 10 s. Idempotent; resolves once the process is gone. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      // Keep this process alive until the server is gone, or the 'exit' handler would SIGKILL it mid-shutdown.
      this.child.ref();
      if (this.running) {
        this.child.kill('SIGTERM');
        const abort = new AbortController();
        const timer = sleep(STOP_GRACE_MS, 'timeout' as const, { signal: abort.signal }).catch(() => 'aborted' as const);
        const first = await Promise.race([this.exited, timer]);
        abort.abort();
        if (first === 'timeout' && this.running) this.child.kill('SIGKILL');
      }
      await this.exited;
      process.off('exit', this.killOnExit);
    })();
    return this.stopping;
  }
}
