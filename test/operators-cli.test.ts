import fs from 'node:fs';
import { Client, Connection } from '@temporalio/client';
import { jsonOf, runCli, runCliInProcess, type CliProcess, type CliResult } from './support/cli';
import { cliTestHome, ensureNamespace, startCliWorker } from './support/cli-worker';
import { testServerAddress } from './support/test-server';
import { failureOf, waitFor } from './support/wait';
import { defaultIdentity, TableFateClient, type TableHistory } from '../client/client';
import { catalogLocation, openCatalog } from '../catalog/open';
import { InvalidInputError } from '../domain/errors';
import type { LeaseInfo } from '../domain/leases';
import type { OperationInfo } from '../domain/operation-runs';
import type { TableInfo } from '../domain/table';

/*
 * What an operator asks of tablefate about its operations, from the command line: `ops` (the operations, newest first,
 * from Temporal's visibility), `history` (one table's life), `cancel` (a running operation taken back), and the progress
 * a drop that drains shows on a terminal; and the SDK's identity, which `history` names. Against a `tablefate worker`
 * (a child process) in a Temporal namespace of this file's own, so that its `tablefate` task queue is not the one
 * test/cli.test.ts's worker polls and visibility lists this file's runs alone; the reconcile schedule is off, and every
 * retention long enough that no expiry fires while the file runs. Most commands run in this process (cli/main.ts's
 * `main`, what a person sees of it); the cancels, whose exit codes a shell sees, in a real process.
 */

const NAMESPACE = 'tablefate-operators-cli-test';
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let home: string;
let env: NodeJS.ProcessEnv;
let connection: Connection | undefined;
let temporal: Client;
let worker: CliProcess | undefined;
/** Who the command line's runs are started by: this process's user at this host, as the CLI's client says by default. */
const me = defaultIdentity();

const cli = (...args: string[]) => runCli(args, { env });
const inProcess = (...args: string[]) => runCliInProcess(args, { env });

// Jest's asymmetric matchers are typed `any`; typed `unknown` they can sit in an expected value lint-clean.
const matching = (pattern: RegExp): unknown => expect.stringMatching(pattern);
const like = (object: Record<string, unknown>): unknown => expect.objectContaining(object);
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

beforeAll(async () => {
  ({ home, env } = await cliTestHome('operators', NAMESPACE));
  connection = await Connection.connect({ address: testServerAddress() });
  temporal = new Client({ connection, namespace: NAMESPACE });
  await ensureNamespace(connection, NAMESPACE);
  worker = await startCliWorker(connection, env);
});

afterAll(async () => {
  try {
    if (worker && !worker.exitStatus) {
      const exit = await worker.stop('SIGINT');
      expect({ exit, stderr: worker.stderr }).toEqual({ exit: { code: 0, signal: null }, stderr: worker.stderr });
    }
  } finally {
    await connection?.close();
    if (home) await fs.promises.rm(home, { recursive: true, force: true });
  }
});

/** What a person (or a script) sees of a command. */
const seen = (r: CliResult) => ({ args: r.args, code: r.code, stdout: r.stdout, stderr: r.stderrLines });

function expectOk(r: CliResult) {
  expect({ args: r.args, code: r.code, stderr: r.stderr }).toEqual({ args: r.args, code: 0, stderr: '' });
}

/** Asserts a command failed with `code` and exactly one stderr line `tablefate: <kind>: <message>`, and printed nothing. */
function expectFailure(r: CliResult, code: number, kind: string, message: RegExp = /./) {
  expect(seen(r)).toEqual({ args: r.args, code, stdout: '', stderr: [matching(new RegExp(`^tablefate: ${kind}: .*${message.source}`))] });
}

function okJson<T>(r: CliResult): T {
  expectOk(r);
  return jsonOf<T>(r);
}

/** Aligned columns: the header's names, and each row as header -> cell (every cell starts under its header). */
function parseColumns(text: string): { columns: string[]; rows: Array<Record<string, string>> } {
  const [header, ...rows] = text.replace(/\n$/, '').split('\n');
  const columns = [...header!.matchAll(/\S+/g)].map((m) => ({ name: m[0], at: m.index }));
  return {
    columns: columns.map((c) => c.name),
    rows: rows.map((row) => {
      for (const { name, at } of columns.slice(1)) {
        expect({ row, column: name, before: row[at - 1], at: row[at] }).toEqual({ row, column: name, before: ' ', at: matching(/\S/) });
      }
      return Object.fromEntries(columns.map(({ name, at }, i) => [name, row.slice(at, columns[i + 1]?.at).trim()]));
    }),
  };
}

