import pino from 'pino';
import { Client } from 'pg';
import { PostgresCatalog } from '../catalog/postgres';
import { CatalogBehindError } from '../catalog/migrations';
import { MIGRATIONS, SCHEMA_VERSION } from '../catalog/postgres-schema';
import { redactUrl } from '../domain/deployment';
import { CatalogNotFoundError } from '../domain/errors';
import { catalogNotReady, untilAvailable } from '../worker/waiting';
import { sharedPostgres, withClient, type TestPostgres } from './support/postgres';
import { failureOf, waitFor } from './support/wait';

/*
 * A reader of the PostgreSQL catalog (a storage node's worker, started before any worker) meets it as a worker makes or
 * migrates it: one migration per transaction, then (a new catalog) its identity. Whatever it meets in between is a
 * catalog to wait for, saying which; a fault is still one.
 */

let pg: TestPostgres;
beforeAll(async () => {
  pg = await sharedPostgres();
});
afterAll(async () => {
  await pg?.stop();
});

/** The advisory lock a gated database's ALTER TABLEs wait for (advisory locks are per database). */
const GATE = 4242;

/**
 * Holds back every ALTER TABLE in `url` (migration 2 opens with one, and migration 1 has none) until the gate is opened:
 * a worker migrating it then waits in the middle of its migrations, the ones before committed, its own transaction open.
 */
async function gated(url: string): Promise<{ open: () => Promise<void> }> {
  await withClient(url, (c) =>
    c.query(`CREATE FUNCTION public.gate() RETURNS event_trigger LANGUAGE plpgsql AS
               $$ BEGIN PERFORM pg_catalog.pg_advisory_xact_lock_shared(${GATE}); END $$;
             CREATE EVENT TRIGGER gate ON ddl_command_start WHEN TAG IN ('ALTER TABLE') EXECUTE FUNCTION public.gate()`),
  );
  const holder = new Client({ connectionString: url });
  await holder.connect();
  await holder.query(`SELECT pg_catalog.pg_advisory_lock(${GATE})`);
  return { open: () => holder.end() };
}

/** The versions `url`'s catalog has had applied, once the first is committed (empty before). */
const appliedIn = (url: string) =>
  withClient(url, async (c) => {
    const { rows } = await c.query<{ made: boolean }>(`SELECT pg_catalog.to_regclass('public.schema_migrations') IS NOT NULL AS made`);
    if (!rows[0]!.made) return [];
    return (await c.query<{ version: number }>('SELECT version FROM public.schema_migrations ORDER BY version')).rows.map((r) => r.version);
  });

/** A reader waiting for the catalog at `url` as a storage node does, and what it says while it waits. */
function waitingReader(url: string) {
  const said: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void said.push((JSON.parse(line) as { msg: string }).msg) });
  // (It gives up after a minute, should a failed test leave it waiting.)
  const stop = new Promise<void>((resolve) => setTimeout(resolve, 60_000).unref());
  const opened = untilAvailable(() => PostgresCatalog.open(url, { mustExist: true }), catalogNotReady(redactUrl(url)), logger, stop);
  return { opened, said };
}

/**
 * A reader started now waits, saying only `says`; once the gate opens, the worker's catalog and the reader's are opened.
 * Answers both ids (both closed).
 */
async function readerWaitsThenOpens(url: string, gate: { open: () => Promise<void> }, worker: Promise<PostgresCatalog>, says: string) {
  const reader = waitingReader(url);
  await waitFor(
    () => Promise.resolve(reader.said),
    (said) => said.length > 0,
    { what: 'the reader to say it waits' },
  );
  expect(reader.said).toEqual([says]);
  await gate.open();
  const [made, read] = await Promise.all([worker, reader.opened]);
  await Promise.all([made.close(), read?.close()]);
  return [made.id, read?.id];
}

