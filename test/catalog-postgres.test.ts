import { inspect } from 'node:util';
import { sqlList } from '../catalog/rows';
import { PostgresCatalog } from '../catalog/postgres';
import {
  MIGRATION_1_NAME_HOLDING_STATES,
  MIGRATION_1_STATES,
  MIGRATION_2_NAME_HOLDING_STATES,
  MIGRATION_2_STATES,
  MIGRATION_6_NAME_HOLDING_STATES,
  MIGRATION_6_STATES,
  MIGRATIONS as PG_MIGRATIONS,
  SCHEMA_VERSION,
} from '../catalog/postgres-schema';
import { isBusy, type Catalog, type LockHolder } from '../catalog/catalog';
import { CatalogNotFoundError } from '../domain/errors';
import { NAME_HOLDING_STATES, TABLE_STATES } from '../domain/states';
import { sharedPostgres, withClient, type TestPostgres } from './support/postgres';
import {
  lastMigrationWith,
  never,
  OLD_ROWS,
  OLD_TABLE,
  owner,
  catalogCalls,
  postgresOn,
  TRASHED_BEFORE_V3_ROWS,
  OLD_TRASHED_TABLE,
} from './support/catalogs';

// The PostgreSQL catalog alone: several workers on one database, opening, and its schema's migrations.

let pg: TestPostgres;
beforeAll(async () => {
  pg = await sharedPostgres();
});
afterAll(async () => {
  await pg?.stop();
});
const postgres = postgresOn(() => pg);

