import { parseArgs } from 'node:util';
import { loadClientConfig } from '../config/client';
import { loadConfig, type Config } from '../worker/config';
import { quarantineCommand } from './quarantine';
import { exitCodeForType, InvalidInputError, ServerUnreachableError, TableFateError } from '../domain/errors';
import type { TableInfo } from '../domain/table';
import { DEFAULT_TIMEOUT_MS, TableFateClient, type WriteOptions } from '../client/client';
import { applicationFailureOf } from '../client/errors';
import { formatHealth, formatHistory, formatLeaseList, formatOperations, formatSettings, formatTable, formatTableList } from './format';
import { DEFAULT_OPERATIONS_LIMIT } from '../domain/requests';
import type { LeaseInfo } from '../domain/leases';
import type { EffectiveSetting } from '../domain/settings';
import { purgeAllCommand } from './purge-all';
import type { CliIo } from './io';

export type { CliIo };
import { portArg } from './args';

/**
 * The commands that run a worker (`dev`, `worker`, `storage-node`), loaded only when one of them runs: the SDK's
 * worker and its native core would cost every table command some 0.3 to 0.6 s more to start.
 */
function workerCommands(): typeof import('../worker/main') {
  // A require, not import(): the command line runs through tsx's CommonJS hook, which import() bypasses.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('../worker/main') as typeof import('../worker/main');
}

/** `tablefate cluster`, loaded only when it runs (it starts processes and builds binaries; no table command needs it). */
function clusterCommands(): typeof import('./cluster') {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('./cluster') as typeof import('./cluster');
}

/** `tablefate guard`, loaded only when it runs (it opens PostgreSQL sessions of its own). */
function guardCommands(): typeof import('../storage/postgres-guard') {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('../storage/postgres-guard') as typeof import('../storage/postgres-guard');
}

