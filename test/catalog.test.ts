import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { inspect } from 'node:util';
import Database from 'better-sqlite3';
import { SqliteCatalog } from '../catalog/sqlite';
import {
  MIGRATIONS as SQLITE_MIGRATIONS,
  SCHEMA_VERSION as SQLITE_SCHEMA_VERSION,
  checkSchema as checkSqliteSchema,
  migrate as migrateSqlite,
} from '../catalog/sqlite-schema';
import type { Migration } from '../catalog/migrations';
import { sqlList } from '../catalog/rows';
import { PostgresCatalog } from '../catalog/postgres';
import {
  MIGRATION_1_NAME_HOLDING_STATES,
  MIGRATION_1_STATES,
  MIGRATION_2_NAME_HOLDING_STATES,
  MIGRATION_2_STATES,
  MIGRATIONS as PG_MIGRATIONS,
  SCHEMA_VERSION,
} from '../catalog/postgres-schema';
import type { Catalog, LockHolder, LockOwner, StepKey } from '../catalog/catalog';
import { CatalogNotFoundError } from '../domain/errors';
import type { Lease } from '../domain/leases';
import type { Hold, TableRecord } from '../domain/table';
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
  /** Runs SQL on `store` with the driver alone, beside the catalog open on it. */
  exec(store: string, sql: string): Promise<void>;
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
  exec: (file, sql) =>
    Promise.resolve().then(() => {
      const db = new Database(file);
      try {
        db.pragma('busy_timeout = 5000');
        db.exec(sql);
      } finally {
        db.close();
      }
    }),
  cleanUp: async () => {
    await Promise.all(sqliteDirs.splice(0).map((dir) => fs.promises.rm(dir, { recursive: true, force: true })));
  },
};

const postgres: Backend = {
  name: 'PostgreSQL',
  newStore: () => pg.freshDatabase('catalog'),
  open: (url, opts) => PostgresCatalog.open(url, opts),
  isUntouched: (url) => withClient(url, async (c) => (await c.query(`SELECT 1 FROM pg_tables WHERE schemaname = 'public'`)).rowCount === 0),
  exec: (url, sql) => withClient(url, async (c) => void (await c.query(sql))),
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

/** A table trashed at `at` for `retentionSeconds`, its trash's lock released (its run waits on a timer, holding none). */
async function trashedTable(name: string, at = 10_000, retentionSeconds = 60) {
  const table = await readyTable(name);
  const op = await locked(`table:${table.id}`, owner(`trash:${table.id}`));
  await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: at - 1 });
  const trashed = await catalog.transition({ tableId: table.id, from: ['TRASHING'], to: 'TRASHED', owner: op, now: at, retentionSeconds });
  await catalog.releaseLocks(op);
  return trashed;
}

/** A lease on `tableId` that runs out at `expiresAt`, taken `ttlSeconds` before. */
const leaseOf = (tableId: number, id: string, expiresAt: number, ttlSeconds = 60): Lease => ({
  id,
  tableId,
  holder: 'svc@host',
  ttlSeconds,
  acquiredAt: expiresAt - ttlSeconds * 1000,
  expiresAt,
});

const acquire = (lease: Lease, step?: StepKey) => catalog.changeLease({ action: 'acquire', lease, step });

/** The last of `migrations` whose SQL contains `marker`: the one that made what the marker names as it is now. */
function lastMigrationWith(migrations: readonly Migration[], marker: string): Migration {
  const found = migrations.filter((m) => m.sql.includes(marker)).at(-1);
  if (!found) throw new Error(`no migration contains ${marker}`);
  return found;
}

/**
 * A catalog's rows as an older worker left them (the same SQL on both stores, and on every schema version): the id
 * counter, a READY table, its lock held by a trash and that trash's journaled step.
 */
const OLD_ROWS = `
  INSERT INTO counters (name, value) VALUES ('table_id', 7);
  INSERT INTO tables (id, namespace, name, state, params, placement, created_at, updated_at)
    VALUES (7, 'ns', 'old', 'READY', '{"shards":1}', '[{"shard":0,"node":"node-0"}]', 100, 101);
  INSERT INTO locks (resource, owner_workflow_id, owner_run_id, since) VALUES ('table:7', 'trash:7', 'run-7', 102);
  INSERT INTO journal (run_id, step, outcome, at) VALUES ('run-7', '1:acquireLock', '{"value":{"acquired":true}}', 103);
`;

/** OLD_ROWS's table as today's catalog reads it. */
const OLD_TABLE = {
  id: 7,
  namespace: 'ns',
  name: 'old',
  state: 'READY',
  params: { shards: 1 },
  placement: [{ shard: 0, node: 'node-0' }],
  createdAt: 100,
  droppedAt: null,
  expireAt: null,
  purgedAt: null,
  updatedAt: 101,
  hold: null,
};

