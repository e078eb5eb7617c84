import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import { TASK_QUEUE } from '../domain/deployment';
import { NEXUS_ENDPOINT } from '../domain/contract';
import { findGoTool, TEMPORAL_SERVER, TEMPORAL_UI_SERVER } from './go-tools';
import { tcpAccepts } from './local-host';
import { ensureNamespace } from './namespaces';
import { registerSearchAttributes, searchAttributesServed } from './search-attributes';
import { ensureNexusEndpoint } from './nexus-endpoint';
import { writeDynamicConfig } from './cluster-config';
import { databaseRunning, ensureDatabase, setUpSchemas, stopDatabase } from './cluster-database';
import { checkSameAsAsked, planCluster, type ClusterUpOptions } from './cluster-plan';
import { listenPort, runs, spawnProcess, stopProcesses, waitListening } from './cluster-processes';
import { clusterPaths, logOf, readClusterState, saveClusterState, type ClusterProcess, type ClusterState } from './cluster-state';

/**
 * A Temporal cluster on PostgreSQL, run on this host as separate processes: the frontend, one or two history processes,
 * matching and the worker service, each `temporal-server start --service X` with deploy/temporal/cluster.yaml (the
 * configuration docker-compose.yml uses), and the web UI's own server. Temporal's two databases are set up by
 * deploy/temporal/setup-schema.sh (compose's schema step) on a given PostgreSQL, or on one this host runs under the
 * state directory. What it started is written to `<state>/cluster/cluster.json`, so that `down` and `status` (other
 * command lines) find it, and `up` again brings back whatever is not running with the same ports and databases.
 *
 * This file brings a cluster up and down as a whole; its parts are each in a file of its own: the state kept
 * (cluster-state.ts), a new cluster's settings (cluster-plan.ts), its PostgreSQL and Temporal's schemas
 * (cluster-database.ts), what its processes read (cluster-config.ts), and its processes (cluster-processes.ts).
 */

export interface ProcessStatus {
  name: string;
  pid: number | null;
  running: boolean;
  /** Whether its port accepts connections. */
  listening: boolean;
  port: number;
  log: string;
}

export interface ClusterStatus {
  address: string;
  namespace: string;
  uiUrl: string | null;
  database: { host: string; port: number; user: string; local: boolean; running: boolean | null };
  processes: ProcessStatus[];
}

/** How long a namespace's closed runs stay listed, as `temporal operator namespace create` has it. */
const NAMESPACE_RETENTION_SECONDS = 3 * 24 * 3600;

export class TemporalCluster {
  /** Where the Temporal binaries are found (and built). */
  private toolDir: string;

  private constructor(
    readonly stateDir: string,
    private state: ClusterState,
    private readonly log: (line: string) => void,
  ) {
    this.toolDir = stateDir;
  }

  get address(): string {
    return this.state.address;
  }
  get namespace(): string {
    return this.state.namespace;
  }
  get uiUrl(): string | null {
    return this.state.uiUrl;
  }
  get processNames(): string[] {
    return this.state.processes.map((p) => p.name);
  }
  /** The log file of process `name`. */
  logOf(name: string): string {
    return logOf(this.stateDir, name);
  }

  /** The cluster whose state is under `stateDir`, or null if none was ever brought up there. */
  static async load(stateDir: string, log: (line: string) => void = defaultLog, toolDir?: string): Promise<TemporalCluster | null> {
    const state = await readClusterState(stateDir);
    if (!state) return null;
    const cluster = new TemporalCluster(stateDir, state, log);
    if (toolDir) cluster.toolDir = toolDir;
    return cluster;
  }

  /**
   * Brings the cluster up: its databases set up (or brought up to date), every process that does not run started,
   * the namespace and the search attributes registered. Resolves once the frontend answers for the namespace. If a
   * process fails to start, every process this call started is stopped again and the error carries its log's tail.
   */
  static async up(opts: ClusterUpOptions): Promise<TemporalCluster> {
    const log = opts.log ?? defaultLog;
    const paths = clusterPaths(opts.stateDir);
    await fs.promises.mkdir(paths.logs, { recursive: true });
    const existing = await TemporalCluster.load(opts.stateDir, log, opts.toolDir);
    const cluster = existing ?? new TemporalCluster(opts.stateDir, await planCluster(opts), log);
    if (existing) checkSameAsAsked(existing.stateDir, existing.state, opts, log);
    const toolDir = opts.toolDir ?? opts.stateDir;
    cluster.toolDir = toolDir;
    const server = await findGoTool(TEMPORAL_SERVER, { stateDir: toolDir, log });
    await saveClusterState(cluster.stateDir, cluster.state);
    await writeDynamicConfig(cluster.stateDir, cluster.state);
    try {
      await ensureDatabase(cluster.state.database, log);
      await setUpSchemas(cluster.state.database, toolDir, log);
    } catch (err) {
      // A new cluster that never got as far as its first process is not kept: the next `up` may name another database.
      if (!existing) await cluster.discard();
      throw err;
    }

    const startedNow: string[] = [];
    const deadline = Date.now() + (opts.readyTimeoutMs ?? 120_000);
    try {
      const start = async (proc: ClusterProcess) => {
        if (runs(proc.pid, proc.exe)) return;
        const exe = proc.service === 'ui' ? await findGoTool(TEMPORAL_UI_SERVER, { stateDir: toolDir, log }) : server;
        await spawnProcess(cluster.stateDir, cluster.state, proc, exe, log);
        startedNow.push(proc.name);
      };
      // The first process alone until it listens: on new databases, each would otherwise race to write the cluster's
      // metadata, and all but one fail (a duplicate key).
      const [first, ...others] = cluster.state.processes;
      await start(first!);
      await waitListening(cluster.stateDir, first!, deadline);
      for (const proc of others) await start(proc);
      await Promise.all(others.map((proc) => waitListening(cluster.stateDir, proc, deadline)));
      await cluster.registerNamespace(deadline);
    } catch (err) {
      if (startedNow.length > 0) {
        log(`stopping what this start started: ${startedNow.join(', ')}`);
        await stopProcesses(cluster.stateDir, cluster.state, startedNow, log);
      }
      throw err;
    }
    log(
      startedNow.length === 0
        ? `the cluster was up already: ${cluster.address}`
        : `started ${startedNow.join(', ')}; the frontend answers at ${cluster.address}`,
    );
    return cluster;
  }