const USAGE = `usage: tablefate <command> [options]

  dev [--headless] [--port N] [--ui-port N]   dev server + worker in the foreground (npm start)
  worker [--storage local|remote]             a worker alone, against TEMPORAL_ADDRESS; local (default) also
                                              serves every storage node from TABLEFATE_HOME/storage, remote
                                              leaves them to their storage-node workers
  storage-node <node> --dir <path>            the worker of one storage node (node-<k>), its files under
               | --postgres <url>             <path>/<node>, or its tables in that database; needs the catalog
                                              (TABLEFATE_CATALOG_URL)
  cluster up|status|down                      a Temporal cluster on PostgreSQL on this host, each service its
                                              own process (tablefate cluster --help)
  (dev, worker, storage-node) [--metrics-address host:port]
                                              serve Prometheus metrics at http://host:port/metrics
                                              (or TABLEFATE_METRICS_ADDRESS; docs/operations.md)
  create <ns.name> [--shards N]               create a table (default 4 shards)
         [--columns "<defs>" | --like <schema.table>]
                                              PostgreSQL storage: its columns, as inside CREATE TABLE (...),
                                              or another table's structure
  adopt <schema.table> [--node node-N]        PostgreSQL storage: make an existing table (on node-N, default
                                              node-0) a tablefate table, so that drop/recall/purge protect it
  drop|trash <ns.name> [-r|--reserve-seconds N] [--drain-timeout S]
                                              move a table to the trash (default retention 7 days, or the
                                              trash.retentionSeconds in force); first wait up to S (default 60)
                                              for its leases (DRAINING) and, PostgreSQL, sessions using it, then
                                              TableBusy
  recall|undelete <id|ns.name> [new_name]     restore a trashed table, maybe under a new name
  purge <id>                                  delete a trashed table now (a held one: OnHold, exit 4)
  purge --all [--namespace ns] --yes          purge every trashed table that is not held, a few at a time;
                                              without --yes, list what it would purge and change nothing
  retention <id|ns.name> <seconds>            a trashed table's new retention, counted from its drop time
                                              (an expiry already past purges it now)
  hold <id|ns.name> [--reason text]           a legal hold: nothing purges the table (expiry, space cap, purge)
  release <id|ns.name>                        release the hold (an expiry that passed meanwhile purges it then)
  lease acquire <id|ns.name> [--ttl N] [--holder text]
                                              a lease on a READY table for N s (default 60): a drop waits for
                                              it (DRAINING) until it is released or expires; prints its id
  lease renew <lease-id> [--ttl N]            renew it for its ttl (or N s) from now
  lease release <lease-id>                    release it: a drop waiting for it goes on
  lease ls [--table <id|ns.name>]             the leases that have not expired
  config get [key] [--namespace ns]           the settings in force, and where each comes from
  config set <key> <value> [--namespace ns]   change one while everything runs: trash.enabled (true|false),
                                              trash.retentionSeconds (1 to 315360000), trash.maxBytes (bytes
                                              or unlimited); a namespace's value overrides the global one
  config unset <key> [--namespace ns]         back to the global value (or the default)
  rename <id|ns.name> <new ns.name>           give a READY table a new name or namespace (its old name is free)
  ls [-a|--all] [--limit N] [--after ID]      live tables by id; -a adds trashed ones; a page of N after ID
  describe <id|ns.name>                       one table (by id: any, tombstones included)
  ops [--table <id|ns.name>] [--running] [--limit N]
                                              operations, newest first (default the 50 newest), from the
                                              server's visibility; STEP: what a running one is doing
  history <id|ns.name>                        one table's life: every operation on it, when, how it ended and
                                              who started it (a purged table by its id)
  cancel <workflow-id>                        cancel a running operation (an id ops lists): it takes back what
                                              it did; prints the table after. A trash that only waits for its
                                              expiry is refused (exit 4): recall or purge the table instead
  quarantine [clear <node>] [--dir <path>]    storage nodes a fatal error quarantined; clear one after a look
  guard install|status|remove [--node node-N] [--url <url>]
                                              PostgreSQL storage: an event trigger on each node (or node-N)
                                              that refuses DROP TABLE, renames and moves of tablefate's tables
                                              by anyone but tablefate; install/remove need a superuser (--url:
                                              connect as one instead of the node's url)
  doctor                                      what the reconciler would repair now (asks a worker; changes nothing)

every command takes --json. the table commands (create to describe) and cancel take --timeout S: how long a write
waits for its answer (default 60); past it, it exits 5 and the operation goes on in the background.
on a terminal (and without --json), a write that waits shows on stderr what its run is doing.
environment: TABLEFATE_HOME (default ./.tablefate), TEMPORAL_ADDRESS (default 127.0.0.1:7233),
TEMPORAL_NAMESPACE (default default).
exit codes: 0 ok, 2 invalid input, 3 not found, in the trash, or no such lease, 4 exists, name taken, wrong
state, has dependents, busy, on hold or a shard table missing,
5 no answer within --timeout or the server lost after the start (the operation may go on),
6 no catalog, no worker or no server (nothing started),
7 the operation failed (lock lost, storage fault, wrong catalog, workflow terminated...), 1 other;
worker, storage-node and dev exit 70 after a fatal storage error; quarantine clear exits 3 if the node is not quarantined;
doctor exits 0 when it finds nothing to repair, 1 when it finds something or could not look at a node;
guard status exits 0 when the guard is on on every node asked, 1 otherwise; guard install without a superuser exits 2;
purge --all exits 0 when every table it tried was purged, 7 when one failed;
cancel exits 3 when no run of this catalog has that workflow id, 4 when the run is not running or is a trash that
only waits for its expiry (nothing cancelled).`;

/** A command line that does not parse: exit 2, like invalid input. */
class UsageError extends Error {}

export function exitCodeOf(err: unknown): number {
  if (err instanceof UsageError) return 2;
  // The server was lost after the start: like a timeout, the operation may go on.
  if (err instanceof ServerUnreachableError && err.mayHaveStarted) return 5;
  if (err instanceof TableFateError) return exitCodeForType(err.type);
  return 1;
}

const COMMON = { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } as const;
/** Every table command's: how long a write waits for its answer, in seconds. */
const TIMEOUT = { timeout: { type: 'string' } } as const;

