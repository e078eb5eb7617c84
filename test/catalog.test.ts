import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import Database from 'better-sqlite3';
import { SqliteCatalog } from '../catalog/sqlite';
import {
  MIGRATIONS as SQLITE_MIGRATIONS,
  SCHEMA_VERSION as SQLITE_SCHEMA_VERSION,
  migrate as migrateSqlite,
} from '../catalog/sqlite-schema';
import type { Migration } from '../catalog/migrations';
import { sqlList } from '../catalog/rows';
import { PostgresCatalog } from '../catalog/postgres';
import { MIGRATION_1_NAME_HOLDING_STATES, MIGRATION_1_STATES, SCHEMA_VERSION } from '../catalog/postgres-schema';
import type { Catalog, LockHolder, LockOwner, StepKey } from '../catalog/catalog';
import { CatalogNotFoundError } from '../domain/errors';
import { NAME_HOLDING_STATES, TABLE_STATES } from '../domain/states';
import { placeShards } from '../domain/table';
import { sharedPostgres, withClient, type TestPostgres } from './support/postgres';

// The catalog alone, on a real SQLite file and on a real PostgreSQL server: the compare-and-set rules every
// workflow relies on, the same for both.

/** A kind of catalog: where a new one goes, how to open it, and whether opening left a place untouched. */
interface Backend {
  name: string;
  /** A new, empty place for a catalog (a file path in a directory not made yet, a new database's url). */
  newStore(): Promise<string>;
  open(store: string, opts?: { mustExist?: boolean; firstTableId?: number }): Promise<Catalog>;
  /** Whether nothing was made at `store`. */
  isUntouched(store: string): Promise<boolean>;
  cleanUp(): Promise<void>;
}

let pg: TestPostgres;
beforeAll(async () => {
  pg = await sharedPostgres();
});
afterAll(async () => {
  await pg?.stop();
});

const sqliteDirs: string[] = [];
const sqlite: Backend = {
  name: 'SQLite',
  newStore: async () => {
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-catalog-'));
    sqliteDirs.push(dir);
    return path.join(dir, 'catalog', 'catalog.sqlite');
  },
  // The constructor throws: inside then() that is a rejection, as PostgresCatalog.open's.
  open: (file, opts) => Promise.resolve().then(() => new SqliteCatalog(file, opts)),
  isUntouched: (file) => Promise.resolve(!fs.existsSync(path.dirname(file))),
  cleanUp: async () => {
    await Promise.all(sqliteDirs.splice(0).map((dir) => fs.promises.rm(dir, { recursive: true, force: true })));
  },
};

const postgres: Backend = {
  name: 'PostgreSQL',
  newStore: () => pg.freshDatabase('catalog'),
  open: (url, opts) => PostgresCatalog.open(url, opts),
  isUntouched: (url) => withClient(url, async (c) => (await c.query(`SELECT 1 FROM pg_tables WHERE schemaname = 'public'`)).rowCount === 0),
  cleanUp: () => Promise.resolve(),
};

const NODES = ['node-0', 'node-1', 'node-2'];
const owner = (workflowId: string, runId = 'run-1'): LockOwner => ({ workflowId, runId });
const never = () => Promise.resolve(false);
const closed = () => Promise.resolve(true);

let catalog: Catalog;

async function locked(resource: string, who: LockOwner, on: Catalog = catalog): Promise<LockOwner> {
  const result = await on.acquireLock(resource, who, 1, never);
  expect(result.acquired).toBe(true);
  return who;
}

function prepare(name: string, who: LockOwner, step?: StepKey, on: Catalog = catalog, now = 1) {
  return on.prepareCreate(
    {
      namespace: 'ns',
      name,
      params: { shards: 2 },
      owner: who,
      nameLock: `name:ns.${name}`,
      place: (id, p) => placeShards(id, p.shards, NODES),
      now,
      step,
    },
    never,
  );
}

async function readyTable(name: string, now = 1) {
  const creator = await locked(`name:ns.${name}`, owner(`create:ns.${name}`));
  const prepared = await prepare(name, creator, undefined, catalog, now);
  if (prepared.outcome !== 'prepared') throw new Error('expected a new table');
  const table = await catalog.transition({ tableId: prepared.table.id, from: ['CREATING'], to: 'READY', owner: creator, now: now + 1 });
  await catalog.releaseLocks(creator);
  return table;
}

