import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SqliteCatalog } from '../catalog/sqlite';
import type { LockGuard, LockOwner } from '../catalog/catalog';
import { placeShards } from '../domain/table';

// The catalog alone, on a real SQLite file: the compare-and-set rules every workflow relies on.
let dir: string;
let catalog: SqliteCatalog;
const NODES = ['node-0', 'node-1', 'node-2'];
const owner = (workflowId: string, runId = 'run-1'): LockOwner => ({ workflowId, runId });
const never = () => Promise.resolve(false);

beforeEach(async () => {
  dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-catalog-'));
  catalog = new SqliteCatalog(path.join(dir, 'catalog.sqlite'));
});
afterEach(async () => {
  await catalog.close();
  await fs.promises.rm(dir, { recursive: true, force: true });
});

async function locked(resource: string, who: LockOwner): Promise<LockGuard> {
  const result = await catalog.acquireLock(resource, who, 1, never);
  expect(result.acquired).toBe(true);
  return { resource, owner: who };
}

async function readyTable(name: string) {
  const guard = await locked(`name:ns.${name}`, owner(`create:ns.${name}`));
  const prepared = await catalog.prepareCreate({
    namespace: 'ns',
    name,
    params: { shards: 2 },
    guard,
    place: (id, p) => placeShards(id, p.shards, NODES),
    now: 1,
  });
  if (prepared.outcome !== 'prepared') throw new Error('expected a new table');
  const table = await catalog.transition({ tableId: prepared.table.id, from: ['CREATING'], to: 'READY', guard, now: 2 });
  await catalog.releaseLock(guard.resource, guard.owner);
  return table;
}

test('ids increase and are never reused; the placement is chosen once from the id', async () => {
  const a = await readyTable('a');
  const b = await readyTable('b');
  expect(b.id).toBe(a.id + 1);
  expect(a.placement).toEqual(placeShards(a.id, 2, NODES));
});

test('a state change needs the expected state and the lock; repeating one already made is a success', async () => {
  const table = await readyTable('t');
  const guard = await locked(`table:${table.id}`, owner('trash:1'));
  await expect(
    catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', guard, now: 3 }),
  ).rejects.toThrow(/is READY/);
  const stranger = { resource: `table:${table.id}`, owner: owner('purge:1') };
  await expect(
    catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', guard: stranger, now: 3 }),
  ).rejects.toThrow(/does not hold the lock/);
  const trashing = await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', guard, now: 3 });
  const again = await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', guard, now: 4 });
  expect(again).toEqual(trashing);
  await expect(catalog.transition({ tableId: 999, from: ['READY'], to: 'TRASHING', guard, now: 3 })).rejects.toThrow(
    /does not exist/,
  );
});

test('a trashed table frees its name; restoring into a taken name is NameTaken and changes nothing', async () => {
  const old = await readyTable('t');
  const guard = await locked(`table:${old.id}`, owner('trash:1'));
  await catalog.transition({ tableId: old.id, from: ['READY'], to: 'TRASHING', guard, now: 3 });
  await catalog.transition({ tableId: old.id, from: ['TRASHING'], to: 'TRASHED', guard, now: 4 });
  expect(await catalog.findByName({ namespace: 'ns', name: 't' })).toBeUndefined();
  const newer = await readyTable('t');
  await expect(
    catalog.transition({ tableId: old.id, from: ['TRASHED'], to: 'RESTORING', guard, now: 5, set: { namespace: 'ns', name: 't' } }),
  ).rejects.toMatchObject({ type: 'NameTaken' });
  expect((await catalog.getTable(old.id))?.state).toBe('TRASHED');
  expect((await catalog.findByName({ namespace: 'ns', name: 't' }))?.id).toBe(newer.id);
  expect((await catalog.findTrashed({ namespace: 'ns', name: 't' }))?.id).toBe(old.id);
});

test('a lock is re-entrant for its owner, refused to others, and taken over only from a closed owner', async () => {
  const first = owner('trash:7', 'run-a');
  await locked('table:7', first);
  expect((await catalog.acquireLock('table:7', first, 2, never)).acquired).toBe(true);
  const other = owner('purge:7');
  expect(await catalog.acquireLock('table:7', other, 3, never)).toMatchObject({ acquired: false, holder: first });
  const asked: string[] = [];
  const closed = (holder: LockOwner) => {
    asked.push(holder.workflowId);
    return Promise.resolve(true);
  };
  expect(await catalog.acquireLock('table:7', other, 4, closed)).toMatchObject({ acquired: true, tookOverFrom: first });
  expect(asked).toEqual(['trash:7']);
  expect((await catalog.listLocks()).map((l) => l.workflowId)).toEqual(['purge:7']);
  await catalog.releaseLock('table:7', first); // not the holder any more: no effect
  expect(await catalog.listLocks()).toHaveLength(1);
  await catalog.releaseLock('table:7', other);
  expect(await catalog.listLocks()).toEqual([]);
});
