import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { CliProcess, jsonOf, runCli, runCliInProcess, type CliResult } from './support/cli';
import { testServerAddress } from './support/test-server';
import { cliTestHome, ensureNamespace, startCliWorker } from './support/cli-worker';
import { waitFor } from './support/wait';
import { SqliteCatalog } from '../catalog/sqlite';
import { catalogPath, TASK_QUEUE } from '../domain/deployment';
import { workflowIdFor } from '../domain/operations';
import type { ReconcileReport } from '../domain/health';
import type { TableInfo } from '../domain/table';
import { reconcileScheduleId } from '../worker/reconcile-schedule';
import { writeQuarantine } from '../storage/quarantine';
import { writeSet } from './support/sets-on-disk';

/*
 * `tablefate doctor` as a person runs it: the command line in a child process, asking a `tablefate worker` (a
 * child process too) for a report. The worker runs in a Temporal namespace of this file's own, so that its
 * `tablefate` task queue is not the one test/cli.test.ts's worker polls (nor is any poller it left behind seen
 * here), and with the reconcile schedule off, so that nothing repairs what the doctor is to find.
 */

const NAMESPACE = 'tablefate-doctor-test';

let home: string;
let env: NodeJS.ProcessEnv;
let connection: Connection;
let temporal: Client;
let catalog: SqliteCatalog;
let worker: CliProcess | undefined;

const cli = (...args: string[]) => runCli(args, { env });
// The same entry point in this process: for the setup commands, the --json reports and the refusals. The text reports
// and the exit codes a shell sees stay in a real process.
const inProcess = (...args: string[]) => runCliInProcess(args, { env });

/** Starts `tablefate worker` and waits until the server sees it polling. */
async function startWorker(): Promise<CliProcess> {
  worker = await startCliWorker(connection, env);
  return worker;
}

beforeAll(async () => {
  ({ home, env } = await cliTestHome('doctor', NAMESPACE));
  connection = await Connection.connect({ address: testServerAddress() });
  temporal = new Client({ connection, namespace: NAMESPACE });
  await ensureNamespace(connection, NAMESPACE);
  // The catalog a worker would create on its first start, made here so that the doctor can be asked before any
  // worker has run (a missing catalog is another error, CatalogNotFound). The worker opens this same one.
  catalog = new SqliteCatalog(catalogPath(home));
});

afterAll(async () => {
  try {
    if (worker && !worker.exitStatus) {
      const exit = await worker.stop('SIGINT');
      expect({ exit, stderr: worker.stderr }).toEqual({ exit: { code: 0, signal: null }, stderr: worker.stderr });
    }
  } finally {
    await catalog?.close();
    await connection?.close();
    if (home) await fs.promises.rm(home, { recursive: true, force: true });
  }
});

/** What a person sees of a command. */
const seen = (r: CliResult) => ({ code: r.code, stdout: r.stdout, stderr: r.stderrLines });

test('with no worker polling, `tablefate doctor` exits 6 (NoWorker) within seconds', async () => {
  const r = await cli('doctor');
  expect(seen(r)).toEqual({
    code: 6,
    stdout: '',
    stderr: [
      expect.stringMatching(
        new RegExp(`^tablefate: NoWorker: no tablefate worker is polling task queue ${TASK_QUEUE} in namespace ${NAMESPACE}`),
      ) as unknown,
    ],
  });
  // The worker check gives up after 2 s: not the doctor's 60 s deadline.
  expect(r.ms).toBeLessThan(15_000);
  const json = await cli('doctor', '--json');
  expect(json.code).toBe(6);
  expect(JSON.parse(json.stderr)).toEqual({
    error: 'NoWorker',
    message: expect.stringContaining('no tablefate worker is polling') as unknown,
  });
  // Nothing was started: no report is waiting for a worker to come.
  const started = await temporal.workflow.count(`WorkflowType = 'reconcileTables'`);
  expect(started.count).toBe(0);
});

