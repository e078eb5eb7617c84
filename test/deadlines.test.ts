import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor, type ConnectionOptions } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { Harness } from './support/harness';
import { promptAndSlowHarnesses, RenameGate } from './support/rename-gate';
import { runCli, runCliAll, type CliResult } from './support/cli';
import { testNamespace, testServerAddress } from './support/test-server';
import { failureOf, waitFor } from './support/wait';
import { visibilityCaughtUp } from './support/runs';
import { NoWorkerError, OperationTimeoutError, ServerUnreachableError, TableFateClient, type TableInfo } from '../client';
import { SqliteCatalog } from '../catalog/sqlite';
import { catalogPath, TASK_QUEUE } from '../domain/deployment';
import { workflowIdFor } from '../domain/operations';
import { registerSearchAttributes } from '../servers/search-attributes';
import { DevServer } from '../servers/dev-server';

/*
 * Clients have deadlines: a write with no worker to run it fails at once, a write that takes too long gives up
 * at its deadline (the operation goes on, and the error says how to follow it), and a server that is not there
 * fails within a bounded time. Through the SDK against workers on the shared server, and through the command
 * line against a Temporal namespace of this file's own (the command line always uses the task queue
 * `tablefate`, so only a namespace of its own lets this file decide who polls it).
 */

let h: Harness;
/** A worker whose storage renames wait at `gate` while it is held: an operation as slow as a test needs. */
let slow: Harness;
const gate = new RenameGate();
const harnesses = promptAndSlowHarnesses(gate);
beforeAll(() => {
  h = harnesses.prompt();
  slow = harnesses.slow();
});

async function timed<T>(promise: Promise<T>): Promise<{ value: T; ms: number }> {
  const started = Date.now();
  const value = await promise;
  return { value, ms: Date.now() - started };
}

type Interceptor = NonNullable<ConnectionOptions['interceptors']>[number];

