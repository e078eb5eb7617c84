import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { InvalidInputError } from '../domain/errors';
import { redactUrl } from '../domain/deployment';
import { TEMPORAL_SERVER_VERSION } from './go-tools';
import { freePorts, freePortsBetween, HOST } from './local-host';
import { findPostgresBin } from './local-postgres';
import { clusterPaths, type ClusterProcess, type ClusterService, type ClusterState } from './cluster-state';

/** What `up` is asked for: a new cluster's settings made of it, or a cluster that exists checked against it. */

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

/** A new cluster's settings: ports picked, the database named. */
export async function planCluster(opts: ClusterUpOptions): Promise<ClusterState> {
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
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new InvalidInputError(`not a plain PostgreSQL database name: ${JSON.stringify(name)}`);
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
export function checkSameAsAsked(stateDir: string, state: ClusterState, opts: ClusterUpOptions, log: (line: string) => void): void {
  const clash = (what: string, asked: unknown, have: unknown) => {
    throw new Error(
      `a cluster exists under ${clusterPaths(stateDir).dir} with ${what} ${String(have)}, not ${String(asked)}: ` +
        'bring it up as it is (leave the option out), or `tablefate cluster down --forget` it first',
    );
  };
  const frontend = state.processes[0]!;
  if (opts.port !== undefined && opts.port !== frontend.port) clash('frontend port', opts.port, frontend.port);
  const ui = state.processes.find((p) => p.service === 'ui');
  if (opts.uiPort !== undefined && opts.uiPort !== ui?.port) clash('UI port', opts.uiPort, ui?.port ?? 'none');
  if (opts.namespace !== undefined && opts.namespace !== state.namespace) clash('namespace', opts.namespace, state.namespace);
  if (opts.postgresUrl !== undefined) {
    const asked = parsePostgresUrl(opts.postgresUrl);
    const have = state.database;
    if (asked.host !== have.host || asked.port !== have.port || asked.user !== have.user) {
      clash('PostgreSQL', `${asked.user}@${asked.host}:${asked.port}`, `${have.user}@${have.host}:${have.port}`);
    }
  }
  if (state.serverVersion !== TEMPORAL_SERVER_VERSION) {
    log(`the cluster ran Temporal ${state.serverVersion}; it now runs ${TEMPORAL_SERVER_VERSION} (schemas updated first)`);
    state.serverVersion = TEMPORAL_SERVER_VERSION;
  }
}

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