describe('with a `tablefate worker` polling', () => {
  beforeAll(async () => {
    await startWorker();
  });

  test('`tablefate doctor` exits 0 and says healthy when nothing is wrong', async () => {
    const table = jsonOf<TableInfo>(await inProcess('create', 'doctor.fine', '--shards', '2', '--json'));
    expect(table.state).toBe('READY');

    const r = await cli('doctor');
    expect(seen(r)).toEqual({ code: 0, stdout: 'healthy: nothing for the reconciler to do\n', stderr: [] });
    const json = await inProcess('doctor', '--json');
    expect(seen(json)).toEqual({ code: 0, stdout: expect.any(String) as unknown, stderr: [] });
    expect(JSON.parse(json.stdout)).toEqual({ healthy: true, findings: [], omitted: 0, skippedNodes: [], actions: [], deferred: 0 });
    // With TABLEFATE_RECONCILE_SECONDS=0 the worker made no schedule.
    await expect(temporal.schedule.getHandle(reconcileScheduleId(catalog.id)).describe()).rejects.toThrow(/not found/i);
  });

  test('after a trash expiry run is terminated, `tablefate doctor` exits 1 with a line naming the table, and changes nothing', async () => {
    const table = jsonOf<TableInfo>(await inProcess('create', 'doctor.lost', '--shards', '2', '--json'));
    const trashed = jsonOf<TableInfo>(await inProcess('trash', 'doctor.lost', '--reserve-seconds', '3600', '--json'));
    expect(trashed.state).toBe('TRASHED');
    const trashRun = temporal.workflow.getHandle(workflowIdFor.expiry(table.id, catalog.id));
    await trashRun.terminate('test: an operator slip');

    const r = await cli('doctor');
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 1, stderr: '' });
    expect(r.stdout).toBe(`missing-timer ${`table ${table.id} is TRASHED with no trash timer: re-arm it (expires ${trashed.expireAt})`}\n`);

    const json = await inProcess('doctor', '--json');
    expect({ code: json.code, stderr: json.stderr }).toEqual({ code: 1, stderr: '' });
    const report = JSON.parse(json.stdout) as ReconcileReport & { healthy: boolean };
    expect(report).toEqual({
      healthy: false,
      findings: [
        {
          kind: 'missing-timer',
          table: { id: table.id, namespace: 'doctor', name: 'lost', shards: 2, params: { shards: 2 } },
          droppedAt: Date.parse(trashed.droppedAt!),
          expireAt: Date.parse(trashed.expireAt!),
          expired: false,
        },
      ],
      omitted: 0,
      skippedNodes: [],
      actions: [],
      deferred: 0,
    });

    // The doctor only looked: the expiry run is still the terminated one, the table still TRASHED.
    expect((await trashRun.describe()).status.name).toBe('TERMINATED');
    expect(await catalog.getTable(table.id)).toMatchObject({ state: 'TRASHED', droppedAt: Date.parse(trashed.droppedAt!) });
  });

  test('`tablefate doctor` refuses arguments and a bad --timeout with exit 2', async () => {
    const extra = await inProcess('doctor', 'now');
    expect(seen(extra)).toEqual({
      code: 2,
      stdout: '',
      stderr: [expect.stringMatching(/^tablefate: Usage: doctor: expected 0 argument/) as unknown],
    });
    const timeout = await inProcess('doctor', '--timeout', '0');
    expect(seen(timeout)).toEqual({
      code: 2,
      stdout: '',
      stderr: [expect.stringMatching(/^tablefate: InvalidInput: --timeout must be/) as unknown],
    });
  });

  test('a quarantined node is named as not checked, and its orphans are reported once it is cleared', async () => {
    const storage = path.join(home, 'storage');
    // A set no table accounts for, on a node that then goes into quarantine.
    const ghost = await writeSet(storage, { tableId: 999_999, shard: 0, node: 'node-2' }, 'live');
    await writeQuarantine(storage, 'node-2', 'test: an operator is looking at it');
    try {
      const r = await cli('doctor');
      expect(r.stderr).toBe('');
      // A node not looked at is not known healthy: exit 1, and no "healthy" line.
      expect(r.code).toBe(1);
      expect(r.stdout).not.toContain('healthy');
      expect(r.stdout.split('\n')).toContain(
        'not checked   node-2: its files were not looked at (quarantined, or its storage worker did not answer)',
      );
      expect(r.stdout).not.toContain('999999');
      const json = await inProcess('doctor', '--json');
      expect(json.stderr).toBe('');
      const report = JSON.parse(json.stdout) as ReconcileReport & { healthy: boolean };
      expect(report.skippedNodes).toEqual(['node-2']);
      expect(report.findings.filter((f) => f.kind === 'orphan')).toEqual([]);
    } finally {
      expect((await inProcess('quarantine', 'clear', 'node-2')).code).toBe(0);
    }

    // Looked at again, the set is an orphan; not collectable yet (the worker's grace is an hour by default).
    const json = await inProcess('doctor', '--json');
    expect(json.code).toBe(1);
    const report = JSON.parse(json.stdout) as ReconcileReport & { healthy: boolean };
    expect(report.skippedNodes).toEqual([]);
    expect(report.findings.filter((f) => f.kind === 'orphan')).toEqual([
      expect.objectContaining({
        set: expect.objectContaining({ tableId: 999_999, node: 'node-2', area: 'live' }) as unknown,
        collectable: false,
      }),
    ]);
    for (const file of ghost) await fs.promises.rm(file);
  });
});

