import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import { InvalidInputError } from '../domain/errors';
import { redactUrl, TASK_QUEUE } from '../domain/deployment';
import { findGoTool, findServerSchemas, TEMPORAL_SERVER, TEMPORAL_SERVER_VERSION, TEMPORAL_SQL_TOOL, TEMPORAL_UI_SERVER } from './go-tools';
import { freePorts, freePortsBetween, HOST, logTail, tcpAccepts } from './local-host';
import {
  findPostgresBin,
  giveToPostgres,
  ownDirectoryForPostgres,
  postgresRunning,
  runPostgresProgram,
  serverOptions,
} from './local-postgres';
import { ensureNamespace } from './namespaces';
import { registerSearchAttributes, searchAttributesServed } from './search-attributes';
import { ensureNexusEndpoint } from './nexus-endpoint';
import { NEXUS_ENDPOINT } from '../domain/contract';
import { ONE_PARTITION } from './dev-server';

const execFileAsync = promisify(execFile);

/**
 * A Temporal cluster on PostgreSQL, run on this host as separate processes: the frontend, one or two history processes,
 * matching and the worker service, each `temporal-server start --service X` with deploy/temporal/cluster.yaml (the
 * configuration docker-compose.yml uses), and the web UI's own server. Temporal's two databases are set up by
 * deploy/temporal/setup-schema.sh (compose's schema step) on a given PostgreSQL, or on one this host runs under the
 * state directory. What it started is written to `<state>/cluster/cluster.json`, so that `down` and `status` (other
 * command lines) find it, and `up` again brings back whatever is not running with the same ports and databases.
 */

/** Temporal's services; history may run as several processes. */
export type ClusterService = 'frontend' | 'history' | 'matching' | 'worker';

export interface ClusterProcess {
  /** `frontend`, `history-1`, `history-2`, `matching`, `worker`, or `ui`. */
  name: string;
  service: ClusterService | 'ui';
  /** The gRPC port (the UI's HTTP port for the UI). */
  port: number;
  /** Ringpop's port (0 for the UI). */
  membershipPort: number;
  /** The frontend's HTTP API port (0 for the others). */
  httpPort: number;
  /** While it runs: its pid, and the binary it runs (how a pid is known to be still ours). */
  pid: number | null;
  exe: string | null;
}

export interface ClusterState {
  version: 1;
  namespace: string;
  /** The frontend's gRPC address: TEMPORAL_ADDRESS for tablefate. */
  address: string;
  uiUrl: string | null;
  historyShards: number;
  serverVersion: string;
  database: {
    host: string;
    port: number;
    user: string;
    /** Kept here (the file is the user's alone, mode 0600): every process started again needs it. */
    password: string;
    /** Temporal's two databases: `temporal` and `temporal_visibility` unless asked otherwise. */
    names: { history: string; visibility: string };
    /** The server this host runs for the cluster, or null when it was given. */
    local: { dataDir: string; bin: string } | null;
  };
  processes: ClusterProcess[];
  /**
   * 1: one partition per task queue (a cluster made since v15: `dynamicConfig` in clusterPaths, deploy/temporal's and
   * ONE_PARTITION); absent: Temporal's four, which a cluster made before keeps (its tasks in partitions 1 to 3 would
   * never be read with one).
   */
  taskQueuePartitions?: 1;
}

export interface ClusterUpOptions {
  /** The state directory (TABLEFATE_HOME): the cluster's files go to its `cluster` directory. */
  stateDir: string;
  /**
   * A PostgreSQL login that owns, or may create, the databases `temporal` and `temporal_visibility` (postgres://user:
   * password@host:port). Absent: a server of this host's PostgreSQL installation under the state directory.
   */
  postgresUrl?: string;
  /** Temporal's two databases' names, if not `temporal` and `temporal_visibility` (two clusters on one PostgreSQL). */
  databaseNames?: { history: string; visibility: string };
  /** Where the Temporal binaries are cached (and built), if not `stateDir`'s `bin`. */
  toolDir?: string;
  /** The frontend's gRPC port; a free one by default. */
  port?: number;
  /** The web UI's port; a free one by default. */
  uiPort?: number;
  /** No web UI. */
  headless?: boolean;
  /** History processes: 2 by default on a machine with 2 cores and 4 GiB or more, else 1. */
  historyProcesses?: number;
  /** History shards, fixed once the databases are in use. Default 4. */
  historyShards?: number;
  /** The namespace to register with tablefate's search attributes. Default `default`. */
  namespace?: string;
  /** How long the services may take to answer. Default 120 s. */
  readyTimeoutMs?: number;
  log?: (line: string) => void;
}

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

