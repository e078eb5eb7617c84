import fs from 'node:fs';
import { Connection } from '@temporalio/client';
import { runCli, type CliProcess } from './support/cli';
import { cliTestHome, ensureNamespace, startCliWorker } from './support/cli-worker';
import { freePort } from './support/postgres';
import { testServerAddress } from './support/test-server';
import { waitFor } from './support/wait';
import { exportedName, METRICS } from '../domain/metrics';

/*
 * The metrics endpoint of `tablefate worker` (TABLEFATE_METRICS_ADDRESS), scraped over HTTP the way Prometheus does,
 * after operations the command line ran: Temporal's worker metrics and ours on one endpoint, counters that moved by
 * exactly the operations run, and gauges read from the catalog. A second worker, started after the first is killed,
 * replays the open trash run when a recall wakes it: the trash it replays must not be counted again. The file has a
 * Temporal namespace of its own, so that its worker's `tablefate` task queue is no other file's.
 */

const NAMESPACE = 'tablefate-metrics-test';
const WEEK = String(7 * 24 * 3600);

let home: string;
let env: NodeJS.ProcessEnv;
let connection: Connection | undefined;
let worker: CliProcess | undefined;

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition. */
function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ([^ ]+)/.exec(line);
    if (!match) continue;
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[key!] = value!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

async function scrape(port: number): Promise<Sample[]> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  expect(response.status).toBe(200);
  return parseExposition(await response.text());
}

/** The sum of a metric's samples whose labels include `labels` (0 when it has none). */
function valueOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

const ours = (samples: Sample[]) => samples.filter((s) => s.name.startsWith('tablefate_'));

/** A worker serving metrics on `port`: told by the environment, or by the flag (which wins over it). */
async function startWorker(port: number, by: 'env' | 'flag'): Promise<CliProcess> {
  if (by === 'env') return startCliWorker(connection!, { ...env, TABLEFATE_METRICS_ADDRESS: `127.0.0.1:${port}` });
  return startCliWorker(connection!, { ...env, TABLEFATE_METRICS_ADDRESS: '127.0.0.1:1' }, ['--metrics-address', `localhost:${port}`]);
}

async function cli(...args: string[]) {
  const result = await runCli(args, { env });
  expect({ args, code: result.code, stderr: result.stderr }).toEqual({ args, code: 0, stderr: '' });
  return result;
}

beforeAll(async () => {
  ({ home, env } = await cliTestHome('metrics', NAMESPACE));
  connection = await Connection.connect({ address: testServerAddress() });
  await ensureNamespace(connection, NAMESPACE);
});

afterAll(async () => {
  try {
    if (worker && !worker.exitStatus) await worker.stop('SIGINT');
  } finally {
    await connection?.close();
    if (home) await fs.promises.rm(home, { recursive: true, force: true });
  }
});