test("a reader that meets a new catalog between its first worker's migrations waits for it to be made, then opens it", async () => {
  const url = await pg.freshDatabase('being_made');
  const where = redactUrl(url);
  const gate = await gated(url);
  let worker: Promise<PostgresCatalog> | undefined;
  try {
    worker = PostgresCatalog.open(url);
    // Migration 1 committed (the catalog's tables, its versions table saying 1), migration 2 waiting, no identity yet.
    await waitFor(
      () => appliedIn(url),
      (versions) => versions.length > 0,
      { what: 'migration 1 to commit' },
    );
    expect(await appliedIn(url)).toEqual([1]);

    const err = await failureOf(PostgresCatalog.open(url, { mustExist: true }));
    expect(err).toBeInstanceOf(CatalogNotFoundError);
    expect(catalogNotReady(where)(err)).toBe(`the catalog at ${where}, which the first \`tablefate worker\` makes`);

    const [made, read] = await readerWaitsThenOpens(
      url,
      gate,
      worker,
      `waiting for the catalog at ${where}, which the first \`tablefate worker\` makes`,
    );
    expect(read).toBe(made);
  } finally {
    await gate.open().catch(() => undefined);
    await worker?.then((c) => c.close()).catch(() => undefined);
  }
});

test('a reader that meets a catalog a worker of this version is migrating waits for the migration, then opens it', async () => {
  const url = await pg.freshDatabase('migrating');
  const where = redactUrl(url);
  // A catalog made when migration 1 was the last: its identity written.
  await withClient(url, async (c) => {
    await c.query(`CREATE TABLE schema_migrations (version INT PRIMARY KEY, applied_at BIGINT NOT NULL)`);
    await c.query(MIGRATIONS[0]!.sql);
    await c.query(`INSERT INTO schema_migrations (version, applied_at) VALUES (1, 0)`);
    await c.query(`INSERT INTO meta (key, value) VALUES ('catalog_id', 'c0ffee01')`);
  });
  const gate = await gated(url);
  let worker: Promise<PostgresCatalog> | undefined;
  try {
    worker = PostgresCatalog.open(url);
    const err = await failureOf(PostgresCatalog.open(url, { mustExist: true }));
    expect(err).toBeInstanceOf(CatalogBehindError);
    expect((err as Error).message).toBe(
      `cannot open the catalog at ${where}: its schema lacks migrations 2, 3, 4, 5, 6: start a worker of this tablefate version to apply them`,
    );

    const ids = await readerWaitsThenOpens(
      url,
      gate,
      worker,
      `waiting for the catalog at ${where} to be migrated by a \`tablefate worker\` of this version`,
    );
    expect(ids).toEqual(['c0ffee01', 'c0ffee01']);
  } finally {
    await gate.open().catch(() => undefined);
    await worker?.then((c) => c.close()).catch(() => undefined);
  }
});

test('a fault is no catalog to wait for: a version newer than this code (made or not), a role the server does not know', async () => {
  const newer = await pg.freshDatabase('newer');
  await PostgresCatalog.open(newer).then((c) => c.close());
  const newerUnmade = await pg.freshDatabase('newer_unmade');
  await withClient(newerUnmade, async (c) => {
    await c.query(`CREATE TABLE schema_migrations (version INT PRIMARY KEY, applied_at BIGINT NOT NULL)`);
    await c.query(`CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
  });
  for (const url of [newer, newerUnmade]) {
    await withClient(url, (c) => c.query(`INSERT INTO schema_migrations (version, applied_at) VALUES (${SCHEMA_VERSION + 1}, 0)`));
    const reader = waitingReader(url);
    await expect(reader.opened).rejects.toThrow(/newer than this tablefate knows/);
    expect(reader.said).toEqual([]);
  }
  const stranger = new URL(newer);
  stranger.username = 'nobody';
  const reader = waitingReader(stranger.toString());
  await expect(reader.opened).rejects.toThrow(/role "nobody" does not exist/);
  expect(reader.said).toEqual([]);
});
