import { MAX_TABLES_DROPPED_TOGETHER } from '../domain/limits';
import type { LeaseInfo } from '../domain/leases';
import type { EffectiveSetting } from '../domain/settings';
import {
  numberArg,
  str,
  tableArg,
  TIMEOUT,
  timeoutOption,
  UsageError,
  type CommandRecord,
  type CommandSpec,
  type RunContext,
} from './command';

/*
 * The table commands: each goes through the SDK (withClient, which loads it), and loads the formatting of what it
 * prints only once it has something to print.
 */

// eslint-disable-next-line @typescript-eslint/no-require-imports
const format = () => require('./format') as typeof import('./format');

export const create: CommandRecord = {
  name: 'create',
  usage: `  create <ns.name> [--shards N]               create a table (default 4 shards)
         [--columns "<defs>" | --like <schema.table>]
                                              PostgreSQL storage: its columns, as inside CREATE TABLE (...),
                                              or another table's structure`,
  spec: {
    options: { shards: { type: 'string', short: 's' }, columns: { type: 'string' }, like: { type: 'string' }, ...TIMEOUT },
    args: { min: 1, max: 1 },
    run: ({ values: v, args: [table], command, withClient, progress }) => {
      const opts = timeoutOption(v);
      const shards = numberArg(v.shards) as number;
      const definition = { columns: str(v.columns), like: str(v.like) };
      return withClient((c) => c.create({ table: table!, shards, ...definition }, { ...opts, onDetails: progress(command) }));
    },
  },
};

export const adopt: CommandRecord = {
  name: 'adopt',
  usage: `  adopt <schema.table> [--node node-N]        PostgreSQL storage: make an existing table (on node-N, default
                                              node-0) a tablefate table, so that drop/recall/purge protect it`,
  spec: {
    options: { node: { type: 'string' }, ...TIMEOUT },
    args: { min: 1, max: 1 },
    run: ({ values: v, args: [table], command, withClient, progress }) => {
      const opts = timeoutOption(v);
      return withClient((c) => c.adopt({ table: table!, node: str(v.node) }, { ...opts, onDetails: progress(command) }));
    },
  },
};

export const drop: CommandRecord = {
  name: 'drop',
  aliases: ['trash'],
  usage: `  drop|trash <ns.name> [<ns.name> ...] [-r|--reserve-seconds N] [--drain-timeout S] [--node node-N]
         [--cascade] [--dry-run]
  drop|trash --namespace <ns> [-r N] [--drain-timeout S]
                                              move a table to the trash (default retention 7 days, or the
                                              trash.retentionSeconds in force); first wait up to S (default 60)
                                              for its leases (DRAINING) and, PostgreSQL, sessions using it, then
                                              TableBusy; PostgreSQL, with --node: a table tablefate does not keep
                                              yet, on node-N, is adopted and dropped in one operation; with
                                              --cascade: its views go into the trash with it, and live tables'
                                              keys, policies and defaults on it are detached until its recall;
                                              --dry-run: drops nothing, prints the table and notes of what the
                                              drop would move into the trash with it and detach, or its refusal;
                                              several tables: dropped as one, all or none, recalled together;
                                              --namespace: every table of the namespace as one, with their views
                                              and (PostgreSQL) the schema with what else it holds`,
  spec: {
    options: {
      'reserve-seconds': { type: 'string', short: 'r' },
      'drain-timeout': { type: 'string' },
      node: { type: 'string' },
      cascade: { type: 'boolean' },
      'dry-run': { type: 'boolean' },
      namespace: { type: 'string' },
      ...TIMEOUT,
    },
    args: { min: 0, max: MAX_TABLES_DROPPED_TOGETHER },
    run: ({ values: v, args: [table, ...more], command, withClient, progress }) => {
      const opts = timeoutOption(v);
      if ((table === undefined) === (v.namespace === undefined)) throw new UsageError('drop: give a table (or several), or --namespace ns');
      const together = more.length > 0 ? { together: more } : {};
      const retentionSeconds = numberArg(v['reserve-seconds']) as number;
      const drainTimeoutSeconds = numberArg(v['drain-timeout']) as number;
      const node = v.node === undefined ? {} : { node: str(v.node) };
      const cascade = v.cascade === true ? { cascade: true } : {};
      const dryRun = v['dry-run'] === true ? { dryRun: true } : {};
      // A drop that drains waits for its table's leases: a person sees which, and until when.
      return withClient((c) =>
        c.trash(
          {
            ...(table !== undefined ? { table } : { namespace: str(v.namespace) }),
            ...together,
            retentionSeconds,
            drainTimeoutSeconds,
            ...node,
            ...cascade,
            ...dryRun,
          },
          { ...opts, onDetails: progress(command) },
        ),
      );
    },
  },
};