describe.each([sqlite, postgres])('$name catalog', (backend) => {
  let store: string;
  beforeEach(async () => {
    store = await backend.newStore();
    catalog = await backend.open(store);
  });
  afterEach(async () => {
    await catalog.close();
  });
  afterAll(() => backend.cleanUp());

  test('ids increase and are never reused; the placement is chosen once from the id', async () => {
    const a = await readyTable('a');
    const b = await readyTable('b');
    expect(b.id).toBe(a.id + 1);
    expect(a.placement).toEqual(placeShards(a.id, 2, NODES));
  });

  test('ids and times past 2^32 come back as the same numbers', async () => {
    const big = await backend.open(await backend.newStore(), { firstTableId: 5_000_000_000 });
    const now = 1_760_000_000_123;
    const was = catalog;
    catalog = big;
    try {
      const table = await readyTable('t', now);
      expect(table).toMatchObject({ id: 5_000_000_000, createdAt: now, updatedAt: now + 1 });
      expect(typeof table.id).toBe('number');
      await catalog.acquireLock(`table:${table.id}`, owner('trash:1'), now + 2, never);
      expect(await catalog.listLocks()).toEqual([expect.objectContaining({ resource: 'table:5000000000', since: now + 2 })]);
      expect(await catalog.getTable(5_000_000_000)).toEqual(table);
    } finally {
      catalog = was;
      await big.close();
    }
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
    expect(await prepare('t', retry)).toMatchObject({
      outcome: 'prepared',
      resumed: true,
      table: { id: first.table.id, state: 'CREATING' },
    });
  });

  test('a prepare without the name lock is LockLost; one with other parameters is TableExists', async () => {
    await expect(prepare('t', owner('create:ns.t'))).rejects.toMatchObject({ name: 'LockLostError' });
    await readyTable('t');
    const other = await locked('name:ns.t', owner('create:ns.t', 'run-9'));
    await expect(
      catalog.prepareCreate(
        { namespace: 'ns', name: 't', params: { shards: 3 }, owner: other, nameLock: 'name:ns.t', place: () => [], now: 5 },
        never,
      ),
    ).rejects.toMatchObject({ type: 'TableExists' });
    expect(await prepare('t', other)).toMatchObject({ outcome: 'exists' });
  });

  test('a state change needs the expected state and the table lock; repeating one already made is a success', async () => {
    const table = await readyTable('t');
    const trash = await locked(`table:${table.id}`, owner('trash:1'));
    await expect(catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', owner: trash, now: 3 })).rejects.toThrow(
      /is READY/,
    );
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

  test('a rename is a move from READY to READY: the name changes, a taken one is NameTaken, the same one is made', async () => {
    const table = await readyTable('t');
    const taken = await readyTable('u');
    const rename = await locked(`table:${table.id}`, owner('rename:1'));
    const move = (name: string, now: number) =>
      catalog.transition({ tableId: table.id, from: ['READY'], to: 'READY', owner: rename, now, rename: { namespace: 'ns2', name } });
    await expect(
      catalog.transition({
        tableId: table.id,
        from: ['READY'],
        to: 'READY',
        owner: rename,
        now: 3,
        rename: { namespace: taken.namespace, name: taken.name },
      }),
    ).rejects.toMatchObject({ type: 'NameTaken' });
    const renamed = await move('t2', 4);
    expect(renamed).toMatchObject({ id: table.id, state: 'READY', namespace: 'ns2', name: 't2', placement: table.placement });
    expect(await move('t2', 5)).toEqual(renamed);
    expect(await catalog.findByName({ namespace: table.namespace, name: table.name })).toBeUndefined();
    expect((await catalog.findByName({ namespace: 'ns2', name: 't2' }))?.id).toBe(table.id);
  });

  test('a state change that expects another name is refused and changes nothing', async () => {
    const table = await readyTable('t');
    const trash = await locked(`table:${table.id}`, owner('trash:1'));
    await expect(
      catalog.transition({
        tableId: table.id,
        from: ['READY'],
        to: 'TRASHING',
        owner: trash,
        now: 3,
        expectName: { namespace: 'ns', name: 'other' },
      }),
    ).rejects.toThrow(/named ns\.t, not ns\.other/);
    expect((await catalog.getTable(table.id))?.state).toBe('READY');
  });

  test('the trash stamps drop time and expiry from the time it is given; going back to the trash keeps them', async () => {
    const table = await readyTable('t');
    const op = await locked(`table:${table.id}`, owner('trash:1'));
    await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: 3 });
    const trashed = await catalog.transition({
      tableId: table.id,
      from: ['TRASHING'],
      to: 'TRASHED',
      owner: op,
      now: 10_000,
      retentionSeconds: 60,
    });
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
      catalog.transition({
        tableId: old.id,
        from: ['TRASHED'],
        to: 'RESTORING',
        owner: op,
        now: 5,
        rename: { namespace: 'ns', name: 't' },
      }),
    ).rejects.toMatchObject({ type: 'NameTaken' });
    expect((await catalog.getTable(old.id))?.state).toBe('TRASHED');
    expect((await catalog.findByName({ namespace: 'ns', name: 't' }))?.id).toBe(newer.id);
    expect((await catalog.findTrashed({ namespace: 'ns', name: 't' }))?.id).toBe(old.id);
  });

  test('the trash of a name lists its newest first; listing hides the trash unless asked, and tombstones always', async () => {
    const trash = async (name: string, at: number, purge = false) => {
      const table = await readyTable(name, at);
      const op = await locked(`table:${table.id}`, owner(`trash:${table.id}`));
      await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: at + 2 });
      await catalog.transition({ tableId: table.id, from: ['TRASHING'], to: 'TRASHED', owner: op, now: at + 3, retentionSeconds: 60 });
      if (purge) {
        await catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', owner: op, now: at + 4 });
        await catalog.transition({ tableId: table.id, from: ['PURGING'], to: 'PURGED', owner: op, now: at + 5 });
      }
      await catalog.releaseLocks(op);
      return table.id;
    };
    const older = await trash('t', 100);
    const newer = await trash('t', 200);
    const purged = await trash('t', 300, true);
    const live = await readyTable('t', 400);
    expect((await catalog.findTrashed({ namespace: 'ns', name: 't' }))?.id).toBe(newer);
    expect((await catalog.listTables({ includeTrashed: false })).map((t) => t.id)).toEqual([live.id]);
    expect((await catalog.listTables({ includeTrashed: true })).map((t) => t.id)).toEqual([older, newer, live.id]);
    // A page at a time, by id: the ids after `afterId`, `limit` of them at most.
    expect((await catalog.listTables({ includeTrashed: true, limit: 2 })).map((t) => t.id)).toEqual([older, newer]);
    expect((await catalog.listTables({ includeTrashed: true, afterId: newer, limit: 2 })).map((t) => t.id)).toEqual([live.id]);
    expect((await catalog.listTables({ includeTrashed: false, afterId: older })).map((t) => t.id)).toEqual([live.id]);
    expect(await catalog.listTables({ includeTrashed: true, afterId: live.id })).toEqual([]);
    expect((await catalog.getTable(purged))?.state).toBe('PURGED');
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
    const trashing = await catalog.transition({
      tableId: table.id,
      from: ['READY'],
      to: 'TRASHING',
      owner: op,
      now: 3,
      step: key('2:transition'),
    });
    const trashed = await catalog.transition({
      tableId: table.id,
      from: ['TRASHING'],
      to: 'TRASHED',
      owner: op,
      now: 4,
      retentionSeconds: 60,
      step: key('3:commitTrash'),
    });
    await catalog.releaseLocks(op);

    // The workflow task that made these calls was lost; meanwhile another operation took the table.
    const undelete = await locked(`table:${table.id}`, owner('undelete:1'));
    await catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'RESTORING', owner: undelete, now: 5 });

    // The replayed calls answer as before and change nothing; a new call is refused for want of the lock.
    expect(await catalog.acquireLock(`table:${table.id}`, op, 6, never, key('1:acquireLock'))).toMatchObject({ acquired: true });
    expect(
      await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: 7, step: key('2:transition') }),
    ).toEqual(trashing);
    expect(
      await catalog.transition({
        tableId: table.id,
        from: ['TRASHING'],
        to: 'TRASHED',
        owner: op,
        now: 8,
        retentionSeconds: 60,
        step: key('3:commitTrash'),
      }),
    ).toEqual(trashed);
    expect((await catalog.getTable(table.id))?.state).toBe('RESTORING');
    await expect(
      catalog.transition({ tableId: table.id, from: ['RESTORING'], to: 'READY', owner: op, now: 9, step: key('4:transition') }),
    ).rejects.toThrow(/does not hold the lock/);
    expect(await catalog.listLocks()).toEqual([expect.objectContaining({ workflowId: 'undelete:1' })]);
  });

  test('a busy lock is not journaled: the same step asked again takes the lock once it is free', async () => {
    await locked('table:5', owner('trash:5'));
    const step = { runId: 'run-p', step: '1:acquireLock' };
    expect(await catalog.acquireLock('table:5', owner('purge:5', 'run-p'), 2, never, step)).toMatchObject({ acquired: false });
    await catalog.releaseLocks(owner('trash:5'));
    expect(await catalog.acquireLock('table:5', owner('purge:5', 'run-p'), 3, never, step)).toMatchObject({ acquired: true });
    expect(await catalog.holdsLock('table:5', owner('purge:5', 'run-p'))).toBe(true);
  });

  test('a domain error is journaled too: the repeated call fails the same way though the table has changed', async () => {
    const table = await readyTable('t');
    const op = await locked(`table:${table.id}`, owner('purge:1', 'run-p'));
    const step = { runId: op.runId, step: '2:transition' };
    await expect(
      catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', owner: op, now: 3, step }),
    ).rejects.toMatchObject({ type: 'WrongState' });
    await catalog.releaseLocks(op);
    const trash = await locked(`table:${table.id}`, owner('trash:1'));
    await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: trash, now: 4 });
    await catalog.transition({ tableId: table.id, from: ['TRASHING'], to: 'TRASHED', owner: trash, now: 5, retentionSeconds: 60 });
    await expect(
      catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', owner: op, now: 6, step }),
    ).rejects.toMatchObject({ type: 'WrongState' });
    expect((await catalog.getTable(table.id))?.state).toBe('TRASHED');
  });

  test('a NameTaken under a step key is journaled and undoes nothing else', async () => {
    const old = await readyTable('t');
    const op = await locked(`table:${old.id}`, owner('trash:1', 'run-u'));
    await catalog.transition({ tableId: old.id, from: ['READY'], to: 'TRASHING', owner: op, now: 3 });
    await catalog.transition({ tableId: old.id, from: ['TRASHING'], to: 'TRASHED', owner: op, now: 4, retentionSeconds: 60 });
    await readyTable('t');
    const step = { runId: 'run-u', step: '5:restore' };
    const restore = () =>
      catalog.transition({
        tableId: old.id,
        from: ['TRASHED'],
        to: 'RESTORING',
        owner: op,
        now: 5,
        rename: { namespace: 'ns', name: 't' },
        step,
      });
    await expect(restore()).rejects.toMatchObject({ type: 'NameTaken' });
    await expect(restore()).rejects.toMatchObject({ type: 'NameTaken' });
    expect((await catalog.getTable(old.id))?.state).toBe('TRASHED');
  });

  test('a pruned journal entry is forgotten: the call under its key is made anew', async () => {
    const table = await readyTable('t');
    const step = { runId: 'run-g', step: '1:getTable' };
    expect(await catalog.getTable(table.id, step)).toEqual(table);
    expect(await catalog.getTable(999, { runId: 'run-g', step: '2:getTable' })).toBeUndefined();
    expect(await catalog.pruneJournal(0)).toBe(0);
    expect(await catalog.pruneJournal(Date.now() + 1000)).toBe(2);
    const op = await locked(`table:${table.id}`, owner('trash:1'));
    await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: 3 });
    expect((await catalog.getTable(table.id, step))?.state).toBe('TRASHING');
  });

  test('a catalog has an identity of its own, kept across opens; a reader never creates a catalog', async () => {
    const other = await backend.open(await backend.newStore());
    const again = await backend.open(store);
    const reader = await backend.open(store, { mustExist: true });
    try {
      expect(catalog.id).toMatch(/^[0-9a-f]{8}$/);
      expect(again.id).toBe(catalog.id);
      expect(reader.id).toBe(catalog.id);
      expect(other.id).not.toBe(catalog.id);
    } finally {
      await other.close();
      await again.close();
      await reader.close();
    }
    const missing = await backend.newStore();
    await expect(backend.open(missing, { mustExist: true })).rejects.toThrow(CatalogNotFoundError);
    expect(await backend.isUntouched(missing)).toBe(true);
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
});

