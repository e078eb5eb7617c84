import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { SqliteCatalog } from '../../catalog/sqlite';
import type { Migration } from '../../catalog/migrations';
import { PostgresCatalog } from '../../catalog/postgres';
import type { Catalog, LockOwner, StepKey } from '../../catalog/catalog';
import type { Lease } from '../../domain/leases';
import type { TableRecord } from '../../domain/table';
import { placeShards } from '../../domain/table';
import { sharedPostgres, withClient, type TestPostgres } from './postgres';

/*
 * What the catalog's tests (test/catalog-*.test.ts) share: the two stores, each on a real SQLite file or a real
 * PostgreSQL database, and the calls that bring a table to where a test begins.
 */

// workflow relies on, the same for both.

/** A kind of catalog: where a new one goes, how to open it, and whether opening left a place untouched. */
export interface Backend {
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

const sqliteDirs: string[] = [];
export const sqlite: Backend = {
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

/** The PostgreSQL store, on the server `server()` answers (each test file starts its own). */
export const postgresOn = (server: () => TestPostgres): Backend => ({
  name: 'PostgreSQL',
  newStore: () => server().freshDatabase('catalog'),
  open: (url, opts) => PostgresCatalog.open(url, opts),
  isUntouched: (url) => withClient(url, async (c) => (await c.query(`SELECT 1 FROM pg_tables WHERE schemaname = 'public'`)).rowCount === 0),
  exec: (url, sql) => withClient(url, async (c) => void (await c.query(sql))),
  cleanUp: () => Promise.resolve(),
});

export const NODES = ['node-0', 'node-1', 'node-2'];
export const owner = (workflowId: string, runId = 'run-1'): LockOwner => ({ workflowId, runId });
export const never = () => Promise.resolve(false);
export const closed = () => Promise.resolve(true);

/** The calls that bring a table where a test begins, on the catalog `current()` answers (the test's own). */
export function catalogCalls(current: () => Catalog) {
  async function locked(resource: string, who: LockOwner, on: Catalog = current()): Promise<LockOwner> {
    const result = await on.acquireLock(resource, who, 1, never);
    expect(result).toMatchObject({ acquired: true });
    return who;
  }

  function prepare(name: string, who: LockOwner, step?: StepKey, on: Catalog = current(), now = 1) {
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
    const prepared = await prepare(name, creator, undefined, current(), now);
    if (prepared.outcome !== 'prepared') throw new Error('expected a new table');
    const table = await current().transition({ tableId: prepared.table.id, from: ['CREATING'], to: 'READY', owner: creator, now: now + 1 });
    await current().releaseLocks(creator);
    return table;
  }

  /** A table trashed at `at` for `retentionSeconds`, its trash's lock released (its run waits on a timer, holding none). */
  async function trashedTable(name: string, at = 10_000, retentionSeconds = 60) {
    const table = await readyTable(name);
    const op = await locked(`table:${table.id}`, owner(`drop:${table.id}`));
    // (Dropped at `at`: the time the table went to the trash; its commit comes after.)
    await current().transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: at });
    const trashed = await current().transition({
      tableId: table.id,
      from: ['TRASHING'],
      to: 'TRASHED',
      owner: op,
      now: at + 1,
      retentionSeconds,
    });
    await current().releaseLocks(op);
    return trashed;
  }

  const acquire = (lease: Lease, step?: StepKey) => current().changeLease({ action: 'acquire', lease, step });

