import type { Config } from '../worker/config';
import { portArg } from './args';
import { METRICS_ADDRESS, str, TIMEOUT, timeoutOption, UsageError, type CommandRecord, type Values } from './command';

/*
 * The commands that run or look after the services (a worker, a storage node, a cluster, the nodes' quarantine and
 * guard, the reconciler's findings). Each loads what it runs only when it runs: the SDK's worker and its native core,
 * zod's configuration schemas, PostgreSQL.
 */

/* eslint-disable @typescript-eslint/no-require-imports -- lazy loading, per command (a require: tsx's CommonJS hook, which import() bypasses) */
const workerMain = () => require('../worker/main') as typeof import('../worker/main');
const workerConfigModule = () => require('../worker/config') as typeof import('../worker/config');
/* eslint-enable @typescript-eslint/no-require-imports */

/** A worker command's configuration: the environment's, with `--metrics-address` over TABLEFATE_METRICS_ADDRESS. */
function workerConfig(env: NodeJS.ProcessEnv, values: Values): Config {
  const flag = values['metrics-address'];
  return workerConfigModule().loadConfig(typeof flag === 'string' ? { ...env, TABLEFATE_METRICS_ADDRESS: flag } : env);
}

/** Every command that runs a worker exits so after a fatal storage error (one clause of the help for the three). */
const EXIT_70 = 'worker, storage-node and dev exit 70 after a fatal storage error';

export const dev: CommandRecord = {
  name: 'dev',
  usage: '  dev [--headless] [--port N] [--ui-port N]   dev server + worker in the foreground (npm start)',
  exits: EXIT_70,
  spec: {
    options: { headless: { type: 'boolean' }, port: { type: 'string' }, 'ui-port': { type: 'string' }, ...METRICS_ADDRESS },
    args: { min: 0, max: 0 },
    run: async ({ values: v, env, io, exit }) => {
      const port = portArg(str(v.port), 7233, '--port');
      const uiPort = portArg(str(v['ui-port']), 8233, '--ui-port');
      // The worker's configuration only for the worker's commands: a variable only workers read never stops a table command.
      exit(await workerMain().devCommand(workerConfig(env, v), { headless: v.headless === true, port, uiPort }, io.out));
    },
  },
};

export const worker: CommandRecord = {
  name: 'worker',
  usage: `  worker [--storage local|remote]             a worker alone, against TEMPORAL_ADDRESS; local (default) also
                                              serves every storage node from TABLEFATE_HOME/storage, remote
                                              leaves them to their storage-node workers`,
  exits: EXIT_70,
  spec: {
    options: { storage: { type: 'string' }, ...METRICS_ADDRESS },
    args: { min: 0, max: 0 },
    run: async ({ values: v, env, exit }) => {
      const mode = v.storage ?? 'local';
      if (mode !== 'local' && mode !== 'remote') throw new UsageError(`worker: --storage is local or remote, got ${JSON.stringify(mode)}`);
      exit(await workerMain().workerCommand(workerConfig(env, v), mode));
    },
  },
};

export const storageNode: CommandRecord = {
  name: 'storage-node',
  usage: `  storage-node <node> --dir <path>            the worker of one storage node (node-<k>), its files under
               | --postgres <url>             <path>/<node>, or its tables in that database (or MariaDB
               | --mariadb <url>              server); needs the catalog (TABLEFATE_CATALOG_URL)`,
  exits: EXIT_70,
  spec: {
    options: { dir: { type: 'string' }, postgres: { type: 'string' }, mariadb: { type: 'string' }, ...METRICS_ADDRESS },
    args: { min: 1, max: 1 },
    run: async ({ values: v, args: [node], env, exit }) => {
      const dir = typeof v.dir === 'string' && v.dir !== '' ? v.dir : undefined;
      const postgres = typeof v.postgres === 'string' && v.postgres !== '' ? v.postgres : undefined;
      const mariadb = typeof v.mariadb === 'string' && v.mariadb !== '' ? v.mariadb : undefined;
      const given = [dir, postgres, mariadb].filter((x) => x !== undefined).length;
      if (given !== 1)
        throw new UsageError(
          'storage-node: give --dir <path> (the node keeps its files under <path>/<node>), --postgres <url> (its tables in that database) or --mariadb <url> (its tables on that server)',
        );
      const store = dir !== undefined ? { dir } : mariadb !== undefined ? { mariadb } : { postgres: postgres! };
      exit(await workerMain().storageNodeCommand(workerConfig(env, v), node!, store));
    },
  },
};