// Several workers on one database: what only a networked catalog has to get right.
describe('PostgreSQL catalog shared by several workers', () => {
  let url: string;
  let a: PostgresCatalog;
  let b: PostgresCatalog;
  beforeEach(async () => {
    url = await pg.freshDatabase('shared');
    [a, b] = await Promise.all([PostgresCatalog.open(url), PostgresCatalog.open(url)]);
    catalog = a;
  });
  afterEach(async () => {
    await Promise.all([a.close(), b.close()]);
  });

  test('two workers racing for one lock: exactly one wins, 50 rounds out of 50', async () => {
    for (let round = 0; round < 50; round++) {
      const resource = `table:${round}`;
      const results = await Promise.all([
        a.acquireLock(
          resource,
          owner(`trash:${round}`, 'run-a'),
          round,
          never,
          round % 2 ? { runId: 'run-a', step: `${round}` } : undefined,
        ),
        b.acquireLock(
          resource,
          owner(`purge:${round}`, 'run-b'),
          round,
          never,
          round % 2 ? { runId: 'run-b', step: `${round}` } : undefined,
        ),
      ]);
      expect(results.filter((r) => r.acquired)).toHaveLength(1);
      const winner = results[0].acquired ? 'trash' : 'purge';
      expect((await a.listLocks()).filter((l) => l.resource === resource)).toEqual([
        expect.objectContaining({ workflowId: `${winner}:${round}` }),
      ]);
    }
  });

  test('two workers taking over the lock of one closed owner: exactly one wins, 50 rounds out of 50', async () => {
    for (let round = 0; round < 50; round++) {
      const resource = `table:${round}`;
      const dead = await locked(resource, owner(`trash:${round}`, 'run-dead'));
      const onlyTheDead = (holder: LockHolder) => Promise.resolve(holder.runId === dead.runId);
      const results = await Promise.all([
        a.acquireLock(resource, owner(`purge:${round}`, 'run-a'), round, onlyTheDead),
        b.acquireLock(resource, owner(`undelete:${round}`, 'run-b'), round, onlyTheDead),
      ]);
      expect(results.filter((r) => r.acquired)).toHaveLength(1);
      // The dead owner's lock was freed once, by one of them; the one that freed it is not always the one that
      // then took the free lock (as with SQLite shared by two processes): tookOverFrom is the freer's report.
      const [held] = (await a.listLocks()).filter((l) => l.resource === resource);
      expect(held?.runId).toBe(results[0].acquired ? 'run-a' : 'run-b');
      expect(results.filter((r) => r.acquired && r.tookOverFrom).length).toBeLessThanOrEqual(1);
    }
  });

  test('two workers running the same prepare at once converge on one id, with or without its step key', async () => {
    const names = Array.from({ length: 20 }, (_, i) => `t${i}`);
    for (const [i, name] of names.entries()) {
      const creator = await locked(`name:ns.${name}`, owner(`create:ns.${name}`));
      const step = i % 2 ? { runId: creator.runId, step: `prepare:${name}` } : undefined;
      const [x, y] = await Promise.all([prepare(name, creator, step, a), prepare(name, creator, step, b)]);
      if (x.outcome !== 'prepared' || y.outcome !== 'prepared') throw new Error('expected both prepared');
      expect(x.table.id).toBe(y.table.id);
      // Without a key the second finds the first's record and resumes it; with one it answers the journaled outcome.
      expect([x.resumed, y.resumed].sort()).toEqual(step ? [false, false] : [false, true]);
    }
    const tables = await a.listTables({ includeTrashed: true });
    expect(tables.map((t) => t.name).sort()).toEqual([...names].sort());
    // No id was given twice, nor lost to a race.
    expect(tables.map((t) => t.id)).toEqual(names.map((_, i) => i + 1));
  });

  test('prepares of many names from two workers at once get distinct ids, none skipped', async () => {
    const names = Array.from({ length: 30 }, (_, i) => `n${i}`);
    await Promise.all(names.map((name) => locked(`name:ns.${name}`, owner(`create:ns.${name}`))));
    const results = await Promise.all(names.map((name, i) => prepare(name, owner(`create:ns.${name}`), undefined, i % 2 ? a : b)));
    const ids = results.map((r) => (r.outcome === 'prepared' ? r.table.id : -1)).sort((x, y) => x - y);
    expect(ids).toEqual(names.map((_, i) => i + 1));
  });

  test('one step made at once on two workers is applied once, and both answer the same', async () => {
    const table = await readyTable('t');
    const op = await locked(`table:${table.id}`, owner('trash:1', 'run-t'));
    const step = { runId: op.runId, step: '2:transition' };
    const [x, y] = await Promise.all([
      a.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: 10, step }),
      b.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: 20, step }),
    ]);
    expect(x).toEqual(y);
    expect(await withClient(url, async (c) => (await c.query(`SELECT 1 FROM journal WHERE run_id = 'run-t'`)).rowCount)).toBe(1);
  });

  test('workers starting together apply each migration once and share one id', async () => {
    const fresh = await pg.freshDatabase('migrate');
    const opened = await Promise.all(Array.from({ length: 4 }, () => PostgresCatalog.open(fresh, { poolSize: 2 })));
    try {
      expect(new Set(opened.map((c) => c.id)).size).toBe(1);
      const versions = await withClient(
        fresh,
        async (c) => (await c.query<{ version: number }>(`SELECT version FROM schema_migrations`)).rows,
      );
      expect(versions).toEqual([{ version: SCHEMA_VERSION }]);
    } finally {
      await Promise.all(opened.map((c) => c.close()));
    }
    const reopened = await PostgresCatalog.open(fresh);
    expect(reopened.id).toBe(opened[0]!.id);
    await reopened.close();
  });

  test('a reader on a database without the schema is CatalogNotFound, names the url without its password, and creates nothing', async () => {
    const empty = new URL(await pg.freshDatabase('empty'));
    empty.password = 'pa55-word'; // the test server trusts every local connection: the password is only carried
    const err = await PostgresCatalog.open(empty.toString(), { mustExist: true }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(CatalogNotFoundError);
    const withoutPassword = empty.toString().replace(':pa55-word@', '@');
    expect((err as CatalogNotFoundError).path).toBe(withoutPassword);
    expect((err as Error).message).toContain(withoutPassword);
    expect(inspect(err)).not.toContain('pa55-word');
    expect(await postgres.isUntouched(empty.toString())).toBe(true);
  });

  test('an unreachable server is an error that never shows the password; an open catalog hides it too', async () => {
    const err = await PostgresCatalog.open(`postgres://someone:hunter2@127.0.0.1:1/db`).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as Error).message).toMatch(/^cannot open the catalog at postgres:\/\/someone@127\.0\.0\.1:1\/db: /);
    expect(inspect(err)).not.toContain('hunter2');
    const withPassword = new URL(url);
    withPassword.password = 'hunter2';
    const open = await PostgresCatalog.open(withPassword.toString());
    try {
      expect(open.id).toBe(a.id);
      expect(inspect(open, { depth: 10 })).not.toContain('hunter2');
      expect(JSON.stringify(open)).not.toContain('hunter2');
      expect(open.where).toBe(url);
    } finally {
      await open.close();
    }
  });

  test('a schema newer than this code is refused', async () => {
    await withClient(url, (c) => c.query(`INSERT INTO schema_migrations (version, applied_at) VALUES (${SCHEMA_VERSION + 1}, 0)`));
    await expect(PostgresCatalog.open(url)).rejects.toThrow(/newer than this tablefate knows/);
    await expect(PostgresCatalog.open(url, { mustExist: true })).rejects.toThrow(/newer than this tablefate knows/);
  });

  test("migration 1 spells the domain's states as they are", () => {
    expect(MIGRATION_1_STATES).toEqual([...TABLE_STATES]);
    expect(MIGRATION_1_NAME_HOLDING_STATES).toEqual([...NAME_HOLDING_STATES]);
  });
});

