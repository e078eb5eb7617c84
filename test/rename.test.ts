import fs from 'node:fs';
import path from 'node:path';
import { Harness, workflowBundle } from './support/harness';
import { startCrashingWorker } from './support/crashing-worker';
import {
  InvalidInputError,
  NameTakenError,
  TableExistsError,
  TableInTrashError,
  TableNotFoundError,
  WrongStateError,
} from '../domain/errors';
import { OPERATIONS } from '../domain/operations';
import type { TableInfo } from '../domain/table';

// `rename` through the SDK on the real dev server: a READY table takes a new name or namespace in one
// compare-and-set, under its lock and the new name's; nothing else about it changes.

let h: Harness;
beforeAll(async () => {
  // (A lost workflow task is taken again after 3 s instead of the server's 10: the crash tests wait that long.)
  h = await Harness.start({ workflowTaskTimeoutMs: 3_000 });
});
afterAll(async () => {
  await h.close();
});

/** What a rename must leave as it was: everything but the name. */
const unchanged = (t: TableInfo) => ({ id: t.id, state: t.state, shards: t.shards, placement: t.placement, createdAt: t.createdAt });

test('by name: the table keeps its id and shards, the old name is free at once and the new one taken', async () => {
  const table = await h.client.create({ table: 'ren.orders', shards: 3 });
  const checksums = (await h.shardReports(table)).map((r) => r.checksum);

  const renamed = await h.client.rename({ table: 'ren.orders', newName: 'ren.orders_2025' });
  expect(renamed).toMatchObject({ ...unchanged(table), namespace: 'ren', name: 'orders_2025', state: 'READY' });
  expect(await h.client.describe({ table: 'ren.orders_2025' })).toEqual(renamed);
  await expect(h.client.describe({ table: 'ren.orders' })).rejects.toBeInstanceOf(TableNotFoundError);
  // Shards untouched: the same sets, in the same place, with the same bytes.
  expect(await h.shardAreas(renamed)).toEqual(['live', 'live', 'live']);
  expect((await h.shardReports(renamed)).map((r) => r.checksum)).toEqual(checksums);

  // The old name is free at once (a new table, a new id); the new one is taken.
  const again = await h.client.create({ table: 'ren.orders', shards: 1 });
  expect(again.id).toBeGreaterThan(table.id);
  await expect(h.client.create({ table: 'ren.orders_2025', shards: 1 })).rejects.toBeInstanceOf(TableExistsError);
  expect(await h.catalog.listLocks()).toEqual([]);

  // The run is the record's: its id, its type and its search attributes.
  const run = await h.temporal.workflow.getHandle(OPERATIONS.rename.workflowId(table.id, h.catalog.id)).describe();
  expect({
    type: run.type,
    op: run.searchAttributes.TableOp,
    id: run.searchAttributes.TableId,
    name: run.searchAttributes.TableName,
  }).toEqual({
    type: 'renameTable',
    op: ['rename'],
    id: [table.id],
    name: ['orders_2025'],
  });
});

test('by id, into another namespace; the same name again answers the table and starts nothing', async () => {
  const table = await h.client.create({ table: 'ren.moved', shards: 2 });
  const moved = await h.client.rename({ table: table.id, newName: 'archive.moved' });
  expect(moved).toMatchObject({ ...unchanged(table), namespace: 'archive', name: 'moved' });
  expect((await h.client.list()).find((t) => t.id === table.id)).toEqual(moved);

  const runs = async () =>
    (await h.temporal.workflow.count(`WorkflowId = '${OPERATIONS.rename.workflowId(table.id, h.catalog.id)}'`)).count;
  const before = await runs();
  expect(await h.client.rename({ table: table.id, newName: 'archive.moved' })).toEqual(moved);
  expect(await h.client.rename({ table: 'archive.moved', newName: 'archive.moved' })).toEqual(moved);
  expect(await runs()).toBe(before);
});