export const cluster: CommandRecord = {
  name: 'cluster',
  usage: `  cluster up|status|down                      a Temporal cluster on PostgreSQL on this host, each service its
                                              own process (tablefate cluster --help)`,
  raw: (args, { env, io }) => {
    // It starts processes and builds binaries: no other command loads it.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { clusterCommand } = require('./cluster') as typeof import('./cluster');
    return clusterCommand(args, workerConfigModule().loadConfig(env).home, io);
  },
};

/** Not a command: a line of the help about the three that run a worker. */
export const METRICS_NOTE = `  (dev, worker, storage-node) [--metrics-address host:port]
                                              serve Prometheus metrics at http://host:port/metrics
                                              (or TABLEFATE_METRICS_ADDRESS; docs/operations.md)`;

export const quarantine: CommandRecord = {
  name: 'quarantine',
  usage: '  quarantine [clear <node>] [--dir <path>]    storage nodes a fatal error quarantined; clear one after a look',
  exits: 'quarantine clear exits 3 if the node is not quarantined',
  raw: (args, { env, io }) => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { quarantineCommand } = require('./quarantine') as typeof import('./quarantine');
    return quarantineCommand(args, workerConfigModule().loadConfig(env), io);
  },
};

export const guard: CommandRecord = {
  name: 'guard',
  usage: `  guard install|status|remove [--node node-N] [--url <url>]
                                              PostgreSQL storage: an event trigger on each node (or node-N)
                                              that refuses DROP TABLE, renames and moves of tablefate's tables
                                              by anyone but tablefate, and a trigger on each that refuses its
                                              TRUNCATE; install/remove need a superuser (--url: connect as one
                                              instead of the node's url)`,
  exits: 'guard status exits 0 when the guard is on on every node asked, 1 otherwise; guard install without a superuser exits 2',
  spec: {
    options: { node: { type: 'string' }, url: { type: 'string' } },
    args: { min: 1, max: 1 },
    run: async ({ values: v, args: [action], env, io, json, exit }) => {
      if (action !== 'install' && action !== 'status' && action !== 'remove')
        throw new UsageError(`guard: expected install, status or remove, got ${JSON.stringify(action)}`);
      // It opens PostgreSQL sessions of its own.
      /* eslint-disable @typescript-eslint/no-require-imports */
      const guard = require('../storage/postgres-guard-command') as typeof import('../storage/postgres-guard-command');
      const { loadClientConfig } = require('../config/client') as typeof import('../config/client');
      /* eslint-enable @typescript-eslint/no-require-imports */
      const results = await guard.runGuard(action, guard.guardTargets(loadClientConfig(env), str(v.node), str(v.url)));
      io.out(json ? JSON.stringify(results, null, 2) : guard.formatGuard(results));
      if (action === 'status' && !results.every((r) => r.enabled)) exit(1);
    },
  },
};

export const doctor: CommandRecord = {
  name: 'doctor',
  usage: '  doctor                                      what the reconciler would repair now (asks a worker; changes nothing)',
  exits: 'doctor exits 0 when it finds nothing to repair, 1 when it finds something or could not look at a node',
  spec: {
    options: TIMEOUT,
    args: { min: 0, max: 0 },
    run: async ({ values: v, io, json, exit, withClient }) => {
      const report = await withClient((c) => c.health(timeoutOption(v)));
      // A node that could not be looked at is not known to be healthy.
      const healthy = report.findings.length === 0 && report.omitted === 0 && report.skippedNodes.length === 0;
      if (json) io.out(JSON.stringify({ healthy, ...report }, null, 2));
      else {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const { formatHealth } = require('./format') as typeof import('./format');
        io.out(formatHealth(report));
      }
      if (!healthy) exit(1);
    },
  },
};