export const truncate: CommandRecord = {
  name: 'truncate',
  usage: `  truncate <id|ns.name> [-r|--reserve-seconds N] [--drain-timeout S] [--cascade]
                                              empty a READY table into the trash: its rows become a trash entry
                                              of their own (a new id, under the table's name, kept N s as a drop
                                              is: recall it under a new name, hold it, purge it), and the table
                                              stays live under its id, empty; waits for leases and, PostgreSQL,
                                              sessions as a drop does (up to S, default 60, then TableBusy);
                                              PostgreSQL, with --cascade: the tables whose foreign keys reference
                                              it, and theirs in turn, too, each into an entry of its own (one
                                              tablefate does not keep refuses it, named)`,
  spec: {
    options: {
      'reserve-seconds': { type: 'string', short: 'r' },
      'drain-timeout': { type: 'string' },
      cascade: { type: 'boolean' },
      ...TIMEOUT,
    },
    args: { min: 1, max: 1 },
    run: ({ values: v, args: [table], command, withClient, progress }) => {
      const opts = timeoutOption(v);
      const retentionSeconds = numberArg(v['reserve-seconds']) as number;
      const drainTimeoutSeconds = numberArg(v['drain-timeout']) as number;
      const cascade = v.cascade === true ? { cascade: true } : {};
      return withClient((c) =>
        c.truncate({ table: table!, retentionSeconds, drainTimeoutSeconds, ...cascade }, { ...opts, onDetails: progress(command) }),
      );
    },
  },
};

export const recall: CommandRecord = {
  name: 'recall',
  aliases: ['undelete'],
  usage: `  recall|undelete <id|ns.name> [new_name] [--alone] [--into ns] [--in-place]
                                              restore a trashed table, maybe under a new name; one dropped with
                                              others as one comes back with those still in the trash, unless
                                              --alone (what ties it to them waits for their recall, as said);
                                              --into: into namespace ns, each under its own name; --in-place: a
                                              truncate's entry back under its table's name, that table (with
                                              the rows written since) into the trash as a drop puts it`,
  spec: {
    options: { alone: { type: 'boolean' }, into: { type: 'string' }, 'in-place': { type: 'boolean' }, ...TIMEOUT },
    args: { min: 1, max: 2 },
    run: ({ values: v, args: [table, newName], command, withClient, progress }) => {
      const opts = timeoutOption(v);
      // Progress for a person watching; scripts (no terminal, or --json) get only the result. The shards back are said
      // as the run's details say a step's progress, so that the two sources show one line each.
      const show = progress(command);
      return withClient((c) =>
        c.undelete(
          {
            table: table!,
            newName,
            ...(v.alone === true ? { alone: true } : {}),
            ...(v.into !== undefined ? { newNamespace: str(v.into) } : {}),
            ...(v['in-place'] === true ? { inPlace: true } : {}),
          },
          show ? { ...opts, onDetails: show, onProgress: (p) => show(`move shards back: ${p.shardsBack}/${p.shards}`) } : opts,
        ),
      );
    },
  },
};