/** Where the configuration every service process reads lives: beside docker-compose.yml's. */
export const CLUSTER_CONFIG_DIR = path.resolve(__dirname, '..', 'deploy', 'temporal');
/** Its file name without `.yaml`: the server's `--env`. */
const CLUSTER_CONFIG_ENV = 'cluster';
const SETUP_SCHEMA_SCRIPT = path.join(CLUSTER_CONFIG_DIR, 'setup-schema.sh');
const DYNAMIC_CONFIG_FILE = path.join(CLUSTER_CONFIG_DIR, 'dynamicconfig.yaml');
/** The frontend's HTTP address as deploy/temporal/dynamicconfig.yaml names it (compose's): a cluster's copy puts its own. */
const COMPOSE_FRONTEND_HTTP = 'temporal-frontend:7243';
const STOP_GRACE_MS = 10_000;
/** How long a namespace's closed runs stay listed, as `temporal operator namespace create` has it. */
const NAMESPACE_RETENTION_SECONDS = 3 * 24 * 3600;

export function clusterPaths(stateDir: string) {
  const dir = path.resolve(stateDir, 'cluster');
  return {
    dir,
    state: path.join(dir, 'cluster.json'),
    logs: path.join(dir, 'logs'),
    postgresData: path.join(dir, 'postgres', 'data'),
    uiConfig: path.join(dir, 'ui'),
    dynamicConfig: path.join(dir, 'dynamicconfig.yaml'),
  };
}

/** A cluster's state on disk changed by hand beyond what this code reads. */
export class ClusterStateError extends Error {}

/** Whether `pid` runs `exe` now (a pid reused by another program, or a zombie, is not ours). */
function runs(pid: number | null, exe: string | null): boolean {
  if (pid === null || exe === null) return false;
  try {
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return cmdline.split('\0')[0] === exe;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' && fs.existsSync('/proc/self')) return false;
    // No /proc here: whether a process of that pid exists at all.
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }
}

/** The port that shows a process is up: the worker service serves no gRPC, only its membership (ringpop) port. */
const listenPort = (proc: ClusterProcess) => (proc.service === 'worker' ? proc.membershipPort : proc.port);

