import { parseArgs } from 'node:util';
import { freshSeed } from './random';
import { formatReport } from './report';
import { runChaos } from './runner';

/**
 * `npm run chaos -- [--seed N] [--ops N] [--clients N] [--server-restarts N] [--converge-seconds N] [--catalog sqlite|postgres]
 *                   [--temporal dev|cluster] [--driver files|postgres|mariadb] [--connection-cuts on|off] [--mariadb-restarts N] [--workers N] [--storage local|remote] [--kill-workers N] [--kill-nodes N] [--caller sdk|cli|sql] [--keep]`
 *
 * Exit codes: 0 no problem found; 1 problems found (listed); 2 the run itself could not be carried out;
 * 130 interrupted (Ctrl-C; a second one exits at once, still killing the processes it started).
 */

const USAGE =
  'usage: npm run chaos -- [--seed N] [--ops N] [--clients N] [--server-restarts N] [--converge-seconds N]\n' +
  '                        [--temporal dev|cluster] [--catalog sqlite|postgres] [--driver files|postgres|mariadb] [--workers N]\n' +
  '                        [--storage local|remote]\n' +
  '                        [--connection-cuts on|off] [--mariadb-restarts N] [--kill-workers N] [--kill-nodes N]\n' +
  '                        [--caller sdk|cli|sql] [--keep]\n' +
  '  --temporal: dev (default: a dev server of the run, crashed whole by --server-restarts) or cluster (a cluster of the\n' +
  '             run on its PostgreSQL, as `tablefate cluster up` makes it: --server-restarts SIGKILLs a history process)\n' +
  '  --converge-seconds: how long to wait for the system to come to rest after the operations (default 180)\n' +
  '  --catalog: sqlite (default: the file under the state directory) or postgres (a throwaway PostgreSQL server,\n' +
  '             started and stopped by the run; needs initdb/pg_ctl installed)\n' +
  '  --driver: files (default: a shard is a set of files) or postgres (a shard is a real table, each storage node a\n' +
  "             database of a throwaway PostgreSQL server, the catalog's with --catalog postgres; rows are inserted\n" +
  "             into the live tables meanwhile, some names are taken by tables a user made by hand, tablefate's storage\n" +
  '             connections are cut now and then; at the end every row seen committed is looked for, each trashed table\n' +
  "             is recalled, and the user's tables must be untouched)\n" +
  '             or mariadb (a shard is a real InnoDB table, each storage node a throwaway MariaDB server of the run;\n' +
  "             the worker has an account of its own with the driver's least privileges; rows are inserted as with\n" +
  '             postgres, a hand-made table is adopted, triggers and keys from other tables are made on the tables and\n' +
  '             must be back after each recall; no truncate, which the driver refuses)\n' +
  "  --connection-cuts: postgres and mariadb drivers: on (default: tablefate's storage connections are cut every 3 to\n" +
  "             8 s, with pg_terminate_backend, or KILL CONNECTION of the worker account's sessions) or off\n" +
  "  --mariadb-restarts: mariadb driver: how many times a node's mariadbd is SIGKILLed and started again on its data\n" +
  '             directory and port during the operations (default 2, the nodes in turn)\n' +
  '  --workers: how many `tablefate worker` processes run at once, sharing home and catalog, each killed and\n' +
  '             restarted by the monkey (default 1)\n' +
  '  --storage: local (default: the workers serve the storage nodes) or remote (a `tablefate storage-node` process\n' +
  '             per node, each with a directory of its own; the workers run with --storage remote)\n' +
  '  --kill-workers: how many of the workers the monkey kills (default all); --kill-nodes: how many storage nodes\n' +
  '             (remote storage; default 1); with --driver postgres a storage node serves its database\n' +
  '  --caller: sdk (default: SDK clients), cli (each operation a `tablefate` command run from an empty directory) or\n' +
  '             sql (--driver postgres only: each drop, recall, purge, hold, release and retention change of a table of\n' +
  "             one shard a CALL of the SQL door, tablefate_sql.<call>(...), on its node's database; the rest through the\n" +
  '             SDK. It connects as a login role of the run, chaos_sql_<hex>, granted tablefate_caller and membership in\n' +
  "             postgres, the workers' role that owns the tables (no superuser itself); at the end every request on every\n" +
  '             node must be answered, once, and each one answered with a table by exactly one run of its own)\n' +
  '  --keep: keep the state directory (catalog, storage, logs, ops.json) even when no problem is found';

