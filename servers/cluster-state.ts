import fs from 'node:fs';
import path from 'node:path';

/**
 * What a cluster brought up on this host is (servers/cluster.ts), as written to `<state>/cluster/cluster.json` so that
 * `down` and `status` (other command lines) find it, and `up` again brings back whatever is not running with the same
 * ports and databases.
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

/** The state of the cluster under `stateDir`, or null if none was ever brought up there. */
export async function readClusterState(stateDir: string): Promise<ClusterState | null> {
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
  return state;
}

export async function saveClusterState(stateDir: string, state: ClusterState): Promise<void> {
  const file = clusterPaths(stateDir).state;
  const temp = `${file}.${process.pid}.tmp`;
  await fs.promises.writeFile(temp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  await fs.promises.rename(temp, file);
}

/** The log file of process `name`. */
export function logOf(stateDir: string, name: string): string {
  return path.join(clusterPaths(stateDir).logs, `${name}.log`);
}