test('with the schedule on, `tablefate worker` creates the reconcile schedule, and its passes re-arm a lost trash timer', async () => {
  // Made while the worker of the tests above (schedule off) still runs; then a worker with the schedule on.
  const scheduleId = reconcileScheduleId(catalog.id);
  const created = jsonOf<TableInfo>(await inProcess('create', 'doctor.scheduled', '--shards', '2', '--json'));
  jsonOf<TableInfo>(await inProcess('drop', 'doctor.scheduled', '-r', '4', '--json'));
  await temporal.workflow.getHandle(workflowIdFor.expiry(created.id, catalog.id)).terminate('test: a lost trash expiry run');
  if (worker && !worker.exitStatus) await worker.stop('SIGINT');
  env = { ...env, TABLEFATE_RECONCILE_SECONDS: '1' };
  try {
    await startWorker();
    const schedule = await temporal.schedule.getHandle(scheduleId).describe();
    expect(schedule.spec.intervals?.[0]?.every).toBe(1000);
    expect(schedule.action).toMatchObject({ type: 'startWorkflow', workflowType: 'reconcileTables', taskQueue: TASK_QUEUE });
    // A pass of the schedule re-arms the timer; the table is purged at its expiry.
    const purged = await waitFor(
      () => catalog.getTable(created.id),
      (t) => t?.state === 'PURGED',
      { what: 'the re-armed expiry', timeoutMs: 60_000 },
    );
    expect(purged?.purgedAt).toBeGreaterThan(0);
    const passes = await temporal.workflow.count(`WorkflowType = 'reconcileTables' AND WorkflowId STARTS_WITH 'reconcile@${catalog.id}'`);
    expect(passes.count).toBeGreaterThan(0);
    const r = await cli('doctor');
    expect(seen(r)).toEqual({ code: 0, stdout: 'healthy: nothing for the reconciler to do\n', stderr: [] });
  } finally {
    await worker?.stop('SIGINT');
    // Turned off again, the next start deletes the schedule.
    env = { ...env, TABLEFATE_RECONCILE_SECONDS: '0' };
    await startWorker();
    await expect(temporal.schedule.getHandle(scheduleId).describe()).rejects.toThrow(/not found/i);
  }
});
