import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { CliProcess, jsonOf, runCli, runCliAll, runCliAllInProcess, runCliInProcess, type CliResult } from './support/cli';
import { testNamespace, testServerAddress } from './support/test-server';
import { waitFor } from './support/wait';
import { visibilityCaughtUp } from './support/runs';
import { catalogPath, TASK_QUEUE } from '../domain/deployment';
import type { TableInfo } from '../domain/table';
import { formatBytes } from '../cli/format';
import { defaultIdentity, TableFateClient } from '../client/client';
import { catalogLocation, openCatalog } from '../catalog/open';

/*
 * The command line, run as a person runs it: `node bin/tablefate.js ...` in child processes, with a worker that is
 * itself `tablefate worker` in a child process, against the shared test server. The CLI cannot choose its task
 * queue or its first table id, so this file uses the task queue `tablefate` (no other file does) and only tables
 * in the namespace `cli`, and keeps every trash retention long enough that no expiry timer fires while it runs.
 */

const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const SEVEN_DAYS_MS = 7 * 24 * 3600 * 1000;

let home: string;
let env: NodeJS.ProcessEnv;
let worker: CliProcess | undefined;
let connection: Connection | undefined;
let temporal: Client;

// Jest's asymmetric matchers are typed `any`; typed `unknown` they can sit in an expected value lint-clean.
const anyValue = (type: StringConstructor | NumberConstructor): unknown => expect.any(type);
const matching = (pattern: RegExp): unknown => expect.stringMatching(pattern);
const containing = (text: string): unknown => expect.stringContaining(text);
const like = (object: Record<string, unknown>): unknown => expect.objectContaining(object);

const cli = (...args: string[]) => runCli(args, { env });
const cliAll = (...argsList: string[][]) => runCliAll(argsList, { env }, 4);
// The same entry point called in this process: for input refused before anything starts (a process costs ~1 s of
// CPU). The tests that run a command to its end, and a few refusals, keep the real process and its wiring.
const inProcess = (...args: string[]) => runCliInProcess(args, { env });
const inProcessAll = (...argsList: string[][]) => runCliAllInProcess(argsList, { env });

beforeAll(async () => {
  home = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-cli-'));
  // No reconcile schedule: it would repair things under these tests, and outlive them on the shared server.
  env = {
    ...process.env,
    TABLEFATE_HOME: home,
    TEMPORAL_ADDRESS: testServerAddress(),
    TABLEFATE_LOG_LEVEL: 'warn',
    TABLEFATE_RECONCILE_SECONDS: '0',
  };
  connection = await Connection.connect({ address: testServerAddress() });
  temporal = new Client({ connection, namespace: testNamespace() });

  worker = CliProcess.start(['worker'], env);
  // At log level warn the worker says nothing when it is ready: ask the server who polls the task queue.
  await waitFor(
    async () => {
      if (worker!.exitStatus) {
        throw new Error(`tablefate worker exited early (${JSON.stringify(worker!.exitStatus)}); stderr: ${worker!.stderr}`);
      }
      const queue = await temporal.workflowService.describeTaskQueue({
        namespace: testNamespace(),
        taskQueue: { name: TASK_QUEUE },
      });
      return queue.pollers?.length ?? 0;
    },
    (pollers) => pollers > 0,
    { timeoutMs: 90_000, intervalMs: 250, what: 'tablefate worker to poll the task queue' },
  );
});

afterAll(async () => {
  try {
    if (worker) {
      const exit = await worker.stop('SIGINT');
      // (stderr on both sides: it shows in the diff if the exit is wrong)
      expect({ exit, stderr: worker.stderr }).toEqual({ exit: { code: 0, signal: null }, stderr: worker.stderr });
    }
  } finally {
    await connection?.close();
    if (home) await fs.promises.rm(home, { recursive: true, force: true });
  }
});

/** A failed command, reduced to what a person (or a script) sees of it. */
function failure(r: CliResult) {
  return { args: r.args, code: r.code, stdout: r.stdout, stderr: r.stderrLines };
}

/** Asserts a command failed with `code` and exactly one stderr line `tablefate: <kind>: <message>`. */
function expectFailure(r: CliResult, code: number, kind: string, message: RegExp = /./) {
  expect(failure(r)).toEqual({
    args: r.args,
    code,
    stdout: '',
    stderr: [matching(new RegExp(`^tablefate: ${kind}: .*${message.source}`))],
  });
}

/** The table a successful `--json` command printed, checked for the shape every table has. */
function tableOf(r: CliResult): TableInfo {
  expect({ args: r.args, code: r.code, stderr: r.stderr }).toEqual({ args: r.args, code: 0, stderr: '' });
  const table = jsonOf<TableInfo>(r);
  expectTableShape(table);
  return table;
}

function tablesOf(r: CliResult): TableInfo[] {
  expect({ args: r.args, code: r.code, stderr: r.stderr }).toEqual({ args: r.args, code: 0, stderr: '' });
  const tables = jsonOf<TableInfo[]>(r);
  expect(Array.isArray(tables)).toBe(true);
  for (const table of tables) expectTableShape(table);
  return tables;
}