test("a worker serves Temporal's metrics and ours on one endpoint; counters move by the operations run, and a replay counts nothing again", async () => {
  const firstPort = await freePort();
  worker = await startWorker(firstPort, 'env');
  await cli('create', 'metrics.kept', '--shards', '2');
  await cli('create', 'metrics.dropped', '--shards', '2');
  await cli('create', 'metrics.other', '--shards', '1');
  await cli('drop', 'metrics.dropped', '-r', WEEK);
  // Refused by the catalog inside the run: a failed operation, with its reason.
  const refused = await runCli(['rename', 'metrics.kept', 'metrics.other'], { env });
  expect(refused.code).toBe(4);

  // Begun (DRAINING), then taken back at its drain deadline: a compensated operation, with its reason.
  await cli('lease', 'acquire', 'metrics.other', '--ttl', '600');
  const busy = await runCli(['drop', 'metrics.other', '--drain-timeout', '1'], { env });
  expect({ code: busy.code, stderr: busy.stderr }).toEqual({ code: 4, stderr: expect.stringContaining('TableBusy') as unknown });

  const started = (op: string) => ({ operation: op });
  const first = await scrape(firstPort);
  expect({
    createsStarted: valueOf(first, exportedName(METRICS.operationsStarted), started('create')),
    createsSucceeded: valueOf(first, exportedName(METRICS.operationsSucceeded), started('create')),
    trashesStarted: valueOf(first, exportedName(METRICS.operationsStarted), started('trash')),
    trashesCompensated: valueOf(first, exportedName(METRICS.operationsCompensated), { operation: 'trash', error: 'TableBusy' }),
    trashesSucceeded: valueOf(first, exportedName(METRICS.operationsSucceeded), started('trash')),
    renamesStarted: valueOf(first, exportedName(METRICS.operationsStarted), started('rename')),
    renamesFailed: valueOf(first, exportedName(METRICS.operationsFailed), { operation: 'rename', error: 'NameTaken' }),
    createDurations: valueOf(first, `${METRICS.operationDuration.name}_count`, { operation: 'create', outcome: 'succeeded' }),
    // The one drop that committed started its trash's expiry, which is no operation: it counts nothing.
    expiriesStarted: valueOf(first, exportedName(METRICS.operationsStarted), started('trashExpiry')),
  }).toEqual({
    createsStarted: 3,
    createsSucceeded: 3,
    trashesStarted: 2,
    trashesCompensated: 1,
    trashesSucceeded: 1,
    renamesStarted: 1,
    renamesFailed: 1,
    createDurations: 3,
    expiriesStarted: 0,
  });
  // Temporal's own worker metrics, on the same endpoint.
  expect(valueOf(first, 'temporal_workflow_completed_total')).toBeGreaterThanOrEqual(3);
  expect(first.some((s) => s.name.startsWith('temporal_worker_task_slots_available'))).toBe(true);

  // A new worker: the trash's expiry run is in no cache of its, and the recall's wake makes it replay the run from its start.
  expect(await worker.stop('SIGINT')).toEqual({ code: 0, signal: null });
  const secondPort = await freePort();
  worker = await startWorker(secondPort, 'flag');
  // Its gauges are read from the catalog, the server and the storage when it starts (each on its own: wait for both).
  const gauges = await waitFor(
    () => scrape(secondPort),
    (samples) => [METRICS.trashTimersPending.name, METRICS.trashBytes.name].every((name) => samples.some((s) => s.name === name)),
    { timeoutMs: 20_000, what: 'the gauges' },
  );
  expect({
    ready: valueOf(gauges, METRICS.tables.name, { state: 'READY' }),
    trashed: valueOf(gauges, METRICS.tables.name, { state: 'TRASHED' }),
    draining: valueOf(gauges, METRICS.drainsWaiting.name),
    timers: valueOf(gauges, METRICS.trashTimersPending.name),
    trashBytesPositive: valueOf(gauges, METRICS.trashBytes.name) > 0,
  }).toEqual({ ready: 2, trashed: 1, draining: 0, timers: 1, trashBytesPositive: true });

  await cli('recall', 'metrics.dropped');
  // The trash's expiry run, woken by the recall, closes on this worker: it did replay there.
  const second = await waitFor(
    () => scrape(secondPort),
    (samples) =>
      valueOf(samples, exportedName(METRICS.operationsSucceeded), started('undelete')) === 1 &&
      valueOf(samples, 'temporal_workflow_completed_total', { workflow_type: 'trashExpiry' }) > 0,
    { timeoutMs: 10_000, what: 'the recall to be counted, and the trash expiry run to close on the second worker' },
  );
  // The recall, once; the expiry it ended was replayed by this worker, and counted nothing.
  const sorted = (rows: Array<[string, string | undefined, number]>) =>
    [...rows].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
  expect(
    sorted(
      ours(second)
        .filter((s) => s.name.endsWith('_total') && s.value > 0)
        .map((s) => [s.name, s.labels.operation, s.value]),
    ),
  ).toEqual(
    sorted([
      [exportedName(METRICS.operationsStarted), 'undelete', 1],
      [exportedName(METRICS.operationsSucceeded), 'undelete', 1],
    ]),
  );
  expect(valueOf(second, 'temporal_workflow_completed_total', { workflow_type: 'trashExpiry' })).toBe(1);
  // (The drop's run had closed on the first worker, once the table was TRASHED: none closed here.)
  expect(valueOf(second, 'temporal_workflow_completed_total', { workflow_type: 'trashTable' })).toBe(0);
});

test('a metrics address that is not host:port is refused before the worker starts, naming the variable', async () => {
  const result = await runCli(['worker'], { env: { ...env, TABLEFATE_METRICS_ADDRESS: 'metrics.example:99999' } });
  expect({ code: result.code, stderr: result.stderr }).toEqual({
    code: 2,
    stderr: expect.stringMatching(/TABLEFATE_METRICS_ADDRESS.*host:port/) as unknown,
  });
});