/**
 * What a catalog migrated from OLD_ROWS must now do (it is `catalog` for the helpers): the drop that holds table 7's lock
 * drains it while a lease lives, DRAINING keeps the name from another table, and the hold columns are there. Answers
 * the other table and the hold placed on it.
 */
async function servesVersion2(worker: Catalog): Promise<{ other: TableRecord; hold: { reason: string; since: number } }> {
  await acquire(leaseOf(7, 'lease-7', 10_000));
  expect(await worker.startDrain({ tableId: 7, owner: owner('trash:7', 'run-7'), now: 1_000 })).toEqual({
    table: { ...OLD_TABLE, state: 'DRAINING', updatedAt: 1_000 },
    leases: [leaseOf(7, 'lease-7', 10_000)],
  });
  const other = await readyTable('other');
  expect(other.id).toBe(8);
  const renamer = await locked(`table:${other.id}`, owner('rename:8'));
  await expect(
    worker.transition({
      tableId: other.id,
      from: ['READY'],
      to: 'READY',
      owner: renamer,
      now: 2_000,
      rename: { namespace: 'ns', name: 'old' },
    }),
  ).rejects.toMatchObject({ type: 'NameTaken' });
  const hold = { reason: 'migrated', since: 3_000 };
  expect((await worker.changeHold({ tableId: other.id, hold, owner: renamer })).hold).toEqual(hold);
  return { other, hold };
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

  test('settings: global and namespace values are set, replaced, listed and unset; a journaled call answers what it first did', async () => {
    expect(await catalog.listSettings()).toEqual([]);
    await catalog.changeSetting({ key: 'trash.retentionSeconds', namespace: null, value: 3600, now: 10 });
    await catalog.changeSetting({ key: 'trash.retentionSeconds', namespace: 'ns', value: 600, now: 11 });
    await catalog.changeSetting({ key: 'trash.maxBytes', namespace: null, value: null, now: 12 });
    const all = await catalog.changeSetting({ key: 'trash.enabled', namespace: 'ns', value: false, now: 13 });
    // By key, the global value before the namespaces'. A stored null (no cap) and a stored false are values, not absences.
    expect(all).toEqual([
      { key: 'trash.enabled', namespace: 'ns', value: false, updatedAt: 13 },
      { key: 'trash.maxBytes', namespace: null, value: null, updatedAt: 12 },
      { key: 'trash.retentionSeconds', namespace: null, value: 3600, updatedAt: 10 },
      { key: 'trash.retentionSeconds', namespace: 'ns', value: 600, updatedAt: 11 },
    ]);
    expect(await catalog.listSettings()).toEqual(all);
    // Set again: replaced, not added.
    const replaced = await catalog.changeSetting({ key: 'trash.retentionSeconds', namespace: null, value: 7200, now: 14 });
    expect(replaced).toEqual([all[0], all[1], { ...all[2], value: 7200, updatedAt: 14 }, all[3]]);

    // A journaled list, then a change: the same step asked again answers the rows it answered first.
    const step = { runId: 'run-s', step: '1:listSettings' };
    expect(await catalog.listSettings(step)).toEqual(replaced);
    const unset = await catalog.changeSetting({ key: 'trash.retentionSeconds', namespace: 'ns', now: 15 });
    expect(unset).toEqual(replaced.slice(0, 3));
    expect(await catalog.listSettings(step)).toEqual(replaced);
    expect(await catalog.listSettings()).toEqual(unset);
    expect(await catalog.listSettings({ runId: 'run-s', step: '2:listSettings' })).toEqual(unset);
    // Unsetting what is not set changes nothing and is no error.
    expect(await catalog.changeSetting({ key: 'trash.retentionSeconds', namespace: 'ns', now: 16 })).toEqual(unset);

    // A journaled change is made once: made again under its key, it answers what it did and changes nothing.
    const setStep = { runId: 'run-s', step: '3:changeSetting' };
    const first = await catalog.changeSetting({ key: 'trash.maxBytes', namespace: 'ns', value: 1024, now: 17, step: setStep });
    expect(first).toContainEqual({ key: 'trash.maxBytes', namespace: 'ns', value: 1024, updatedAt: 17 });
    await catalog.changeSetting({ key: 'trash.maxBytes', namespace: 'ns', value: 2048, now: 18 });
    expect(await catalog.changeSetting({ key: 'trash.maxBytes', namespace: 'ns', value: 1024, now: 19, step: setStep })).toEqual(first);
    expect(await catalog.listSettings()).toContainEqual({ key: 'trash.maxBytes', namespace: 'ns', value: 2048, updatedAt: 18 });
  });

  test('a legal hold needs the table lock; the same reason again is a success, another is WrongState; updatedAt is left alone', async () => {
    const table = await readyTable('t');
    const who = owner('hold:1');
    const hold = { reason: 'litigation 42', since: 50 };
    const change = (h: Hold | null, by: LockOwner = who) => catalog.changeHold({ tableId: table.id, hold: h, owner: by });
    await expect(change(hold)).rejects.toMatchObject({ name: 'LockLostError' });
    await locked(`table:${table.id}`, who);
    await expect(change(hold, owner('hold:2'))).rejects.toMatchObject({ name: 'LockLostError' });
    await expect(
      catalog.changeHold({ tableId: table.id, hold, owner: who, expectName: { namespace: 'ns', name: 'other' } }),
    ).rejects.toMatchObject({ type: 'WrongState' });
    expect(await catalog.getTable(table.id)).toEqual(table);

    const held = await change(hold);
    expect(held).toEqual({ ...table, hold });
    expect(await catalog.getTable(table.id)).toEqual(held);
    // Held again for the same reason (a retry, later): the table as it is, held since the first time.
    expect(await change({ reason: 'litigation 42', since: 60 })).toEqual(held);
    await expect(change({ reason: 'audit', since: 70 })).rejects.toMatchObject({ type: 'WrongState' });
    await expect(change({ reason: null, since: 70 })).rejects.toMatchObject({ type: 'WrongState' });
    expect(await catalog.getTable(table.id)).toEqual(held);

    // Released: the table as it was before; released again: WrongState.
    expect(await change(null)).toEqual(table);
    await expect(change(null)).rejects.toMatchObject({ type: 'WrongState' });
    expect(await catalog.getTable(table.id)).toEqual(table);

    // A hold without a reason is a hold all the same.
    const anonymous = await change({ reason: null, since: 80 });
    expect(await catalog.getTable(table.id)).toEqual({ ...table, hold: { reason: null, since: 80 } });
    expect(await change({ reason: null, since: 90 })).toEqual(anonymous);
    await expect(change({ reason: 'audit', since: 90 })).rejects.toMatchObject({ type: 'WrongState' });
    await expect(catalog.changeHold({ tableId: 999, hold, owner: who })).rejects.toMatchObject({ type: 'TableNotFound' });
  });

  test('only a READY or trashed table can be held; a hold stays with its table into the trash', async () => {
    const hold = { reason: 'r', since: 20_000 };
    const trashed = await trashedTable('gone', 10_000, 60);
    const holder = await locked(`table:${trashed.id}`, owner('hold:1'));
    expect(await catalog.changeHold({ tableId: trashed.id, hold, owner: holder })).toEqual({ ...trashed, hold });
    expect(await catalog.changeHold({ tableId: trashed.id, hold: null, owner: holder })).toEqual(trashed);

    // Tables on their way somewhere, each under the lock of the operation moving it.
    const creator = await locked('name:ns.new', owner('create:ns.new'));
    const creating = await prepare('new', creator);
    if (creating.outcome !== 'prepared') throw new Error('expected a new table');
    await expect(catalog.changeHold({ tableId: creating.table.id, hold, owner: creator })).rejects.toMatchObject({ type: 'WrongState' });

    const moving = await readyTable('moving');
    const drop = await locked(`table:${moving.id}`, owner('trash:m'));
    await acquire(leaseOf(moving.id, 'lease-m', 1_000_000));
    expect((await catalog.startDrain({ tableId: moving.id, owner: drop, now: 5 })).table.state).toBe('DRAINING');
    await expect(catalog.changeHold({ tableId: moving.id, hold, owner: drop })).rejects.toMatchObject({ type: 'WrongState' });
    await catalog.transition({ tableId: moving.id, from: ['DRAINING'], to: 'TRASHING', owner: drop, now: 6 });
    await expect(catalog.changeHold({ tableId: moving.id, hold, owner: drop })).rejects.toMatchObject({ type: 'WrongState' });
    expect((await catalog.getTable(moving.id))?.hold).toBeNull();

    // A held READY table dropped: the hold goes with it into the trash.
    const kept = await readyTable('kept');
    const op = await locked(`table:${kept.id}`, owner('trash:k'));
    await catalog.changeHold({ tableId: kept.id, hold, owner: op });
    await catalog.transition({ tableId: kept.id, from: ['READY'], to: 'TRASHING', owner: op, now: 30_000 });
    const keptTrashed = await catalog.transition({
      tableId: kept.id,
      from: ['TRASHING'],
      to: 'TRASHED',
      owner: op,
      now: 30_001,
      retentionSeconds: 60,
    });
    expect(keptTrashed).toMatchObject({ state: 'TRASHED', hold });
  });

  test('the trash run moves its expiry: only the trash at its drop time, and not while another operation holds the table', async () => {
    const trashed = await trashedTable('t', 10_000, 60);
    expect(trashed).toMatchObject({ droppedAt: 10_000, expireAt: 70_000 });
    const run = owner(`trash:${trashed.id}`, 'run-trash');
    const move = (expireAt: number, opts: { droppedAt?: number; by?: LockOwner; tableId?: number } = {}) =>
      catalog.changeExpiry({ tableId: opts.tableId ?? trashed.id, droppedAt: opts.droppedAt ?? 10_000, expireAt, owner: opts.by ?? run });

    const moved = await move(130_000);
    expect(moved).toEqual({ ...trashed, expireAt: 130_000, updatedAt: moved.updatedAt });
    expect(await catalog.getTable(trashed.id)).toEqual(moved);
    expect(await move(130_000)).toEqual(moved);

    // Another trash of the table (another drop time): WrongState, nothing changed.
    await expect(move(200_000, { droppedAt: 9_999 })).rejects.toMatchObject({ type: 'WrongState' });
    // A recall under way holds the table: WrongState, nothing changed.
    const recall = await locked(`table:${trashed.id}`, owner('undelete:1'));
    await expect(move(200_000)).rejects.toMatchObject({ type: 'WrongState' });
    expect((await catalog.getTable(trashed.id))?.expireAt).toBe(130_000);
    await catalog.releaseLocks(recall);
    // The run itself may hold the lock.
    await locked(`table:${trashed.id}`, run);
    expect(await move(20_000)).toMatchObject({ state: 'TRASHED', droppedAt: 10_000, expireAt: 20_000 });
    expect((await catalog.getTable(trashed.id))?.expireAt).toBe(20_000);
    // Recalled: no longer in the trash.
    await catalog.transition({ tableId: trashed.id, from: ['TRASHED'], to: 'RESTORING', owner: run, now: 21_000 });
    await expect(move(300_000)).rejects.toMatchObject({ type: 'WrongState' });
    await catalog.transition({ tableId: trashed.id, from: ['RESTORING'], to: 'READY', owner: run, now: 22_000 });
    await catalog.releaseLocks(run);
    await expect(move(300_000)).rejects.toMatchObject({ type: 'WrongState' });
    expect(await catalog.getTable(trashed.id)).toMatchObject({ state: 'READY', droppedAt: null, expireAt: null });
  });

  test('a drop of a READY table with a live lease starts DRAINING, with that lease; found DRAINING or TRASHING, it is answered as it is', async () => {
    const table = await readyTable('t');
    const other = await readyTable('u');
    const live = leaseOf(table.id, 'lease-live', 5_000);
    await acquire(live);
    await acquire(leaseOf(table.id, 'lease-old', 500));
    await acquire(leaseOf(other.id, 'lease-other', 9_000));
    const drop = owner('trash:1', 'run-d');
    const start = (now: number, more: { expectName?: { namespace: string; name: string }; step?: StepKey } = {}) =>
      catalog.startDrain({ tableId: table.id, owner: drop, now, ...more });

    await expect(start(1_000)).rejects.toMatchObject({ name: 'LockLostError' });
    await locked(`table:${table.id}`, drop);
    await expect(start(1_000, { expectName: { namespace: 'ns', name: 'other' } })).rejects.toMatchObject({ type: 'WrongState' });
    expect(await catalog.getTable(table.id)).toEqual(table);

    const step = { runId: drop.runId, step: '2:startDrain' };
    const drained = await start(1_000, { expectName: { namespace: 'ns', name: 't' }, step });
    expect(drained).toEqual({ table: { ...table, state: 'DRAINING', updatedAt: 1_000 }, leases: [live] });
    expect(await catalog.getTable(table.id)).toEqual(drained.table);
    // It takes no new lease; the one it waits for can still be released.
    await expect(acquire(leaseOf(table.id, 'lease-new', 8_000))).rejects.toMatchObject({ type: 'WrongState' });
    // Found DRAINING: as it is, with the leases still live then.
    expect(await start(2_000)).toEqual(drained);
    expect(await start(6_000)).toEqual({ table: drained.table, leases: [] });

    // The DRAINING table keeps its name: found by it, refused to a create and (the unique index) to a rename.
    expect((await catalog.findByName({ namespace: 'ns', name: 't' }))?.id).toBe(table.id);
    const creator = await locked('name:ns.t', owner('create:ns.t', 'run-c'));
    await expect(prepare('t', creator)).rejects.toMatchObject({ type: 'TableExists' });
    const renamer = await locked(`table:${other.id}`, owner('rename:u'));
    await expect(
      catalog.transition({
        tableId: other.id,
        from: ['READY'],
        to: 'READY',
        owner: renamer,
        now: 3_000,
        rename: { namespace: 'ns', name: 't' },
      }),
    ).rejects.toMatchObject({ type: 'NameTaken' });
    expect((await catalog.getTable(other.id))?.name).toBe('u');

    // The drop goes on; found TRASHING, it is answered as it is. The journaled call answers what it did first.
    const trashing = await catalog.transition({ tableId: table.id, from: ['DRAINING'], to: 'TRASHING', owner: drop, now: 7_000 });
    expect(await start(8_000)).toEqual({ table: trashing, leases: [] });
    expect(await start(8_000, { step })).toEqual(drained);
    await expect(start(8_000, { expectName: { namespace: 'ns', name: 'other' } })).rejects.toMatchObject({ type: 'WrongState' });
    // Trashed: no drop to start.
    await catalog.transition({ tableId: table.id, from: ['TRASHING'], to: 'TRASHED', owner: drop, now: 9_000, retentionSeconds: 60 });
    await expect(start(10_000)).rejects.toMatchObject({ type: 'WrongState' });
    await expect(catalog.startDrain({ tableId: 999, owner: drop, now: 1 })).rejects.toMatchObject({ type: 'TableNotFound' });
  });

  test('a drop of a READY table whose leases have all expired goes straight to TRASHING', async () => {
    const table = await readyTable('t');
    const other = await readyTable('u');
    await acquire(leaseOf(table.id, 'lease-old', 500));
    await acquire(leaseOf(other.id, 'lease-other', 9_000));
    const drop = await locked(`table:${table.id}`, owner('trash:1'));
    // A lease that ends at `now` has ended.
    expect(await catalog.startDrain({ tableId: table.id, owner: drop, now: 500 })).toEqual({
      table: { ...table, state: 'TRASHING', updatedAt: 500 },
      leases: [],
    });
    expect((await catalog.getTable(table.id))?.state).toBe('TRASHING');
  });

  test('a lease is taken on a READY table only, renewed while it lasts, released once', async () => {
    const table = await readyTable('t');
    const lease = leaseOf(table.id, 'lease-1', 61_000);
    expect(await acquire(lease)).toEqual(lease);
    expect(await catalog.listLeases({ now: 2_000 })).toEqual([lease]);
    expect(await catalog.listLeases({ tableId: table.id, now: 2_000 })).toEqual([lease]);
    expect(await catalog.listLeases({ tableId: 999, now: 2_000 })).toEqual([]);
    await expect(acquire({ ...lease, expiresAt: 99_000 })).rejects.toMatchObject({ type: 'WrongState' });
    await expect(acquire(leaseOf(999, 'lease-x', 61_000))).rejects.toMatchObject({ type: 'TableNotFound' });

    // Renewed: its ttl from now.
    const renewed = await catalog.changeLease({ action: 'renew', leaseId: lease.id, now: 30_000 });
    expect(renewed).toEqual({ ...lease, expiresAt: 90_000 });
    expect(await catalog.listLeases({ now: 30_000 })).toEqual([renewed]);
    const longer = await catalog.changeLease({ action: 'renew', leaseId: lease.id, now: 40_000, ttlSeconds: 120 });
    expect(longer).toMatchObject({ id: lease.id, ttlSeconds: 120, expiresAt: 160_000, acquiredAt: lease.acquiredAt });
    expect(await catalog.listLeases({ now: 100_000 })).toEqual([expect.objectContaining({ id: lease.id, expiresAt: 160_000 })]);
    // Expired (at its expiry exactly): hidden from the list, and not renewed.
    expect(await catalog.listLeases({ now: 160_000 })).toEqual([]);
    await expect(catalog.changeLease({ action: 'renew', leaseId: lease.id, now: 160_000 })).rejects.toMatchObject({
      type: 'LeaseNotFound',
    });
    await expect(catalog.changeLease({ action: 'renew', leaseId: 'no-such', now: 1 })).rejects.toMatchObject({ type: 'LeaseNotFound' });

    // Released: deleted, and answered as it was; a second release finds none.
    const second = leaseOf(table.id, 'lease-2', 200_000);
    await acquire(second);
    expect(await catalog.changeLease({ action: 'release', leaseId: second.id })).toEqual(second);
    expect(await catalog.listLeases({ now: 170_000 })).toEqual([]);
    await expect(catalog.changeLease({ action: 'release', leaseId: second.id })).rejects.toMatchObject({ type: 'LeaseNotFound' });
    // An expired lease can still be released (its holder is done with it).
    expect(await catalog.changeLease({ action: 'release', leaseId: lease.id })).toMatchObject({ id: lease.id });
    await expect(catalog.changeLease({ action: 'release', leaseId: lease.id })).rejects.toMatchObject({ type: 'LeaseNotFound' });

    // A journaled acquire is made once: made again under its key after the lease was released, it answers the same and takes none.
    const step = { runId: 'run-l', step: '1:changeLease' };
    const third = leaseOf(table.id, 'lease-3', 300_000);
    expect(await acquire(third, step)).toEqual(third);
    await catalog.changeLease({ action: 'release', leaseId: third.id });
    expect(await acquire(third, step)).toEqual(third);
    expect(await catalog.listLeases({ now: 250_000 })).toEqual([]);
  });

  test('no lease is taken on a table that is not READY', async () => {
    const trashed = await trashedTable('gone');
    await expect(acquire(leaseOf(trashed.id, 'lease-t', 99_000))).rejects.toMatchObject({ type: 'WrongState' });
    const creator = await locked('name:ns.new', owner('create:ns.new'));
    const creating = await prepare('new', creator);
    if (creating.outcome !== 'prepared') throw new Error('expected a new table');
    await expect(acquire(leaseOf(creating.table.id, 'lease-c', 99_000))).rejects.toMatchObject({ type: 'WrongState' });
    expect(await catalog.listLeases({ now: 0 })).toEqual([]);
  });

  test('a renew with a new ttl keeps that ttl: listed with it, and the next renew uses it', async () => {
    const table = await readyTable('t');
    await acquire(leaseOf(table.id, 'lease-1', 61_000));
    const longer = await catalog.changeLease({ action: 'renew', leaseId: 'lease-1', now: 40_000, ttlSeconds: 120 });
    expect(await catalog.listLeases({ now: 40_000 })).toEqual([longer]);
    expect(await catalog.changeLease({ action: 'renew', leaseId: 'lease-1', now: 50_000 })).toMatchObject({
      ttlSeconds: 120,
      expiresAt: 170_000,
    });
  });

  test('leases are listed soonest to expire first; pruning forgets those expired before a time, and only those', async () => {
    const a = await readyTable('a');
    const b = await readyTable('b');
    const late = leaseOf(a.id, 'lease-late', 9_000);
    const soon = leaseOf(b.id, 'lease-soon', 5_000);
    const atCut = leaseOf(a.id, 'lease-at-cut', 3_000);
    const gone = leaseOf(b.id, 'lease-gone', 2_999);
    for (const lease of [late, soon, atCut, gone]) await acquire(lease);
    expect(await catalog.listLeases({ now: 0 })).toEqual([gone, atCut, soon, late]);
    expect(await catalog.listLeases({ tableId: a.id, now: 0 })).toEqual([atCut, late]);
    expect(await catalog.listLeases({ now: 4_000 })).toEqual([soon, late]);

    expect(await catalog.pruneLeases(3_000)).toBe(1);
    expect(await catalog.pruneLeases(3_000)).toBe(0);
    // The pruned lease is gone for good; the one that ran out at the cut is still there to release.
    await expect(catalog.changeLease({ action: 'release', leaseId: gone.id })).rejects.toMatchObject({ type: 'LeaseNotFound' });
    expect(await catalog.listLeases({ now: 0 })).toEqual([atCut, soon, late]);
    expect(await catalog.pruneLeases(10_000)).toBe(3);
    expect(await catalog.listLeases({ now: 0 })).toEqual([]);
  });

  test("a new catalog's schema holds a name in exactly the domain's name-holding states, and takes every state", async () => {
    const insert = (id: number, state: string) =>
      backend.exec(
        store,
        `INSERT INTO tables (id, namespace, name, state, params, placement, created_at, updated_at)
         VALUES (${id}, 'raw', 'n-${state}', '${state}', '{"shards":1}', '[]', 1, 1)`,
      );
    // Each state's outcome, compared at once: a failure names the state (and the error) that went wrong.
    const outcomes: Array<{ state: string; second: string }> = [];
    for (const [i, state] of TABLE_STATES.entries()) {
      await insert(100 + 2 * i, state);
      const second = await insert(101 + 2 * i, state).then(
        () => 'inserted',
        (err: unknown) => (/unique constraint/i.test(String(err)) ? 'refused: name taken' : `failed: ${String(err)}`),
      );
      outcomes.push({ state, second });
    }
    expect(outcomes).toEqual(
      TABLE_STATES.map((state) => ({ state, second: NAME_HOLDING_STATES.includes(state) ? 'refused: name taken' : 'inserted' })),
    );
    const rows = await catalog.listTables({ includeTrashed: true });
    expect(rows.filter((t) => t.namespace === 'raw').every((t) => t.hold === null)).toBe(true);
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
        async (c) => (await c.query<{ version: number }>(`SELECT version FROM schema_migrations ORDER BY version`)).rows,
      );
      expect(versions).toEqual(PG_MIGRATIONS.map((m) => ({ version: m.version })));
      expect(versions.at(-1)).toEqual({ version: SCHEMA_VERSION });
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

  test("the latest migration spells the domain's states as they are; migration 1 keeps those it was released with", () => {
    expect(MIGRATION_2_STATES).toEqual([...TABLE_STATES]);
    expect(MIGRATION_2_NAME_HOLDING_STATES).toEqual([...NAME_HOLDING_STATES]);
    // The last migration that builds the state check, and the last that builds the name index, are the one these
    // lists come from (a later one that rebuilds either needs lists of its own, and this test moved to them).
    const check = lastMigrationWith(PG_MIGRATIONS, 'CHECK (state IN (');
    expect(check.version).toBe(2);
    expect(check.sql).toContain(`CHECK (state IN (${sqlList(MIGRATION_2_STATES)}))`);
    const index = lastMigrationWith(PG_MIGRATIONS, 'CREATE UNIQUE INDEX tables_name_holder');
    expect(index.version).toBe(2);
    expect(index.sql).toContain(`WHERE state IN (${sqlList(MIGRATION_2_NAME_HOLDING_STATES)})`);
    // Migration 1 is released: it spells the states as they were then (before DRAINING), never edited since.
    expect(MIGRATION_1_STATES).toEqual(TABLE_STATES.filter((s) => s !== 'DRAINING'));
    expect(MIGRATION_1_NAME_HOLDING_STATES).toEqual(NAME_HOLDING_STATES.filter((s) => s !== 'DRAINING'));
    expect(PG_MIGRATIONS[0]!.sql).toContain(`CHECK (state IN (${sqlList(MIGRATION_1_STATES)}))`);
    expect(PG_MIGRATIONS[0]!.sql).toContain(`WHERE state IN (${sqlList(MIGRATION_1_NAME_HOLDING_STATES)})`);
  });

  test('a database at schema version 1 with a table is migrated to the latest: the table reads back unheld, DRAINING is a state', async () => {
    const old = await pg.freshDatabase('v1');
    await withClient(old, async (c) => {
      // What migrate() made of a new database when migration 1 was the last.
      await c.query(`CREATE TABLE schema_migrations (version INT PRIMARY KEY, applied_at BIGINT NOT NULL)`);
      for (const migration of PG_MIGRATIONS.slice(0, 1)) {
        await c.query(migration.sql);
        await c.query(`INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 0)`, [migration.version]);
      }
      await c.query(`INSERT INTO meta (key, value) VALUES ('catalog_id', 'c0ffee01')`);
      await c.query(OLD_ROWS);
      // Version 1's check knows no DRAINING.
      await expect(c.query(`UPDATE tables SET state = 'DRAINING' WHERE id = 7`)).rejects.toMatchObject({ code: '23514' });
    });
    // A reader never migrates: it refuses the database until a worker has.
    await expect(PostgresCatalog.open(old, { mustExist: true })).rejects.toThrow(/lacks migrations 2/);

    const worker = await PostgresCatalog.open(old);
    const was = catalog;
    catalog = worker;
    try {
      expect(worker.id).toBe('c0ffee01');
      const versions = await withClient(
        old,
        async (c) => (await c.query<{ version: number }>(`SELECT version FROM schema_migrations ORDER BY version`)).rows,
      );
      expect(versions).toEqual(PG_MIGRATIONS.map((m) => ({ version: m.version })));
      const table = await worker.getTable(7);
      expect(table).toEqual(OLD_TABLE);
      expect(await worker.listLocks()).toEqual([{ resource: 'table:7', workflowId: 'trash:7', runId: 'run-7', since: 102 }]);

      // DRAINING is a state the check now takes, and one that holds its name (the rebuilt index).
      const { other, hold } = await servesVersion2(worker);
      // What is no state is still refused.
      await expect(withClient(old, (c) => c.query(`UPDATE tables SET state = 'DRAINED' WHERE id = 7`))).rejects.toMatchObject({
        code: '23514',
      });
      const reader = await PostgresCatalog.open(old, { mustExist: true });
      try {
        expect(await reader.getTable(7)).toMatchObject({ state: 'DRAINING', hold: null });
        expect((await reader.getTable(other.id))?.hold).toEqual(hold);
      } finally {
        await reader.close();
      }
    } finally {
      catalog = was;
      await worker.close();
    }
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
      db.exec(`INSERT INTO meta (key, value) VALUES ('catalog_id', 'c0ffee00');`);
      db.exec(OLD_ROWS);
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
    // A reader takes it as the baseline as it is, and writes nothing; the baseline is behind this code, so a reader of
    // this code refuses it until a worker has migrated it.
    expect(inspectFile(file, (db) => checkSqliteSchema(db, SQLITE_MIGRATIONS.slice(0, 1)))).toBe(true);
    expect(() => new SqliteCatalog(file, { mustExist: true })).toThrow(/lacks migrations 2/);
    expect(userVersion(file)).toBe(0);

    const worker = new SqliteCatalog(file);
    const was = catalog;
    catalog = worker;
    try {
      expect(userVersion(file)).toBe(SQLITE_SCHEMA_VERSION);
      expect(worker.id).toBe('c0ffee00');
      expect(await worker.getTable(7)).toMatchObject({ id: 7, namespace: 'ns', name: 'old', state: 'READY', createdAt: 100, hold: null });
      const reader = new SqliteCatalog(file, { mustExist: true });
      expect(reader.id).toBe('c0ffee00');
      expect(await reader.getTable(7)).toEqual(await worker.getTable(7));
      await reader.close();
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

  test("the last migration that builds the name index spells the domain's name-holding states as they are", () => {
    const index = lastMigrationWith(SQLITE_MIGRATIONS, 'CREATE UNIQUE INDEX tables_name_holder');
    expect(index.version).toBe(SQLITE_SCHEMA_VERSION);
    expect(index.sql).toContain(`WHERE state IN (${sqlList(NAME_HOLDING_STATES)})`);
    // Migration 1 is released: its index keeps the states of then (before DRAINING), as the files it made have it.
    expect(SQLITE_MIGRATIONS[0]!.sql).toContain(`WHERE state IN (${sqlList(MIGRATION_1_NAME_HOLDING_STATES)})`);
    expect(UNVERSIONED_SCHEMA).toContain(`WHERE state IN (${sqlList(MIGRATION_1_NAME_HOLDING_STATES)})`);
  });

  test('a file at schema version 1 with a table is migrated to the latest: the table reads back unheld, DRAINING holds its name', async () => {
    const file = await sqlite.newStore();
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const db = new Database(file);
    try {
      db.pragma('journal_mode = WAL');
      migrateSqlite(db, SQLITE_MIGRATIONS.slice(0, 1));
      db.exec(`INSERT INTO meta (key, value) VALUES ('catalog_id', 'c0ffee01');`);
      db.exec(OLD_ROWS);
    } finally {
      db.close();
    }
    expect(userVersion(file)).toBe(1);
    // A reader never migrates: it refuses the file until a worker has, and leaves it as it is.
    expect(() => new SqliteCatalog(file, { mustExist: true })).toThrow(/lacks migrations 2/);
    expect(userVersion(file)).toBe(1);

    const worker = new SqliteCatalog(file);
    const was = catalog;
    catalog = worker;
    try {
      expect(userVersion(file)).toBe(SQLITE_SCHEMA_VERSION);
      expect(worker.id).toBe('c0ffee01');
      expect(await worker.getTable(7)).toEqual(OLD_TABLE);
      expect(await worker.stepOutcome({ runId: 'run-7', step: '1:acquireLock' })).toEqual({ value: { acquired: true } });
      const indexSql = inspectFile(
        file,
        (d) => (d.prepare(`SELECT sql FROM sqlite_master WHERE name = 'tables_name_holder'`).get() as { sql: string }).sql,
      );
      expect(indexSql).toContain(`WHERE state IN (${sqlList(NAME_HOLDING_STATES)})`);

      const { other, hold } = await servesVersion2(worker);
      expect(await worker.changeSetting({ key: 'trash.enabled', namespace: null, value: false, now: 4_000 })).toEqual([
        { key: 'trash.enabled', namespace: null, value: false, updatedAt: 4_000 },
      ]);
      const reader = new SqliteCatalog(file, { mustExist: true });
      try {
        expect(await reader.getTable(7)).toMatchObject({ state: 'DRAINING', hold: null });
        expect((await reader.getTable(other.id))?.hold).toEqual(hold);
      } finally {
        await reader.close();
      }
    } finally {
      catalog = was;
      await worker.close();
    }
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
