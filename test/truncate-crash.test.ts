import fs from 'node:fs';
import path from 'node:path';
import { Harness, workflowBundleFile } from './support/harness';
import { armedTimer } from './support/trash-runs';
import { startCrashingWorker } from './support/crashing-worker';
import { workflowIdFor } from '../domain/operations';
import type { truncateTable } from '../workflows';
import { toTableInfo, type TableInfo } from '../domain/table';
import { waitFor } from './support/wait';

// A truncate whose worker is killed right after a call did its work, before the workflow task that ran it completed
// (the work made, the history unaware), or whose run is lost for good: it ends with the table live and empty and its
// rows in one trash entry, moved once; never both, never neither. (As crash-points.test.ts does for the other
// operations: a 3 s workflow task timeout makes the lost task come back sooner, on the same path.)
const LOST_TASK_TIMEOUT_MS = 3_000;

let h: Harness;
let bundleFile: string;
beforeAll(async () => {
  h = await Harness.start({ startWorker: false, workflowTaskTimeoutMs: LOST_TASK_TIMEOUT_MS });
  bundleFile = await workflowBundleFile();
});
afterAll(async () => {
  await h.close();
});

// A truncate's first call stops new leases, chooses its entry and moves the rows (all undoable, so one call); its second
// commits and releases the locks.
const crashAfterCall = (n: number) =>
  startCrashingWorker({ on: h, bundleFile, activity: 'runStepsHere', env: { CRASH_ON_CALL: String(n) } });

const dataFile = (tableId: number, shard: number, node: string, area: 'live' | 'trash') =>
  path.join(h.home, 'storage', node, area, `t${tableId}-s${shard}.dat`);
const writeRows = (table: TableInfo, rows: string) =>
  table.placement.forEach(({ shard, node }) => fs.writeFileSync(dataFile(table.id, shard, node, 'live'), `${rows}:${shard}`));
const dataOf = (tableId: number, table: TableInfo, area: 'live' | 'trash') =>
  table.placement.map(({ shard, node }) => fs.readFileSync(dataFile(tableId, shard, node, area), 'utf8'));

/** A table of two shards with rows, made by a worker that is stopped again. */
async function filledTable(name: string): Promise<TableInfo> {
  await h.startWorker();
  const table = await h.client.create({ table: `crashtrunc.${name}`, shards: 2 });
  writeRows(table, 'rows');
  await h.stopWorker();
  return table;
}

/** The table live and empty under its id, its rows in `entry`'s trash sets (moved once), TRASHED with its expiry armed. */
async function expectTruncated(table: TableInfo, entryId: number): Promise<void> {
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY', name: table.name });
  expect((await h.catalog.getTable(table.id))?.truncateInto).toBeUndefined();
  expect(dataOf(table.id, table, 'live')).toEqual(['', '']);
  const entry = await h.catalog.getTable(entryId);
  expect(entry).toMatchObject({ state: 'TRASHED', truncatedFrom: table.id, name: table.name });
  expect(dataOf(entryId, table, 'trash')).toEqual(['rows:0', 'rows:1']);
  // One entry, none other made of the table.
  expect((await h.catalog.listTables({ includeTrashed: true })).filter((t) => t.truncatedFrom === table.id).map((t) => t.id)).toEqual([
    entryId,
  ]);
  expect(await armedTimer(h, entryId)).toMatchObject({ ended: null, droppedAt: entry!.droppedAt });
  expect(await h.catalog.listLocks()).toEqual([]);
}

test('killed after the rows moved, in a lost task: the next worker commits them once', async () => {
  const table = await filledTable('moved');
  const worker = await crashAfterCall(1);
  const truncating = h.client.truncate({ table: table.id, retentionSeconds: 3600 });
  expect(await worker.exited).toBe('SIGKILL');
  const half = await h.catalog.getTable(table.id);
  expect(half).toMatchObject({ state: 'TRUNCATING' });
  expect(dataOf(half!.truncateInto!, table, 'trash')).toEqual(['rows:0', 'rows:1']);

  await h.startWorker();
  const entry = await truncating;
  expect(entry).toMatchObject({ id: half!.truncateInto, state: 'TRASHED', truncatedFrom: table.id });
  await expectTruncated(table, entry.id);
  await h.stopWorker();
}, 90_000);

test('killed after the commit released the locks, in a lost task: the repeat answers the same entry', async () => {
  const table = await filledTable('committed');
  const worker = await crashAfterCall(2);
  const truncating = h.client.truncate({ table: table.id, retentionSeconds: 3600 });
  expect(await worker.exited).toBe('SIGKILL');
  const live = await h.catalog.getTable(table.id);
  expect(live?.state).toBe('READY');
  expect(await h.catalog.listLocks()).toEqual([]);

  await h.startWorker();
  const entry = await truncating;
  await expectTruncated(table, entry.id);
  await h.stopWorker();
}, 90_000);

test('its run lost for good once the rows moved: the reconciler resumes it, into the same entry', async () => {
  const table = await filledTable('lost');
  const worker = await crashAfterCall(1);
  const truncating = h.client.truncate({ table: table.id, retentionSeconds: 3600 }).catch((err: unknown) => err);
  expect(await worker.exited).toBe('SIGKILL');
  const half = await h.catalog.getTable(table.id);
  expect(half?.state).toBe('TRUNCATING');
  await h.temporal.workflow.getHandle(workflowIdFor.truncate(table.id, h.catalog.id)).terminate('test: a lost truncate');
  await truncating;

  await h.startWorker();
  // The doctor sees the table stuck, and the entry's sets as its table's, not orphans.
  const report = await h.reconcile('report');
  expect(report.findings).toContainEqual(expect.objectContaining({ kind: 'stuck', state: 'TRUNCATING', resume: 'truncate' }));
  expect(report.findings.filter((f) => f.kind === 'orphan' || f.kind === 'misplaced')).toEqual([]);
  await h.reconcile();
  const resumed = h.temporal.workflow.getHandle<typeof truncateTable>(workflowIdFor.truncate(table.id, h.catalog.id));
  expect(await resumed.result()).toMatchObject({ id: half!.truncateInto, state: 'TRASHED' });
  await waitFor(
    () => h.catalog.getTable(table.id),
    (t) => t?.state === 'READY',
    { what: 'the resumed truncate' },
  );
  await expectTruncated(table, half!.truncateInto!);
  await h.stopWorker();
}, 90_000);

test('a worker that runs every call twice truncates once: one entry, the rows moved once', async () => {
  const twice = await Harness.start({ everyCallTwice: true });
  try {
    const table = await twice.client.create({ table: 'flaky.truncated', shards: 2 });
    for (const { shard, node } of table.placement) {
      fs.writeFileSync(path.join(twice.home, 'storage', node, 'live', `t${table.id}-s${shard}.dat`), `rows:${shard}`);
    }
    const entry = await twice.client.truncate({ table: 'flaky.truncated' });
    expect(await twice.shardAreas(entry)).toEqual(['trash', 'trash']);
    expect(await twice.shardAreas(toTableInfo((await twice.catalog.getTable(table.id))!))).toEqual(['live', 'live']);
    const moved = table.placement.map(({ shard, node }) =>
      fs.readFileSync(path.join(twice.home, 'storage', node, 'trash', `t${entry.id}-s${shard}.dat`), 'utf8'),
    );
    expect(moved).toEqual(['rows:0', 'rows:1']);
    expect((await twice.catalog.listTables({ includeTrashed: true })).filter((t) => t.truncatedFrom === table.id)).toHaveLength(1);
    expect(await twice.catalog.listLocks()).toEqual([]);
  } finally {
    await twice.close();
  }
});
