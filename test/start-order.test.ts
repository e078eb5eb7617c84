import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { CliProcess, jsonOf, runCli } from './support/cli';
import { ensureNamespace, startCliWorker } from './support/cli-worker';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { testServerAddress } from './support/test-server';
import { waitFor } from './support/wait';
import { freePorts } from '../servers/local-host';
import { TASK_QUEUE } from '../domain/deployment';
import type { TableInfo } from '../domain/table';

/*
 * Ready means ready, in any start order: a service started before what it needs waits for it, saying what it waits
 * for, and a process says it is running only once the server lists it as polling.
 */

const NAMESPACE = 'tablefate-start-order';
let connection: Connection;
let pg: TestPostgres;
const dirs: string[] = [];
const processes: CliProcess[] = [];

beforeAll(async () => {
  connection = await Connection.connect({ address: testServerAddress() });
  await ensureNamespace(connection, NAMESPACE);
  pg = await sharedPostgres();
});

afterAll(async () => {
  for (const p of processes) if (!p.exitStatus) await p.stop('SIGINT').catch(() => undefined);
  await connection?.close();
  await pg?.stop();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

const tempDir = (prefix: string) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `tablefate-${prefix}-`));
  dirs.push(dir);
  return dir;
};

const started = (args: string[], env: NodeJS.ProcessEnv) => {
  const p = CliProcess.start(args, env);
  processes.push(p);
  return p;
};

test('storage nodes started before the first worker wait for the catalog it makes, then serve: a create reaches them', async () => {
  const env = {
    PATH: process.env.PATH,
    TEMPORAL_ADDRESS: testServerAddress(),
    TEMPORAL_NAMESPACE: NAMESPACE,
    TABLEFATE_CATALOG_URL: await pg.freshDatabase('start_order'),
    TABLEFATE_HOME: tempDir('start-order-home'),
    TABLEFATE_STORAGE_NODES: '2',
    TABLEFATE_LOG_LEVEL: 'info',
    TABLEFATE_RECONCILE_SECONDS: '0',
  };
  const storage = tempDir('start-order-nodes');
  const nodes = ['node-0', 'node-1'].map((node) => started(['storage-node', node, '--dir', storage], env));
  // Before any worker: each node says what it waits for, and stays up (it used to exit with CatalogNotFound).
  for (const node of nodes) {
    await waitFor(
      () => Promise.resolve({ stderr: node.stderr, exit: node.exitStatus }),
      ({ stderr, exit }) => exit !== undefined || /waiting for the catalog at postgres/.test(stderr),
      { what: 'a storage node to say it waits for the catalog' },
    );
    expect(node.exitStatus).toBeUndefined();
    expect(node.stderr).not.toContain('storage node polling');
  }

  processes.push(await startCliWorker(connection, { ...process.env, ...env }, ['--storage', 'remote']));
  for (const node of nodes) {
    await waitFor(
      () => Promise.resolve({ stderr: node.stderr, exit: node.exitStatus }),
      ({ stderr, exit }) => exit !== undefined || stderr.includes('storage node polling'),
      { what: 'a storage node to poll once the catalog is made', timeoutMs: 60_000 },
    );
    // (Its last words beside its exit, should it have exited: the one failure seen here, in CI, left none to read.)
    expect({ exit: node.exitStatus, said: node.exitStatus === undefined ? '' : node.stderr.slice(-3000) }).toEqual({
      exit: undefined,
      said: '',
    });
  }
  const created = await runCli(['create', 'order.first', '--shards', '4', '--json', '--timeout', '60'], { env });
  expect(created.code).toBe(0);
  expect(jsonOf<TableInfo>(created)).toMatchObject({ state: 'READY', shards: 4 });
  // Both nodes made their shards' files.
  for (const node of ['node-0', 'node-1']) expect(fs.readdirSync(path.join(storage, node, 'live')).length).toBeGreaterThan(0);
});

test('tablefate dev says its worker is running only once the server lists it polling: a command typed then succeeds', async () => {
  const [port, uiPort] = await freePorts(2);
  // (The test run's environment names the Temporal CLI the dev server runs.)
  const env = {
    ...process.env,
    TEMPORAL_ADDRESS: `127.0.0.1:${port}`,
    TEMPORAL_NAMESPACE: 'default',
    TABLEFATE_HOME: tempDir('start-order-dev'),
    TABLEFATE_LOG_LEVEL: 'warn',
  };
  const dev = started(['dev', '--headless', '--port', String(port), '--ui-port', String(uiPort)], env);
  await waitFor(
    () => Promise.resolve({ stdout: dev.stdout, exit: dev.exitStatus }),
    ({ stdout, exit }) => exit !== undefined || stdout.includes('tablefate worker running'),
    { what: 'tablefate dev to say its worker runs', timeoutMs: 90_000, intervalMs: 20 },
  );
  expect(dev.exitStatus).toBeUndefined();
  // At the moment it says so, the server lists this very process polling the workflow queue.
  const devServer = await Connection.connect({ address: env.TEMPORAL_ADDRESS });
  try {
    const queue = await devServer.workflowService.describeTaskQueue({ namespace: 'default', taskQueue: { name: TASK_QUEUE } });
    expect((queue.pollers ?? []).map((p) => p.identity)).toContainEqual(expect.stringMatching(new RegExp(`^${dev.pid}@`)));
  } finally {
    await devServer.close();
  }
  const created = await runCli(['create', 'dev.first', '--json'], { env });
  expect(created.code).toBe(0);
  expect(jsonOf<TableInfo>(created).state).toBe('READY');
});
