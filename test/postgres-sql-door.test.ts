import { execFile } from 'node:child_process';
import type { Client } from 'pg';
import { postgresProgram } from '../servers/local-postgres';
import { DoorNode, failureOf, firstOf, rowsOf } from './support/door';
import type { Harness } from './support/harness';
import { waitFor } from './support/wait';

/*
 * The SQL door (issue 41): a table's owner drops it into the trash with `CALL tablefate_sql.drop(...)` from any
 * PostgreSQL client, as an ordinary role, and PostgreSQL's roles decide who may. Judged as the roles' own sessions see
 * it: what CALL answers, the SQLSTATE of each refusal, where the table is, and what the requests view shows each role.
 */

let door: DoorNode;
let h: Harness;
let admin: Client;
/** The table's owner, who may drop it; a role that may call the door but owns nothing; a role not let in at all. */
let ALICE: string;
let BOB: string;
let MALLORY: string;

const sessionOf = (role: string) => door.sessionOf(role === ALICE ? 'alice' : role === BOB ? 'bob' : 'mallory');
const containing = (text: string): unknown => expect.stringContaining(text);
const schemaOf = (oid: string) => door.schemaOf(Number(oid));

beforeAll(async () => {
  door = await DoorNode.start({ roles: ['alice', 'bob', 'mallory'], callers: ['alice', 'bob'] });
  ({ h, admin } = door);
  ({ alice: ALICE, bob: BOB, mallory: MALLORY } = door.roles as { alice: string; bob: string; mallory: string });
});

afterAll(() => door?.close());

/** A table of alice's, with rows, that tablefate keeps (adopted). */
const alicesTable = (name: string) => door.ownedTable('alice', name);

test("a table's owner drops it with CALL, as any client calls: the call waits for the drop and answers its row", async () => {
  const { id, oid } = await alicesTable('orders');
  const alice = await sessionOf(ALICE);
  const dropped = await firstOf(alice, `CALL tablefate_sql.drop('shop.orders', retention_seconds => 600)`);
  expect(dropped).toMatchObject({ table_id: String(id), table: 'shop.orders', state: 'TRASHED' });
  expect(dropped?.expires_at).toBeInstanceOf(Date);
  expect(await h.catalog.getTable(id)).toMatchObject({ state: 'TRASHED' });
  // The same table (its oid, its rows) waits in tablefate's trash.
  expect(await schemaOf(String(oid))).toBe('tablefate_trash');
  const request = await firstOf(alice, `SELECT * FROM tablefate_sql.requests WHERE id = $1`, [dropped?.request_id]);
  expect(request).toMatchObject({ op: 'drop', requester: ALICE, application_name: `${ALICE}-app`, state: 'answered', sqlstate: null });
  // Who asked, through which door, is what the table's history says.
  const history = await h.client.history({ table: id });
  expect(JSON.stringify(history.operations)).toContain(`sql:${ALICE}`);
});

test('PostgreSQL decides who may: another role is refused 42501, a role not let in cannot call at all', async () => {
  const { id, oid } = await alicesTable('ledger');
  const bob = await sessionOf(BOB);
  expect(await failureOf(bob, `CALL tablefate_sql.drop('shop.ledger')`)).toMatchObject({
    code: '42501',
    message: containing(BOB),
  });
  const mallory = await sessionOf(MALLORY);
  expect(await failureOf(mallory, `CALL tablefate_sql.drop('shop.ledger')`)).toMatchObject({ code: '42501' });
  // Nor can a caller make a request without the procedure, or write one itself.
  expect(await failureOf(bob, `SELECT tablefate_sql._request('drop', 'shop.ledger', '{}', gen_random_uuid())`)).toMatchObject({
    code: '42501',
  });
  expect(
    await failureOf(
      bob,
      `INSERT INTO tablefate.sql_requests (op, args, table_oid, requester, requester_name, session_user_name) VALUES ('drop', '{}', 1, 1, 'x', 'x')`,
    ),
  ).toMatchObject({ code: '42501' });
  expect(
    await failureOf(bob, `INSERT INTO tablefate_sql.caller_marks (nonce, role_name) VALUES (gen_random_uuid(), '${ALICE}')`),
  ).toMatchObject({ code: '42501' });
  expect(await h.catalog.getTable(id)).toMatchObject({ state: 'READY' });
  expect(await schemaOf(String(oid))).toBe('shop');
});