let catalog: Catalog;
const { locked, prepare, readyTable, servesVersion2, servesVersion3 } = catalogCalls(() => catalog);

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
          owner(`drop:${round}`, 'run-a'),
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
      expect(results.filter((r) => !isBusy(r))).toHaveLength(1);
      const winner = isBusy(results[0]) ? 'purge' : 'drop';
      expect((await a.listLocks()).filter((l) => l.resource === resource)).toEqual([
        expect.objectContaining({ workflowId: `${winner}:${round}` }),
      ]);
    }
  });

  test('two workers taking over the lock of one closed owner: exactly one wins, 50 rounds out of 50', async () => {
    for (let round = 0; round < 50; round++) {
      const resource = `table:${round}`;
      const dead = await locked(resource, owner(`drop:${round}`, 'run-dead'));
      const onlyTheDead = (holder: LockHolder) => Promise.resolve(holder.runId === dead.runId);
      const results = await Promise.all([
        a.acquireLock(resource, owner(`purge:${round}`, 'run-a'), round, onlyTheDead),
        b.acquireLock(resource, owner(`undelete:${round}`, 'run-b'), round, onlyTheDead),
      ]);
      expect(results.filter((r) => !isBusy(r))).toHaveLength(1);
      // The dead owner's lock was freed once, by one of them; the one that freed it is not always the one that
      // then took the free lock (as with SQLite shared by two processes): tookOverFrom is the freer's report.
      const [held] = (await a.listLocks()).filter((l) => l.resource === resource);
      expect(held?.runId).toBe(isBusy(results[0]) ? 'run-b' : 'run-a');
      expect(results.filter((r) => !isBusy(r) && r.tookOverFrom).length).toBeLessThanOrEqual(1);
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
    const op = await locked(`table:${table.id}`, owner('drop:1', 'run-t'));
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

  test("a session's search_path cannot send the catalog to other tables, nor a user's function stand in for a built-in one", async () => {
    const url = await pg.freshDatabase('pinned');
    const made = await PostgresCatalog.open(url);
    const id = made.id;
    await made.close();
    // What a role's own search_path could be made to look at first: decoys of the catalog's tables, in a schema that
    // comes first, and a user's function in it that would answer for a built-in one given the chance.
    await withClient(url, async (c) => {
      await c.query(`CREATE SCHEMA decoy;
        CREATE TABLE decoy.meta (key text, value text); INSERT INTO decoy.meta VALUES ('catalog_id', 'decoy');
        CREATE TABLE decoy.tables (LIKE public.tables); CREATE TABLE decoy.calls (fn text);
        CREATE FUNCTION decoy.pg_advisory_xact_lock(text) RETURNS void LANGUAGE sql AS $$ INSERT INTO decoy.calls VALUES ('lock') $$;
        ALTER DATABASE ${JSON.stringify(new URL(url).pathname.slice(1))} SET search_path = decoy, public`);
    });
    const reopened = await PostgresCatalog.open(url);
    try {
      expect(reopened.id).toBe(id);
      const was = catalog;
      catalog = reopened;
      try {
        expect(await readyTable('pinned')).toMatchObject({ namespace: 'ns', name: 'pinned', state: 'READY' });
      } finally {
        catalog = was;
      }
    } finally {
      await reopened.close();
    }
    await withClient(url, async (c) => {
      expect((await c.query('SELECT count(*)::int AS n FROM public.tables')).rows).toEqual([{ n: 1 }]);
      expect((await c.query('SELECT count(*)::int AS n FROM decoy.tables')).rows).toEqual([{ n: 0 }]);
      expect((await c.query('SELECT fn FROM decoy.calls')).rows).toEqual([]);
    });
  });

  test('a schema newer than this code is refused', async () => {
    await withClient(url, (c) => c.query(`INSERT INTO schema_migrations (version, applied_at) VALUES (${SCHEMA_VERSION + 1}, 0)`));
    await expect(PostgresCatalog.open(url)).rejects.toThrow(/newer than this tablefate knows/);
    await expect(PostgresCatalog.open(url, { mustExist: true })).rejects.toThrow(/newer than this tablefate knows/);
  });

  test("the latest migration spells the domain's states as they are; migration 1 keeps those it was released with", () => {
    expect(MIGRATION_6_STATES).toEqual([...TABLE_STATES]);
    expect(MIGRATION_6_NAME_HOLDING_STATES).toEqual([...NAME_HOLDING_STATES]);
    // The last migration that builds the state check, and the last that builds the name index, are the one these
    // lists come from (a later one that rebuilds either needs lists of its own, and this test moved to them).
    const check = lastMigrationWith(PG_MIGRATIONS, 'CHECK (state IN (');
    expect(check.version).toBe(6);
    expect(check.sql).toContain(`CHECK (state IN (${sqlList(MIGRATION_6_STATES)}))`);
    const index = lastMigrationWith(PG_MIGRATIONS, 'CREATE UNIQUE INDEX tables_name_holder');
    expect(index.version).toBe(6);
    expect(index.sql).toContain(`WHERE state IN (${sqlList(MIGRATION_6_NAME_HOLDING_STATES)})`);
    // Migration 2 is released: it spells the states as they were then (before TRUNCATING), never edited since.
    expect(PG_MIGRATIONS[1]!.sql).toContain(`CHECK (state IN (${sqlList(MIGRATION_2_STATES)}))`);
    expect(PG_MIGRATIONS[1]!.sql).toContain(`WHERE state IN (${sqlList(MIGRATION_2_NAME_HOLDING_STATES)})`);
    // Migration 1 is released: it spells the states as they were then (before DRAINING), never edited since.
    expect(MIGRATION_1_STATES).toEqual(MIGRATION_2_STATES.filter((s) => s !== 'DRAINING'));
    expect(MIGRATION_1_NAME_HOLDING_STATES).toEqual(MIGRATION_2_NAME_HOLDING_STATES.filter((s) => s !== 'DRAINING'));
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
  test('a database at schema version 2 with a trashed table is migrated to the latest: its dropper is unknown, a new drop records one', async () => {
    const old = await pg.freshDatabase('v2');
    await withClient(old, async (c) => {
      // What migrate() made of a new database when migration 2 was the last.
      await c.query(`CREATE TABLE schema_migrations (version INT PRIMARY KEY, applied_at BIGINT NOT NULL)`);
      for (const migration of PG_MIGRATIONS.slice(0, 2)) {
        await c.query(migration.sql);
        await c.query(`INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 0)`, [migration.version]);
      }
      await c.query(`INSERT INTO meta (key, value) VALUES ('catalog_id', 'c0ffee02')`);
      await c.query(OLD_ROWS);
      await c.query(TRASHED_BEFORE_V3_ROWS);
    });
    // A reader never migrates: it refuses the database until a worker has.
    await expect(PostgresCatalog.open(old, { mustExist: true })).rejects.toThrow(/lacks migrations 3/);

    const worker = await PostgresCatalog.open(old);
    const was = catalog;
    catalog = worker;
    try {
      const versions = await withClient(
        old,
        async (c) => (await c.query<{ version: number }>(`SELECT version FROM schema_migrations ORDER BY version`)).rows,
      );
      expect(versions).toEqual(PG_MIGRATIONS.map((m) => ({ version: m.version })));
      expect(await worker.getTable(7)).toEqual(OLD_TABLE);
      const trashed = await servesVersion3(worker);
      const reader = await PostgresCatalog.open(old, { mustExist: true });
      try {
        expect(await reader.getTable(7)).toEqual(trashed);
        expect(await reader.getTable(6)).toEqual(OLD_TRASHED_TABLE);
      } finally {
        await reader.close();
      }
    } finally {
      catalog = was;
      await worker.close();
    }
  });
});