/** One table as `describe` prints it: a field per line. */
function fieldsOf(text: string): Record<string, string> {
  const lines = text.trimEnd().split('\n');
  const valueAt = lines[0]!.search(/ {2}\S/) + 2;
  return Object.fromEntries(lines.map((line) => [line.slice(0, valueAt).trim(), line.slice(valueAt)]));
}

const createTable = async (name: string) => okJson<TableInfo>(await inProcess('create', name, '--shards', '2', '--json'));
const historyOf = async (table: string | number) => okJson<TableHistory>(await inProcess('history', String(table), '--json'));
const opsJson = async (...args: string[]) => okJson<OperationInfo[]>(await inProcess('ops', ...args, '--json'));

/** `what` as visibility shows it once every run listed has closed (visibility follows the histories by a moment). */
const closedHistory = (table: string | number, runs: number) =>
  waitFor(
    () => historyOf(table),
    (h) => h.operations.length === runs && h.operations.every((o) => o.status !== 'RUNNING'),
    { what: `${runs} closed runs in the history of table ${table}`, timeoutMs: 15_000 },
  );

/** The catalog's identity, as every workflow id of its runs ends with it. */
const catalogOf = (workflowId: string) => workflowId.slice(workflowId.lastIndexOf('@') + 1);

test("ops and history show every run of a table's life (create, drop, recall, rename, drop, purge), newest first, with how each ended and who started it", async () => {
  const table = await createTable('ops.life');
  const { id } = table;
  expectOk(await inProcess('drop', 'ops.life', '-r', '3600'));
  expectOk(await inProcess('recall', String(id)));
  expectOk(await inProcess('rename', String(id), 'ops.life2'));
  expectOk(await inProcess('drop', 'ops.life2', '-r', '3600'));
  expectOk(await inProcess('purge', String(id)));

  // Every drop's run closed once its table was TRASHED (the expiry runs the drops started are no operations: not
  // listed). A purged table's id still answers.
  const history = await closedHistory(id, 6);
  const catalog = catalogOf(history.operations[0]!.workflowId);
  expect(catalog).toMatch(/^[0-9a-f-]{8,}$/);
  expect(history.table).toMatchObject({ id, namespace: 'ops', name: 'life2', state: 'PURGED', purgedAt: matching(ISO_8601) });
  // Newest first: what, on which name, how it ended, who started it, under which workflow id.
  expect(history.operations.map((o) => [o.operation, o.table, o.status, o.startedBy, o.workflowId])).toEqual([
    ['purge', 'ops.life2', 'COMPLETED', me, `purge:${id}@${catalog}`],
    ['trash', 'ops.life2', 'COMPLETED', me, `drop:${id}@${catalog}`],
    ['rename', 'ops.life2', 'COMPLETED', me, `rename:${id}@${catalog}`],
    ['undelete', 'ops.life', 'COMPLETED', me, `undelete:${id}@${catalog}`],
    ['trash', 'ops.life', 'COMPLETED', me, `drop:${id}@${catalog}`],
    ['create', 'ops.life', 'COMPLETED', me, `create:ops.life@${catalog}`],
  ]);
  for (const [i, o] of history.operations.entries()) {
    expect(o).toMatchObject({ tableId: id, startedAt: matching(ISO_8601), closedAt: matching(ISO_8601), currentStep: null });
    expect(Date.parse(o.closedAt!)).toBeGreaterThanOrEqual(Date.parse(o.startedAt));
    // Each started after the one below it.
    const older = history.operations[i + 1];
    if (older) expect(Date.parse(o.startedAt)).toBeGreaterThan(Date.parse(older.startedAt));
  }

  // As a person reads it: what the catalog says of the table now, then the runs, aligned.
  const text = await inProcess('history', String(id));
  expectOk(text);
  const [head, blank, ...rest] = text.stdout.trimEnd().split('\n');
  expect([head, blank]).toEqual([`table ${id} ops.life2: PURGED at ${history.table.purgedAt} (a tombstone)`, '']);
  const runs = parseColumns(rest.join('\n'));
  expect(runs.columns).toEqual(['STARTED', 'OPERATION', 'NAME', 'STATUS', 'CLOSED', 'BY', 'WORKFLOW', 'STEP']);
  expect(runs.rows).toEqual(
    history.operations.map((o) => ({
      STARTED: o.startedAt,
      OPERATION: o.operation,
      NAME: o.table,
      STATUS: o.status,
      CLOSED: o.closedAt,
      BY: me,
      WORKFLOW: o.workflowId,
      STEP: '-',
    })),
  );

  // `ops` of that table is the same list; of all, at most --limit, the newest (this file's runs are the namespace's).
  expect(await opsJson('--table', String(id))).toEqual(history.operations);
  expect(await opsJson('--limit', '2')).toEqual(history.operations.slice(0, 2));
  // By name, a purged table is not found: its id answers.
  expectFailure(await inProcess('history', 'ops.life2'), 3, 'TableNotFound', /no live or trashed table is named ops\.life2 .*by its id/);
  expectFailure(await inProcess('ops', '--limit', '0'), 2, 'InvalidInput', /limit/);
});