  /** The namespace (made if missing, and served), then tablefate's search attributes in it. */
  private async registerNamespace(deadline: number): Promise<void> {
    const namespace = this.state.namespace;
    const connection = await Connection.connect({ address: this.state.address });
    try {
      const { registered } = await ensureNamespace(connection, namespace, {
        retentionMs: NAMESPACE_RETENTION_SECONDS * 1000,
        timeoutMs: Math.max(1000, deadline - Date.now()),
      });
      if (registered) this.log(`namespace ${namespace}: registered`);
      const added = await registerSearchAttributes(connection, namespace);
      if (added.length > 0) this.log(`namespace ${namespace}: search attributes ${added.join(', ')} added`);
      await searchAttributesServed(connection, namespace, Math.max(1000, deadline - Date.now()));
      // The contract's calls as Nexus operations, for workflows of any namespace: routed to the workers' queue.
      const endpoint = await ensureNexusEndpoint(
        connection,
        { name: NEXUS_ENDPOINT, namespace, taskQueue: TASK_QUEUE },
        { timeoutMs: Math.max(1000, deadline - Date.now()) },
      );
      if (endpoint !== 'kept') this.log(`Nexus endpoint ${NEXUS_ENDPOINT}: ${endpoint}, to ${namespace}/${TASK_QUEUE}`);
    } finally {
      await connection.close();
    }
  }

  /** Each process: whether it runs (its pid runs its binary) and listens; the database: whether it runs (if local). */
  async status(): Promise<ClusterStatus> {
    const db = this.state.database;
    return {
      address: this.state.address,
      namespace: this.state.namespace,
      uiUrl: this.state.uiUrl,
      database: {
        host: db.host,
        port: db.port,
        user: db.user,
        local: db.local !== null,
        running: await databaseRunning(db),
      },
      processes: await Promise.all(
        this.state.processes.map(async (proc) => {
          const running = runs(proc.pid, proc.exe);
          return {
            name: proc.name,
            pid: running ? proc.pid : null,
            running,
            listening: running && (await tcpAccepts(listenPort(proc))),
            port: listenPort(proc),
            log: this.logOf(proc.name),
          };
        }),
      ),
    };
  }

  private proc(name: string): ClusterProcess {
    const proc = this.state.processes.find((p) => p.name === name);
    if (!proc) throw new Error(`the cluster has no process ${name} (it has ${this.processNames.join(', ')})`);
    return proc;
  }

  /** Sends `signal` to process `name` and resolves once it is gone (SIGKILL: a crash, for the tests). */
  async kill(name: string, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const proc = this.proc(name);
    if (!runs(proc.pid, proc.exe)) return;
    process.kill(proc.pid!, signal);
    while (runs(proc.pid, proc.exe)) await sleep(50);
    this.log(`${name}: ${signal} (pid ${proc.pid})`);
  }

  /** Starts process `name` again if it does not run, with the ports it had, and resolves once it listens. */
  async restart(name: string, timeoutMs = 60_000): Promise<void> {
    const proc = this.proc(name);
    if (runs(proc.pid, proc.exe)) return;
    const exe =
      proc.exe ??
      (await findGoTool(proc.service === 'ui' ? TEMPORAL_UI_SERVER : TEMPORAL_SERVER, { stateDir: this.toolDir, log: this.log }));
    await spawnProcess(this.stateDir, this.state, proc, exe, this.log);
    await waitListening(this.stateDir, proc, Date.now() + timeoutMs);
  }

  /** Removes a cluster that never started a process: its state, and its own PostgreSQL (stopped) and data, if any. */
  private async discard(): Promise<void> {
    await stopDatabase(this.state.database).catch(() => undefined);
    const paths = clusterPaths(this.stateDir);
    await fs.promises.rm(paths.state, { force: true });
    await fs.promises.rm(path.dirname(paths.postgresData), { recursive: true, force: true });
  }

  /**
   * Stops every process the cluster runs (the UI and the frontend first, history last), and its own PostgreSQL; the
   * databases stay, so `up` brings the same cluster back. `forget`: also removes the cluster's state (and its own
   * PostgreSQL's data), so that the next `up` makes a new one.
   */
  async down(opts: { forget?: boolean } = {}): Promise<void> {
    const order = ['ui', 'frontend', 'matching', 'worker', 'history'];
    const names = [...this.state.processes].sort((a, b) => order.indexOf(a.service) - order.indexOf(b.service)).map((p) => p.name);
    for (const name of names) await stopProcesses(this.stateDir, this.state, [name], this.log);
    await stopDatabase(this.state.database, this.log);
    if (opts.forget) await fs.promises.rm(clusterPaths(this.stateDir).dir, { recursive: true, force: true });
  }
}

function defaultLog(line: string): void {
  process.stderr.write(`${line}\n`);
}
