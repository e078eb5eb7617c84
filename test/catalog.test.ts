import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SqliteCatalog } from '../catalog/sqlite';
import type { LockOwner, StepKey } from '../catalog/catalog';
import { CatalogNotFoundError } from '../domain/errors';
import { placeShards } from '../domain/table';

// The catalog alone, on a real SQLite file: the compare-and-set rules every workflow relies on.
let dir: string;
let catalog: SqliteCatalog;
const NODES = ['node-0', 'node-1', 'node-2'];
const owner = (workflowId: string, runId = 'run-1'): LockOwner => ({ workflowId, runId });
const never = () => Promise.resolve(false);
const closed = () => Promise.resolve(true);

beforeEach(async () => {
  dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-catalog-'));
  catalog = new SqliteCatalog(path.join(dir, 'catalog.sqlite'));
});
afterEach(async () => {
  await catalog.close();
  await fs.promises.rm(dir, { recursive: true, force: true });
});

async function locked(resource: string, who: LockOwner): Promise<LockOwner> {
  const result = await catalog.acquireLock(resource, who, 1, never);
  expect(result.acquired).toBe(true);
  return who;
}

function prepare(name: string, who: LockOwner, step?: StepKey) {
  return catalog.prepareCreate(
    { namespace: 'ns', name, params: { shards: 2 }, owner: who, nameLock: `name:ns.${name}`, place: (id, p) => placeShards(id, p.shards, NODES), now: 1, step },
    never,
  );
}

async function readyTable(name: string) {
  const creator = await locked(`name:ns.${name}`, owner(`create:ns.${name}`));
  const prepared = await prepare(name, creator);
  if (prepared.outcome !== 'prepared') throw new Error('expected a new table');
  const table = await catalog.transition({ tableId: prepared.table.id, from: ['CREATING'], to: 'READY', owner: creator, now: 2 });
  await catalog.releaseLocks(creator);
  return table;
}

test('ids increase and are never reused; the placement is chosen once from the id', async () => {
  const a = await readyTable('a');
  const b = await readyTable('b');
  expect(b.id).toBe(a.id + 1);
  expect(a.placement).toEqual(placeShards(a.id, 2, NODES));
});

test('a prepare takes the table lock with the name lock, and waits while another operation holds the table', async () => {
  const creator = await locked('name:ns.t', owner('create:ns.t'));
  const first = await prepare('t', creator);
  if (first.outcome !== 'prepared') throw new Error('expected a new table');
  expect((await catalog.listLocks()).map((l) => l.resource).sort()).toEqual(['name:ns.t', `table:${first.table.id}`]);
  await catalog.transition({ tableId: first.table.id, from: ['CREATING'], to: 'CREATE_FAILED', owner: creator, now: 2 });
  await catalog.releaseLocks(creator);
  expect(await catalog.listLocks()).toEqual([]);

  // A stray operation (a trash with a stale idea of the table) holds the table's lock: the retry waits for it.
  await locked(`table:${first.table.id}`, owner('trash:x'));
  const retry = await locked('name:ns.t', owner('create:ns.t', 'run-2'));
  expect(await prepare('t', retry)).toMatchObject({ outcome: 'busy', holder: { workflowId: 'trash:x' } });
  expect((await catalog.getTable(first.table.id))?.state).toBe('CREATE_FAILED');
  await catalog.releaseLocks(owner('trash:x'));
  expect(await prepare('t', retry)).toMatchObject({ outcome: 'prepared', resumed: true, table: { id: first.table.id, state: 'CREATING' } });
});

test('a state change needs the expected state and the table lock; repeating one already made is a success', async () => {
  const table = await readyTable('t');
  const trash = await locked(`table:${table.id}`, owner('trash:1'));
  await expect(
    catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', owner: trash, now: 3 }),
  ).rejects.toThrow(/is READY/);
  await expect(
    catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: owner('purge:1'), now: 3 }),
  ).rejects.toThrow(/does not hold the lock/);
  const trashing = await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: trash, now: 3 });
  const again = await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: trash, now: 4 });
  expect(again).toEqual(trashing);
  await expect(catalog.transition({ tableId: 999, from: ['READY'], to: 'TRASHING', owner: trash, now: 3 })).rejects.toThrow(
    /does not exist/,
  );
});

test('a state change that expects another name is refused and changes nothing', async () => {
  const table = await readyTable('t');
  const trash = await locked(`table:${table.id}`, owner('trash:1'));
  await expect(
    catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: trash, now: 3, expectName: { namespace: 'ns', name: 'other' } }),
  ).rejects.toThrow(/named ns\.t, not ns\.other/);
  expect((await catalog.getTable(table.id))?.state).toBe('READY');
});

test('the trash stamps drop time and expiry from the time it is given; going back to the trash keeps them', async () => {
  const table = await readyTable('t');
  const op = await locked(`table:${table.id}`, owner('trash:1'));
  await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: 3 });
  const trashed = await catalog.transition({ tableId: table.id, from: ['TRASHING'], to: 'TRASHED', owner: op, now: 10_000, retentionSeconds: 60 });
  expect(trashed).toMatchObject({ droppedAt: 10_000, expireAt: 70_000 });
  await catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', owner: op, now: 20_000 });
  const back = await catalog.transition({ tableId: table.id, from: ['PURGING'], to: 'TRASHED', owner: op, now: 30_000 });
  expect(back).toMatchObject({ droppedAt: 10_000, expireAt: 70_000 });
});