test("ops --running lists only the runs going on, not a drop done nor its trash's expiry; a cancel of that expiry is refused, naming purge and recall, and changes nothing", async () => {
  const table = await createTable('ops.kept');
  const trashed = okJson<TableInfo>(await inProcess('drop', 'ops.kept', '-r', '3600', '--json'));
  const { id } = table;

  // The drop's run ended once the table was TRASHED; the trash's expiry goes on in a run of its own, which is no
  // operation: nothing of this namespace is going on.
  const ops = await waitFor(
    () => opsJson('--table', String(id)),
    (found) => found.length === 2 && found.every((o) => o.status !== 'RUNNING'),
    { what: 'the drop listed closed', timeoutMs: 15_000 },
  );
  const drop = ops[0]!;
  expect(drop).toMatchObject({
    operation: 'trash',
    tableId: id,
    table: 'ops.kept',
    status: 'COMPLETED',
    closedAt: matching(ISO_8601),
    startedBy: me,
    workflowId: matching(new RegExp(`^drop:${id}@`)),
    currentStep: null,
  });
  expect(await opsJson('--running')).toEqual([]);
  const text = await inProcess('ops', '--running');
  expectOk(text);
  expect(parseColumns(text.stdout).rows).toEqual([]);

  // The trash's expiry, at trash:<id>: running, and saying until when the table is in the trash.
  const catalog = catalogOf(drop.workflowId);
  const expiryId = `trash:${id}@${catalog}`;
  const expiry = temporal.workflow.getHandle(expiryId);
  const detailsOf = () => expiry.query<{ currentDetails?: string }>('__temporal_workflow_metadata').then((m) => m.currentDetails ?? '');
  expect(await expiry.describe()).toMatchObject({ type: 'trashExpiry', status: { name: 'RUNNING' } });
  // (Its run begins a second after the drop.)
  const details = await waitFor(detailsOf, (d) => d !== '', { what: 'the expiry to say what it waits for' });
  expect(details).toMatch(new RegExp(`^table ${id} .*${escape(trashed.expireAt!)}`));

  // Refused: the trash is done, its expiry's run is what keeps the data. Exit 4, and the message says what ends a trash.
  const refused = await cli('cancel', expiryId);
  expectFailure(refused, 4, 'WrongState', new RegExp(`tablefate recall ${id}.*tablefate purge ${id}`));
  expect(refused.stderr).toMatch(/the table is TRASHED until/);
  // Nothing was cancelled: the run goes on, and never heard a cancel (it would say "cancel request ignored").
  expect((await expiry.describe()).status.name).toBe('RUNNING');
  expect(await detailsOf()).toBe(details);
  expect(await opsJson('--running')).toEqual([]);
  expect((await historyOf(id)).table).toEqual(trashed);
  // The drop, done: not running, nothing to cancel (exit 4).
  expectFailure(await cli('cancel', drop.workflowId), 4, 'WrongState', /is not running: it ended COMPLETED at/);
  expect((await historyOf(id)).table).toEqual(trashed);

  // No such run of this catalog (nor an id of another catalog): exit 3. A run that has closed: exit 4.
  expectFailure(await cli('cancel', `trash:999999@${catalog}`), 3, 'OperationNotFound', /no operation of this catalog runs or ran as/);
  expectFailure(await inProcess('cancel', `trash:${id}@another-catalog`), 3, 'OperationNotFound', new RegExp(`end in @${catalog}`));
  expectFailure(await inProcess('cancel', `create:ops.kept@${catalog}`), 4, 'WrongState', /is not running: it ended COMPLETED at/);
});