function parsePostgresUrl(url: string): Omit<ClusterState['database'], 'names'> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new InvalidInputError(`--postgres: not a URL: ${redactUrl(url)} (postgres://user:password@host:port)`);
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    throw new InvalidInputError(`--postgres: a postgres:// URL is expected, got ${parsed.protocol}//...`);
  }
  if (!parsed.username) throw new InvalidInputError('--postgres: the URL names no user (postgres://user:password@host:port)');
  return {
    host: parsed.hostname || HOST,
    port: parsed.port ? Number(parsed.port) : 5432,
    user: decodeURIComponent(parsed.username),
    password: decodeURIComponent(parsed.password),
    local: null,
  };
}

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
    return path.join(clusterPaths(this.stateDir).logs, `${name}.log`);
  }

  /** The cluster whose state is under `stateDir`, or null if none was ever brought up there. */
  static async load(stateDir: string, log: (line: string) => void = defaultLog, toolDir?: string): Promise<TemporalCluster | null> {
    const file = clusterPaths(stateDir).state;
    let text: string;
    try {
      text = await fs.promises.readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    const state = JSON.parse(text) as ClusterState;
    if (state.version !== 1) throw new ClusterStateError(`${file}: version ${String(state.version)} is not one this tablefate reads`);
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
    const cluster = existing ?? new TemporalCluster(opts.stateDir, await TemporalCluster.plan(opts), log);
    if (existing) existing.checkSameAsAsked(opts);
    const toolDir = opts.toolDir ?? opts.stateDir;
    cluster.toolDir = toolDir;
    const server = await findGoTool(TEMPORAL_SERVER, { stateDir: toolDir, log });
    await cluster.save();
    await cluster.writeDynamicConfig();
    try {
      await cluster.ensureDatabase();
      await cluster.setUpSchemas(toolDir);
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
        await cluster.spawn(proc, exe);
        startedNow.push(proc.name);
      };
      // The first process alone until it listens: on new databases, each would otherwise race to write the cluster's
      // metadata, and all but one fail (a duplicate key).
      const [first, ...others] = cluster.state.processes;
      await start(first!);
      await cluster.waitListening(first!, deadline);
      for (const proc of others) await start(proc);
      await Promise.all(others.map((proc) => cluster.waitListening(proc, deadline)));
      await cluster.registerNamespace(deadline);
    } catch (err) {
      if (startedNow.length > 0) {
        log(`stopping what this start started: ${startedNow.join(', ')}`);
        await cluster.stopProcesses(startedNow);
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

  /** A new cluster's settings: ports picked, the database named. */
  private static async plan(opts: ClusterUpOptions): Promise<ClusterState> {
    const historyProcesses = opts.historyProcesses ?? (os.cpus().length >= 2 && os.totalmem() >= 4 * 1024 ** 3 ? 2 : 1);
    if (!Number.isInteger(historyProcesses) || historyProcesses < 1 || historyProcesses > 8) {
      throw new InvalidInputError(`history processes: 1 to 8, got ${historyProcesses}`);
    }
    const historyShards = opts.historyShards ?? 4;
    const services: Array<[string, ClusterService]> = [
      ['frontend', 'frontend'],
      ...Array.from({ length: historyProcesses }, (_, i): [string, ClusterService] => [`history-${i + 1}`, 'history']),
      ['matching', 'matching'],
      ['worker', 'worker'],
    ];
    const picked = await freePorts(services.length + 3);
    const take = () => picked.pop()!;
    // Temporal keeps a membership port in a smallint column.
    const membershipPorts = await freePortsBetween(services.length, 20000, 32767);
    const processes: ClusterProcess[] = services.map(([name, service], i) => ({
      name,
      service,
      port: service === 'frontend' && opts.port !== undefined ? opts.port : take(),
      membershipPort: membershipPorts[i]!,
      httpPort: service === 'frontend' ? take() : 0,
      pid: null,
      exe: null,
    }));
    const uiPort = opts.headless ? null : (opts.uiPort ?? take());
    if (uiPort !== null) processes.push({ name: 'ui', service: 'ui', port: uiPort, membershipPort: 0, httpPort: 0, pid: null, exe: null });
    const names = opts.databaseNames ?? { history: 'temporal', visibility: 'temporal_visibility' };
    for (const name of [names.history, names.visibility]) {
      if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name))
        throw new InvalidInputError(`not a plain PostgreSQL database name: ${JSON.stringify(name)}`);
    }
    const database = opts.postgresUrl
      ? { ...parsePostgresUrl(opts.postgresUrl), names }
      : {
          names,
          host: HOST,
          port: take(),
          user: 'postgres',
          password: randomBytes(18).toString('hex'),
          local: { dataDir: clusterPaths(opts.stateDir).postgresData, bin: findPostgresBin() },
        };
    return {
      version: 1,
      namespace: opts.namespace ?? 'default',
      address: `${HOST}:${processes[0]!.port}`,
      uiUrl: uiPort === null ? null : `http://${HOST}:${uiPort}`,
      historyShards,
      serverVersion: TEMPORAL_SERVER_VERSION,
      database,
      processes,
      taskQueuePartitions: 1,
    };
  }

  /** `up` on a cluster that exists takes it as it was made: options that would change it are refused. */
  private checkSameAsAsked(opts: ClusterUpOptions): void {
    const clash = (what: string, asked: unknown, have: unknown) => {
      throw new Error(
        `a cluster exists under ${clusterPaths(this.stateDir).dir} with ${what} ${String(have)}, not ${String(asked)}: ` +
          'bring it up as it is (leave the option out), or `tablefate cluster down --forget` it first',
      );
    };
    const frontend = this.state.processes[0]!;
    if (opts.port !== undefined && opts.port !== frontend.port) clash('frontend port', opts.port, frontend.port);
    const ui = this.state.processes.find((p) => p.service === 'ui');
    if (opts.uiPort !== undefined && opts.uiPort !== ui?.port) clash('UI port', opts.uiPort, ui?.port ?? 'none');
    if (opts.namespace !== undefined && opts.namespace !== this.state.namespace) clash('namespace', opts.namespace, this.state.namespace);
    if (opts.postgresUrl !== undefined) {
      const asked = parsePostgresUrl(opts.postgresUrl);
      const have = this.state.database;
      if (asked.host !== have.host || asked.port !== have.port || asked.user !== have.user) {
        clash('PostgreSQL', `${asked.user}@${asked.host}:${asked.port}`, `${have.user}@${have.host}:${have.port}`);
      }
    }
    if (this.state.serverVersion !== TEMPORAL_SERVER_VERSION) {
      this.log(`the cluster ran Temporal ${this.state.serverVersion}; it now runs ${TEMPORAL_SERVER_VERSION} (schemas updated first)`);
      this.state.serverVersion = TEMPORAL_SERVER_VERSION;
    }
  }

  private async save(): Promise<void> {
    const file = clusterPaths(this.stateDir).state;
    const temp = `${file}.${process.pid}.tmp`;
    await fs.promises.writeFile(temp, `${JSON.stringify(this.state, null, 2)}\n`, { mode: 0o600 });
    await fs.promises.rename(temp, file);
  }

  /** The local PostgreSQL server made (once) and started, if this cluster runs its own. */
  private async ensureDatabase(): Promise<void> {
    const db = this.state.database;
    if (!db.local) return;
    const { dataDir, bin } = db.local;
    if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) {
      this.log(`initialising a PostgreSQL server for the cluster in ${dataDir}`);
      await ownDirectoryForPostgres(path.dirname(dataDir));
      const passwordFile = path.join(path.dirname(dataDir), 'initdb-password');
      await fs.promises.writeFile(passwordFile, `${db.password}\n`, { mode: 0o600 });
      await giveToPostgres(passwordFile);
      try {
        await runPostgresProgram(bin, 'initdb', [
          '-D',
          dataDir,
          '-U',
          db.user,
          '--pwfile',
          passwordFile,
          '-A',
          'scram-sha-256',
          '-E',
          'UTF8',
          '--locale=C',
          '--no-instructions',
        ]);
      } finally {
        await fs.promises.rm(passwordFile, { force: true });
      }
    }
    if (await postgresRunning(bin, dataDir)) return;
    const logFile = path.join(path.dirname(dataDir), 'server.log');
    this.log(`starting the cluster's PostgreSQL on ${db.host}:${db.port}`);
    const options = `${serverOptions({ listen_addresses: db.host, max_connections: 300 })} -p ${db.port} -k ${path.dirname(dataDir)}`;
    try {
      await runPostgresProgram(bin, 'pg_ctl', ['-D', dataDir, '-o', options, '-l', logFile, '-w', '-t', '60', 'start']);
    } catch (err) {
      throw new Error(`the cluster's PostgreSQL did not start: ${(err as Error).message}\n${await logTail(logFile, 0)}`);
    }
  }

  /** deploy/temporal/setup-schema.sh, as compose's schema step runs it: idempotent, so on every `up`. */
  private async setUpSchemas(toolDir: string): Promise<void> {
    const db = this.state.database;
    const [sqlTool, schemas] = [
      await findGoTool(TEMPORAL_SQL_TOOL, { stateDir: toolDir, log: this.log }),
      await findServerSchemas({ stateDir: toolDir, log: this.log }),
    ];
    this.log(`setting up the schemas of ${db.names.history} and ${db.names.visibility} on ${db.host}:${db.port} (${SETUP_SCHEMA_SCRIPT})`);
    try {
      await execFileAsync('sh', [SETUP_SCHEMA_SCRIPT], {
        env: {
          ...process.env,
          POSTGRES_SEEDS: db.host,
          DB_PORT: String(db.port),
          POSTGRES_USER: db.user,
          SQL_PASSWORD: db.password,
          TEMPORAL_SQL_TOOL: sqlTool,
          TEMPORAL_SCHEMA_DIR: schemas,
          TEMPORAL_DB_NAME: db.names.history,
          TEMPORAL_VISIBILITY_DB_NAME: db.names.visibility,
        },
        maxBuffer: 16 << 20,
      });
    } catch (err) {
      const failed = err as { stdout?: string; stderr?: string; message: string };
      const output = `${failed.stdout ?? ''}${failed.stderr ?? ''}`.trim().split('\n').slice(-15).join('\n');
      throw new Error(`setting up Temporal's schemas failed (${SETUP_SCHEMA_SCRIPT}):\n${output || failed.message}`);
    }
  }

  /** This cluster's copy of deploy/temporal's dynamic config. */
  private dynamicConfigFile(): string {
    return clusterPaths(this.stateDir).dynamicConfig;
  }

  /**
   * This cluster's copy of deploy/temporal's dynamic config, made again at every `up` (the server reads it every minute):
   * its frontend's HTTP address where the file names compose's (Nexus callbacks), and one partition per task queue where
   * the cluster was made so.
   */
  private async writeDynamicConfig(): Promise<void> {
    const base = await fs.promises.readFile(DYNAMIC_CONFIG_FILE, 'utf8');
    let text = base.trimEnd().replaceAll(COMPOSE_FRONTEND_HTTP, this.frontendHttpAddress());
    if (this.state.taskQueuePartitions === 1) {
      const entries = Object.entries(ONE_PARTITION).map(([key, value]) => `${key}:\n  - value: ${value}\n    constraints: {}\n`);
      text += `\n\n# One partition per task queue: this cluster was made so (ClusterState.taskQueuePartitions).\n${entries.join('')}`;
    }
    await fs.promises.writeFile(this.dynamicConfigFile(), `${text}\n`);
  }

  /** Where the frontend serves its HTTP API (Nexus: where history sends an operation, where callbacks complete one). */
  private frontendHttpAddress(): string {
    const frontend = this.state.processes.find((p) => p.service === 'frontend');
    return `${HOST}:${frontend?.httpPort ?? 7243}`;
  }

  /** What cluster.yaml reads for process `proc`. */
  private environmentOf(proc: ClusterProcess): NodeJS.ProcessEnv {
    const db = this.state.database;
    const service = proc.service.toUpperCase();
    return {
      ...process.env,
      TEMPORAL_DB_HOST: db.host,
      TEMPORAL_DB_PORT: String(db.port),
      TEMPORAL_DB_USER: db.user,
      TEMPORAL_DB_PASSWORD: db.password,
      TEMPORAL_DB_NAME: db.names.history,
      TEMPORAL_VISIBILITY_DB_NAME: db.names.visibility,
      TEMPORAL_HISTORY_SHARDS: String(this.state.historyShards),
      TEMPORAL_BIND_IP: HOST,
      TEMPORAL_BROADCAST_ADDRESS: HOST,
      TEMPORAL_FRONTEND_ADDRESS: this.state.address,
      TEMPORAL_FRONTEND_HTTP_ADDRESS: this.frontendHttpAddress(),
      TEMPORAL_DYNAMIC_CONFIG_FILE: this.dynamicConfigFile(),
      [`TEMPORAL_${service}_GRPC_PORT`]: String(proc.port),
      [`TEMPORAL_${service}_MEMBERSHIP_PORT`]: String(proc.membershipPort),
      // (Every service: history dispatches a Nexus operation to the frontend's HTTP port, as its own config says it.)
      TEMPORAL_FRONTEND_HTTP_PORT: this.frontendHttpAddress().split(':')[1],
    };
  }

  /** The web UI server's configuration (its own format), written where its `--root` points. */
  private async writeUiConfig(proc: ClusterProcess): Promise<string> {
    const dir = clusterPaths(this.stateDir).uiConfig;
    await fs.promises.mkdir(dir, { recursive: true });
    const config = [
      `temporalGrpcAddress: ${this.state.address}`,
      `host: ${HOST}`,
      `port: ${proc.port}`,
      'enableUi: true',
      `defaultNamespace: ${this.state.namespace}`,
      'notifyOnNewVersion: false',
      'hideLogs: true',
      '',
    ].join('\n');
    await fs.promises.writeFile(path.join(dir, 'development.yaml'), config);
    return dir;
  }

  /** Starts process `proc` in a session of its own (it outlives this command line), its output appended to its log. */
  private async spawn(proc: ClusterProcess, exe: string): Promise<void> {
    const args =
      proc.service === 'ui'
        ? ['--root', await this.writeUiConfig(proc), '--config', '.', '--env', 'development', 'start']
        : [
            '--root',
            CLUSTER_CONFIG_DIR,
            '--config',
            '.',
            '--env',
            CLUSTER_CONFIG_ENV,
            '--allow-no-auth',
            'start',
            '--service',
            proc.service,
          ];
    const logFile = this.logOf(proc.name);
    await fs.promises.appendFile(logFile, `--- ${new Date().toISOString()} ${exe} ${args.join(' ')}\n`);
    const fd = fs.openSync(logFile, 'a');
    try {
      const child = spawn(exe, args, {
        detached: true,
        stdio: ['ignore', fd, fd],
        env: proc.service === 'ui' ? process.env : this.environmentOf(proc),
        cwd: CLUSTER_CONFIG_DIR,
      });
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', reject);
      });
      child.unref();
      proc.pid = child.pid!;
      proc.exe = exe;
    } finally {
      fs.closeSync(fd);
    }
    this.log(`${proc.name}: started (pid ${proc.pid}, port ${listenPort(proc)}, log ${logFile})`);
    await this.save();
  }

  /** Resolves once `proc`'s port accepts connections; throws with its log's tail if it exits or the deadline passes. */
  private async waitListening(proc: ClusterProcess, deadline: number): Promise<void> {
    for (;;) {
      if (!runs(proc.pid, proc.exe)) {
        throw new Error(`${proc.name} exited while starting. Last lines of ${this.logOf(proc.name)}:\n${await this.tail(proc)}`);
      }
      if (await tcpAccepts(listenPort(proc))) return;
      if (Date.now() > deadline) {
        throw new Error(
          `${proc.name} did not listen on port ${listenPort(proc)} in time. Last lines of its log:\n${await this.tail(proc)}`,
        );
      }
      await sleep(200);
    }
  }

  /** The last lines of `proc`'s log, each cut short: the server logs JSON with whole stack traces. */
  private async tail(proc: ClusterProcess): Promise<string> {
    const text = await logTail(this.logOf(proc.name), 0, 6);
    return text
      .split('\n')
      .map((line) => (line.length > 500 ? `${line.slice(0, 500)} ...` : line))
      .join('\n');
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
        running: db.local ? await postgresRunning(db.local.bin, db.local.dataDir) : null,
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
    await this.spawn(proc, exe);
    await this.waitListening(proc, Date.now() + timeoutMs);
  }

  /** SIGTERM to each, SIGKILL to any still there after 10 s. */
  private async stopProcesses(names: readonly string[]): Promise<void> {
    const procs = this.state.processes.filter((p) => names.includes(p.name) && runs(p.pid, p.exe));
    for (const proc of procs) process.kill(proc.pid!, 'SIGTERM');
    const deadline = Date.now() + STOP_GRACE_MS;
    while (procs.some((p) => runs(p.pid, p.exe)) && Date.now() < deadline) await sleep(100);
    for (const proc of procs.filter((p) => runs(p.pid, p.exe))) {
      this.log(`${proc.name}: still there after ${STOP_GRACE_MS / 1000} s; SIGKILL`);
      process.kill(proc.pid!, 'SIGKILL');
    }
    while (procs.some((p) => runs(p.pid, p.exe))) await sleep(50);
    for (const proc of this.state.processes.filter((p) => names.includes(p.name))) {
      proc.pid = null;
      proc.exe = null;
    }
    await this.save();
  }

  /** Removes a cluster that never started a process: its state, and its own PostgreSQL (stopped) and data, if any. */
  private async discard(): Promise<void> {
    const local = this.state.database.local;
    if (local && (await postgresRunning(local.bin, local.dataDir))) {
      await runPostgresProgram(local.bin, 'pg_ctl', ['-D', local.dataDir, '-m', 'fast', '-w', 'stop']).catch(() => undefined);
    }
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
    for (const name of names) await this.stopProcesses([name]);
    const local = this.state.database.local;
    if (local && (await postgresRunning(local.bin, local.dataDir))) {
      this.log("stopping the cluster's PostgreSQL");
      await runPostgresProgram(local.bin, 'pg_ctl', ['-D', local.dataDir, '-m', 'fast', '-w', 'stop']);
    }
    if (opts.forget) await fs.promises.rm(clusterPaths(this.stateDir).dir, { recursive: true, force: true });
  }
}

function defaultLog(line: string): void {
  process.stderr.write(`${line}\n`);
}
