import { Client } from 'pg';
import { Harness } from './support/harness';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { failureOf, waitFor } from './support/wait';
import { TableBusyError } from '../domain/errors';
import type { TableInfo } from '../domain/table';

/*
 * The trash's policies with real PostgreSQL tables, judged by what a service's own client sees: the space cap evicts by
 * the bytes PostgreSQL measures (heap, indexes, TOAST), oldest first and never a held table; a drop waits for leases and
 * then for the sessions using the table, within one deadline; with the trash off a drop leaves nothing behind.
 */

let server: TestPostgres;
let h: Harness;
let service: Client;
let nodeUrl: string;

beforeAll(async () => {
  server = await sharedPostgres();
  nodeUrl = await server.freshDatabase('pgpolicy');
  service = new Client({ connectionString: nodeUrl });
  await service.connect();
  h = await Harness.start({ postgresNodes: [nodeUrl] });
});

afterAll(async () => {
  await service?.end();
  await h?.close();
  await server?.stop();
});

const stateOf = async (id: number) => (await h.catalog.getTable(id))?.state;
const exists = async (qualified: string) =>
  (await service.query<{ oid: string | null }>('SELECT to_regclass($1)::text AS oid', [qualified])).rows[0]!.oid !== null;
const trashedRelations = async () =>
  (
    await service.query<{ relname: string }>(
      `SELECT relname FROM pg_class WHERE relnamespace = 'tablefate_trash'::regnamespace AND relkind = 'r'`,
    )
  ).rows.length;

test('the space cap purges the oldest trashed tables by the bytes PostgreSQL measures, never a held one', async () => {
  const made: TableInfo[] = [];
  // Sizes that differ by more than a page or two: 1, 4 and 2 thousand rows of 200 bytes.
  for (const [name, rows] of [
    ['old', 1000],
    ['held', 4000],
    ['mid', 2000],
    ['new', 1000],
  ] as const) {
    made.push(await h.client.create({ table: `pgcap.${name}`, columns: 'id int primary key, body text' }));
    await service.query(`INSERT INTO pgcap.${name} SELECT g, repeat('x', 200) FROM generate_series(1, ${rows}) g`);
    // (Vacuumed now, its free space and visibility maps are there already: an autovacuum between the two measures
    // below would add them to one of them, two pages more.)
    await service.query(`VACUUM pgcap.${name}`);
  }
  await h.client.hold({ table: 'pgcap.held', reason: 'litigation' });
  for (const t of made) await h.client.trash({ table: `pgcap.${t.name}` });
  const sizes = new Map((await h.client.list({ includeTrashed: true, withSizes: true })).map((t) => [t.id, t.bytes!]));
  // What the service's own PostgreSQL says of the trashed tables is what the cap counts.
  const measured = await service.query<{ bytes: string }>(
    `SELECT sum(pg_total_relation_size(c.oid))::text AS bytes FROM pg_class c WHERE c.relnamespace = 'tablefate_trash'::regnamespace AND c.relkind = 'r'`,
  );
  expect(made.reduce((sum, t) => sum + sizes.get(t.id)!, 0)).toBe(Number(measured.rows[0]!.bytes));

  const [old, held, mid, young] = made;
  const cap = sizes.get(held!.id)! + sizes.get(young!.id)! + 1;
  await h.client.setSetting({ key: 'trash.maxBytes', value: String(cap), namespace: 'pgcap' });
  for (const t of [old!, mid!]) {
    await waitFor(
      () => stateOf(t.id),
      (s) => s === 'PURGED',
      { what: `table ${t.id} evicted`, timeoutMs: 30_000 },
    );
  }
  expect(await stateOf(held!.id)).toBe('TRASHED');
  expect(await stateOf(young!.id)).toBe('TRASHED');
  expect(await trashedRelations()).toBe(2);
  // The held table comes back whole: its 4000 rows.
  await h.client.release({ table: held!.id });
  await h.client.unsetSetting({ key: 'trash.maxBytes', namespace: 'pgcap' });
  await h.client.undelete({ table: held!.id });
  expect((await service.query('SELECT count(*)::int AS n FROM pgcap.held')).rows).toEqual([{ n: 4000 }]);
});

test('a drop waits for the leases, then for the sessions using the table, within one deadline', async () => {
  await h.client.create({ table: 'pgdrain.events', columns: 'id int primary key' });
  await service.query('INSERT INTO pgdrain.events VALUES (1), (2)');
  const lease = await h.client.acquireLease('pgdrain.events', { ttlSeconds: 60, holder: 'reporting' });
  // A session that keeps the table open in a transaction.
  const reader = new Client({ connectionString: nodeUrl });
  await reader.connect();
  try {
    await reader.query('BEGIN');
    await reader.query('SELECT count(*) FROM pgdrain.events');
    const drop = failureOf(h.client.trash({ table: 'pgdrain.events', drainTimeoutSeconds: 4 }));
    await waitFor(
      () => h.client.describe({ table: 'pgdrain.events' }).then((t) => t.state),
      (s) => s === 'DRAINING',
      { what: 'the drain' },
    );
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await h.client.releaseLease(lease.id);
    // Leases done, the session still holds the table: the rest of the deadline runs out on it.
    const failure = await drop;
    expect(failure).toBeInstanceOf(TableBusyError);
    // One deadline: the sessions' wait had what the leases (held 1.5 s and more) left of the 4 s, not 4 s of its own.
    const waited = Number(/after (\d+) ms of waiting/.exec((failure as Error).message)?.[1]);
    expect(waited).toBeGreaterThan(0);
    expect(waited).toBeLessThanOrEqual(2500);
    expect((await h.client.describe({ table: 'pgdrain.events' })).state).toBe('READY');
    expect((await service.query('SELECT count(*)::int AS n FROM pgdrain.events')).rows).toEqual([{ n: 2 }]);
  } finally {
    await reader.query('ROLLBACK').catch(() => undefined);
    await reader.end();
  }
  // Nobody left: the drop goes through.
  expect((await h.client.trash({ table: 'pgdrain.events', drainTimeoutSeconds: 4 })).state).toBe('TRASHED');
  expect(await exists('pgdrain.events')).toBe(false);
});

test('with the trash off, a drop deletes the PostgreSQL table at once: not in its schema, not in the trash', async () => {
  await h.client.setSetting({ key: 'trash.enabled', value: 'false', namespace: 'pgoff' });
  try {
    const table = await h.client.create({ table: 'pgoff.scratch', columns: 'id int' });
    await service.query('INSERT INTO pgoff.scratch VALUES (1)');
    const before = await trashedRelations();
    const answer = await h.client.trash({ table: 'pgoff.scratch' });
    expect(answer.state).toBe('PURGED');
    expect(await exists('pgoff.scratch')).toBe(false);
    expect(await trashedRelations()).toBe(before);
    expect((await h.shardReports(table)).map((r) => r.area)).toEqual([null]);
  } finally {
    await h.client.unsetSetting({ key: 'trash.enabled', namespace: 'pgoff' });
  }
});