/** A TCP port nobody listens on (taken from the OS, then let go). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('the SDK', () => {
  test('a write past its timeoutMs throws OperationTimeoutError naming the running workflow, which then finishes on its own', async () => {
    const table = await slow.client.create({ table: 'late.trash', shards: 2 });
    const workflowId = workflowIdFor.trash(table.id, slow.catalog.id);
    gate.hold();
    let err: unknown;
    let ms: number;
    try {
      ({ value: err, ms } = await timed(
        failureOf(slow.client.trash({ table: 'late.trash', retentionSeconds: 3600 }, { timeoutMs: 1000 })),
      ));
      // Still half way when the call gave up: the deadline, not the operation, ended the call.
      expect(gate.waiting(table.id)).toBeGreaterThan(0);
    } finally {
      gate.open();
    }
    expect(err).toBeInstanceOf(OperationTimeoutError);
    expect(err).toMatchObject({ name: 'OperationTimeoutError', type: 'OperationTimeout', workflowId, timeoutMs: 1000, started: true });
    expect((err as Error).message).toBe(
      `trash of late.trash (id ${table.id}) did not finish within 1 s; it goes on in the background as workflow ${workflowId}: ` +
        `see where it is with \`tablefate describe ${table.id}\``,
    );
    expect(ms).toBeGreaterThanOrEqual(1000);
    expect(ms).toBeLessThan(2500);
    // It went on: once the disk answers, the trash finishes without anyone waiting for it.
    await waitFor(
      () => slow.client.describe({ table: table.id }),
      (t) => t.state === 'TRASHED',
      { what: 'the abandoned trash to finish' },
    );
  });

  test("the client's defaultTimeoutMs bounds every write that names no timeout (an undelete here)", async () => {
    const table = await slow.client.create({ table: 'late.recall', shards: 2 });
    await slow.client.trash({ table: 'late.recall', retentionSeconds: 3600 });
    const impatient = new TableFateClient({
      client: slow.temporal,
      catalog: slow.catalog,
      taskQueue: slow.taskQueue,
      defaultTimeoutMs: 800,
    });
    const progress: unknown[] = [];
    gate.hold();
    let err: unknown;
    let ms: number;
    let heard: number;
    try {
      ({ value: err, ms } = await timed(failureOf(impatient.undelete({ table: table.id }, { onProgress: (p) => progress.push(p) }))));
      heard = progress.length;
    } finally {
      gate.open();
    }
    expect(err).toBeInstanceOf(OperationTimeoutError);
    expect(err).toMatchObject({ timeoutMs: 800, workflowId: workflowIdFor.undelete(table.id, slow.catalog.id), started: true });
    expect((err as Error).message).toContain(`\`tablefate describe ${table.id}\``);
    expect(ms).toBeLessThan(2500);
    // The undelete goes on once the disk answers, its shards coming back one by one, to its end.
    await slow.temporal.workflow.getHandle(workflowIdFor.undelete(table.id, slow.catalog.id)).result();
    expect((await slow.client.describe({ table: table.id })).state).toBe('READY');
    // The progress reports stopped with the call: nothing was heard of the run's progress after it gave up.
    expect(progress).toHaveLength(heard);
  });

  test('with no worker polling its task queue, every write fails in about 2 s with NoWorkerError and starts nothing', async () => {
    const live = await h.client.create({ table: 'idle.live', shards: 1 });
    const binned = await h.client.create({ table: 'idle.binned', shards: 1 });
    await h.client.trash({ table: 'idle.binned', retentionSeconds: 3600 });
    // The same catalog, and a task queue nobody polls.
    const idle = await Harness.start({ home: h.home, startWorker: false });
    try {
      const tablesBefore = await idle.catalog.listTables({ includeTrashed: true });
      const writes: Array<[string, () => Promise<TableInfo>]> = [
        ['create', () => idle.client.create({ table: 'idle.new' })],
        ['trash', () => idle.client.trash({ table: 'idle.live' })],
        ['undelete', () => idle.client.undelete({ table: binned.id })],
        ['purge', () => idle.client.purge({ tableId: binned.id })],
      ];
      // At the same time: they share one question to the server, and its answer.
      const failures = await Promise.all(writes.map(([what, write]) => timed(failureOf(write())).then((r) => ({ what, ...r }))));
      for (const { what, value: err, ms } of failures) {
        expect({ what, err }).toEqual({ what, err: expect.any(NoWorkerError) as unknown });
        expect(err).toMatchObject({ type: 'NoWorker', taskQueue: idle.taskQueue, namespace: testNamespace(), address: idle.address });
        expect((err as Error).message).toBe(
          `no tablefate worker is polling task queue ${idle.taskQueue} in namespace ${testNamespace()} at ${idle.address}; ` +
            'start one with `tablefate worker` (or `tablefate dev`)',
        );
        // The 2 s a worker that has just started gets to poll, not the 60 s deadline.
        expect({ what, ms: ms < 5000 }).toEqual({ what, ms: true });
      }
      expect(await idle.catalog.listTables({ includeTrashed: true })).toEqual(tablesBefore);
      expect(await idle.catalog.listLocks()).toEqual([]);
      await visibilityCaughtUp(idle.temporal);
      expect((await idle.temporal.workflow.count(`TaskQueue = '${idle.taskQueue}'`)).count).toBe(0);

      // A read with sizes answers without them, as soon, and starts no run either.
      const { value: sized, ms } = await timed(idle.client.describe({ table: live.id, withSizes: true }));
      expect(sized).toMatchObject({ id: live.id, bytes: null });
      expect(ms).toBeLessThan(5000);
      await visibilityCaughtUp(idle.temporal);
      expect((await idle.temporal.workflow.count(`TaskQueue = '${idle.taskQueue}'`)).count).toBe(0);

      // "No worker" is not remembered: once one polls, the same client's writes go through.
      await idle.startWorker();
      expect(await idle.client.trash({ table: 'idle.live', retentionSeconds: 3600 })).toMatchObject({ id: live.id, state: 'TRASHED' });
    } finally {
      await idle.close();
    }
  });

  test('a burst of writes asks the server about workers once; the question costs about a millisecond here', async () => {
    let asked = 0;
    const connection = await Connection.connect({
      address: testServerAddress(),
      interceptors: [
        (options, nextCall) => {
          if (options.method_definition.path.endsWith('/DescribeTaskQueue')) asked++;
          return nextCall(options) as ReturnType<Interceptor>;
        },
      ],
    });
    try {
      const client = new TableFateClient({
        client: new Client({ connection, namespace: testNamespace() }),
        catalog: h.catalog,
        taskQueue: h.taskQueue,
      });
      const burst = await Promise.all([1, 2, 3, 4, 5].map((n) => client.create({ table: `burst.t${n}`, shards: 1 })));
      expect(burst.map((t) => t.state)).toEqual(['READY', 'READY', 'READY', 'READY', 'READY']);
      for (const n of [1, 2, 3]) await client.trash({ table: `burst.t${n}`, retentionSeconds: 3600 });
      expect(asked).toBe(1);

      // What the question costs (it is paid once per client every 10 s at most).
      const costs: number[] = [];
      for (let i = 0; i < 25; i++) {
        const started = performance.now();
        await connection.workflowService.describeTaskQueue({ namespace: testNamespace(), taskQueue: { name: h.taskQueue } });
        costs.push(performance.now() - started);
      }
      costs.sort((a, b) => a - b);
      const median = costs[Math.floor(costs.length / 2)]!;
      console.log(
        `DescribeTaskQueue: median ${median.toFixed(2)} ms, max ${costs[costs.length - 1]!.toFixed(2)} ms over ${costs.length} calls`,
      );
      expect(median).toBeLessThan(50);
    } finally {
      await connection.close();
    }
  });

  test('a Temporal server that is not there fails a write within about 5 s as ServerUnreachableError; reads still answer', async () => {
    const address = `127.0.0.1:${await closedPort()}`;
    const connection = Connection.lazy({ address, connectTimeout: '5s' });
    try {
      const client = new TableFateClient({
        client: new Client({ connection, namespace: 'default' }),
        catalog: h.catalog,
        taskQueue: h.taskQueue,
      });
      const { value: err, ms } = await timed(failureOf(client.create({ table: 'gone.t' })));
      expect(err).toBeInstanceOf(ServerUnreachableError);
      expect(err).toMatchObject({ type: 'ServerUnreachable', address });
      expect((err as Error).message).toMatch(
        new RegExp(`^cannot reach the Temporal server at ${address} \\(.+\\); is \`tablefate dev\` running\\?$`),
      );
      // About 5 s of asking, more on a busy machine (9.6 s seen in CI): the point is that it does not wait for
      // the 60 s deadline.
      expect(ms).toBeLessThan(20_000);
      expect(await client.list()).toEqual(await h.client.list());
    } finally {
      await connection.close();
    }
  });

  test('a server lost after the start is ServerUnreachableError that says the operation may go on, naming its workflow', async () => {
    // A server of this test's own, to stop while a create waits for its answer; a worker that polls and hangs.
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-lost-'));
    let server: DevServer | undefined = await DevServer.start({ stateDir: dir, headless: true, log: () => undefined });
    const taskQueue = `tablefate-lost-${randomUUID()}`;
    // The client gives up on an unavailable server after 3 tries rather than the SDK's 10 (about 20 s).
    const connection = await Connection.connect({
      address: server.address,
      interceptors: [makeGrpcRetryInterceptor(defaultGrpcRetryOptions({ maxAttempts: 3 }))],
    });
    const catalog = new SqliteCatalog(catalogPath(path.join(dir, 'home')));
    const abort = new AbortController();
    try {
      const hung = connection.withDeadline(Date.now() + 60_000, () =>
        connection.withAbortSignal(abort.signal, () =>
          connection.workflowService.pollWorkflowTaskQueue({
            namespace: 'default',
            taskQueue: { name: taskQueue },
            identity: 'hung-worker',
          }),
        ),
      );
      hung.catch(() => undefined);
      const client = new TableFateClient({ client: new Client({ connection, namespace: 'default' }), catalog, taskQueue });
      const workflowId = workflowIdFor.create({ namespace: 'lost', name: 't' }, catalog.id);
      const call = timed(failureOf(client.create({ table: 'lost.t', shards: 1 }, { timeoutMs: 120_000 })));
      expect((await hung).workflowExecution?.workflowId).toBe(workflowId); // started, and waiting for its answer
      await server.stop();
      server = undefined;

      const { value: err, ms } = await call;
      expect(err).toBeInstanceOf(ServerUnreachableError);
      expect(err).toMatchObject({ type: 'ServerUnreachable', mayHaveStarted: true, workflowId });
      expect((err as Error).message).toMatch(
        new RegExp(
          `^lost the Temporal server at 127\\.0\\.0\\.1:\\d+ during the create of lost\\.t \\(.+\\); it may go on as workflow ${workflowId}`,
        ),
      );
      expect((err as Error).message).toContain('check with `tablefate describe lost.t` once the server is back');
      // The unavailable server, not the 120 s deadline, ended the wait.
      expect(ms).toBeLessThan(30_000);
    } finally {
      abort.abort();
      await connection.close();
      await catalog.close();
      await server?.stop();
      await fs.promises.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the command line', () => {
  let home: string;
  let env: NodeJS.ProcessEnv;
  let namespace: string;
  let catalogId: string;
  let connection: Connection;

  beforeAll(async () => {
    connection = await Connection.connect({ address: testServerAddress() });
    // A namespace of this file's own, with the search attributes the operations carry, and nobody polling in it.
    namespace = `tablefate-deadlines-${randomUUID().slice(0, 8)}`;
    await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
    await waitFor(
      () =>
        connection.workflowService.describeNamespace({ namespace }).then(
          () => true,
          () => false,
        ),
      (ready) => ready,
      { what: `namespace ${namespace}` },
    );
    await registerSearchAttributes(connection, namespace);
    // A catalog, as a worker leaves one.
    home = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-deadlines-'));
    const catalog = new SqliteCatalog(catalogPath(home));
    catalogId = catalog.id;
    await catalog.close();
    env = { ...process.env, TABLEFATE_HOME: home, TEMPORAL_ADDRESS: testServerAddress(), TEMPORAL_NAMESPACE: namespace };
  });
  afterAll(async () => {
    await connection?.close();
    if (home) await fs.promises.rm(home, { recursive: true, force: true });
  });

  const oneLine = (r: CliResult) => ({ code: r.code, stdout: r.stdout, stderr: r.stderrLines });

  test('with no worker polling, a write exits 6 at once with one NoWorker line naming the task queue, namespace and address', async () => {
    const [text, json] = await runCliAll(
      [
        ['create', 'dl.nobody'],
        ['create', 'dl.nobody', '--json'],
      ],
      { env },
      2,
    );
    const message =
      `no tablefate worker is polling task queue ${TASK_QUEUE} in namespace ${namespace} at ${testServerAddress()}; ` +
      'start one with `tablefate worker` (or `tablefate dev`)';
    expect(oneLine(text!)).toEqual({ code: 6, stdout: '', stderr: [`tablefate: NoWorker: ${message}`] });
    expect({ code: json!.code, error: JSON.parse(json!.stderr) as unknown }).toEqual({ code: 6, error: { error: 'NoWorker', message } });
    // Node's start-up (about 0.5 s) and the 2 s the client gives a worker that has just started, not the 60 s deadline.
    expect(text!.ms).toBeLessThan(10_000);
    const inNamespace = new Client({ connection, namespace });
    const marker = await visibilityCaughtUp(inNamespace);
    expect((await inNamespace.workflow.count(`WorkflowId != '${marker}'`)).count).toBe(0);
  });

  test('--timeout: a write that a hung worker took gives up at its deadline with exit 5, naming the workflow that goes on', async () => {
    const client = new Client({ connection, namespace });
    // A worker that takes the workflow task and never answers: it polls, and that is all.
    const abort = new AbortController();
    const taken = connection.withDeadline(Date.now() + 60_000, () =>
      connection.withAbortSignal(abort.signal, () =>
        connection.workflowService.pollWorkflowTaskQueue({ namespace, taskQueue: { name: TASK_QUEUE }, identity: 'hung-worker' }),
      ),
    );
    taken.catch(() => undefined); // aborted at the end if it never got the task
    const workflowId = workflowIdFor.create({ namespace: 'dl', name: 'hung' }, catalogId);
    try {
      await waitFor(
        () =>
          connection.workflowService.describeTaskQueue({ namespace, taskQueue: { name: TASK_QUEUE } }).then((q) => q.pollers?.length ?? 0),
        (pollers) => pollers > 0,
        { what: 'the hung worker to poll' },
      );
      const r = await runCli(['create', 'dl.hung', '--timeout', '1', '--json'], { env });
      expect({ code: r.code, stdout: r.stdout, lines: r.stderrLines.length }).toEqual({ code: 5, stdout: '', lines: 1 });
      expect(JSON.parse(r.stderr)).toEqual({
        error: 'OperationTimeout',
        message:
          `create of dl.hung did not finish within 1 s; it goes on in the background as workflow ${workflowId}: ` +
          'see where it is with `tablefate describe dl.hung`',
      });
      expect(r.ms).toBeGreaterThanOrEqual(1000);
      expect(r.ms).toBeLessThan(5000);
      expect((await taken)?.workflowExecution?.workflowId).toBe(workflowId);
      expect((await client.workflow.getHandle(workflowId).describe()).status.name).toBe('RUNNING');
    } finally {
      abort.abort();
      await client.workflow
        .getHandle(workflowId)
        .terminate('test over')
        .catch(() => undefined);
    }
  });

  test('a Temporal server that is not there: a write exits 6 within about 5 s with one ServerUnreachable line; ls still answers', async () => {
    const address = `127.0.0.1:${await closedPort()}`;
    const [write, ls] = await runCliAll(
      [
        ['create', 'dl.gone'],
        ['ls', '--json'],
      ],
      { env: { ...env, TEMPORAL_ADDRESS: address } },
      2,
    );
    expect(oneLine(write!)).toEqual({
      code: 6,
      stdout: '',
      stderr: [
        expect.stringMatching(
          new RegExp(
            `^tablefate: ServerUnreachable: cannot reach the Temporal server at ${address} \\(.+\\); is \`tablefate dev\` running\\?$`,
          ),
        ) as unknown,
      ],
    });
    // About 5 s of asking plus two CLI processes starting on a busy machine (up to 10 s seen in CI): the point is
    // that it does not wait for the 60 s deadline.
    expect(write!.ms).toBeLessThan(20_000);
    expect({ code: ls!.code, tables: JSON.parse(ls!.stdout) as unknown }).toEqual({ code: 0, tables: [] });
  });

  test('ls of tables whose sizes no server can measure answers them, sizes unknown, and ends cleanly (no call left retrying)', async () => {
    const table = await h.client.create({ table: 'dl.sized', shards: 1 });
    const address = `127.0.0.1:${await closedPort()}`;
    const ls = await runCli(['ls', '--json'], { env: { ...process.env, TABLEFATE_HOME: h.home, TEMPORAL_ADDRESS: address } });
    // (With --json the unknown size is the null; a call left retrying past the connection's close would crash here.)
    expect({ code: ls.code, stderr: ls.stderr }).toEqual({ code: 0, stderr: '' });
    const listed = JSON.parse(ls.stdout) as Array<{ id: number; bytes: number | null }>;
    expect(listed.find((t) => t.id === table.id)).toMatchObject({ bytes: null });
  });
});