test('every refusal is typed and changes nothing', async () => {
  const live = await h.client.create({ table: 'ren.live', shards: 1 });
  const other = await h.client.create({ table: 'ren.other', shards: 1 });
  const binned = await h.client.create({ table: 'ren.binned', shards: 1 });
  await h.client.trash({ table: 'ren.binned', retentionSeconds: 3600 });

  await expect(h.client.rename({ table: 'ren.nope', newName: 'ren.x' })).rejects.toBeInstanceOf(TableNotFoundError);
  await expect(h.client.rename({ table: 999_999, newName: 'ren.x' })).rejects.toBeInstanceOf(TableNotFoundError);
  // By name, a trashed table is in the trash (as describe says); by id, it is in the wrong state.
  await expect(h.client.rename({ table: 'ren.binned', newName: 'ren.x' })).rejects.toBeInstanceOf(TableInTrashError);
  await expect(h.client.rename({ table: binned.id, newName: 'ren.x' })).rejects.toThrow(
    new WrongStateError(`table ${binned.id} is TRASHED; only a READY table can be renamed`),
  );
  await expect(h.client.rename({ table: 'ren.live', newName: 'ren.other' })).rejects.toBeInstanceOf(NameTakenError);
  for (const bad of [
    { table: 'ren.live', newName: 'ren.a;drop' },
    { table: 'ren.live', newName: '' },
    { table: 'Ren.live', newName: 'ren.y' },
    { table: 0, newName: 'ren.y' },
    { table: 'ren.live' },
    { table: 'ren.live', newName: 'ren.y', extra: 1 },
  ]) {
    await expect(h.client.rename(bad as never)).rejects.toBeInstanceOf(InvalidInputError);
  }

  expect(await h.client.describe({ table: live.id })).toEqual(live);
  expect(await h.client.describe({ table: other.id })).toEqual(other);
  expect(await h.client.describe({ table: binned.id })).toMatchObject({ name: 'binned', state: 'TRASHED' });
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('a table renamed meanwhile is refused by the name the client resolved', async () => {
  const table = await h.client.create({ table: 'ren.stale', shards: 1 });
  // The workflow checks the name under the lock: started with a name the table no longer bears, it refuses.
  await h.client.rename({ table: table.id, newName: 'ren.fresh' });
  const stale = h.temporal.workflow.execute(OPERATIONS.rename.workflowType, {
    workflowId: `${OPERATIONS.rename.workflowId(table.id, h.catalog.id)}-stale`,
    taskQueue: h.taskQueue,
    args: [
      {
        tableId: table.id,
        catalogId: h.catalog.id,
        expectedName: { namespace: 'ren', name: 'stale' },
        newName: { namespace: 'ren', name: 'third' },
      },
    ],
  });
  const failure = await stale.then(
    () => undefined,
    (err: unknown) => (err as { cause?: { type?: string; message?: string } }).cause,
  );
  expect({ type: failure?.type, message: failure?.message }).toEqual({
    type: 'WrongState',
    message: expect.stringContaining('is named ren.fresh, not ren.stale') as unknown,
  });
  expect(await h.client.describe({ table: table.id })).toMatchObject({ name: 'fresh', state: 'READY' });
});

test('a rename racing a create of the new name: exactly one gets the name', async () => {
  for (let i = 0; i < 3; i++) {
    const table = await h.client.create({ table: `ren.racer${i}`, shards: 2 });
    // Other shard counts: a create of a name a table with the same shards bears would answer that table (idempotence).
    const [renamed, created] = await Promise.allSettled([
      h.client.rename({ table: table.id, newName: `ren.prize${i}` }),
      h.client.create({ table: `ren.prize${i}`, shards: 1 }),
    ]);
    const holder = await h.catalog.findByName({ namespace: 'ren', name: `prize${i}` });
    if (renamed.status === 'fulfilled') {
      expect(created.status === 'rejected' && created.reason).toBeInstanceOf(TableExistsError);
      expect(holder?.id).toBe(table.id);
    } else {
      expect(renamed.reason).toBeInstanceOf(NameTakenError);
      expect(created.status).toBe('fulfilled');
      expect(holder?.id).not.toBe(table.id);
      expect(await h.client.describe({ table: table.id })).toMatchObject({ name: `racer${i}`, state: 'READY' });
    }
    expect(holder?.state).toBe('READY');
  }
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('a rename waits for an operation holding the table, then sees what it left (a trash: refused)', async () => {
  const table = await h.client.create({ table: 'ren.busy', shards: 2 });
  const [trashed, renamed] = await Promise.allSettled([
    h.client.trash({ table: 'ren.busy', retentionSeconds: 3600 }),
    h.client.rename({ table: table.id, newName: 'ren.busier' }),
  ]);
  // Either order is a consistent outcome; never both half done.
  const final = await h.client.describe({ table: table.id });
  if (trashed.status === 'fulfilled' && renamed.status === 'rejected') {
    expect(renamed.reason).toBeInstanceOf(WrongStateError);
    expect(final).toMatchObject({ name: 'busy', state: 'TRASHED' });
  } else {
    expect(renamed.status).toBe('fulfilled');
    expect(final.name).toBe('busier');
  }
  expect(await h.catalog.listLocks()).toEqual([]);
});

describe('crashes', () => {
  let bundleFile: string;
  beforeAll(async () => {
    bundleFile = path.join(h.home, 'rename-bundle.js');
    await fs.promises.writeFile(bundleFile, (await workflowBundle()).code);
  });

  // The rename's lock, check and compare-and-set run in one local activity, and its compare-and-set releases the locks:
  // a worker killed right after the lock or the compare-and-set loses a task whose work is (partly) done. The next
  // worker repeats the task, and the catalog's journal answers what was done.
  test.each([
    ['lock', 'catalog.acquireLock'],
    ['transition', 'catalog.transition'],
  ])('a worker killed right after the rename’s %s converges on the renamed table', async (label, activity) => {
    const table = await h.client.create({ table: `ren.crash_${label}`, shards: 2 });
    await h.stopWorker();
    try {
      const worker = await startCrashingWorker({ on: h, bundleFile, activity });
      const renaming = h.client.rename({ table: table.id, newName: `ren.crashed_${label}` }, { timeoutMs: 90_000 });
      expect(await worker.exited).toBe('SIGKILL');
      await h.startWorker();
      const renamed = await renaming;
      expect(renamed).toMatchObject({ ...unchanged(table), name: `crashed_${label}` });
      expect(await h.shardAreas(renamed)).toEqual(['live', 'live']);
      expect(await h.catalog.listLocks()).toEqual([]);
    } finally {
      await h.startWorker().catch(() => undefined);
    }
  });
});

test('a worker that runs every call twice renames once, and leaves no lock', async () => {
  const twice = await Harness.start({ everyCallTwice: true });
  try {
    const table = await twice.client.create({ table: 'flaky.named', shards: 2 });
    const renamed = await twice.client.rename({ table: 'flaky.named', newName: 'flaky.renamed' });
    expect(renamed).toMatchObject({ ...unchanged(table), name: 'renamed' });
    expect(await twice.client.rename({ table: table.id, newName: 'other.renamed' })).toMatchObject({ namespace: 'other', name: 'renamed' });
    await expect(twice.client.describe({ table: 'flaky.named' })).rejects.toBeInstanceOf(TableNotFoundError);
    expect(await twice.shardAreas(renamed)).toEqual(['live', 'live']);
    expect(await twice.catalog.listLocks()).toEqual([]);
  } finally {
    await twice.close();
  }
});