// The SQLite file's schema versions: what a worker of this code does to a file it finds, made by this code or before.
describe('SQLite catalog schema', () => {
  /** The schema as catalog/sqlite.ts made it before versions (up to commit 3c7b5f3), run on every open. */
  const UNVERSIONED_SCHEMA = `
CREATE TABLE IF NOT EXISTS tables (
  id          INTEGER PRIMARY KEY,
  namespace   TEXT    NOT NULL,
  name        TEXT    NOT NULL,
  state       TEXT    NOT NULL,
  params      TEXT    NOT NULL,
  placement   TEXT    NOT NULL,
  created_at  INTEGER NOT NULL,
  dropped_at  INTEGER,
  expire_at   INTEGER,
  purged_at   INTEGER,
  updated_at  INTEGER NOT NULL
);
-- A name belongs to at most one table that holds it; the database, not the code, keeps that true.
CREATE UNIQUE INDEX IF NOT EXISTS tables_name_holder ON tables (namespace, name)
  WHERE state IN ('CREATING', 'READY', 'TRASHING', 'RESTORING', 'CREATE_FAILED');
CREATE INDEX IF NOT EXISTS tables_trash ON tables (namespace, name, dropped_at) WHERE state = 'TRASHED';
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS locks (
  resource          TEXT PRIMARY KEY,
  owner_workflow_id TEXT    NOT NULL,
  owner_run_id      TEXT    NOT NULL,
  since             INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS locks_owner ON locks (owner_run_id);
-- What each call of a workflow run answered, so that the call made again after a lost workflow task answers
-- the same without touching anything (see StepKey).
CREATE TABLE IF NOT EXISTS journal (
  run_id  TEXT    NOT NULL,
  step    TEXT    NOT NULL,
  outcome TEXT    NOT NULL,
  at      INTEGER NOT NULL,
  PRIMARY KEY (run_id, step)
);
CREATE INDEX IF NOT EXISTS journal_age ON journal (at);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
`;

  afterAll(() => sqlite.cleanUp());

  /** A file as a worker of the code before versions left it: its schema, a catalog id, a READY table, a lock, a journaled step. */
  async function unversionedFile(schema = UNVERSIONED_SCHEMA): Promise<string> {
    const file = await sqlite.newStore();
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const db = new Database(file);
    try {
      db.pragma('journal_mode = WAL');
      db.exec(schema);
      db.exec(`
        INSERT INTO meta (key, value) VALUES ('catalog_id', 'c0ffee00');
        INSERT INTO counters (name, value) VALUES ('table_id', 7);
        INSERT INTO tables (id, namespace, name, state, params, placement, created_at, updated_at)
          VALUES (7, 'ns', 'old', 'READY', '{"shards":1}', '[{"shard":0,"node":"node-0"}]', 100, 101);
        INSERT INTO locks (resource, owner_workflow_id, owner_run_id, since) VALUES ('table:7', 'trash:7', 'run-7', 102);
        INSERT INTO journal (run_id, step, outcome, at) VALUES ('run-7', '1:acquireLock', '{"value":{"acquired":true}}', 103);
      `);
    } finally {
      db.close();
    }
    return file;
  }

  /** Reads the file with the driver alone: its version, and the SQL of an object of its schema. */
  function inspectFile<T>(file: string, read: (db: Database.Database) => T): T {
    const db = new Database(file, { readonly: true });
    try {
      return read(db);
    } finally {
      db.close();
    }
  }
  const userVersion = (file: string) => inspectFile(file, (db) => db.pragma('user_version', { simple: true }) as number);

  test('a file made before versions opens as the baseline, keeps its rows, and is at the latest version', async () => {
    const file = await unversionedFile();
    // A reader takes it as it is, and writes nothing.
    const reader = new SqliteCatalog(file, { mustExist: true });
    expect(reader.id).toBe('c0ffee00');
    expect((await reader.getTable(7))?.name).toBe('old');
    await reader.close();
    expect(userVersion(file)).toBe(0);

    const worker = new SqliteCatalog(file);
    const was = catalog;
    catalog = worker;
    try {
      expect(userVersion(file)).toBe(SQLITE_SCHEMA_VERSION);
      expect(worker.id).toBe('c0ffee00');
      expect(await worker.getTable(7)).toMatchObject({ id: 7, namespace: 'ns', name: 'old', state: 'READY', createdAt: 100 });
      expect(await worker.listLocks()).toEqual([{ resource: 'table:7', workflowId: 'trash:7', runId: 'run-7', since: 102 }]);
      expect(await worker.stepOutcome({ runId: 'run-7', step: '1:acquireLock' })).toEqual({ value: { acquired: true } });
      // The counter goes on from where it was, and the name index still holds.
      expect((await readyTable('new')).id).toBe(8);
      const creator = await locked('name:ns.old', owner('create:ns.old'));
      await expect(
        catalog.prepareCreate(
          { namespace: 'ns', name: 'old', params: { shards: 3 }, owner: creator, nameLock: 'name:ns.old', place: () => [], now: 5 },
          never,
        ),
      ).rejects.toMatchObject({ type: 'TableExists' });
    } finally {
      catalog = was;
      await worker.close();
    }
  });

  test('a file made before versions that lacks tables made since gets them; one whose index differs is refused, unchanged', async () => {
    // The first versions had no journal, no meta and no locks_owner index: they were made when the file was next opened.
    const early = await unversionedFile(UNVERSIONED_SCHEMA.replace(/CREATE INDEX IF NOT EXISTS locks_owner[^;]*;/, ''));
    const opened = new SqliteCatalog(early);
    await opened.close();
    expect(userVersion(early)).toBe(SQLITE_SCHEMA_VERSION);
    expect(inspectFile(early, (db) => db.prepare(`SELECT name FROM sqlite_master WHERE name = 'locks_owner'`).get())).toBeDefined();

    const otherIndex = UNVERSIONED_SCHEMA.replace(`'CREATING', 'READY', 'TRASHING', 'RESTORING', 'CREATE_FAILED'`, `'READY'`);
    const odd = await unversionedFile(otherIndex);
    const indexSql = (file: string) =>
      inspectFile(
        file,
        (db) => (db.prepare(`SELECT sql FROM sqlite_master WHERE name = 'tables_name_holder'`).get() as { sql: string }).sql,
      );
    const before = indexSql(odd);
    expect(() => new SqliteCatalog(odd)).toThrow(/index tables_name_holder is not the one/);
    expect(() => new SqliteCatalog(odd, { mustExist: true })).toThrow(/index tables_name_holder is not the one/);
    expect(userVersion(odd)).toBe(0);
    expect(indexSql(odd)).toBe(before);
  });

  test('opening a catalog again applies nothing again', async () => {
    const file = await sqlite.newStore();
    const first = new SqliteCatalog(file);
    await first.close();
    const second = new SqliteCatalog(file);
    await second.close();
    expect(second.id).toBe(first.id);
    expect(userVersion(file)).toBe(SQLITE_SCHEMA_VERSION);

    // A migration that is not idempotent (an insert): applied once however often the file is migrated.
    const counted: Migration = {
      version: SQLITE_SCHEMA_VERSION + 1,
      description: 'test',
      sql: `CREATE TABLE extra (x INTEGER); INSERT INTO extra VALUES (1);`,
    };
    const db = new Database(file);
    try {
      migrateSqlite(db, [...SQLITE_MIGRATIONS, counted]);
      migrateSqlite(db, [...SQLITE_MIGRATIONS, counted]);
      expect(db.prepare(`SELECT count(*) AS n FROM extra`).get()).toEqual({ n: 1 });
      expect(db.pragma('user_version', { simple: true })).toBe(SQLITE_SCHEMA_VERSION + 1);
    } finally {
      db.close();
    }
  });

  test('a migration that fails leaves the file at its old version, with nothing of it applied', async () => {
    const file = await sqlite.newStore();
    const made = new SqliteCatalog(file);
    await made.close();
    const failing: Migration = {
      version: SQLITE_SCHEMA_VERSION + 1,
      description: 'test',
      sql: `CREATE TABLE extra (x INTEGER); INSERT INTO no_such_table VALUES (1);`,
    };
    const db = new Database(file);
    try {
      expect(() => migrateSqlite(db, [...SQLITE_MIGRATIONS, failing])).toThrow(/no such table: no_such_table/);
      expect(db.pragma('user_version', { simple: true })).toBe(SQLITE_SCHEMA_VERSION);
      expect(db.prepare(`SELECT name FROM sqlite_master WHERE name = 'extra'`).get()).toBeUndefined();
    } finally {
      db.close();
    }
    const reopened = new SqliteCatalog(file);
    expect(reopened.id).toBe(made.id);
    await reopened.close();
  });

  test('a file newer than this code is refused, by a worker and by a reader', async () => {
    const file = await sqlite.newStore();
    await new SqliteCatalog(file).close();
    const db = new Database(file);
    db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION + 1}`);
    db.close();
    expect(() => new SqliteCatalog(file)).toThrow(/newer than this tablefate knows/);
    expect(() => new SqliteCatalog(file, { mustExist: true })).toThrow(/newer than this tablefate knows/);
  });

  test("migration 1 spells the domain's name-holding states as they are", () => {
    expect(SQLITE_MIGRATIONS[0]!.sql).toContain(`WHERE state IN (${sqlList(NAME_HOLDING_STATES)})`);
  });
});

// The rules are asynchronous; SQLite's transactions are BEGIN IMMEDIATE ... COMMIT around them, one call at a time
// per file in the process. Without that, a call would join another's open transaction, or wait for its write lock
// with the event loop blocked (and fail after busy_timeout).
describe('SQLite catalog called concurrently in one process', () => {
  afterAll(() => sqlite.cleanUp());

  test('many calls at once, on one catalog and on two of the same file, each apply once and see each other', async () => {
    const file = await sqlite.newStore();
    const a = new SqliteCatalog(file);
    const b = new SqliteCatalog(file);
    try {
      const names = Array.from({ length: 30 }, (_, i) => `n${i}`);
      await Promise.all(names.map((name, i) => locked(`name:ns.${name}`, owner(`create:ns.${name}`), i % 2 ? a : b)));
      const results = await Promise.all(names.map((name, i) => prepare(name, owner(`create:ns.${name}`), undefined, i % 3 ? a : b)));
      const ids = results.map((r) => (r.outcome === 'prepared' ? r.table.id : -1)).sort((x, y) => x - y);
      expect(ids).toEqual(names.map((_, i) => i + 1));
      // A failing call rolls back only its own transaction, while the others go on.
      const moves = await Promise.allSettled(
        results.map((r, i) =>
          (i % 2 ? a : b).transition({
            tableId: r.outcome === 'prepared' ? r.table.id : -1,
            from: ['CREATING'],
            to: 'READY',
            owner: owner(i % 5 ? `create:ns.${names[i]}` : 'not-the-owner'),
            now: 2,
          }),
        ),
      );
      expect(moves.filter((m) => m.status === 'rejected')).toHaveLength(6);
      expect((await b.listTables({ includeTrashed: false })).filter((t) => t.state === 'READY')).toHaveLength(24);
      expect(await a.listLocks()).toHaveLength(60);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