function count(value: string | undefined, fallback: number, name: string, min: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, got ${JSON.stringify(value)}`);
  return n;
}

function oneOf<T extends string>(value: string | undefined, choices: readonly T[], name: string): T {
  if (value === undefined) return choices[0]!;
  if ((choices as readonly string[]).includes(value)) return value as T;
  throw new Error(`--${name} must be ${choices.join(' or ')}, got ${JSON.stringify(value)}`);
}

async function main(): Promise<number> {
  let options;
  try {
    const { values } = parseArgs({
      options: {
        seed: { type: 'string' },
        ops: { type: 'string' },
        clients: { type: 'string' },
        'server-restarts': { type: 'string' },
        temporal: { type: 'string' },
        'converge-seconds': { type: 'string' },
        catalog: { type: 'string' },
        driver: { type: 'string' },
        'connection-cuts': { type: 'string' },
        'mariadb-restarts': { type: 'string' },
        workers: { type: 'string' },
        storage: { type: 'string' },
        'kill-workers': { type: 'string' },
        'kill-nodes': { type: 'string' },
        caller: { type: 'string' },
        keep: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    });
    if (values.help) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    options = {
      seed: count(values.seed, freshSeed(), 'seed', 0),
      ops: count(values.ops, 150, 'ops', 1),
      clients: count(values.clients, 4, 'clients', 1),
      serverRestarts: count(values['server-restarts'], 2, 'server-restarts', 0),
      temporal: oneOf(values.temporal, ['dev', 'cluster'] as const, 'temporal'),
      convergenceTimeoutMs: count(values['converge-seconds'], 180, 'converge-seconds', 1) * 1000,
      catalog: oneOf(values.catalog, ['sqlite', 'postgres'] as const, 'catalog'),
      driver: oneOf(values.driver, ['files', 'postgres', 'mariadb'] as const, 'driver'),
      connectionCutsEveryMs:
        oneOf(values['connection-cuts'], ['on', 'off'] as const, 'connection-cuts') === 'off' ? (false as const) : undefined,
      mariadbRestarts: count(values['mariadb-restarts'], 2, 'mariadb-restarts', 0),
      workers: count(values.workers, 1, 'workers', 1),
      storage: oneOf(values.storage, ['local', 'remote'] as const, 'storage'),
      killWorkers: values['kill-workers'] === undefined ? undefined : count(values['kill-workers'], 0, 'kill-workers', 0),
      killNodes: values['kill-nodes'] === undefined ? undefined : count(values['kill-nodes'], 0, 'kill-nodes', 0),
      caller: oneOf(values.caller, ['sdk', 'cli', 'sql'] as const, 'caller'),
      keepState: values.keep ?? false,
    };
    if (options.caller === 'sql' && options.driver !== 'postgres') {
      throw new Error(
        options.driver === 'mariadb'
          ? '--caller sql calls the SQL door of PostgreSQL storage nodes, which the mariadb driver has not: it needs --driver postgres'
          : '--caller sql calls the SQL door of PostgreSQL storage nodes: it needs --driver postgres',
      );
    }
    if (values['mariadb-restarts'] !== undefined && options.driver !== 'mariadb') {
      throw new Error('--mariadb-restarts restarts the MariaDB servers of the storage nodes: it needs --driver mariadb');
    }
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }

  const abort = new AbortController();
  const onInterrupt = () => {
    if (abort.signal.aborted) process.exit(130); // 'exit' handlers still kill the worker and the server
    process.stderr.write('interrupted: stopping the operations and cleaning up (Ctrl-C again to quit at once)\n');
    abort.abort();
  };
  process.on('SIGINT', onInterrupt);
  process.on('SIGTERM', onInterrupt);

  process.stderr.write(`chaos: seed ${options.seed}\n`);
  try {
    const report = await runChaos({ ...options, signal: abort.signal, log: (line) => process.stderr.write(`${line}\n`) });
    process.stdout.write(`\n${formatReport(report)}\n`);
    if (report.aborted) return 130;
    return report.problems.length > 0 ? 1 : 0;
  } catch (err) {
    process.stderr.write(`chaos run (seed ${options.seed}) could not be carried out: ${(err as Error).stack ?? String(err)}\n`);
    return 2;
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${String(err)}\n`);
    process.exit(2);
  },
);