const isoOrNull = (value: unknown) => value === null || (typeof value === 'string' && isIso(value));
test("truncate: the answer is the rows' trash entry, ls -a shows what it was truncated from; recall --in-place brings the rows back in place", async () => {
  const table = tableOf(await inProcess('create', 'cli.emptied', '--json'));
  const entry = tableOf(await cli('truncate', 'cli.emptied', '-r', '3600', '--json'));
  expect(entry).toMatchObject({ state: 'TRASHED', namespace: 'cli', name: 'emptied', truncatedFrom: table.id });
  expect(Date.parse(entry.expireAt!) - Date.parse(entry.droppedAt!)).toBe(3600_000);
  expect(tableOf(await cli('describe', 'cli.emptied', '--json'))).toMatchObject({ id: table.id, state: 'READY' });
  const rows = parseColumns((await cli('ls', '-a')).stdout).rows;
  expect(rows.find((row) => row.ID === String(entry.id))?.WITH).toBe(`truncated from table ${table.id}`);
  expect((await cli('describe', String(entry.id))).stdout).toMatch(new RegExp(`^truncated from +table ${table.id}$`, 'm'));

  const back = tableOf(await cli('recall', String(entry.id), '--in-place', '--json'));
  expect(back).toMatchObject({ id: entry.id, state: 'READY', name: 'emptied' });
  expect(tableOf(await cli('describe', String(table.id), '--json'))).toMatchObject({ state: 'TRASHED' });

  expectFailure(await inProcess('truncate', 'cli.none'), 3, 'TableNotFound');
  expectFailure(await inProcess('truncate', String(table.id)), 4, 'WrongState', /TRASHED; only a READY table can be truncated/);
  expectFailure(await inProcess('truncate', 'cli.emptied', '-r', '0'), 2, 'InvalidInput', /retentionSeconds/);
});

test('drop a b: the two as one, ls -a and describe show each with the other; recall --alone brings one, recall the other', async () => {
  const [a, b] = [tableOf(await inProcess('create', 'cli.pair_a', '--json')), tableOf(await inProcess('create', 'cli.pair_b', '--json'))];
  const dropped = tableOf(await cli('drop', 'cli.pair_b', 'cli.pair_a', '--json'));
  expect(dropped).toMatchObject({ id: b.id, state: 'TRASHED', droppedWith: [a.id] });
  const listed = await cli('ls', '-a');
  const rows = parseColumns(listed.stdout).rows;
  expect(rows.find((row) => row.ID === String(a.id))?.WITH).toBe(`tables ${b.id}`);
  expect(rows.find((row) => row.ID === String(b.id))?.WITH).toBe(`tables ${a.id}`);
  expect((await cli('describe', String(a.id))).stdout).toMatch(new RegExp(`^dropped with +tables ${b.id}$`, 'm'));

  const alone = tableOf(await cli('recall', String(a.id), '--alone', '--json'));
  expect(alone).toMatchObject({ id: a.id, state: 'READY' });
  expect(tableOf(await cli('describe', String(b.id), '--json'))).toMatchObject({ state: 'TRASHED', droppedWith: [a.id] });
  expect(tableOf(await cli('recall', String(b.id), '--json'))).toMatchObject({ id: b.id, state: 'READY' });

  expectFailure(await inProcess('drop', 'cli.pair_a', 'cli.pair_a'), 2, 'InvalidInput', /named twice in one drop/);
  expect(tableOf(await cli('describe', 'cli.pair_a', '--json'))).toMatchObject({ state: 'READY' });
});

const isIso = (value: string) => ISO_8601.test(value) && new Date(Date.parse(value)).toISOString() === value;

function expectTableShape(table: TableInfo) {
  expect(table).toEqual(
    like({
      id: anyValue(Number),
      namespace: anyValue(String),
      name: anyValue(String),
      state: anyValue(String),
      shards: anyValue(Number),
    }),
  );
  expect(Number.isInteger(table.id) && table.id > 0).toBe(true);
  expect(table.placement).toHaveLength(table.shards);
  expect({ createdAt: isIso(table.createdAt), droppedAt: isoOrNull(table.droppedAt), expireAt: isoOrNull(table.expireAt) }).toEqual({
    createdAt: true,
    droppedAt: true,
    expireAt: true,
  });
}

/**
 * `ls` without --json: the header names the columns, and every row's cells start where their header starts
 * (two spaces or more before each). Returns the rows as header -> cell.
 */
function parseColumns(text: string): { header: string; rows: Array<Record<string, string>> } {
  const [header, ...rows] = text.replace(/\n$/, '').split('\n');
  expect(header).toMatch(
    /^ID {2,}STATE {2,}NAMESPACE {2,}NAME {2,}SHARDS {2,}SIZE {2,}CREATED {2,}DROPPED {2,}BY {2,}EXPIRES {2,}HOLD {2,}WITH$/,
  );
  const columns = [...header!.matchAll(/\S+/g)].map((m) => ({ name: m[0], at: m.index }));
  return {
    header: header!,
    rows: rows.map((row) => {
      for (const { name, at } of columns.slice(1)) {
        // A cell starts exactly under its header: a blank before it, text at it.
        expect({ row, column: name, before: row[at - 1], at: row[at] }).toEqual({
          row,
          column: name,
          before: ' ',
          at: matching(/\S/),
        });
      }
      return Object.fromEntries(columns.map(({ name, at }, i) => [name, row.slice(at, columns[i + 1]?.at).trim()]));
    }),
  };
}