/** The commands that run a worker serve Prometheus metrics there (TABLEFATE_METRICS_ADDRESS, which the flag overrides). */
const METRICS_ADDRESS = { 'metrics-address': { type: 'string' } } as const;

/** A worker command's configuration: the environment's, with `--metrics-address` over TABLEFATE_METRICS_ADDRESS. */
function workerConfig(env: NodeJS.ProcessEnv, values: Record<string, unknown>): Config {
  const flag = values['metrics-address'];
  return loadConfig(typeof flag === 'string' ? { ...env, TABLEFATE_METRICS_ADDRESS: flag } : env);
}

/** `--timeout S` as the SDK's option; absent: the SDK's default (DEFAULT_TIMEOUT_MS). */
function timeoutOption(values: Record<string, string | boolean | undefined>): WriteOptions {
  const value = values.timeout;
  if (value === undefined) return {};
  const seconds = typeof value === 'string' && /^[0-9]+(\.[0-9]+)?$/.test(value) ? Number(value) : NaN;
  if (!(seconds > 0 && seconds <= 86_400)) {
    throw new InvalidInputError(
      `--timeout must be a number of seconds above 0 and at most 86400, not "${String(value)}" (default ${DEFAULT_TIMEOUT_MS / 1000})`,
    );
  }
  return { timeoutMs: seconds * 1000 };
}

/** A number as typed, or the text itself so that validation names what was wrong with it. */
function numberArg(value: string | undefined): number | string | undefined {
  return value !== undefined && /^-?[0-9]+(\.[0-9]+)?$/.test(value) ? Number(value) : value;
}

function positionals(args: string[], count: { min: number; max: number }, command: string): string[] {
  if (args.length < count.min || args.length > count.max) {
    throw new UsageError(
      `${command}: expected ${count.min === count.max ? count.min : `${count.min} to ${count.max}`} argument(s), got ${args.length}`,
    );
  }
  return args;
}

/**
 * Runs one command and returns its exit code: bin/tablefate.js calls it with the process's arguments, environment and
 * streams; a test can call it in-process with its own (`io`), and sees exactly what a person would.
 */