export const purge: CommandRecord = {
  name: 'purge',
  usage: `  purge <id>                                  delete a trashed table now (a held one: OnHold, exit 4)
  purge --all [--namespace ns] --yes          purge every trashed table that is not held, a few at a time;
                                              without --yes, list what it would purge and change nothing`,
  exits: 'purge --all exits 0 when every table it tried was purged, 7 when one failed',
  spec: {
    options: { all: { type: 'boolean' }, namespace: { type: 'string' }, yes: { type: 'boolean' }, ...TIMEOUT },
    args: { min: 0, max: 1 },
    run: async ({ values: v, args: [id], command, io, json, exit, withClient, progress }) => {
      const opts = timeoutOption(v);
      if (v.all !== true) {
        if (id === undefined || v.namespace !== undefined || v.yes !== undefined)
          throw new UsageError('purge: give a table id, or --all [--namespace ns] --yes');
        return withClient((c) => c.purge({ tableId: id }, { ...opts, onDetails: progress(command) }));
      }
      if (id !== undefined) throw new UsageError('purge --all takes no table id');
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { purgeAllCommand } = require('./purge-all') as typeof import('./purge-all');
      exit(await withClient((c) => purgeAllCommand(c, { namespace: str(v.namespace) }, { ...opts, yes: v.yes === true, json, io })));
    },
  },
};

export const retention: CommandRecord = {
  name: 'retention',
  usage: `  retention <id|ns.name> <seconds>            a trashed table's new retention, counted from its drop time
                                              (an expiry already past purges it now)`,
  spec: {
    options: TIMEOUT,
    args: { min: 2, max: 2 },
    run: ({ values: v, args: [table, seconds], withClient }) => {
      const opts = timeoutOption(v);
      return withClient((c) => c.setRetention({ table: table!, retentionSeconds: numberArg(seconds) as number }, opts));
    },
  },
};

export const hold: CommandRecord = {
  name: 'hold',
  usage: '  hold <id|ns.name> [--reason text]           a legal hold: nothing purges the table (expiry, space cap, purge)',
  spec: {
    options: { reason: { type: 'string' }, ...TIMEOUT },
    args: { min: 1, max: 1 },
    run: ({ values: v, args: [table], withClient }) => {
      const opts = timeoutOption(v);
      return withClient((c) => c.hold({ table: table!, reason: str(v.reason) }, opts));
    },
  },
};

export const release: CommandRecord = {
  name: 'release',
  usage: '  release <id|ns.name>                        release the hold (an expiry that passed meanwhile purges it then)',
  spec: {
    options: TIMEOUT,
    args: { min: 1, max: 1 },
    run: ({ values: v, args: [table], withClient }) => {
      const opts = timeoutOption(v);
      return withClient((c) => c.release({ table: table! }, opts));
    },
  },
};

const printLeases = ({ io, json }: RunContext, value: LeaseInfo | LeaseInfo[]): void =>
  io.out(json ? JSON.stringify(value, null, 2) : format().formatLeaseList(([] as LeaseInfo[]).concat(value)));