/** What `ls` should print in a row for this table. */
function rowFor(t: TableInfo): Record<string, string> {
  return {
    ID: String(t.id),
    STATE: t.state,
    NAMESPACE: t.namespace,
    NAME: t.name,
    SHARDS: String(t.shards),
    SIZE: formatBytes(t.bytes),
    CREATED: t.createdAt,
    DROPPED: t.droppedAt ?? '-',
    BY: t.droppedBy ?? (t.droppedAt === null ? '-' : '?'),
    EXPIRES: t.expireAt ?? '-',
    HOLD: t.hold ? (t.hold.reason ?? 'held') : '-',
    // (This file drops no table with others or a family: only a truncate's entry, recalled or not, says anything here.)
    WITH: t.truncatedFrom !== undefined ? `truncated from table ${t.truncatedFrom}` : '-',
  };
}

/** The number of workflows ever started on the CLI's task queue, once visibility has caught up with every start so far. */
async function settledWorkflowCount(): Promise<number> {
  await visibilityCaughtUp(temporal);
  // The operations' runs: a describe or an ls starts a run that measures sizes, which changes nothing.
  return (await temporal.workflow.count(`TaskQueue = '${TASK_QUEUE}' AND WorkflowType != 'measureTables'`)).count;
}

test('--help (and help, and <command> --help) prints the usage of every command and exits 0; no command exits 2', async () => {
  const [help, helpWord, createHelp] = await inProcessAll(['--help'], ['help'], ['create', '--help']);
  const nothing = await cli();
  for (const r of [help, helpWord, createHelp]) {
    expect({ args: r!.args, code: r!.code, stderr: r!.stderr }).toEqual({ args: r!.args, code: 0, stderr: '' });
    expect(r!.stdout).toMatch(/^usage: tablefate <command>/);
    for (const command of ['create', 'drop|trash', 'recall|undelete', 'purge', 'ls', 'describe', 'worker', 'dev', '--json']) {
      expect(r!.stdout).toContain(command);
    }
    // The exit codes, each with the help words of its error types (domain/error-meanings.ts).
    expect(r!.stdout).toMatch(/exit codes: 0 ok, 2 invalid input,\s+3 not found, in the trash, no such lease or no such run,\s+4 exists/);
    expect(r!.stdout).toMatch(/--timeout S: how long a write\s+waits for its answer \(default 60\)/);
    expect(r!.stdout).toMatch(
      /5 no answer within --timeout .*\s*6 no catalog, no worker or no server .*\s*7 lock lost, [\s\S]*\(the operation ran and failed\), 1 other;/,
    );
  }
  expect(nothing.code).toBe(2);
  expect(nothing.stdout + nothing.stderr).toContain('usage: tablefate');
});

test('create prints the table (--json: the TableInfo object), is idempotent, and refuses the same name with other shards', async () => {
  const created = tableOf(await cli('create', 'cli.orders', '--shards', '3', '--json'));
  expect(created).toMatchObject({ namespace: 'cli', name: 'orders', state: 'READY', shards: 3, droppedAt: null, expireAt: null });

  // The same create again is the same table. (Not alongside the 5-shard ones below: run at the same time, it would
  // join their create workflow, create:cli.orders, and share its TableExists.)
  expect(tableOf(await cli('create', 'cli.orders', '-s', '3', '--json'))).toEqual(created);

  const [other, otherJson, defaults] = await cliAll(
    ['create', 'cli.orders', '--shards', '5'],
    ['create', 'cli.orders', '--shards', '5', '--json'],
    ['create', 'cli.defaults', '--json'],
  );
  expectFailure(other!, 4, 'TableExists', /cli\.orders.*3 shards, not 5/);
  // With --json the error is one JSON object on stderr, and stdout stays empty.
  expect({ code: otherJson!.code, stdout: otherJson!.stdout, stderrLines: otherJson!.stderrLines.length }).toEqual({
    code: 4,
    stdout: '',
    stderrLines: 1,
  });
  expect(JSON.parse(otherJson!.stderr)).toEqual({ error: 'TableExists', message: containing('cli.orders') });
  const withDefaults = tableOf(defaults!);
  expect(withDefaults).toMatchObject({ name: 'defaults', shards: 4, state: 'READY' });
  expect(withDefaults.id).toBeGreaterThan(created.id);

  // Without --json: one field per line, the values in one column.
  const described = await cli('describe', 'cli.orders');
  expect({ code: described.code, stderr: described.stderr }).toEqual({ code: 0, stderr: '' });
  const fields = described.stdout.trimEnd().split('\n');
  const valueAt = fields[0]!.search(/ {2}\S/) + 2;
  expect(fields.map((line) => line.search(/ {2}\S/) + 2)).toEqual(fields.map(() => valueAt));
  expect(Object.fromEntries(fields.map((line) => [line.slice(0, valueAt).trim(), line.slice(valueAt)]))).toEqual({
    id: String(created.id),
    name: 'cli.orders',
    state: 'READY',
    shards: created.placement.map((p) => `${p.shard}@${p.node}`).join(' '),
    // The files' bytes, as the nodes measure them (describe asks them through a worker).
    size: expect.stringMatching(/^[1-9][0-9]* bytes$/) as unknown,
    created: created.createdAt,
    dropped: '-',
    'dropped by': '-',
    expires: '-',
    purged: '-',
    hold: '-',
  });
});