test('bad input is refused with the standard SQLSTATE, and nothing is asked', async () => {
  const alice = await sessionOf(ALICE);
  await alice.query(
    `CREATE SCHEMA IF NOT EXISTS shop; CREATE TABLE IF NOT EXISTS shop.loose (id int); CREATE OR REPLACE VIEW shop.v AS SELECT 1 AS x`,
  );
  const count = async () => Number((await firstOf(admin, 'SELECT count(*) AS n FROM tablefate.sql_requests'))?.n);
  const before = await count();
  expect(await failureOf(alice, `CALL tablefate_sql.drop('shop.nosuch')`)).toMatchObject({ code: '42P01' });
  expect(await failureOf(alice, `CALL tablefate_sql.drop('shop.v')`)).toMatchObject({ code: '42809' });
  expect(await failureOf(alice, `CALL tablefate_sql.drop('shop.orders; DROP TABLE shop.loose')`)).toMatchObject({ code: '22023' });
  expect(await failureOf(alice, `CALL tablefate_sql.drop('orders')`)).toMatchObject({ code: '22023' });
  expect(await failureOf(alice, `CALL tablefate_sql.drop(NULL)`)).toMatchObject({ code: '22004' });
  expect(await count()).toBe(before);
});

test('a table tablefate does not keep yet is adopted and dropped in one operation; one a view depends on is left as it was', async () => {
  const alice = await sessionOf(ALICE);
  await alice.query(
    `CREATE SCHEMA IF NOT EXISTS shop; CREATE TABLE shop.unkept (id int PRIMARY KEY); INSERT INTO shop.unkept VALUES (1), (2)`,
  );
  const oid = String((await firstOf(admin, `SELECT 'shop.unkept'::regclass::oid AS oid`))?.oid);
  const dropped = await firstOf(alice, `CALL tablefate_sql.drop('shop.unkept', retention_seconds => 600)`);
  expect(dropped).toMatchObject({ table: 'shop.unkept', state: 'TRASHED' });
  const id = Number(dropped?.table_id);
  expect(await h.catalog.getTable(id)).toMatchObject({ state: 'TRASHED', params: { shards: 1, adopt: { node: 'node-0' } } });
  expect(await schemaOf(oid)).toBe('tablefate_trash');
  // One operation: neither an adopt nor a drop of its own.
  expect((await h.client.history({ table: id })).operations.map((op) => op.operation)).toEqual(['adoptTrash']);
  // And it comes back, the same table with its rows.
  await alice.query(`CALL tablefate_sql.recall('shop.unkept')`);
  expect(await schemaOf(oid)).toBe('shop');
  expect(await rowsOf(alice, 'SELECT id FROM shop.unkept ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);

  // A view on the table: the drop is refused as a drop of a kept table is, and nothing of the table changed.
  await alice.query(
    `CREATE TABLE shop.viewed (id int); INSERT INTO shop.viewed VALUES (7); CREATE VIEW shop.viewed_v AS SELECT * FROM shop.viewed`,
  );
  const viewed = String((await firstOf(admin, `SELECT 'shop.viewed'::regclass::oid AS oid`))?.oid);
  expect(await failureOf(alice, `CALL tablefate_sql.drop('shop.viewed')`)).toMatchObject({
    code: '2BP01',
    message: containing('view shop.viewed_v'),
  });
  expect(await schemaOf(viewed)).toBe('shop');
  expect(await rowsOf(alice, 'SELECT id FROM shop.viewed_v')).toEqual([{ id: 7 }]);
  expect(await firstOf(admin, `SELECT pg_get_userbyid(relowner) AS owner FROM pg_class WHERE oid = $1`, [viewed])).toEqual({
    owner: ALICE,
  });
  // Not kept: no record of it on the node, and the catalog's record of the attempt is a failed adopt's.
  expect(await rowsOf(admin, 'SELECT table_id FROM tablefate.shards WHERE table_oid = $1', [viewed])).toEqual([]);
  const failed = await h.catalog.findByName({ namespace: 'shop', name: 'viewed' });
  expect(failed).toMatchObject({ state: 'CREATE_FAILED' });
  // A call on that failed record finds no table of it on the node: refused as its state says, not as another node's.
  expect(await failureOf(alice, `CALL tablefate_sql.purge('${failed!.id}')`)).toMatchObject({
    code: '55000',
    message: containing(`table ${failed!.id} is CREATE_FAILED`),
  });
});

test('inside a transaction the drop is asked for only if the transaction commits, and the call says so', async () => {
  const { id, oid } = await alicesTable('events');
  const alice = await sessionOf(ALICE);
  await alice.query('BEGIN');
  const rolledBack = await firstOf(alice, `CALL tablefate_sql.drop('shop.events')`);
  expect(rolledBack).toMatchObject({ state: 'queued' });
  expect(alice.notices.at(-1)).toContain('runs once this transaction commits');
  await alice.query('ROLLBACK');
  expect((await rowsOf(admin, 'SELECT id FROM tablefate.sql_requests WHERE id = $1', [rolledBack?.request_id])).length).toBe(0);

  await alice.query('BEGIN');
  const committed = await firstOf(alice, `CALL tablefate_sql.drop('shop.events', retention_seconds => 600)`);
  await alice.query('COMMIT');
  const answered = await waitFor(
    () => firstOf(alice, `SELECT * FROM tablefate_sql.requests WHERE id = $1`, [committed?.request_id]),
    (row) => row?.state === 'answered',
    { what: 'the committed request to be answered' },
  );
  expect(answered).toMatchObject({ message: null, sqlstate: null, answer: expect.objectContaining({ id, state: 'TRASHED' }) as unknown });
  expect(await schemaOf(String(oid))).toBe('tablefate_trash');
  // Each role sees its own requests only.
  const bob = await sessionOf(BOB);
  expect(await rowsOf(bob, `SELECT * FROM tablefate_sql.requests WHERE id = $1`, [committed?.request_id])).toEqual([]);
});

test("a refusal of tablefate's comes back with its SQLSTATE and message: a drop that cannot drain the table's sessions", async () => {
  const { id } = await alicesTable('twice');
  const alice = await sessionOf(ALICE);
  await alice.query(`CALL tablefate_sql.drop('shop.twice', retention_seconds => 600)`);
  await h.client.undelete({ table: id });
  await alice.query(`BEGIN; LOCK TABLE shop.twice IN ACCESS SHARE MODE`);
  // A drop that cannot drain the table's sessions in its time is TableBusy, 55006; the table stays where it was.
  const other = await sessionOf(ALICE);
  expect(await failureOf(other, `CALL tablefate_sql.drop('shop.twice', drain_timeout_seconds => 1)`)).toMatchObject({
    code: '55006',
    message: containing('tablefate:'),
  });
  await alice.query('ROLLBACK');
  expect(await h.catalog.getTable(id)).toMatchObject({ state: 'READY' });
});

test('a request made while no worker runs waits, committed, and is answered once a worker starts', async () => {
  const { id, oid } = await alicesTable('waiting');
  await h.stopWorker();
  const alice = await sessionOf(ALICE);
  await alice.query('BEGIN');
  const asked = await firstOf(alice, `CALL tablefate_sql.drop('shop.waiting', retention_seconds => 600)`);
  await alice.query('COMMIT');
  // (No door listens: the request stays queued, and the table where it is.)
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect(await firstOf(alice, 'SELECT state FROM tablefate_sql.requests WHERE id = $1', [asked?.request_id])).toEqual({ state: 'queued' });
  expect(await schemaOf(String(oid))).toBe('shop');
  await h.startWorker();
  await waitFor(
    () => firstOf(alice, 'SELECT state, answer FROM tablefate_sql.requests WHERE id = $1', [asked?.request_id]),
    (row) => row?.state === 'answered',
    { what: 'the request made while no worker ran to be answered' },
  );
  expect(await h.catalog.getTable(id)).toMatchObject({ state: 'TRASHED' });
});

test('a flood of requests committed at once: each answered, each table dropped by one run', async () => {
  const tables = [];
  for (let i = 0; i < 12; i++) tables.push(await alicesTable(`flood_${i}`));
  const alice = await sessionOf(ALICE);
  await alice.query('BEGIN');
  const ids: unknown[] = [];
  for (let i = 0; i < tables.length; i++) {
    ids.push((await firstOf(alice, `CALL tablefate_sql.drop('shop.flood_${i}', retention_seconds => 600)`))?.request_id);
  }
  await alice.query('COMMIT');
  const answered = await waitFor(
    async () => rowsOf(alice, `SELECT id, state, sqlstate FROM tablefate_sql.requests WHERE id = ANY($1::bigint[]) ORDER BY id`, [ids]),
    (rows) => rows.every((row) => row.state === 'answered'),
    { what: 'every request of the flood to be answered', timeoutMs: 60_000 },
  );
  expect(answered.map((row) => row.sqlstate)).toEqual(ids.map(() => null));
  for (const { id } of tables) {
    expect(await h.catalog.getTable(id)).toMatchObject({ state: 'TRASHED' });
    const drops = (await h.client.history({ table: id })).operations.filter((op) => op.operation === 'trash');
    expect(drops).toHaveLength(1);
  }
});

test('a worker that stops while it runs a request: the next one takes it up, joins the same drop, and answers it once', async () => {
  const { id, oid } = await alicesTable('orphaned');
  // A lease keeps the drop draining, so the request is still running when its worker stops.
  const lease = await h.client.acquireLease(id, { ttlSeconds: 120, holder: 'the test' });
  const alice = await sessionOf(ALICE);
  await alice.query('BEGIN');
  const asked = await firstOf(alice, `CALL tablefate_sql.drop('shop.orphaned', retention_seconds => 600, drain_timeout_seconds => 60)`);
  await alice.query('COMMIT');
  await waitFor(
    () => firstOf(alice, 'SELECT state, workflow_id FROM tablefate_sql.requests WHERE id = $1', [asked?.request_id]),
    (row) => row?.state === 'planned' && typeof row.workflow_id === 'string',
    { what: 'the request taken and its drop started' },
  );
  await door.untilDraining(id);
  await h.stopWorker();
  await h.startWorker();
  await h.client.releaseLease(lease.id);
  const answered = await waitFor(
    () => firstOf(alice, 'SELECT state, sqlstate, answer FROM tablefate_sql.requests WHERE id = $1', [asked?.request_id]),
    (row) => row?.state === 'answered',
    { what: 'the request taken up again to be answered' },
  );
  expect(answered).toMatchObject({ sqlstate: null, answer: expect.objectContaining({ id, state: 'TRASHED' }) as unknown });
  expect(await schemaOf(String(oid))).toBe('tablefate_trash');
  const drops = (await h.client.history({ table: id })).operations.filter((op) => op.operation === 'trash');
  expect(drops).toHaveLength(1);
});

test("recall and purge in SQL: by the owner's role only, a recall only where it may create, a purge by id", async () => {
  const { id, oid } = await alicesTable('items');
  const alice = await sessionOf(ALICE);
  const bob = await sessionOf(BOB);
  await alice.query(`CALL tablefate_sql.drop('shop.items', retention_seconds => 600)`);
  // Another role may not recall it, nor purge it; nobody may recall it into a schema where it may not create.
  expect(await failureOf(bob, `CALL tablefate_sql.recall('shop.items')`)).toMatchObject({ code: '42501' });
  expect(await failureOf(bob, `CALL tablefate_sql.purge('${id}')`)).toMatchObject({ code: '42501' });
  await admin.query(`CREATE SCHEMA IF NOT EXISTS locked`);
  expect(await failureOf(alice, `CALL tablefate_sql.recall('${id}', new_name => 'locked.items')`)).toMatchObject({ code: '42501' });
  expect(await failureOf(alice, `CALL tablefate_sql.purge('shop.items')`)).toMatchObject({ code: '22023' });
  expect(await failureOf(alice, `CALL tablefate_sql.recall('shop.nosuch')`)).toMatchObject({ code: '42P01' });
  expect(await h.catalog.getTable(id)).toMatchObject({ state: 'TRASHED' });

  // Its owner recalls it by the name it was dropped under: the same table, back where it was.
  const recalled = await firstOf(alice, `CALL tablefate_sql.recall('shop.items')`);
  expect(recalled).toMatchObject({ table_id: String(id), table: 'shop.items', state: 'READY' });
  expect(await schemaOf(String(oid))).toBe('shop');
  expect(await rowsOf(alice, 'SELECT id FROM shop.items ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);

  // And, dropped again, purges it by its id.
  await alice.query(`CALL tablefate_sql.drop('shop.items', retention_seconds => 600)`);
  const purged = await firstOf(alice, `CALL tablefate_sql.purge('${id}')`);
  expect(purged).toMatchObject({ table_id: String(id), state: 'PURGED' });
  expect(await schemaOf(String(oid))).toBeUndefined();
});

test("a worker lost between a purge's end and its answer: the next answers it, found by its catalog, the table gone from the node", async () => {
  const { id, oid } = await alicesTable('gone');
  const alice = await sessionOf(ALICE);
  await alice.query(`CALL tablefate_sql.drop('shop.gone', retention_seconds => 600)`);
  const purged = await firstOf(alice, `CALL tablefate_sql.purge('${id}')`);
  expect(purged).toMatchObject({ state: 'PURGED' });
  expect(await schemaOf(String(oid))).toBeUndefined();
  // As a worker leaves it that dies after the purge's run has ended and before it writes the answer back.
  await admin.query(`UPDATE tablefate.sql_requests SET state = 'planned', answer = NULL, answered_at = NULL WHERE id = $1`, [
    purged?.request_id,
  ]);
  const answered = await waitFor(
    () => firstOf(alice, 'SELECT state, sqlstate, answer FROM tablefate_sql.requests WHERE id = $1', [purged?.request_id]),
    (row) => row?.state === 'answered',
    { what: 'the purge taken up again to be answered' },
  );
  expect(answered).toMatchObject({ sqlstate: null, answer: expect.objectContaining({ id, state: 'PURGED' }) as unknown });
  const purges = (await h.client.history({ table: id })).operations.filter((op) => op.operation === 'purge');
  expect(purges).toHaveLength(1);
});

/** psql itself, as a role runs it: its exit code, what it prints, and what it says on stderr (NOTICEs, ERRORs). */
function psql(role: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      postgresProgram('psql'),
      [door.urlOf(role), '-X', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose', ...args],
      (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

test('in psql, as the roles run it: the row; a refusal, exit 1 with its SQLSTATE; a call in a transaction, its NOTICE, then wait()', async () => {
  const { id } = await alicesTable('via_psql');
  const dropped = await psql('alice', '-c', `CALL tablefate_sql.drop('shop.via_psql', retention_seconds => 600)`);
  expect(dropped).toMatchObject({ code: 0 });
  expect(dropped.stdout).toMatch(new RegExp(`${id} \\| shop\\.via_psql \\| TRASHED`));

  const refused = await psql('bob', '-c', `CALL tablefate_sql.recall('shop.via_psql')`);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain(`ERROR:  42501: tablefate: role ${BOB} may not recall table ${id}`);
  expect(await h.catalog.getTable(id)).toMatchObject({ state: 'TRASHED' });

  // psql -1: the whole command one transaction, so the call asks, says so, and does not wait.
  const queued = await psql('alice', '-1', '-c', `CALL tablefate_sql.recall('shop.via_psql')`);
  expect(queued).toMatchObject({ code: 0 });
  const request = /NOTICE: {2}00000: tablefate: request ([0-9]+) \(recall of shop\.via_psql\) runs once this transaction commits/.exec(
    queued.stderr,
  )?.[1];
  expect(request).toBeDefined();
  const waited = await psql('alice', '-c', `CALL tablefate_sql.wait(${request})`);
  expect(waited).toMatchObject({ code: 0 });
  expect(waited.stdout).toMatch(new RegExp(`${id} \\| shop\\.via_psql \\| READY`));
});
