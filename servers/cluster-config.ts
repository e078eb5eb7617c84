import fs from 'node:fs';
import path from 'node:path';
import { HOST } from './local-host';
import { ONE_PARTITION } from './dev-server';
import { clusterPaths, type ClusterProcess, type ClusterState } from './cluster-state';

/**
 * What a cluster's processes read: deploy/temporal/cluster.yaml (the configuration docker-compose.yml uses) through
 * the environment each service process is given, the cluster's own copy of deploy/temporal's dynamic config, and the
 * web UI's configuration.
 */

/** Where the configuration every service process reads lives: beside docker-compose.yml's. */
export const CLUSTER_CONFIG_DIR = path.resolve(__dirname, '..', 'deploy', 'temporal');
/** Its file name without `.yaml`: the server's `--env`. */
export const CLUSTER_CONFIG_ENV = 'cluster';
const DYNAMIC_CONFIG_FILE = path.join(CLUSTER_CONFIG_DIR, 'dynamicconfig.yaml');
/** The frontend's HTTP address as deploy/temporal/dynamicconfig.yaml names it (compose's): a cluster's copy puts its own. */
const COMPOSE_FRONTEND_HTTP = 'temporal-frontend:7243';

/**
 * The cluster's copy of deploy/temporal's dynamic config, made again at every `up` (the server reads it every minute):
 * its frontend's HTTP address where the file names compose's (Nexus callbacks), and one partition per task queue where
 * the cluster was made so.
 */
export async function writeDynamicConfig(stateDir: string, state: ClusterState): Promise<void> {
  const base = await fs.promises.readFile(DYNAMIC_CONFIG_FILE, 'utf8');
  let text = base.trimEnd().replaceAll(COMPOSE_FRONTEND_HTTP, frontendHttpAddress(state));
  if (state.taskQueuePartitions === 1) {
    const entries = Object.entries(ONE_PARTITION).map(([key, value]) => `${key}:\n  - value: ${value}\n    constraints: {}\n`);
    text += `\n\n# One partition per task queue: this cluster was made so (ClusterState.taskQueuePartitions).\n${entries.join('')}`;
  }
  await fs.promises.writeFile(clusterPaths(stateDir).dynamicConfig, `${text}\n`);
}

/** Where the frontend serves its HTTP API (Nexus: where history sends an operation, where callbacks complete one). */
function frontendHttpAddress(state: ClusterState): string {
  const frontend = state.processes.find((p) => p.service === 'frontend');
  return `${HOST}:${frontend?.httpPort ?? 7243}`;
}

/** What cluster.yaml reads for process `proc`. */
export function environmentOf(stateDir: string, state: ClusterState, proc: ClusterProcess): NodeJS.ProcessEnv {
  const db = state.database;
  const service = proc.service.toUpperCase();
  return {
    ...process.env,
    TEMPORAL_DB_HOST: db.host,
    TEMPORAL_DB_PORT: String(db.port),
    TEMPORAL_DB_USER: db.user,
    TEMPORAL_DB_PASSWORD: db.password,
    TEMPORAL_DB_NAME: db.names.history,
    TEMPORAL_VISIBILITY_DB_NAME: db.names.visibility,
    TEMPORAL_HISTORY_SHARDS: String(state.historyShards),
    TEMPORAL_BIND_IP: HOST,
    TEMPORAL_BROADCAST_ADDRESS: HOST,
    TEMPORAL_FRONTEND_ADDRESS: state.address,
    TEMPORAL_FRONTEND_HTTP_ADDRESS: frontendHttpAddress(state),
    TEMPORAL_DYNAMIC_CONFIG_FILE: clusterPaths(stateDir).dynamicConfig,
    [`TEMPORAL_${service}_GRPC_PORT`]: String(proc.port),
    [`TEMPORAL_${service}_MEMBERSHIP_PORT`]: String(proc.membershipPort),
    // (Every service: history dispatches a Nexus operation to the frontend's HTTP port, as its own config says it.)
    TEMPORAL_FRONTEND_HTTP_PORT: frontendHttpAddress(state).split(':')[1],
  };
}

/** The web UI server's configuration (its own format), written where its `--root` points. */
export async function writeUiConfig(stateDir: string, state: ClusterState, proc: ClusterProcess): Promise<string> {
  const dir = clusterPaths(stateDir).uiConfig;
  await fs.promises.mkdir(dir, { recursive: true });
  const config = [
    `temporalGrpcAddress: ${state.address}`,
    `host: ${HOST}`,
    `port: ${proc.port}`,
    'enableUi: true',
    `defaultNamespace: ${state.namespace}`,
    'notifyOnNewVersion: false',
    'hideLogs: true',
    '',
  ].join('\n');
  await fs.promises.writeFile(path.join(dir, 'development.yaml'), config);
  return dir;
}
