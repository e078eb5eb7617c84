import fs from 'node:fs';
import path from 'node:path';
import { Harness } from './support/harness';
import { TableExistsError } from '../domain/errors';
import { OperationFailedError } from '../client';

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.close();
});

/** Every file under the storage nodes that belongs to table `id`, in any area. */
async function filesOfTable(id: number): Promise<string[]> {
  const root = h.storage.root;
  if (!fs.existsSync(root)) return [];
  const all = await fs.promises.readdir(root, { recursive: true });
  return all.filter((f) => path.basename(f).startsWith(`t${id}-`));
}

test('a failed create is compensated, and running it again resumes with the same id and placement', async () => {
  h.storage.faults.inject({ op: 'createShard', shard: 2, kind: 'permanent' });
  const failure = await h.client.create({ table: 'ceres.orders', shards: 4 }).catch((err: unknown) => err);
  expect(failure).toBeInstanceOf(OperationFailedError);
  expect(failure).toMatchObject({ type: 'StorageFault' });

  const failed = await h.catalog.findByName({ namespace: 'ceres', name: 'orders' });
  expect(failed?.state).toBe('CREATE_FAILED');
  expect(await filesOfTable(failed!.id)).toEqual([]);
  expect(await h.catalog.listLocks()).toEqual([]);

  h.storage.faults.clear();
  const created = await h.client.create({ table: 'ceres.orders', shards: 4 });
  expect(created.state).toBe('READY');
  expect(created.id).toBe(failed!.id);
  expect(created.placement).toEqual(failed!.placement);
  expect((await filesOfTable(created.id)).length).toBe(4 * 3);

  // The same create once more returns the table; other parameters are a conflict.
  expect((await h.client.create({ table: 'ceres.orders', shards: 4 })).id).toBe(created.id);
  await expect(h.client.create({ table: 'ceres.orders', shards: 8 })).rejects.toThrow(TableExistsError);
});

test('a failed create, taken back whole, gives its record to a create of that name with other parameters', async () => {
  h.storage.faults.inject({ op: 'createShard', shard: 0, kind: 'permanent' });
  await expect(h.client.create({ table: 'ceres.redo', shards: 2 })).rejects.toThrow(OperationFailedError);
  const failed = await h.catalog.findByName({ namespace: 'ceres', name: 'redo' });
  expect(failed).toMatchObject({ state: 'CREATE_FAILED', params: { shards: 2 } });
  expect(await filesOfTable(failed!.id)).toEqual([]);
  h.storage.faults.clear();
  const redone = await h.client.create({ table: 'ceres.redo', shards: 3 });
  expect(redone).toMatchObject({ id: failed!.id, state: 'READY', shards: 3 });
  expect(redone.placement.map((p) => p.shard)).toEqual([0, 1, 2]);
  expect((await filesOfTable(redone.id)).length).toBe(3 * 3);
  // Once READY, other parameters are a conflict again.
  await expect(h.client.create({ table: 'ceres.redo', shards: 2 })).rejects.toThrow(TableExistsError);
});

test('a transient storage fault is retried and the create succeeds', async () => {
  h.storage.faults.inject({ op: 'createShard', shard: 1, kind: 'transient', times: 2 });
  const table = await h.client.create({ table: 'ceres.flaky', shards: 2 });
  expect(table.state).toBe('READY');
  expect((await filesOfTable(table.id)).length).toBe(2 * 3);
});

test('20 concurrent creates of one name give one table, and every caller gets its id', async () => {
  const results = await Promise.all(Array.from({ length: 20 }, () => h.client.create({ table: 'race.one', shards: 4 })));
  const ids = new Set(results.map((t) => t.id));
  expect(ids.size).toBe(1);
  const tables = (await h.catalog.listTables({ includeTrashed: true })).filter((t) => t.name === 'one');
  expect(tables).toHaveLength(1);
  expect(tables[0]!.id).toBe([...ids][0]);
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('a create that joins a conflicting create of its name still gets its own answer', async () => {
  await h.client.create({ table: 'race.joined', shards: 3 });
  const calls = [3, 5, 3, 5, 3].map((shards) =>
    h.client.create({ table: 'race.joined', shards }).then(
      (t) => ({ shards, ok: t.shards }),
      (err: unknown) => ({ shards, error: (err as Error).name }),
    ),
  );
  expect(await Promise.all(calls)).toEqual([
    { shards: 3, ok: 3 },
    { shards: 5, error: 'TableExistsError' },
    { shards: 3, ok: 3 },
    { shards: 5, error: 'TableExistsError' },
    { shards: 3, ok: 3 },
  ]);
});
