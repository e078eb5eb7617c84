import type { Client } from 'pg';
import { DoorNode, failureOf, firstOf, rowsOf } from './support/door';
import type { Harness } from './support/harness';
import { startPostgres, type TestPostgres } from './support/postgres';
import { waitFor } from './support/wait';

/*
 * The SQL door when what it stands on goes away: the database restarted (its sessions ended) with requests queued and
 * one running, and a caller's session ended while it waits. Each committed request still runs one operation and is
 * answered once. On a PostgreSQL server of this file's own, which it restarts.
 */

let server: TestPostgres;
let door: DoorNode;
let h: Harness;
let admin: Client;

beforeAll(async () => {
  server = await startPostgres();
  door = await DoorNode.start({ roles: ['alice'], callers: ['alice'], server });
  ({ h, admin } = door);
});

afterAll(() => door?.close());

const requestOf = (client: Client, id: unknown) =>
  firstOf(client, 'SELECT state, sqlstate, answer, workflow_id FROM tablefate_sql.requests WHERE id = $1', [id]);

/** The server restarted; the test's own sessions are gone with it, and made again. */
async function restart(): Promise<void> {
  await server.restart!();
  admin = await door.reconnectAdmin();
}

test('requests queued, and one running, when the database restarts: each runs once and is answered', async () => {
  const tables = [await door.ownedTable('alice', 'queued_0'), await door.ownedTable('alice', 'queued_1')];
  const running = await door.ownedTable('alice', 'running');
  // The running one drains a lease, so that it is under way when the server goes.
  const lease = await h.client.acquireLease(running.id, { ttlSeconds: 120, holder: 'the test' });
  const alice = await door.sessionOf('alice');
  await alice.query('BEGIN');
  const asked = await firstOf(alice, `CALL tablefate_sql.drop('shop.running', retention_seconds => 600)`);
  await alice.query('COMMIT');
  await door.untilDraining(running.id);
  // The others are committed while no worker serves the node.
  await h.stopWorker();
  await alice.query('BEGIN');
  const queued = [];
  for (const i of [0, 1])
    queued.push((await firstOf(alice, `CALL tablefate_sql.drop('shop.queued_${i}', retention_seconds => 600)`))?.request_id);
  await alice.query('COMMIT');

  await restart();
  await h.startWorker();
  await h.client.releaseLease(lease.id);
  const reader = await door.sessionOf('alice');
  for (const id of [asked?.request_id, ...queued]) {
    const answered = await waitFor(
      () => requestOf(reader, id),
      (row) => row?.state === 'answered',
      { what: `request ${String(id)} to be answered after the restart`, timeoutMs: 60_000 },
    );
    expect(answered).toMatchObject({ sqlstate: null, answer: expect.objectContaining({ state: 'TRASHED' }) as unknown });
  }
  for (const { id, oid } of [...tables, running]) {
    expect(await h.catalog.getTable(id)).toMatchObject({ state: 'TRASHED' });
    expect(await door.schemaOf(oid)).toBe('tablefate_trash');
    const drops = (await h.client.history({ table: id })).operations.filter((op) => op.operation === 'trash');
    expect(drops).toHaveLength(1);
  }
});

test("a caller's session ended while it waits: the drop goes on, and its outcome stays readable", async () => {
  const { id, oid } = await door.ownedTable('alice', 'abandoned');
  const lease = await h.client.acquireLease(id, { ttlSeconds: 120, holder: 'the test' });
  const caller = await door.sessionOf('alice');
  const pid = (await firstOf(caller, 'SELECT pg_backend_pid() AS pid'))?.pid;
  const waiting = failureOf(caller, `CALL tablefate_sql.drop('shop.abandoned', retention_seconds => 600)`);
  const request = await waitFor(
    () => firstOf(admin, `SELECT id FROM tablefate.sql_requests WHERE table_oid = $1`, [oid]),
    (row) => row !== undefined,
    { what: 'the request committed' },
  );
  await admin.query('SELECT pg_terminate_backend($1)', [pid]);
  expect(await waiting).toMatchObject({ code: '57P01' });
  await h.client.releaseLease(lease.id);
  const reader = await door.sessionOf('alice');
  const answered = await waitFor(
    () => requestOf(reader, request?.id),
    (row) => row?.state === 'answered',
    { what: 'the abandoned request to be answered' },
  );
  expect(answered).toMatchObject({ sqlstate: null, answer: expect.objectContaining({ id, state: 'TRASHED' }) as unknown });
  expect(await rowsOf(reader, 'SELECT table_id FROM tablefate_sql.trash WHERE table_id = $1', [id])).toEqual([{ table_id: String(id) }]);
});