export const lease: CommandRecord = {
  name: 'lease',
  usage: `  lease acquire <id|ns.name> [--ttl N] [--holder text]
                                              a lease on a READY table for N s (default 60): a drop waits for
                                              it (DRAINING) until it is released or expires; prints its id
  lease renew <lease-id> [--ttl N]            renew it for its ttl (or N s) from now
  lease release <lease-id>                    release it: a drop waiting for it goes on
  lease ls [--table <id|ns.name>]             the leases that have not expired`,
  subcommands: {
    acquire: {
      options: { ttl: { type: 'string' }, holder: { type: 'string' }, ...TIMEOUT },
      args: { min: 1, max: 1 },
      run: async (ctx) => {
        const { values: v, args } = ctx;
        const opts = timeoutOption(v);
        const ttlSeconds = numberArg(v.ttl) as number | undefined;
        printLeases(ctx, await ctx.withClient((c) => c.acquireLease(tableArg(args[0]!), { ...opts, ttlSeconds, holder: str(v.holder) })));
      },
    },
    renew: {
      options: { ttl: { type: 'string' }, ...TIMEOUT },
      args: { min: 1, max: 1 },
      run: async (ctx) => {
        const opts = timeoutOption(ctx.values);
        const ttlSeconds = numberArg(ctx.values.ttl) as number | undefined;
        printLeases(ctx, await ctx.withClient((c) => c.renewLease(ctx.args[0]!, { ...opts, ttlSeconds })));
      },
    },
    release: {
      options: TIMEOUT,
      args: { min: 1, max: 1 },
      run: async (ctx) => {
        const opts = timeoutOption(ctx.values);
        printLeases(ctx, await ctx.withClient((c) => c.releaseLease(ctx.args[0]!, opts)));
      },
    },
    ls: {
      options: { table: { type: 'string' } },
      args: { min: 0, max: 0 },
      run: async (ctx) => {
        const table = str(ctx.values.table);
        printLeases(ctx, await ctx.withClient((c) => c.listLeases(table === undefined ? {} : { table: tableArg(table) })));
      },
    },
  },
};

const NAMESPACE = { namespace: { type: 'string' } } as const;
const printSettings = ({ io, json }: RunContext, settings: EffectiveSetting[]): void =>
  io.out(json ? JSON.stringify(settings, null, 2) : format().formatSettings(settings));

export const config: CommandRecord = {
  name: 'config',
  usage: `  config get [key] [--namespace ns]           the settings in force, and where each comes from
  config set <key> <value> [--namespace ns]   change one while everything runs: trash.enabled (true|false),
                                              trash.retentionSeconds (1 to 315360000), trash.maxBytes (bytes
                                              or unlimited); a namespace's value overrides the global one
  config unset <key> [--namespace ns]         back to the global value (or the default)`,
  subcommands: {
    get: {
      options: NAMESPACE,
      args: { min: 0, max: 1 },
      run: async (ctx) => {
        const [key] = ctx.args;
        printSettings(ctx, await ctx.withClient((c) => c.getSettings({ key, namespace: str(ctx.values.namespace) })));
      },
    },
    set: {
      options: { ...NAMESPACE, ...TIMEOUT },
      args: { min: 2, max: 2 },
      run: async (ctx) => {
        const [key, value] = ctx.args;
        const opts = timeoutOption(ctx.values);
        const namespace = str(ctx.values.namespace);
        printSettings(ctx, [await ctx.withClient((c) => c.setSetting({ key: key!, value: value!, namespace }, opts))]);
      },
    },
    unset: {
      options: { ...NAMESPACE, ...TIMEOUT },
      args: { min: 1, max: 1 },
      run: async (ctx) => {
        const opts = timeoutOption(ctx.values);
        const namespace = str(ctx.values.namespace);
        printSettings(ctx, [await ctx.withClient((c) => c.unsetSetting({ key: ctx.args[0]!, namespace }, opts))]);
      },
    },
  } satisfies Record<string, CommandSpec>,
};

export const rename: CommandRecord = {
  name: 'rename',
  usage: `  rename <id|ns.name> <new ns.name> [--drain-timeout S]
                                              give a READY table a new name or namespace (its old name is free);
                                              PostgreSQL: the table itself is renamed, once the sessions using it
                                              let go (waiting up to S, default 60, then TableBusy)`,
  spec: {
    options: { 'drain-timeout': { type: 'string' }, ...TIMEOUT },
    args: { min: 2, max: 2 },
    run: ({ values: v, args: [table, newName], command, withClient, progress }) => {
      const opts = timeoutOption(v);
      const drainTimeoutSeconds = numberArg(v['drain-timeout']) as number;
      return withClient((c) =>
        c.rename({ table: table!, newName: newName!, drainTimeoutSeconds }, { ...opts, onDetails: progress(command) }),
      );
    },
  },
};
