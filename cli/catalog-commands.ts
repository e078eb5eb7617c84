import { numberArg, str, tableArg, TIMEOUT, timeoutOption, type CommandRecord } from './command';

/* The commands that read tables and operations (through the SDK, which withClient loads), and cancel. */

// eslint-disable-next-line @typescript-eslint/no-require-imports
const format = () => require('./format') as typeof import('./format');

export const ls: CommandRecord = {
  name: 'ls',
  usage: '  ls [-a|--all] [--limit N] [--after ID]      live tables by id; -a adds trashed ones; a page of N after ID',
  spec: {
    // Reads answer from the catalog, waiting for nothing: --timeout is checked and has nothing to bound.
    options: { all: { type: 'boolean', short: 'a' }, limit: { type: 'string' }, after: { type: 'string' }, ...TIMEOUT },
    args: { min: 0, max: 0 },
    run: async ({ values: v, io, json, withClient, unknownSizes }) => {
      timeoutOption(v);
      const limit = numberArg(v.limit) as number | undefined;
      const page = await withClient((c) => c.list({ includeTrashed: v.all === true, after: str(v.after), limit, withSizes: true }));
      unknownSizes(page);
      // A full page may have more behind it: tell a person how to ask for it (on stderr: the listing stays clean).
      if (!json && limit !== undefined && page.length === limit)
        io.err(`more may follow: tablefate ls${v.all ? ' -a' : ''} --limit ${limit} --after ${page.at(-1)!.id}`);
      return page;
    },
  },
};

export const describe: CommandRecord = {
  name: 'describe',
  usage: '  describe <id|ns.name>                       one table (by id: any, tombstones included)',
  spec: {
    options: TIMEOUT,
    args: { min: 1, max: 1 },
    run: ({ values: v, args: [table], withClient, unknownSizes }) => {
      timeoutOption(v);
      return withClient(async (c) => unknownSizes(await c.describe({ table: table!, withSizes: true })));
    },
  },
};

export const ops: CommandRecord = {
  name: 'ops',
  usage: `  ops [--table <id|ns.name>] [--running] [--limit N]
                                              operations, newest first (default the 50 newest), from the
                                              server's visibility; STEP: what a running one is doing`,
  spec: {
    options: { table: { type: 'string' }, running: { type: 'boolean' }, limit: { type: 'string' } },
    args: { min: 0, max: 0 },
    run: async ({ values: v, io, json, withClient }) => {
      const limit = numberArg(v.limit) as number | undefined;
      const table = v.table === undefined ? undefined : tableArg(v.table as string);
      const operations = await withClient((c) => c.operations({ table, running: v.running === true, limit }));
      io.out(json ? JSON.stringify(operations, null, 2) : format().formatOperations(operations));
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { DEFAULT_OPERATIONS_LIMIT } = require('../domain/requests') as typeof import('../domain/requests');
      // A full page may have older ones behind it (on stderr: the listing stays clean).
      if (!json && operations.length === (limit ?? DEFAULT_OPERATIONS_LIMIT))
        io.err(`the newest ${operations.length} shown; older ones may follow: --limit N (at most 1000)`);
    },
  },
};

export const history: CommandRecord = {
  name: 'history',
  usage: `  history <id|ns.name>                        one table's life: every operation on it, when, how it ended and
                                              who started it (a purged table by its id)`,
  spec: {
    options: {},
    args: { min: 1, max: 1 },
    run: async ({ args: [table], io, json, withClient }) => {
      const history = await withClient((c) => c.history({ table: tableArg(table!) }));
      io.out(json ? JSON.stringify(history, null, 2) : format().formatHistory(history));
    },
  },
};

export const cancel: CommandRecord = {
  name: 'cancel',
  usage: `  cancel <workflow-id>                        cancel a running operation (an id ops lists): it takes back what
                                              it did; prints the table after. A trash that only waits for its
                                              expiry is refused (exit 4): recall or purge the table instead`,
  exits: `cancel exits 3 when no run of this catalog has that workflow id, 4 when the run is not running or is a trash that
only waits for its expiry (nothing cancelled)`,
  spec: {
    options: TIMEOUT,
    args: { min: 1, max: 1 },
    run: async ({ values: v, args: [workflowId], command, io, json, withClient, progress }) => {
      const opts = timeoutOption(v);
      // Waits for the run to close, having taken back what it did; a person sees the compensation go.
      const outcome = await withClient((c) => c.cancel({ workflowId: workflowId! }, { ...opts, onDetails: progress(command) }));
      if (json) io.out(JSON.stringify(outcome, null, 2));
      else if (outcome.table) io.out(format().formatTable(outcome.table));
      else io.out(`${outcome.operation.workflowId} was cancelled before it had a table: nothing of it remains`);
    },
  },
};