test('a trashed table frees its name; restoring into a taken name is NameTaken and changes nothing', async () => {
  const old = await readyTable('t');
  const op = await locked(`table:${old.id}`, owner('trash:1'));
  await catalog.transition({ tableId: old.id, from: ['READY'], to: 'TRASHING', owner: op, now: 3 });
  await catalog.transition({ tableId: old.id, from: ['TRASHING'], to: 'TRASHED', owner: op, now: 4, retentionSeconds: 60 });
  expect(await catalog.findByName({ namespace: 'ns', name: 't' })).toBeUndefined();
  const newer = await readyTable('t');
  await expect(
    catalog.transition({ tableId: old.id, from: ['TRASHED'], to: 'RESTORING', owner: op, now: 5, rename: { namespace: 'ns', name: 't' } }),
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
  const closedAndAsked = (holder: LockOwner) => {
    asked.push(holder.workflowId);
    return Promise.resolve(true);
  };
  expect(await catalog.acquireLock('table:7', other, 4, closedAndAsked)).toMatchObject({ acquired: true, tookOverFrom: first });
  expect(asked).toEqual(['trash:7']);
  expect(await catalog.holdsLock('table:7', other)).toBe(true);
  expect(await catalog.holdsLock('table:7', first)).toBe(false);
  await catalog.releaseLocks(first); // not the holder any more: no effect
  expect(await catalog.listLocks()).toHaveLength(1);
  await catalog.releaseLocks(other);
  expect(await catalog.listLocks()).toEqual([]);
});

test('a call repeated under its step key answers what it answered, even after its run released the lock', async () => {
  const table = await readyTable('t');
  const op = owner('trash:1', 'run-t');
  const key = (step: string): StepKey => ({ runId: op.runId, step });
  await catalog.acquireLock(`table:${table.id}`, op, 1, never, key('1:acquireLock'));
  const trashing = await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: 3, step: key('2:transition') });
  const trashed = await catalog.transition({ tableId: table.id, from: ['TRASHING'], to: 'TRASHED', owner: op, now: 4, retentionSeconds: 60, step: key('3:commitTrash') });
  await catalog.releaseLocks(op);

  // The workflow task that made these calls was lost; meanwhile another operation took the table.
  const undelete = await locked(`table:${table.id}`, owner('undelete:1'));
  await catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'RESTORING', owner: undelete, now: 5 });

  // The replayed calls answer as before and change nothing; a new call is refused for want of the lock.
  expect(await catalog.acquireLock(`table:${table.id}`, op, 6, never, key('1:acquireLock'))).toMatchObject({ acquired: true });
  expect(await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: 7, step: key('2:transition') })).toEqual(trashing);
  expect(await catalog.transition({ tableId: table.id, from: ['TRASHING'], to: 'TRASHED', owner: op, now: 8, retentionSeconds: 60, step: key('3:commitTrash') })).toEqual(trashed);
  expect((await catalog.getTable(table.id))?.state).toBe('RESTORING');
  await expect(
    catalog.transition({ tableId: table.id, from: ['RESTORING'], to: 'READY', owner: op, now: 9, step: key('4:transition') }),
  ).rejects.toThrow(/does not hold the lock/);
  expect(await catalog.listLocks()).toEqual([expect.objectContaining({ workflowId: 'undelete:1' })]);
});

test('a domain error is journaled too: the repeated call fails the same way though the table has changed', async () => {
  const table = await readyTable('t');
  const op = await locked(`table:${table.id}`, owner('purge:1', 'run-p'));
  const step = { runId: op.runId, step: '2:transition' };
  await expect(catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', owner: op, now: 3, step })).rejects.toMatchObject({ type: 'WrongState' });
  await catalog.releaseLocks(op);
  const trash = await locked(`table:${table.id}`, owner('trash:1'));
  await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: trash, now: 4 });
  await catalog.transition({ tableId: table.id, from: ['TRASHING'], to: 'TRASHED', owner: trash, now: 5, retentionSeconds: 60 });
  await expect(catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', owner: op, now: 6, step })).rejects.toMatchObject({ type: 'WrongState' });
  expect((await catalog.getTable(table.id))?.state).toBe('TRASHED');
});

test('a catalog has an identity of its own, kept across opens; a reader never creates a catalog', async () => {
  const file = path.join(dir, 'catalog.sqlite');
  const other = new SqliteCatalog(path.join(dir, 'other.sqlite'));
  const again = new SqliteCatalog(file);
  try {
    expect(catalog.id).toMatch(/^[0-9a-f]{8}$/);
    expect(again.id).toBe(catalog.id);
    expect(other.id).not.toBe(catalog.id);
  } finally {
    await other.close();
    await again.close();
  }
  const missing = path.join(dir, 'nowhere', 'catalog.sqlite');
  expect(() => new SqliteCatalog(missing, { mustExist: true })).toThrow(CatalogNotFoundError);
  expect(fs.existsSync(path.dirname(missing))).toBe(false);
});

test('a lock left by a closed owner is taken over by a prepare that needs it', async () => {
  const creator = await locked('name:ns.t', owner('create:ns.t'));
  const first = await prepare('t', creator);
  if (first.outcome !== 'prepared') throw new Error('expected a new table');
  // The first create was terminated while holding both locks.
  const retry = owner('create:ns.t', 'run-2');
  expect((await catalog.acquireLock('name:ns.t', retry, 2, closed)).acquired).toBe(true);
  const resumed = await catalog.prepareCreate(
    { namespace: 'ns', name: 't', params: { shards: 2 }, owner: retry, nameLock: 'name:ns.t', place: () => [], now: 3 },
    closed,
  );
  expect(resumed).toMatchObject({ outcome: 'prepared', resumed: true, table: { id: first.table.id } });
  expect(await catalog.holdsLock(`table:${first.table.id}`, retry)).toBe(true);
});
