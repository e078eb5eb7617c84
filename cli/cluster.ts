import { parseArgs } from 'node:util';
import { InvalidInputError } from '../domain/errors';
import { TemporalCluster, type ClusterStatus } from '../servers/cluster';
import { portArg } from './args';
import { renderRows } from './format';

/**
 * `tablefate cluster up|down|status`: a Temporal cluster on PostgreSQL on this host, every service its own process
 * (servers/cluster.ts). Its state is under $TABLEFATE_HOME/cluster. Exit codes: 0 ok (status: every process runs);
 * 1 status: something does not run, or any other failure; 2 usage; 3 no cluster under this state directory.
 */

export const CLUSTER_USAGE = `usage: tablefate cluster up [--postgres <url>] [--port N] [--ui-port N] [--headless] [--history N]
                          [--namespace ns] [--json]
       tablefate cluster status [--json]
       tablefate cluster down [--forget] [--json]
  up: Temporal's databases set up on PostgreSQL (--postgres postgres://user:password@host:port, a login that owns or
      may create temporal and temporal_visibility; default: a PostgreSQL server of this host's installation under
      $TABLEFATE_HOME/cluster), then frontend (--port, default 7233), history (--history processes, default 2 on two
      cores), matching and worker as separate processes, the web UI (--ui-port, default 8233; none with --headless),
      the namespace (default default) and tablefate's search attributes. Again: starts whatever does not run.
  status: each process, whether it runs and listens (exit 1 if one does not)
  down: stops every process it started, and its own PostgreSQL; the data stays (--forget removes it all)`;

interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
}

class ClusterCommandError extends Error {
  constructor(
    readonly kind: string,
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
  }
}

function formatStatus(status: ClusterStatus): string {
  const db = status.database;
  const rows = status.processes.map((p) => [
    p.name,
    p.pid === null ? '-' : String(p.pid),
    !p.running ? 'stopped' : p.listening ? 'running' : 'starting',
    String(p.port),
    p.log,
  ]);
  return [
    `frontend  ${status.address} (namespace ${status.namespace})`,
    `web UI    ${status.uiUrl ?? 'none (headless)'}`,
    `database  ${db.user}@${db.host}:${db.port}${db.local ? ` (this host's, ${db.running ? 'running' : 'stopped'})` : ''}`,
    '',
    renderRows([['PROCESS', 'PID', 'STATE', 'PORT', 'LOG'], ...rows]),
  ].join('\n');
}

const allRunning = (status: ClusterStatus) => status.processes.every((p) => p.running && p.listening) && status.database.running !== false;

/** Runs `tablefate cluster ...` (args after the word `cluster`) for state directory `home`; returns the exit code. */
export async function clusterCommand(args: string[], home: string, io: Io): Promise<number> {
  let json = args.includes('--json');
  try {
    let parsed;
    try {
      parsed = parseArgs({
        args,
        options: {
          json: { type: 'boolean' },
          postgres: { type: 'string' },
          port: { type: 'string' },
          'ui-port': { type: 'string' },
          headless: { type: 'boolean' },
          history: { type: 'string' },
          namespace: { type: 'string' },
          forget: { type: 'boolean' },
          help: { type: 'boolean', short: 'h' },
        },
        allowPositionals: true,
        strict: true,
      });
    } catch (err) {
      throw new ClusterCommandError('Usage', 2, `cluster: ${(err as Error).message}`);
    }
    const v = parsed.values;
    json = v.json === true;
    if (v.help) {
      io.out(CLUSTER_USAGE);
      return 0;
    }
    const [action, ...extra] = parsed.positionals;
    if (extra.length > 0 || !['up', 'down', 'status'].includes(action ?? '')) {
      throw new ClusterCommandError('Usage', 2, `cluster: expected up, down or status, got "${parsed.positionals.join(' ')}"`);
    }
    const onlyFor = (flag: string, given: unknown, allowed: string) => {
      if (given !== undefined && action !== allowed)
        throw new ClusterCommandError('Usage', 2, `cluster ${action}: --${flag} is for \`cluster ${allowed}\``);
    };
    for (const flag of ['postgres', 'port', 'ui-port', 'headless', 'history', 'namespace'] as const) onlyFor(flag, v[flag], 'up');
    onlyFor('forget', v.forget, 'down');
    const log = (line: string) => io.err(line);

    if (action === 'up') {
      if (v.headless && v['ui-port'] !== undefined)
        throw new ClusterCommandError('Usage', 2, 'cluster up: --headless and --ui-port exclude each other');
      const history = v.history === undefined ? undefined : Number(v.history);
      if (history !== undefined && (!/^[1-8]$/.test(v.history!) || !Number.isInteger(history))) {
        throw new InvalidInputError(`--history must be a number of history processes from 1 to 8, not "${v.history}"`);
      }
      const existing = await TemporalCluster.load(home, log);
      const cluster = await TemporalCluster.up({
        stateDir: home,
        // A cluster that exists keeps its ports unless asked otherwise; a new one takes the usual ones.
        port: v.port !== undefined || !existing ? portArg(v.port, 7233, '--port') : undefined,
        uiPort: v.headless ? undefined : v['ui-port'] !== undefined || !existing ? portArg(v['ui-port'], 8233, '--ui-port') : undefined,
        headless: v.headless === true,
        ...(v.postgres !== undefined ? { postgresUrl: v.postgres } : {}),
        ...(history !== undefined ? { historyProcesses: history } : {}),
        ...(v.namespace !== undefined ? { namespace: v.namespace } : {}),
        log,
      });
      const status = await cluster.status();
      if (json) io.out(JSON.stringify(status, null, 2));
      else {
        io.out(formatStatus(status));
        io.out(`\nfor tablefate and the temporal CLI: export TEMPORAL_ADDRESS=${status.address} TEMPORAL_NAMESPACE=${status.namespace}`);
      }
      return 0;
    }

    const cluster = await TemporalCluster.load(home, log);
    if (!cluster) throw new ClusterCommandError('NoCluster', 3, `no cluster under ${home}/cluster: \`tablefate cluster up\` makes one`);
    if (action === 'status') {
      const status = await cluster.status();
      io.out(json ? JSON.stringify(status, null, 2) : formatStatus(status));
      return allRunning(status) ? 0 : 1;
    }
    await cluster.down({ forget: v.forget === true });
    const result = { stopped: cluster.processNames, forgotten: v.forget === true };
    io.out(json ? JSON.stringify(result) : `stopped ${result.stopped.join(', ')}${result.forgotten ? '; its state and data removed' : ''}`);
    return 0;
  } catch (err) {
    const kind = err instanceof ClusterCommandError ? err.kind : err instanceof InvalidInputError ? 'InvalidInput' : 'Error';
    const message = err instanceof Error ? err.message : String(err);
    io.err(json ? JSON.stringify({ error: kind, message }) : `tablefate: ${kind}: ${message}`);
    return err instanceof ClusterCommandError ? err.exitCode : err instanceof InvalidInputError ? 2 : 1;
  }
}