test('a cancel of a drop that waits for a lease takes it back: the table is READY again, the drop hears it was cancelled, the lease is still there', async () => {
  const table = await createTable('ops.leased');
  const lease = okJson<LeaseInfo>(await inProcess('lease', 'acquire', 'ops.leased', '--ttl', '600', '--holder', 'etl@host9', '--json'));

  // The drop waits for the lease (DRAINING) up to 300 s; on a terminal it says what it waits for.
  const dropOut: string[] = [];
  const dropErr: string[] = [];
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { main } = require('../cli/main') as typeof import('../cli/main');
  const dropping = main(['drop', 'ops.leased', '--drain-timeout', '300'], {
    env,
    out: (line) => dropOut.push(line),
    err: (line) => dropErr.push(line),
    errIsTTY: true,
  });
  await waitFor(
    () => Promise.resolve(dropErr),
    (lines) => lines.length > 0,
    { what: "the drop's progress on its terminal", timeoutMs: 15_000 },
  );
  expect(dropErr).toEqual([matching(new RegExp(`^drop: draining table ${table.id} until .*: lease ${lease.id} held by etl@host9 until`))]);
  const draining = okJson<TableInfo>(await inProcess('describe', String(table.id), '--json'));
  expect(draining.state).toBe('DRAINING');
  const [trashRun] = (await opsJson('--running')).filter((o) => o.tableId === table.id);
  expect(trashRun).toMatchObject({ operation: 'trash', status: 'RUNNING', currentStep: matching(/^draining table/) });
  expect(trashRun!.workflowId).toMatch(new RegExp(`^drop:${table.id}@`));
  // As a person reads it: the one run going on, with its step.
  const running = await inProcess('ops', '--running');
  expectOk(running);
  expect(parseColumns(running.stdout).rows).toEqual([
    expect.objectContaining({
      OPERATION: 'trash',
      TABLE: String(table.id),
      STATUS: 'RUNNING',
      CLOSED: '-',
      WORKFLOW: trashRun!.workflowId,
      STEP: trashRun!.currentStep,
    }),
  ]);

  // The cancel waits for the run to close, taken back, and prints the table as it is then.
  const cancelled = await cli('cancel', trashRun!.workflowId);
  expectOk(cancelled);
  expect(fieldsOf(cancelled.stdout)).toMatchObject({ id: String(table.id), name: 'ops.leased', state: 'READY', dropped: '-' });

  // The drop's caller hears the cancellation (exit 7), after its progress line, and printed no table. Between them it
  // may show the undo as progress, if its poll caught the run taking it back (a race with the run's end, so optional).
  expect(await dropping).toBe(7);
  const undoShown = dropErr.length === 3 ? ['drop: taking back: stop new leases'] : [];
  expect({ out: dropOut, err: dropErr }).toEqual({
    out: [],
    err: [
      dropErr[0],
      ...undoShown,
      matching(
        new RegExp(`^tablefate: WorkflowCancelled: workflow ${escape(trashRun!.workflowId)} was cancelled.*tablefate describe ${table.id}`),
      ),
    ],
  });
  // The worker's log says so, on a line that names the run, its table and the step it stopped at.
  const takingBack = worker!.stderr
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.msg === 'the operation stopped; taking back what it did' && line.workflowId === trashRun!.workflowId);
  expect(takingBack).toEqual([like({ tableId: table.id, table: 'ops.leased', step: 'wait for leases', undo: ['stop new leases'] })]);
  // The lease was never the drop's to end; the run shows as cancelled in the table's history.
  expect(okJson<LeaseInfo[]>(await inProcess('lease', 'ls', '--table', String(table.id), '--json'))).toEqual([lease]);
  expect(okJson<TableInfo>(await inProcess('describe', String(table.id), '--json')).state).toBe('READY');
  const history = await closedHistory(table.id, 3);
  expect(history.operations.map((o) => [o.operation, o.status])).toEqual([
    ['trash', 'CANCELLED'],
    ['lease', 'COMPLETED'],
    ['create', 'COMPLETED'],
  ]);
  // --json: the run, closed, and the table.
  expect(history.operations[0]).toMatchObject({ workflowId: trashRun!.workflowId, runId: trashRun!.runId });
});