test('bad input exits 2 with one line on stderr, starts no workflow and changes nothing', async () => {
  // Something for the bad commands to aim at: a live table and a trashed one.
  const [keep, binned] = (await cliAll(['create', 'cli.keep', '--json'], ['create', 'cli.binned', '--json'])).map(tableOf);
  expect(tableOf(await cli('drop', 'cli.binned', '-r', '3600', '--json')).state).toBe('TRASHED');

  const tablesBefore = tablesOf(await cli('ls', '-a', '--json'));
  const workflowsBefore = await settledWorkflowCount();
  // The query matches this file's workflows (so an unchanged count means something).
  expect(workflowsBefore).toBeGreaterThanOrEqual(3);

  const cases: Array<[args: string[], kind: 'InvalidInput' | 'Usage', message?: RegExp]> = [
    [['create', ''], 'InvalidInput', /"" has an empty name part/],
    [['create', `cli.${'a'.repeat(64)}`], 'InvalidInput', /is over PostgreSQL's 63 bytes/],
    [['create', '../x'], 'InvalidInput', /"\.\.\/x" has an empty name part/],
    [['create', 'cli.Orders'], 'InvalidInput', /"Orders" has capitals: write "Orders" in double quotes for that very name, or orders/],
    [['create', 'cli."un closed'], 'InvalidInput', /a quote that is not closed/],
    [['create', 'a.b.c'], 'InvalidInput', /more than one "\." outside quotes/],
    [['create', 'cli.a;drop'], 'InvalidInput', /"a;drop"/],
    [['create', 'cli.ta-ble'], 'InvalidInput', /"ta-ble"/],
    [['create', 'cli.zero', '--shards', '0'], 'InvalidInput', /shards/],
    [['create', 'cli.many', '--shards', '257'], 'InvalidInput', /shards/],
    [['create', 'cli.half', '--shards', '2.5'], 'InvalidInput', /shards/],
    [['create', 'cli.novalue', '--shards'], 'Usage', /shards/],
    [['drop', 'cli.keep', '-r=-5'], 'InvalidInput', /retentionSeconds/],
    [['drop', 'cli.keep', '--reserve-seconds=-5'], 'InvalidInput', /retentionSeconds/],
    [['drop', 'cli.keep', '--drain-timeout', '0'], 'InvalidInput', /drainTimeoutSeconds/],
    [['create', 'cli.cols', '--columns', 'id int'], 'InvalidInput', /columns and like are for the postgres and mariadb storage drivers/],
    [['create', 'cli.both', '--columns', 'id int', '--like', 'a.b'], 'InvalidInput', /columns or like, not both/],
    [['adopt', 'cli.legacy'], 'InvalidInput', /adopt is for the postgres and mariadb storage drivers/],
    [['adopt', 'cli.legacy', '--node', 'one'], 'InvalidInput', /node: a storage node is node-<k>/],
    [['adopt'], 'Usage', /adopt: expected 1 argument/],
    [['trash', '../x'], 'InvalidInput'],
    [['recall', 'cli.a;drop'], 'InvalidInput', /"a;drop"/],
    [['recall', String(binned!.id), 'cli.ta-ble'], 'InvalidInput', /newName/],
    [['undelete', '0'], 'InvalidInput', /not a valid table id/],
    [['purge', '0'], 'InvalidInput', /tableId/],
    [['purge', 'cli.binned'], 'InvalidInput', /tableId: "cli.binned" is not a table id: a table id is a positive whole number/],
    [['describe', ''], 'InvalidInput'],
    [['frobnicate'], 'Usage', /unknown command "frobnicate"/],
    [['ls', '--bogus'], 'Usage', /--bogus/],
    [['create'], 'Usage', /create: expected 1 argument\(s\), got 0/],
    [['recall'], 'Usage', /recall: expected 1 to 2 argument/],
    [['purge'], 'Usage', /purge: give a table id, or --all/],
    [['recall', String(binned!.id), 'cli.a', 'cli.b'], 'Usage', /got 3/],
    [['create', 'cli.hurry', '--timeout', '0'], 'InvalidInput', /--timeout must be a number of seconds above 0 .*not "0"/],
    [['drop', 'cli.keep', '--timeout', 'soon'], 'InvalidInput', /--timeout .*not "soon"/],
    [['recall', String(binned!.id), '--timeout', '86401'], 'InvalidInput', /at most 86400/],
    [['purge', String(binned!.id), '--timeout=-1'], 'InvalidInput', /--timeout .*not "-1"/],
    [['ls', '--timeout', '1e3'], 'InvalidInput', /--timeout/],
    [['ls', '--limit', '0'], 'InvalidInput', /limit/],
    [['ls', '--limit', 'ten'], 'InvalidInput', /limit/],
    [['ls', '--after', 'cli.keep'], 'InvalidInput', /after/],
    [['describe', 'cli.keep', '--timeout'], 'Usage', /--timeout/],
    [['rename', 'cli.keep'], 'Usage', /rename: expected 2 argument\(s\), got 1/],
    [['rename', 'cli.keep', 'cli.a;drop'], 'InvalidInput', /newName: .*"a;drop"/],
    [['rename', 'cli.ta-ble', 'cli.x'], 'InvalidInput', /table: .*"ta-ble"/],
    [['rename', 'cli.keep', 'cli.x', '--timeout', '0'], 'InvalidInput', /--timeout/],
  ];
  const results = await inProcessAll(...cases.map(([args]) => args));
  expect(results.map(failure)).toEqual(
    cases.map(([args, kind, message = /./]) => ({
      args,
      code: 2,
      stdout: '',
      stderr: [matching(new RegExp(`^tablefate: ${kind}: .*${message.source}`))],
    })),
  );

  // With --json, the error is a single-line JSON object {error, message} on stderr.
  const jsonCases: Array<[args: string[], error: string]> = [
    [['create', '../x', '--json'], 'InvalidInput'],
    [['frobnicate', '--json'], 'Usage'],
    [['ls', '--bogus', '--json'], 'Usage'],
    [['drop', 'cli.keep', '--reserve-seconds=-5', '--json'], 'InvalidInput'],
  ];
  const jsonResults = await cliAll(...jsonCases.map(([args]) => args));
  expect(jsonResults.map((r) => ({ ...failure(r), stderr: r.stderrLines.map((line) => JSON.parse(line) as unknown) }))).toEqual(
    jsonCases.map(([args, error]) => ({ args, code: 2, stdout: '', stderr: [{ error, message: anyValue(String) }] })),
  );

  const [tablesAfter, keepAfter, binnedAfter] = await inProcessAll(
    ['ls', '-a', '--json'],
    ['describe', 'cli.keep', '--json'],
    ['describe', String(binned!.id), '--json'],
  );
  expect(tablesOf(tablesAfter!)).toEqual(tablesBefore);
  expect(tableOf(keepAfter!)).toEqual({ ...keep, bytes: anyValue(Number) });
  expect(tableOf(binnedAfter!)).toMatchObject({ id: binned!.id, state: 'TRASHED' });
  expect(await settledWorkflowCount()).toBe(workflowsBefore);
});

test('the Pegasus walk-through: create two, drop one, ls hides it, ls -a shows it, recall it under a new name', async () => {
  const temp = tableOf(await cli('create', 'cli.temp', '--shards', '8', '--json'));
  const mytable = tableOf(await cli('create', 'cli.mytable', '--shards', '8', '--json'));
  expect(mytable.id).toBeGreaterThan(temp.id);

  const dropped = tableOf(await cli('drop', 'cli.mytable', '-r', '3600', '--json'));
  expect(dropped).toMatchObject({ id: mytable.id, state: 'TRASHED', droppedAt: anyValue(String), expireAt: anyValue(String) });
  expect(Date.parse(dropped.expireAt!) - Date.parse(dropped.droppedAt!)).toBe(3600 * 1000);

  const [live, all, allText, byName] = await cliAll(['ls', '--json'], ['ls', '-a', '--json'], ['ls', '-a'], ['describe', 'cli.mytable']);
  const liveTables = tablesOf(live!);
  expect(liveTables.map((t) => t.id)).toContain(temp.id);
  expect(liveTables.map((t) => t.id)).not.toContain(mytable.id);
  expect(liveTables.every((t) => t.state === 'READY')).toBe(true);
  const allTables = tablesOf(all!);
  expect(allTables.find((t) => t.id === mytable.id)).toEqual({ ...dropped, bytes: anyValue(Number) });

  // The same list as aligned columns: one row per table, in the same order, every cell under its header.
  expect({ code: allText!.code, stderr: allText!.stderr }).toEqual({ code: 0, stderr: '' });
  const { header, rows } = parseColumns(allText!.stdout);
  expect(rows).toEqual(allTables.map(rowFor));
  const trashedRow = allText!.stdout.split('\n').find((line) => line.startsWith(`${mytable.id} `))!;
  expect(trashedRow.indexOf('TRASHED')).toBe(header.indexOf('STATE'));
  expect(trashedRow.indexOf(dropped.expireAt!)).toBe(header.indexOf('EXPIRES'));

  expectFailure(byName!, 3, 'TableInTrash', new RegExp(`in the trash, id ${mytable.id}$`));

  // The same listing a page at a time; a full page tells a person (not --json) how to ask for the next.
  const ids = allTables.map((t) => t.id);
  const [first, firstText, rest] = await cliAll(
    ['ls', '-a', '--limit', '1', '--json'],
    ['ls', '-a', '--limit', '1'],
    ['ls', '-a', '--after', String(ids[0]), '--json'],
  );
  expect(tablesOf(first!).map((t) => t.id)).toEqual([ids[0]]);
  expect(parseColumns(firstText!.stdout).rows).toEqual([rowFor(allTables[0]!)]);
  expect(firstText!.stderr).toBe(`more may follow: tablefate ls -a --limit 1 --after ${ids[0]}\n`);
  expect(tablesOf(rest!).map((t) => t.id)).toEqual(ids.slice(1));

  const recalled = tableOf(await cli('recall', String(mytable.id), 'cli.mytable2', '--json'));
  expect(recalled).toMatchObject({ id: mytable.id, namespace: 'cli', name: 'mytable2', state: 'READY', droppedAt: null, expireAt: null });

  const [liveAfter, liveText, oldName, newName] = await cliAll(
    ['ls', '--json'],
    ['ls'],
    ['describe', 'cli.mytable'],
    ['describe', 'cli.mytable2', '--json'],
  );
  const after = tablesOf(liveAfter!);
  expect(after.filter((t) => t.id === temp.id || t.id === mytable.id)).toEqual([
    like({ id: temp.id, name: 'temp', state: 'READY' }),
    like({ id: mytable.id, name: 'mytable2', state: 'READY' }),
  ]);
  expect(parseColumns(liveText!.stdout).rows).toEqual(after.map(rowFor));
  expectFailure(oldName!, 3, 'TableNotFound', /cli\.mytable does not exist/);
  expect(tableOf(newName!)).toEqual({ ...recalled, bytes: anyValue(Number) });
});

test('who dropped a table: the identity of the client that dropped it, in describe, ls -a (BY) and --json; a recall clears it', async () => {
  // A service's SDK client with an identity of its own, on the catalog and task queue the CLI's worker serves.
  const catalog = await openCatalog(catalogLocation(undefined, home), { mustExist: true });
  const alice = new TableFateClient({ client: temporal, catalog, identity: 'alice@test' });
  try {
    const table = tableOf(await cli('create', 'cli.whodunit', '--json'));
    expect(table.droppedBy).toBeNull();
    const dropped = await alice.trash({ table: 'cli.whodunit', retentionSeconds: 3600 });
    expect(dropped).toMatchObject({ id: table.id, state: 'TRASHED', droppedBy: 'alice@test' });

    const [all, allText, described, describedJson] = await cliAll(
      ['ls', '-a', '--json'],
      ['ls', '-a'],
      ['describe', String(table.id)],
      ['describe', String(table.id), '--json'],
    );
    const allTables = tablesOf(all!);
    expect(allTables.find((t) => t.id === table.id)).toEqual({ ...dropped, bytes: anyValue(Number) });
    const { rows } = parseColumns(allText!.stdout);
    expect(rows).toEqual(allTables.map(rowFor));
    expect(rows.find((r) => r.ID === String(table.id))).toMatchObject({ STATE: 'TRASHED', DROPPED: dropped.droppedAt!, BY: 'alice@test' });
    expect({ code: described!.code, stderr: described!.stderr }).toEqual({ code: 0, stderr: '' });
    expect(described!.stdout).toMatch(new RegExp(`^dropped {5}${dropped.droppedAt!.replace(/\./g, '\\.')}\ndropped by  alice@test$`, 'm'));
    expect(tableOf(describedJson!)).toEqual({ ...dropped, bytes: anyValue(Number) });

    // Recalled, nobody dropped it; dropped by the command line, it is who ran the command (user@host).
    expect(tableOf(await cli('recall', String(table.id), '--json'))).toMatchObject({ state: 'READY', droppedAt: null, droppedBy: null });
    expect(tableOf(await cli('drop', 'cli.whodunit', '-r', '3600', '--json'))).toMatchObject({
      state: 'TRASHED',
      droppedBy: defaultIdentity(),
    });
    expect(tableOf(await inProcess('describe', String(table.id), '--json')).droppedBy).toBe(defaultIdentity());
  } finally {
    await catalog.close();
  }
});

test('drop and recall have aliases (trash, undelete); drop keeps a table 7 days by default; recall by name', async () => {
  const table = tableOf(await inProcess('create', 'cli.aliased', '--shards', '2', '--json'));
  const trashed = tableOf(await cli('trash', 'cli.aliased', '--json'));
  expect(trashed).toMatchObject({ id: table.id, state: 'TRASHED' });
  expect(Date.parse(trashed.expireAt!) - Date.parse(trashed.droppedAt!)).toBe(SEVEN_DAYS_MS);

  const [again, notFound] = await cliAll(['drop', 'cli.aliased'], ['undelete', 'cli.never_trashed']);
  expectFailure(again!, 3, 'TableInTrash', new RegExp(`in the trash, id ${table.id}$`));
  expectFailure(notFound!, 3, 'TableNotFound', /cli\.never_trashed/);

  const restored = tableOf(await cli('undelete', 'cli.aliased', '--json'));
  expect(restored).toMatchObject({ id: table.id, name: 'aliased', state: 'READY', droppedAt: null, expireAt: null });

  const retrashed = tableOf(await cli('drop', 'cli.aliased', '--reserve-seconds', '7200', '--json'));
  expect(Date.parse(retrashed.expireAt!) - Date.parse(retrashed.droppedAt!)).toBe(7200 * 1000);
  expect(tableOf(await cli('recall', 'cli.aliased', '--json'))).toMatchObject({ id: table.id, state: 'READY' });
});

test('not found and in-trash exit 3; name taken and wrong state exit 4', async () => {
  const [describeName, describeId, drop, purge] = await cliAll(
    ['describe', 'cli.nope'],
    ['describe', '999999'],
    ['drop', 'cli.nope'],
    ['purge', '999999'],
  );
  expectFailure(describeName!, 3, 'TableNotFound', /cli\.nope/);
  expectFailure(describeId!, 3, 'TableNotFound', /999999/);
  expectFailure(drop!, 3, 'TableNotFound', /cli\.nope/);
  expectFailure(purge!, 3, 'TableNotFound', /999999/);

  // A trashed name can be created again; recalling the old table into it is NameTaken, and leaves it in the trash.
  const first = tableOf(await inProcess('create', 'cli.taken', '--json'));
  tableOf(await inProcess('drop', 'cli.taken', '-r', '3600', '--json'));
  const second = tableOf(await inProcess('create', 'cli.taken', '--json'));
  expect(second.id).toBeGreaterThan(first.id);

  // One recall of a table at a time (undelete:<id>, conflict policy FAIL): these two one after the other.
  expectFailure(await cli('recall', String(first.id)), 4, 'NameTaken', /cli\.taken/);
  const [takenJson, recallLive, purgeLive] = await cliAll(
    ['recall', String(first.id), '--json'],
    ['recall', String(second.id)],
    ['purge', String(second.id)],
  );
  expect({ code: takenJson!.code, stdout: takenJson!.stdout, stderr: takenJson!.stderrLines.map((l) => JSON.parse(l) as unknown) }).toEqual(
    {
      code: 4,
      stdout: '',
      stderr: [{ error: 'NameTaken', message: containing('cli.taken') }],
    },
  );
  expectFailure(recallLive!, 4, 'WrongState', /READY/);
  expectFailure(purgeLive!, 4, 'WrongState', /READY/);

  const [firstAfter, secondAfter] = await inProcessAll(['describe', String(first.id), '--json'], ['describe', 'cli.taken', '--json']);
  expect(tableOf(firstAfter!)).toMatchObject({ id: first.id, state: 'TRASHED' });
  expect(tableOf(secondAfter!)).toMatchObject({ id: second.id, state: 'READY' });
  expect(tableOf(await cli('recall', String(first.id), 'cli.taken_old', '--json'))).toMatchObject({
    id: first.id,
    name: 'taken_old',
    state: 'READY',
  });
});

test('rename: by name and by id, --json or text; the old name is free, and each refusal has its exit code', async () => {
  const table = tableOf(await inProcess('create', 'cli.before', '--shards', '2', '--json'));
  const renamed = tableOf(await cli('rename', 'cli.before', 'cli.after', '--timeout', '30', '--json'));
  expect(renamed).toEqual({ ...table, name: 'after' });
  const text = await cli('rename', String(table.id), 'cli.renamed');
  expect({ code: text.code, stderr: text.stderr }).toEqual({ code: 0, stderr: '' });
  expect(text.stdout).toMatch(/^name +cli\.renamed$/m);

  const [binned] = (await inProcessAll(['create', 'cli.rbinned', '--json'], ['create', 'cli.rtaken', '--json'])).map(tableOf);
  tableOf(await inProcess('drop', 'cli.rbinned', '-r', '3600', '--json'));
  const [oldName, missing, taken, inTrash, trashedById] = await cliAll(
    ['describe', 'cli.before'],
    ['rename', 'cli.nowhere', 'cli.x'],
    ['rename', 'cli.renamed', 'cli.rtaken'],
    ['rename', 'cli.rbinned', 'cli.x'],
    ['rename', String(binned!.id), 'cli.x'],
  );
  // (After the other rename of this table: one rename of a table runs at a time, and a second is refused meanwhile.)
  const takenJson = await cli('rename', String(table.id), 'cli.rtaken', '--json');
  expectFailure(oldName!, 3, 'TableNotFound', /cli\.before does not exist/);
  expectFailure(missing!, 3, 'TableNotFound', /cli\.nowhere/);
  expectFailure(taken!, 4, 'NameTaken', /cli\.rtaken/);
  expectFailure(inTrash!, 3, 'TableInTrash', new RegExp(`id ${binned!.id}$`));
  expectFailure(trashedById!, 4, 'WrongState', /TRASHED; only a READY table can be renamed/);
  expect({ code: takenJson.code, stdout: takenJson.stdout, stderr: JSON.parse(takenJson.stderr) as unknown }).toEqual({
    code: 4,
    stdout: '',
    stderr: { error: 'NameTaken', message: containing('cli.rtaken') },
  });
  expect(tableOf(await inProcess('describe', String(table.id), '--json'))).toEqual({ ...table, name: 'renamed', bytes: anyValue(Number) });
});

test('purge: refused for a READY table; of a dropped one, leaves a PURGED tombstone that describe shows and ls -a does not', async () => {
  const table = tableOf(await inProcess('create', 'cli.doomed', '--shards', '2', '--json'));
  expectFailure(await cli('purge', String(table.id)), 4, 'WrongState', /READY/);
  expect(tableOf(await inProcess('describe', String(table.id), '--json')).state).toBe('READY');

  tableOf(await inProcess('drop', 'cli.doomed', '-r', '3600', '--json'));
  const purged = tableOf(await cli('purge', String(table.id), '--json'));
  expect(purged).toMatchObject({ id: table.id, state: 'PURGED', purgedAt: matching(ISO_8601) });

  const [described, all, again, recall] = await cliAll(
    ['describe', String(table.id), '--json'],
    ['ls', '-a', '--json'],
    ['purge', String(table.id), '--json'],
    ['recall', String(table.id)],
  );
  expect(tableOf(described!)).toMatchObject({ id: table.id, name: 'doomed', state: 'PURGED', purgedAt: purged.purgedAt });
  expect(tablesOf(all!).map((t) => t.id)).not.toContain(table.id);
  // Purging a purged table is not an error: it answers with the tombstone.
  expect(tableOf(again!)).toEqual(purged);
  expectFailure(recall!, 3, 'TableNotFound', new RegExp(`table ${table.id}`));
  // The name is free again.
  expect(tableOf(await inProcess('create', 'cli.doomed', '--json')).id).toBeGreaterThan(table.id);
});

describe('strict parsing', () => {
  test('an option parse error is still one line on stderr (drop -r -5)', async () => {
    tableOf(await cli('create', 'cli.bugs', '--json'));
    const r = await inProcess('drop', 'cli.bugs', '-r', '-5');
    expect(r.code).toBe(2);
    expect(r.stderrLines).toHaveLength(1);
  });

  test('purge takes only a decimal id, like describe and recall (0x1, 1e0 and " 1" are not ids)', async () => {
    const keep = tableOf(await cli('create', 'cli.bugs', '--json'));
    expect(keep.state).toBe('READY');
    const results = await inProcessAll(
      ['purge', `0x${keep.id.toString(16)}`],
      ['purge', `${keep.id}e0`],
      ['purge', ` ${keep.id}`],
      ['describe', `0x${keep.id.toString(16)}`],
    );
    expect(results.map((r) => r.code)).toEqual([2, 2, 2, 2]);
  });
});

test('with no catalog in TABLEFATE_HOME, ls, describe and the writes exit 6 with one CatalogNotFound line naming the path, and make no catalog', async () => {
  const empty = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-nocatalog-'));
  const missing = path.join(empty, 'not-there');
  try {
    for (const dir of [empty, missing]) {
      const commands = [
        ['ls'],
        ['ls', '-a', '--json'],
        ['describe', 'cli.x'],
        ['describe', '1'],
        ['create', 'cli.x'],
        ['drop', 'cli.x'],
        ['purge', '1'],
      ];
      // In-process, but for the first command of the first directory: one real process shows the same wiring.
      const dirEnv = { env: { ...env, TABLEFATE_HOME: dir } };
      const results =
        dir === empty
          ? [await runCli(commands[0]!, dirEnv), ...(await runCliAllInProcess(commands.slice(1), dirEnv))]
          : await runCliAllInProcess(commands, dirEnv);
      const message =
        `no tablefate catalog at ${catalogPath(dir)} (TABLEFATE_HOME=${dir}); a worker makes it on its first start: ` +
        'point TABLEFATE_CATALOG_URL (or TABLEFATE_HOME) at the catalog of a worker, or start one with `tablefate worker` (or `tablefate dev`)';
      expect(results.map(failure)).toEqual(
        commands.map((args) => ({
          args,
          code: 6,
          stdout: '',
          stderr: [
            args.includes('--json') ? JSON.stringify({ error: 'CatalogNotFound', message }) : `tablefate: CatalogNotFound: ${message}`,
          ],
        })),
      );
    }
    // Nothing was made in its place: no catalog file, not even the directory.
    expect(await fs.promises.readdir(empty)).toEqual([]);
  } finally {
    await fs.promises.rm(empty, { recursive: true, force: true });
  }
});

test('--timeout on a write that answers in time changes nothing about the answer', async () => {
  const created = tableOf(await cli('create', 'cli.timely', '--shards', '2', '--timeout', '30', '--json'));
  expect(created).toMatchObject({ name: 'timely', state: 'READY', shards: 2 });
  expect(tableOf(await cli('drop', 'cli.timely', '-r', '3600', '--timeout', '30', '--json'))).toMatchObject({
    id: created.id,
    state: 'TRASHED',
  });
  expect(tableOf(await cli('recall', String(created.id), '--timeout', '29.5', '--json'))).toMatchObject({ id: created.id, state: 'READY' });
  const [listed, described] = await cliAll(['ls', '--timeout', '5', '--json'], ['describe', 'cli.timely', '--timeout', '5', '--json']);
  expect(tablesOf(listed!).map((t) => t.id)).toContain(created.id);
  expect(tableOf(described!)).toMatchObject({ id: created.id, state: 'READY' });
});