  /**
   * What a catalog migrated from OLD_ROWS must now do (it is the current one): the drop that holds table 7's lock drains
   * it while a lease lives, DRAINING keeps the name from another table, and the hold columns are there. Answers the
   * other table and the hold placed on it.
   */
  async function servesVersion2(worker: Catalog): Promise<{ other: TableRecord; hold: { reason: string; since: number } }> {
    await acquire(leaseOf(7, 'lease-7', 10_000));
    expect(await worker.startDrain({ tableId: 7, owner: owner('trash:7', 'run-7'), now: 1_000 }, never)).toEqual({
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

  /**
   * What a catalog migrated from a schema before version 3 (OLD_ROWS and TRASHED_BEFORE_V3_ROWS) must now do: the table
   * trashed before reads back with no dropper known, and the drop that holds table 7's lock records who dropped it.
   */
  async function servesVersion3(worker: Catalog): Promise<TableRecord> {
    expect(await worker.getTable(6)).toEqual(OLD_TRASHED_TABLE);
    expect((await worker.listTables({ includeTrashed: true })).map((t) => [t.id, t.droppedBy])).toEqual([
      [6, null],
      [7, null],
    ]);
    const drop = owner('trash:7', 'run-7');
    expect(await worker.startDrain({ tableId: 7, owner: drop, now: 1_000 }, never)).toMatchObject({ table: { state: 'TRASHING' } });
    const trashed = await worker.transition({
      tableId: 7,
      from: ['TRASHING'],
      to: 'TRASHED',
      owner: drop,
      now: 2_000,
      retentionSeconds: 60,
      droppedBy: 'alice@test',
    });
    // (Dropped when it went to the trash, at the drain's start; committed later.)
    expect(trashed).toEqual({
      ...OLD_TABLE,
      state: 'TRASHED',
      droppedAt: 1_000,
      droppedBy: 'alice@test',
      expireAt: 61_000,
      updatedAt: 2_000,
    });
    return trashed;
  }

  return { locked, prepare, readyTable, trashedTable, acquire, servesVersion2, servesVersion3 };
}

/** A lease on `tableId` that runs out at `expiresAt`, taken `ttlSeconds` before. */
export const leaseOf = (tableId: number, id: string, expiresAt: number, ttlSeconds = 60): Lease => ({
  id,
  tableId,
  holder: 'svc@host',
  ttlSeconds,
  acquiredAt: expiresAt - ttlSeconds * 1000,
  expiresAt,
});

/** The last of `migrations` whose SQL contains `marker`: the one that made what the marker names as it is now. */
export function lastMigrationWith(migrations: readonly Migration[], marker: string): Migration {
  const found = migrations.filter((m) => m.sql.includes(marker)).at(-1);
  if (!found) throw new Error(`no migration contains ${marker}`);
  return found;
}

/**
 * A catalog's rows as an older worker left them (the same SQL on both stores, and on every schema version): the id
 * counter, a READY table, its lock held by a trash and that trash's journaled step.
 */
export const OLD_ROWS = `
  INSERT INTO counters (name, value) VALUES ('table_id', 7);
  INSERT INTO tables (id, namespace, name, state, params, placement, created_at, updated_at)
    VALUES (7, 'ns', 'old', 'READY', '{"shards":1}', '[{"shard":0,"node":"node-0"}]', 100, 101);
  INSERT INTO locks (resource, owner_workflow_id, owner_run_id, since) VALUES ('table:7', 'trash:7', 'run-7', 102);
  INSERT INTO journal (run_id, step, outcome, at) VALUES ('run-7', '1:acquireLock', '{"value":{"acquired":true}}', 103);
`;

/** A table in the trash as a worker before schema version 3 left it (no dropped_by): the same SQL on both stores. */
export const TRASHED_BEFORE_V3_ROWS = `
  INSERT INTO tables (id, namespace, name, state, params, placement, created_at, dropped_at, expire_at, updated_at)
    VALUES (6, 'ns', 'binned', 'TRASHED', '{"shards":1}', '[{"shard":0,"node":"node-1"}]', 90, 95, 60095, 95);
`;

/** TRASHED_BEFORE_V3_ROWS's table as today's catalog reads it: who dropped it is not known. */
export const OLD_TRASHED_TABLE = {
  id: 6,
  namespace: 'ns',
  name: 'binned',
  state: 'TRASHED',
  params: { shards: 1 },
  placement: [{ shard: 0, node: 'node-1' }],
  createdAt: 90,
  droppedAt: 95,
  droppedBy: null,
  expireAt: 60_095,
  purgedAt: null,
  updatedAt: 95,
  hold: null,
};

/** OLD_ROWS's table as today's catalog reads it. */
export const OLD_TABLE = {
  id: 7,
  namespace: 'ns',
  name: 'old',
  state: 'READY',
  params: { shards: 1 },
  placement: [{ shard: 0, node: 'node-0' }],
  createdAt: 100,
  droppedAt: null,
  droppedBy: null,
  expireAt: null,
  purgedAt: null,
  updatedAt: 101,
  hold: null,
};

/**
 * Runs `body`'s tests on each store (SQLite, then PostgreSQL on the shared test server), each test on a new catalog
 * handed to `use` before it (and closed after it).
 */
export function describeEachCatalog(
  subject: string,
  use: (opened: { catalog: Catalog; store: string }) => void,
  body: (backend: Backend) => void,
): void {
  let server: TestPostgres | undefined;
  beforeAll(async () => {
    server = await sharedPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });
  describe.each([sqlite, postgresOn(() => server!)])(`$name catalog: ${subject}`, (backend) => {
    let catalog: Catalog | undefined;
    beforeEach(async () => {
      const store = await backend.newStore();
      catalog = await backend.open(store);
      use({ catalog, store });
    });
    afterEach(async () => {
      await catalog?.close();
    });
    afterAll(() => backend.cleanUp());
    body(backend);
  });
}