export async function main(argv: string[], given: Partial<CliIo> = {}): Promise<number> {
  const io: CliIo = { ...processIo(), ...given };
  const { env } = io;
  const [command, ...rest] = argv;
  let json = rest.includes('--json');
  try {
    if (!command) {
      io.err(USAGE);
      return 2;
    }
    if (command === '--help' || command === '-h' || command === 'help') {
      io.out(USAGE);
      return 0;
    }
    const run = async (
      options: NonNullable<Parameters<typeof parseArgs>[0]>['options'],
      count: { min: number; max: number },
      body: (values: Record<string, string | boolean | undefined>, args: string[]) => Promise<TableInfo | TableInfo[] | void>,
      args: string[] = rest,
    ) => {
      let parsed;
      try {
        parsed = parseArgs({ args, options: { ...COMMON, ...options }, allowPositionals: true, strict: true });
      } catch (err) {
        throw new UsageError(`${command}: ${(err as Error).message}`);
      }
      const values = parsed.values as Record<string, string | boolean | undefined>;
      json = values.json === true;
      if (values.help) {
        io.out(USAGE);
        return;
      }
      const result = await body(values, positionals(parsed.positionals, count, command));
      if (result === undefined) return;
      if (json) io.out(JSON.stringify(result, null, 2));
      else io.out(Array.isArray(result) ? formatTableList(result) : formatTable(result));
    };
    /** Says on stderr when a size could not be had (the listing itself is the catalog's, and complete). */
    const unknownSizes = <T extends TableInfo | TableInfo[]>(tables: T): T => {
      const unknown = ([] as TableInfo[]).concat(tables).filter((t) => t.bytes === null).length;
      if (unknown > 0 && !json)
        io.err(`size unknown (?) for ${unknown} table(s): no worker answered for a node holding them (see tablefate doctor)`);
      return tables;
    };
    /**
     * What a person watching sees of a long wait: the run's current details on stderr, each new line once, prefixed with
     * the command; nothing for a script (stderr not a terminal) or with --json.
     */
    const progress = (label: string): ((details: string) => void) | undefined => {
      if (!io.errIsTTY || json) return undefined;
      let last = '';
      return (details) => {
        if (details === last) return;
        last = details;
        io.err(`${label}: ${details}`);
      };
    };
    const withClient = async <T>(fn: (client: TableFateClient) => Promise<T>): Promise<T> => {
      const client = await TableFateClient.connect(loadClientConfig(env));
      try {
        return await fn(client);
      } finally {
        await client.close();
      }
    };

    switch (command) {
      case 'dev': {
        // 70 (EX_SOFTWARE) after a fatal storage error, which must survive to the process's exit code.
        let exitCode = 0;
        await run(
          { headless: { type: 'boolean' }, port: { type: 'string' }, 'ui-port': { type: 'string' }, ...METRICS_ADDRESS },
          { min: 0, max: 0 },
          async (v) => {
            const port = portArg(v.port as string | undefined, 7233, '--port');
            const uiPort = portArg(v['ui-port'] as string | undefined, 8233, '--ui-port');
            // The worker's configuration only for the worker's commands: a variable only workers read never
            // stops a table command.
            exitCode = await workerCommands().devCommand(workerConfig(env, v), { headless: v.headless === true, port, uiPort }, io.out);
          },
        );
        return exitCode;
      }
      case 'worker': {
        let exitCode = 0;
        await run({ storage: { type: 'string' }, ...METRICS_ADDRESS }, { min: 0, max: 0 }, async (v) => {
          const mode = v.storage ?? 'local';
          if (mode !== 'local' && mode !== 'remote')
            throw new UsageError(`worker: --storage is local or remote, got ${JSON.stringify(mode)}`);
          exitCode = await workerCommands().workerCommand(workerConfig(env, v), mode);
        });
        return exitCode;
      }
      case 'storage-node': {
        let exitCode = 0;
        await run({ dir: { type: 'string' }, postgres: { type: 'string' }, ...METRICS_ADDRESS }, { min: 1, max: 1 }, async (v, [node]) => {
          const dir = typeof v.dir === 'string' && v.dir !== '' ? v.dir : undefined;
          const postgres = typeof v.postgres === 'string' && v.postgres !== '' ? v.postgres : undefined;
          if ((dir === undefined) === (postgres === undefined))
            throw new UsageError(
              'storage-node: give --dir <path> (the node keeps its files under <path>/<node>) or --postgres <url> (its tables in that database)',
            );
          exitCode = await workerCommands().storageNodeCommand(
            workerConfig(env, v),
            node!,
            dir !== undefined ? { dir } : { postgres: postgres! },
          );
        });
        return exitCode;
      }
      case 'quarantine':
        return await quarantineCommand(rest, loadConfig(env), io);
      case 'cluster':
        return await clusterCommands().clusterCommand(rest, loadConfig(env).home, io);
      case 'guard': {
        let exitCode = 0;
        await run({ node: { type: 'string' }, url: { type: 'string' } }, { min: 1, max: 1 }, async (v, [action]) => {
          if (action !== 'install' && action !== 'status' && action !== 'remove')
            throw new UsageError(`guard: expected install, status or remove, got ${JSON.stringify(action)}`);
          const guard = guardCommands();
          const targets = guard.guardTargets(loadClientConfig(env), v.node as string | undefined, v.url as string | undefined);
          const results = await guard.runGuard(action, targets);
          io.out(json ? JSON.stringify(results, null, 2) : guard.formatGuard(results));
          if (action === 'status' && !results.every((r) => r.enabled)) exitCode = 1;
        });
        return exitCode;
      }
      case 'doctor': {
        let healthy = true;
        await run(TIMEOUT, { min: 0, max: 0 }, async (v) => {
          const report = await withClient((c) => c.health(timeoutOption(v)));
          // A node that could not be looked at is not known to be healthy.
          healthy = report.findings.length === 0 && report.omitted === 0 && report.skippedNodes.length === 0;
          if (json) io.out(JSON.stringify({ healthy, ...report }, null, 2));
          else io.out(formatHealth(report));
        });
        return healthy ? 0 : 1;
      }
      case 'create':
        await run(
          { shards: { type: 'string', short: 's' }, columns: { type: 'string' }, like: { type: 'string' }, ...TIMEOUT },
          { min: 1, max: 1 },
          (v, [table]) => {
            const opts = timeoutOption(v);
            const shards = numberArg(v.shards as string | undefined) as number;
            const definition = { columns: v.columns as string | undefined, like: v.like as string | undefined };
            return withClient((c) => c.create({ table: table!, shards, ...definition }, { ...opts, onDetails: progress(command) }));
          },
        );
        return 0;
      case 'adopt':
        await run({ node: { type: 'string' }, ...TIMEOUT }, { min: 1, max: 1 }, (v, [table]) => {
          const opts = timeoutOption(v);
          return withClient((c) =>
            c.adopt({ table: table!, node: v.node as string | undefined }, { ...opts, onDetails: progress(command) }),
          );
        });
        return 0;
      case 'drop':
      case 'trash':
        await run(
          { 'reserve-seconds': { type: 'string', short: 'r' }, 'drain-timeout': { type: 'string' }, ...TIMEOUT },
          { min: 1, max: 1 },
          (v, [table]) => {
            const opts = timeoutOption(v);
            const retentionSeconds = numberArg(v['reserve-seconds'] as string | undefined) as number;
            const drainTimeoutSeconds = numberArg(v['drain-timeout'] as string | undefined) as number;
            // A drop that drains waits for its table's leases: a person sees which, and until when.
            return withClient((c) =>
              c.trash({ table: table!, retentionSeconds, drainTimeoutSeconds }, { ...opts, onDetails: progress(command) }),
            );
          },
        );
        return 0;
      case 'recall':
      case 'undelete':
        await run(TIMEOUT, { min: 1, max: 2 }, (v, [table, newName]) => {
          const opts = timeoutOption(v);
          // Progress for a person watching; scripts (no terminal, or --json) get only the result. The shards back are said
          // as the run's details say a step's progress, so that the two sources show one line each.
          const show = progress(command);
          return withClient((c) =>
            c.undelete(
              { table: table!, newName },
              show ? { ...opts, onDetails: show, onProgress: (p) => show(`move shards back: ${p.shardsBack}/${p.shards}`) } : opts,
            ),
          );
        });
        return 0;
      case 'purge': {
        let exitCode = 0;
        await run(
          { all: { type: 'boolean' }, namespace: { type: 'string' }, yes: { type: 'boolean' }, ...TIMEOUT },
          { min: 0, max: 1 },
          async (v, [id]) => {
            const opts = timeoutOption(v);
            if (v.all !== true) {
              if (id === undefined || v.namespace !== undefined || v.yes !== undefined)
                throw new UsageError('purge: give a table id, or --all [--namespace ns] --yes');
              return withClient((c) => c.purge({ tableId: id }, { ...opts, onDetails: progress(command) }));
            }
            if (id !== undefined) throw new UsageError('purge --all takes no table id');
            const request = { namespace: v.namespace as string | undefined };
            exitCode = await withClient((c) => purgeAllCommand(c, request, { ...opts, yes: v.yes === true, json, io }));
          },
        );
        return exitCode;
      }
      case 'retention':
        await run(TIMEOUT, { min: 2, max: 2 }, (v, [table, seconds]) => {
          const opts = timeoutOption(v);
          return withClient((c) => c.setRetention({ table: table!, retentionSeconds: numberArg(seconds) as number }, opts));
        });
        return 0;
      case 'hold':
        await run({ reason: { type: 'string' }, ...TIMEOUT }, { min: 1, max: 1 }, (v, [table]) => {
          const opts = timeoutOption(v);
          return withClient((c) => c.hold({ table: table!, reason: v.reason as string | undefined }, opts));
        });
        return 0;
      case 'release':
        await run(TIMEOUT, { min: 1, max: 1 }, (v, [table]) => {
          const opts = timeoutOption(v);
          return withClient((c) => c.release({ table: table! }, opts));
        });
        return 0;
      case 'lease': {
        const [sub, ...args] = rest;
        const print = (value: LeaseInfo | LeaseInfo[]): void => {
          if (json) io.out(JSON.stringify(value, null, 2));
          else io.out(formatLeaseList(([] as LeaseInfo[]).concat(value)));
        };
        switch (sub) {
          case 'acquire':
            await run(
              { ttl: { type: 'string' }, holder: { type: 'string' }, ...TIMEOUT },
              { min: 1, max: 1 },
              async (v, [table]) => {
                const opts = timeoutOption(v);
                const ttlSeconds = numberArg(v.ttl as string | undefined) as number | undefined;
                print(
                  await withClient((c) =>
                    c.acquireLease(tableArg(table!), { ...opts, ttlSeconds, holder: v.holder as string | undefined }),
                  ),
                );
              },
              args,
            );
            return 0;
          case 'renew':
            await run(
              { ttl: { type: 'string' }, ...TIMEOUT },
              { min: 1, max: 1 },
              async (v, [id]) => {
                const opts = timeoutOption(v);
                print(
                  await withClient((c) =>
                    c.renewLease(id!, { ...opts, ttlSeconds: numberArg(v.ttl as string | undefined) as number | undefined }),
                  ),
                );
              },
              args,
            );
            return 0;
          case 'release':
            await run(
              TIMEOUT,
              { min: 1, max: 1 },
              async (v, [id]) => {
                const opts = timeoutOption(v);
                print(await withClient((c) => c.releaseLease(id!, opts)));
              },
              args,
            );
            return 0;
          case 'ls':
            await run(
              { table: { type: 'string' } },
              { min: 0, max: 0 },
              async (v) => {
                const table = v.table as string | undefined;
                print(await withClient((c) => c.listLeases(table === undefined ? {} : { table: tableArg(table) })));
              },
              args,
            );
            return 0;
          default:
            throw new UsageError(
              `lease: expected acquire, renew, release or ls, got ${sub === undefined ? 'nothing' : JSON.stringify(sub)}`,
            );
        }
      }
      case 'config': {
        const [sub, ...args] = rest;
        const NAMESPACE = { namespace: { type: 'string' } } as const;
        const print = (settings: EffectiveSetting[]): void => io.out(json ? JSON.stringify(settings, null, 2) : formatSettings(settings));
        switch (sub) {
          case 'get':
            await run(
              NAMESPACE,
              { min: 0, max: 1 },
              async (v, [key]) => {
                print(await withClient((c) => c.getSettings({ key, namespace: v.namespace as string | undefined })));
              },
              args,
            );
            return 0;
          case 'set':
            await run(
              { ...NAMESPACE, ...TIMEOUT },
              { min: 2, max: 2 },
              async (v, [key, value]) => {
                const opts = timeoutOption(v);
                print([
                  await withClient((c) => c.setSetting({ key: key!, value: value!, namespace: v.namespace as string | undefined }, opts)),
                ]);
              },
              args,
            );
            return 0;
          case 'unset':
            await run(
              { ...NAMESPACE, ...TIMEOUT },
              { min: 1, max: 1 },
              async (v, [key]) => {
                const opts = timeoutOption(v);
                print([await withClient((c) => c.unsetSetting({ key: key!, namespace: v.namespace as string | undefined }, opts))]);
              },
              args,
            );
            return 0;
          default:
            throw new UsageError(`config: expected get, set or unset, got ${sub === undefined ? 'nothing' : JSON.stringify(sub)}`);
        }
      }
      case 'rename':
        await run(TIMEOUT, { min: 2, max: 2 }, (v, [table, newName]) => {
          const opts = timeoutOption(v);
          return withClient((c) => c.rename({ table: table!, newName: newName! }, { ...opts, onDetails: progress(command) }));
        });
        return 0;
      case 'ls':
        // Reads answer from the catalog, waiting for nothing: --timeout is checked and has nothing to bound.
        await run(
          { all: { type: 'boolean', short: 'a' }, limit: { type: 'string' }, after: { type: 'string' }, ...TIMEOUT },
          { min: 0, max: 0 },
          async (v) => {
            timeoutOption(v);
            const limit = numberArg(v.limit as string | undefined) as number | undefined;
            const page = await withClient((c) =>
              c.list({ includeTrashed: v.all === true, after: v.after as string | undefined, limit, withSizes: true }),
            );
            unknownSizes(page);
            // A full page may have more behind it: tell a person how to ask for it (on stderr: the listing stays clean).
            if (!json && limit !== undefined && page.length === limit)
              io.err(`more may follow: tablefate ls${v.all ? ' -a' : ''} --limit ${limit} --after ${page.at(-1)!.id}`);
            return page;
          },
        );
        return 0;
      case 'describe':
        await run(TIMEOUT, { min: 1, max: 1 }, (v, [table]) => {
          timeoutOption(v);
          return withClient(async (c) => unknownSizes(await c.describe({ table: table!, withSizes: true })));
        });
        return 0;
      case 'ops':
        await run({ table: { type: 'string' }, running: { type: 'boolean' }, limit: { type: 'string' } }, { min: 0, max: 0 }, async (v) => {
          const limit = numberArg(v.limit as string | undefined) as number | undefined;
          const table = v.table === undefined ? undefined : tableArg(v.table as string);
          const operations = await withClient((c) => c.operations({ table, running: v.running === true, limit }));
          io.out(json ? JSON.stringify(operations, null, 2) : formatOperations(operations));
          // A full page may have older ones behind it (on stderr: the listing stays clean).
          if (!json && operations.length === (limit ?? DEFAULT_OPERATIONS_LIMIT))
            io.err(`the newest ${operations.length} shown; older ones may follow: --limit N (at most 1000)`);
        });
        return 0;
      case 'history':
        await run({}, { min: 1, max: 1 }, async (_v, [table]) => {
          const history = await withClient((c) => c.history({ table: tableArg(table!) }));
          io.out(json ? JSON.stringify(history, null, 2) : formatHistory(history));
        });
        return 0;
      case 'cancel':
        await run(TIMEOUT, { min: 1, max: 1 }, async (v, [workflowId]) => {
          const opts = timeoutOption(v);
          // Waits for the run to close, having taken back what it did; a person sees the compensation go.
          const outcome = await withClient((c) => c.cancel({ workflowId: workflowId! }, { ...opts, onDetails: progress(command) }));
          if (json) io.out(JSON.stringify(outcome, null, 2));
          else if (outcome.table) io.out(formatTable(outcome.table));
          else io.out(`${outcome.operation.workflowId} was cancelled before it had a table: nothing of it remains`);
        });
        return 0;
      default:
        throw new UsageError(`unknown command "${command}"; try tablefate --help`);
    }
  } catch (err) {
    const code = exitCodeOf(err);
    // What the workflow failed with, not just "Workflow execution failed".
    const failure = applicationFailureOf(err);
    let message = err instanceof Error ? err.message : String(err);
    if (failure && !(err instanceof TableFateError)) message = `${message}: ${failure.type ?? 'Error'}: ${failure.message}`;
    // One line, always: some messages (node's parseArgs) span several.
    message = message.replace(/\s*\n\s*/g, ' ');
    const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : '';
    // (The SDK's own calls say so themselves, as ServerUnreachable: this is for anything that slipped by.)
    if (!(err instanceof TableFateError) && /failed to connect|UNAVAILABLE|ECONNREFUSED/i.test(`${message} ${cause}`)) {
      const address = env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
      message = `cannot reach the Temporal server at ${address} (${message}); is \`tablefate dev\` running?`;
    }
    const kind = err instanceof TableFateError ? err.type : err instanceof UsageError ? 'Usage' : 'Error';
    io.err(json ? JSON.stringify({ error: kind, message }) : `tablefate: ${kind}: ${message}`);
    return code;
  }
}

/** A table as typed: digits are an id, anything else a name (the SDK's validation says what is wrong with it). */
function tableArg(text: string): string | number {
  return /^[0-9]+$/.test(text) ? Number(text) : text;
}

const processIo = (): CliIo => ({
  env: process.env,
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
  errIsTTY: process.stderr.isTTY === true,
});