test("the SDK: a client's identity is who history says started its runs, continued-as-new ones included; its cancel answers the run and the table", async () => {
  expect(() => new TableFateClient({ client: temporal, catalog: undefined as never, identity: '' })).toThrow(InvalidInputError);
  const catalog = await openCatalog(catalogLocation(undefined, home), { mustExist: true });
  // A lock wait that continues as new every second try: a run that waits shows as a chain of runs.
  const client = new TableFateClient({
    client: temporal,
    catalog,
    identity: 'billing-service@rack4',
    lockWait: { firstMs: 250, maxMs: 250, attemptsPerRun: 2 },
  });
  try {
    const table = await client.create({ table: 'ops.sdk', shards: 1 });
    const lease = await client.acquireLease(table.id, { ttlSeconds: 600 });
    // A drop that drains holds the table's lock; the hold asked meanwhile waits for it.
    const details: string[] = [];
    const dropping = failureOf(client.trash({ table: 'ops.sdk', drainTimeoutSeconds: 300 }, { onDetails: (d) => details.push(d) }));
    await waitFor(
      () => client.describe({ table: table.id }),
      (t) => t.state === 'DRAINING',
      { what: 'the table DRAINING' },
    );
    const holding = client.hold({ table: table.id, reason: 'audit 7' });
    const waited = await waitFor(
      () => client.operations({ table: table.id }),
      (ops) => ops.filter((o) => o.operation === 'hold' && o.status === 'CONTINUED_AS_NEW').length >= 2,
      { what: 'the hold continued as new twice while it waits', timeoutMs: 15_000 },
    );
    const trashRun = waited.find((o) => o.operation === 'trash')!;
    expect(trashRun).toMatchObject({ status: 'RUNNING', currentStep: matching(/^draining table/) });

    const outcome = await client.cancel({ workflowId: trashRun.workflowId });
    expect(outcome.operation).toMatchObject({ workflowId: trashRun.workflowId, operation: 'trash', status: 'CANCELLED' });
    expect(outcome.table).toMatchObject({ id: table.id, state: 'READY', droppedAt: null });
    expect(await dropping).toMatchObject({ type: 'WorkflowCancelled' });
    expect(details[0]).toMatch(new RegExp(`^draining table ${table.id} until .*lease ${lease.id}`));
    // Its lock released, the hold goes through.
    expect((await holding).hold).toMatchObject({ reason: 'audit 7' });

    const history = await waitFor(
      () => client.history({ table: 'ops.sdk' }),
      (h) => h.operations.every((o) => o.status !== 'RUNNING'),
      { what: 'every run closed in the history', timeoutMs: 15_000 },
    );
    const holds = history.operations.filter((o) => o.operation === 'hold');
    expect(holds.map((o) => o.status)).toEqual(['COMPLETED', ...holds.slice(1).map(() => 'CONTINUED_AS_NEW')]);
    expect(holds.length).toBeGreaterThanOrEqual(3);
    expect(history.operations.filter((o) => o.operation !== 'hold').map((o) => [o.operation, o.status])).toEqual([
      ['trash', 'CANCELLED'],
      ['lease', 'COMPLETED'],
      ['create', 'COMPLETED'],
    ]);
    // Every run is the client's, the continued ones too (a run continued as new keeps its memo).
    expect(new Set(history.operations.map((o) => o.startedBy))).toEqual(new Set(['billing-service@rack4']));
    const run = await temporal.workflow.getHandle(holds[0]!.workflowId).describe();
    expect(run.memo).toEqual({ startedBy: 'billing-service@rack4' });
    // A workflow id as typed is checked at the edge.
    await expect(client.cancel({ workflowId: 'no spaces allowed' })).rejects.toThrow(InvalidInputError);
  } finally {
    await client.close();
    await catalog.close();
  }
});
