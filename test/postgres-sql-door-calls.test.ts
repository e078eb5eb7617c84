import { Pool, type Client } from 'pg';
import { DOOR_VERSION, prepareDoor } from '../storage/postgres-door-sql';
import { DoorNode, failureOf, firstOf, rowsOf, type Row } from './support/door';
import type { Harness } from './support/harness';
import { waitFor } from './support/wait';

/*
 * The SQL door's calls on a table tablefate keeps, beside drop: a retention change, a hold and its release, each by the
 * table's owner only; and the trash view, which shows each role the tables it may recall, with who dropped each and when
 * it expires. Judged as the roles' own sessions see it.
 */

let door: DoorNode;
let h: Harness;
let admin: Client;

beforeAll(async () => {
  door = await DoorNode.start({ roles: ['alice', 'bob'], callers: ['alice', 'bob'], nodes: 2 });
  ({ h, admin } = door);
});

afterAll(() => door?.close());

const trashRowOf = async (client: Client, id: number): Promise<Row | undefined> =>
  firstOf(client, 'SELECT * FROM tablefate_sql.trash WHERE table_id = $1', [id]);

const seconds = (from: unknown, to: unknown) => ((to as Date).getTime() - (from as Date).getTime()) / 1000;

test('the trash view shows a role the tables it may recall, with who dropped each and when it expires; another role sees none', async () => {
  const { id } = await door.ownedTable('alice', 'kept');
  const alice = await door.sessionOf('alice');
  const dropped = await firstOf(alice, `CALL tablefate_sql.drop('shop.kept', retention_seconds => 600)`);
  expect(dropped).toMatchObject({ table_id: String(id), state: 'TRASHED', hold_reason: null, held_since: null, notes: [] });

  const row = await trashRowOf(alice, id);
  expect(row).toMatchObject({ table: 'shop.kept', state: 'TRASHED', shards_here: 1, owner: door.roles.alice });
  expect(row?.dropped_by).toEqual(expect.stringContaining(`sql:${door.roles.alice}`));
  expect(seconds(row?.dropped_at, row?.expires_at)).toBe(600);
  expect(Number(row?.bytes)).toBeGreaterThan(0);
  // Bob may call the door but owns nothing: he sees none of it; a superuser sees it all.
  expect(await trashRowOf(await door.sessionOf('bob'), id)).toBeUndefined();
  expect(await trashRowOf(admin, id)).toMatchObject({ table: 'shop.kept' });

  // Dropped through the SDK, a table is in the view at once, and what the catalog says of it follows.
  const other = await door.ownedTable('alice', 'by_sdk');
  await h.client.trash({ table: 'shop.by_sdk', retentionSeconds: 900 });
  // (Its state as the door's copy last read it: TRASHING if a sweep read it between its move and its commit, until the
  // next sweep, within 2 s.)
  expect(await trashRowOf(alice, other.id)).toMatchObject({
    state: expect.stringMatching(/^TRASH(ING|ED)$/) as unknown,
    owner: door.roles.alice,
  });
  const synced = await waitFor(
    () => trashRowOf(alice, other.id),
    (r) => r?.table === 'shop.by_sdk' && r.state === 'TRASHED',
    { what: "the SDK's drop in the trash view" },
  );
  expect(seconds(synced?.dropped_at, synced?.expires_at)).toBe(900);
  expect(synced?.dropped_by).toEqual((await h.catalog.getTable(other.id))?.droppedBy);

  // Recalled, it leaves the view.
  await alice.query(`CALL tablefate_sql.recall('${id}')`);
  expect(await trashRowOf(alice, id)).toBeUndefined();
});

test('a retention change, a hold and its release in SQL: by the owner, each answered with the table as it is after', async () => {
  const { id } = await door.ownedTable('alice', 'ledger');
  const alice = await door.sessionOf('alice');
  const bob = await door.sessionOf('bob');
  await alice.query(`CALL tablefate_sql.drop('shop.ledger', retention_seconds => 600)`);

  const longer = await firstOf(alice, `CALL tablefate_sql.retention('shop.ledger', 3600)`);
  expect(longer).toMatchObject({ table_id: String(id), state: 'TRASHED' });
  const table = await h.catalog.getTable(id);
  expect((longer?.expires_at as Date).getTime()).toBe(table!.droppedAt! + 3600 * 1000);
  expect(seconds((await trashRowOf(alice, id))?.dropped_at, (await trashRowOf(alice, id))?.expires_at)).toBe(3600);

  const held = await firstOf(alice, `CALL tablefate_sql.hold('${id}', reason => 'case 7')`);
  expect(held).toMatchObject({ hold_reason: 'case 7' });
  expect(held?.held_since).toBeInstanceOf(Date);
  expect(await trashRowOf(alice, id)).toMatchObject({ hold_reason: 'case 7' });
  // Held, it is not purged: OnHold is 55000, and the table stays.
  expect(await failureOf(alice, `CALL tablefate_sql.purge('${id}')`)).toMatchObject({
    code: '55000',
    message: expect.stringContaining('case 7') as unknown,
  });
  // Bob may neither release it, nor change its retention, nor hold it.
  expect(await failureOf(bob, `CALL tablefate_sql.release('${id}')`)).toMatchObject({ code: '42501' });
  expect(await failureOf(bob, `CALL tablefate_sql.retention('${id}', 60)`)).toMatchObject({ code: '42501' });
  expect(await failureOf(bob, `CALL tablefate_sql.hold('${id}')`)).toMatchObject({ code: '42501' });
  expect(await h.catalog.getTable(id)).toMatchObject({ state: 'TRASHED', hold: { reason: 'case 7' } });

  const released = await firstOf(alice, `CALL tablefate_sql.release('${id}')`);
  expect(released).toMatchObject({ hold_reason: null, held_since: null, state: 'TRASHED' });
  expect(await firstOf(alice, `CALL tablefate_sql.purge('${id}')`)).toMatchObject({ state: 'PURGED' });

  // A live table is held by its name, and stays where it is.
  await door.ownedTable('alice', 'live');
  expect(await firstOf(alice, `CALL tablefate_sql.hold('shop.live')`)).toMatchObject({ state: 'READY', hold_reason: null });
  expect((await firstOf(alice, `CALL tablefate_sql.hold('shop.live')`))?.held_since).toBeInstanceOf(Date);
  expect(await firstOf(alice, `CALL tablefate_sql.release('shop.live')`)).toMatchObject({ state: 'READY', held_since: null });
});

test('a drop with cascade => true takes the views along, as the SDK does; without it, HasDependents names the flag', async () => {
  const { id, oid } = await door.ownedTable('alice', 'viewed');
  const alice = await door.sessionOf('alice');
  await alice.query('CREATE VIEW shop.viewed_v AS SELECT id FROM shop.viewed');
  const view = Number((await firstOf(alice, `SELECT 'shop.viewed_v'::regclass::oid AS oid`))?.oid);
  expect(await failureOf(alice, `CALL tablefate_sql.drop('shop.viewed')`)).toMatchObject({
    message: expect.stringContaining('view shop.viewed_v; drop them first, or drop with --cascade') as unknown,
  });
  const dropped = await firstOf(alice, `CALL tablefate_sql.drop('shop.viewed', cascade => true)`);
  expect(dropped).toMatchObject({
    table_id: String(id),
    state: 'TRASHED',
    notes: ['shop.viewed: moved into the trash with it: view shop.viewed_v'],
  });
  const schemaOf = async (relation: number) =>
    (await firstOf(admin, 'SELECT relnamespace::regnamespace::text AS schema FROM pg_class WHERE oid = $1', [relation]))?.schema;
  expect([await schemaOf(oid), await schemaOf(view)]).toEqual(['tablefate_trash', 'tablefate_trash']);
  // One entry in the trash view, with what it took along.
  expect(await trashRowOf(alice, id)).toMatchObject({ family: ['shop.viewed: moved into the trash with it: view shop.viewed_v'] });
  await alice.query(`CALL tablefate_sql.recall('${id}')`);
  expect(await rowsOf(alice, 'SELECT id FROM shop.viewed_v ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);
});

test('a truncate in SQL: by a role PostgreSQL lets TRUNCATE the table, its rows into the trash as an entry of their own; another role is refused 42501', async () => {
  const { id, oid } = await door.ownedTable('alice', 'emptied');
  const alice = await door.sessionOf('alice');
  const bob = await door.sessionOf('bob');
  expect(await failureOf(bob, `CALL tablefate_sql.truncate('shop.emptied')`)).toMatchObject({
    code: '42501',
    message: expect.stringContaining('TRUNCATE privilege') as unknown,
  });
  await alice.query(`GRANT TRUNCATE ON shop.emptied TO ${door.roles.bob!}`);
  const entry = await firstOf(bob, `CALL tablefate_sql.truncate('shop.emptied', retention_seconds => 600)`);
  expect(entry).toMatchObject({ table: 'shop.emptied', state: 'TRASHED' });
  expect(Number(entry?.table_id)).not.toBe(id);
  expect(await h.catalog.getTable(Number(entry?.table_id))).toMatchObject({ state: 'TRASHED', truncatedFrom: id });
  // The table at its name is empty, a new one; the rows wait in the trash under the old one's oid.
  expect(await rowsOf(alice, 'SELECT count(*)::int AS n FROM shop.emptied')).toEqual([{ n: 0 }]);
  expect((await firstOf(admin, 'SELECT relnamespace::regnamespace::text AS schema FROM pg_class WHERE oid = $1', [oid]))?.schema).toBe(
    'tablefate_trash',
  );
  // The trash view shows the entry to the table's owner, who recalls it under a new name.
  expect(await trashRowOf(alice, Number(entry?.table_id))).toMatchObject({ table: 'shop.emptied' });
  await alice.query(`INSERT INTO shop.emptied VALUES (3, 'c')`);
  // ... and in its table's place: the rows written since go to the trash, as a table of their own.
  const back = await firstOf(alice, `CALL tablefate_sql.recall('${String(entry?.table_id)}', in_place => true)`);
  expect(back).toMatchObject({ table_id: entry?.table_id, table: 'shop.emptied', state: 'READY' });
  expect(await rowsOf(alice, 'SELECT id FROM shop.emptied ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }]);
  expect(await h.catalog.getTable(id)).toMatchObject({ state: 'TRASHED' });
});

test('a truncate with cascade => true asks for the cascade; without it, the request is as it always was', async () => {
  const alice = await door.sessionOf('alice');
  const argsOf = async (sql: string) => {
    // (In a transaction rolled back: the request is written, and never runs.)
    await alice.query('BEGIN');
    try {
      const { request_id: id } = (await firstOf(alice, sql))!;
      return (await firstOf(alice, 'SELECT args FROM tablefate_sql.requests WHERE id = $1', [id]))?.args;
    } finally {
      await alice.query('ROLLBACK');
    }
  };
  expect(await argsOf(`CALL tablefate_sql.truncate('shop.accounts', cascade => true)`)).toEqual({ table: 'shop.accounts', cascade: true });
  expect(await argsOf(`CALL tablefate_sql.truncate('shop.accounts', retention_seconds => 600)`)).toEqual({
    table: 'shop.accounts',
    retentionSeconds: 600,
  });
});

test('a name that needs quotes, as psql writes it: dropped and recalled through the door under its exact name', async () => {
  const alice = await door.sessionOf('alice');
  await alice.query(
    `CREATE SCHEMA IF NOT EXISTS shop; CREATE TABLE shop."Mixed Case.v2" (id int); INSERT INTO shop."Mixed Case.v2" VALUES (1)`,
  );
  const oid = Number((await firstOf(alice, `SELECT 'shop."Mixed Case.v2"'::regclass::oid AS oid`))?.oid);
  // Not kept yet: the door adopts and drops it in one operation, under its exact name.
  const dropped = await firstOf(alice, `CALL tablefate_sql.drop('shop."Mixed Case.v2"')`);
  expect(dropped).toMatchObject({ state: 'TRASHED', table: 'shop."Mixed Case.v2"' });
  expect(await h.catalog.getTable(Number(dropped?.table_id))).toMatchObject({ namespace: 'shop', name: 'Mixed Case.v2' });
  await alice.query(`CALL tablefate_sql.recall('${String(dropped?.table_id)}')`);
  expect(Number((await firstOf(alice, `SELECT 'shop."Mixed Case.v2"'::regclass::oid AS oid`))?.oid)).toBe(oid);
});

test('bad input to the calls is refused with its SQLSTATE, and changes nothing', async () => {
  const { id } = await door.ownedTable('alice', 'intact');
  const alice = await door.sessionOf('alice');
  await alice.query(`CALL tablefate_sql.drop('shop.intact', retention_seconds => 600)`);
  await alice.query(`CREATE TABLE shop."Mixed" (id int); CREATE SEQUENCE shop.seq; CREATE INDEX idx_mixed ON shop."Mixed" (id)`);
  const refusals: [string, string][] = [
    // Names PostgreSQL's way: unquoted upper case folds to a table that is not there.
    [`CALL tablefate_sql.drop('SHOP.NOSUCH')`, '42P01'],
    [`CALL tablefate_sql.drop('shop.ördérs')`, '42P01'],
    [`CALL tablefate_sql.drop('shop.seq')`, '42809'],
    [`CALL tablefate_sql.drop('shop.idx_mixed')`, '42809'],
    [`CALL tablefate_sql.drop('shop.a"b')`, '22023'],
    [`CALL tablefate_sql.drop('shop.intact.x')`, '22023'],
    // Ids that never were, names tablefate cannot give, retentions out of bounds.
    [`CALL tablefate_sql.recall('987654321')`, '42P01'],
    [`CALL tablefate_sql.purge('987654321')`, '42P01'],
    [`CALL tablefate_sql.hold('987654321')`, '42P01'],
    [`CALL tablefate_sql.recall('${id}', new_name => 'shop.Orders')`, '22023'],
    [`CALL tablefate_sql.recall('${id}', new_name => 'shop."Orders')`, '22023'],
    [`CALL tablefate_sql.retention('${id}', 0)`, '22023'],
    [`CALL tablefate_sql.retention('${id}', NULL)`, '22004'],
    [`CALL tablefate_sql.hold(NULL)`, '22004'],
    [`CALL tablefate_sql.hold('${id}', reason => E'two\\nlines')`, '22023'],
    [`CALL tablefate_sql.truncate('shop.intact', cascade => 'maybe')`, '22P02'],
  ];
  for (const [sql, code] of refusals) expect([sql, await failureOf(alice, sql)]).toEqual([sql, expect.objectContaining({ code })]);
  const table = await h.catalog.getTable(id);
  expect(table).toMatchObject({ state: 'TRASHED', hold: null, expireAt: table!.droppedAt! + 600 * 1000 });
  expect(await door.schemaOf(Number((await firstOf(admin, `SELECT 'shop."Mixed"'::regclass::oid AS oid`))?.oid))).toBe('shop');
});

test('a request taken up again after its run ended and the table moved on makes no second operation', async () => {
  const { id, oid } = await door.ownedTable('alice', 'moved_on');
  const alice = await door.sessionOf('alice');
  const dropped = await firstOf(alice, `CALL tablefate_sql.drop('shop.moved_on', retention_seconds => 600)`);
  // The table is recalled since, dropped and recalled again (through the SDK: a newer run of the drop's usual workflow
  // id), then the door's request is found planned again, as a worker that died after the drop's run ended and before it
  // wrote the answer back leaves it.
  await h.client.undelete({ table: id });
  await h.client.trash({ table: 'shop.moved_on' });
  await h.client.undelete({ table: id });
  await admin.query(`UPDATE tablefate.sql_requests SET state = 'planned', answer = NULL, answered_at = NULL WHERE id = $1`, [
    dropped?.request_id,
  ]);
  const answered = await waitFor(
    () => firstOf(alice, 'SELECT state, sqlstate, answer, workflow_id FROM tablefate_sql.requests WHERE id = $1', [dropped?.request_id]),
    (row) => row?.state === 'answered',
    { what: 'the drop taken up again to be answered' },
  );
  // Its answer is what its one run ended with; the table was not dropped a second time.
  expect(answered).toMatchObject({ sqlstate: null, answer: expect.objectContaining({ id, state: 'TRASHED' }) as unknown });
  expect(await h.catalog.getTable(id)).toMatchObject({ state: 'READY' });
  expect(await door.schemaOf(oid)).toBe('shop');
  const drops = (await h.client.history({ table: id })).operations.filter((op) => op.operation === 'trash');
  expect(drops).toHaveLength(2);
  expect(answered?.workflow_id).toEqual(expect.stringContaining(`~sql.node-0.${String(dropped?.request_id)}.`));
});

test('1,000 requests committed at once, served by two workers: each answered once, none lost', async () => {
  const alice = await door.sessionOf('alice');
  // Every answer the door writes, counted as it is written.
  await admin.query(`CREATE TABLE public.door_answers (id bigint NOT NULL);
    CREATE FUNCTION public.count_answer() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO public.door_answers VALUES (NEW.id); RETURN NEW; END $$;
    CREATE TRIGGER counted AFTER UPDATE ON tablefate.sql_requests FOR EACH ROW
      WHEN (NEW.state = 'answered' AND OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION public.count_answer()`);
  const second = await door.secondDoor();
  try {
    await alice.query('BEGIN');
    await alice.query(`DO $$
      DECLARE r bigint; t bigint; n text; s text; e timestamptz; hs timestamptz; hr text; notes text[];
      BEGIN
        FOR i IN 1..1000 LOOP
          CALL tablefate_sql.purge((900000000 + i)::text, NULL, r, t, n, s, e, hs, hr, notes);
        END LOOP;
      END $$`);
    await alice.query('COMMIT');
    const { rows } = await alice.query<{ first: string; last: string }>(
      `SELECT min(id)::text AS first, max(id)::text AS last FROM tablefate_sql.requests WHERE op = 'purge' AND args ->> 'table' LIKE '9000%'`,
    );
    const [first, last] = [Number(rows[0]?.first), Number(rows[0]?.last)];
    const settled = await waitFor(
      () =>
        firstOf(
          admin,
          `SELECT count(*) FILTER (WHERE state = 'answered') AS answered, count(*) AS asked FROM tablefate.sql_requests WHERE id BETWEEN $1 AND $2`,
          [first, last],
        ),
      (row) => Number(row?.answered) === 1000,
      { what: 'the thousand requests to be answered', timeoutMs: 120_000 },
    );
    expect(Number(settled?.asked)).toBe(1000);
    const counted = await firstOf(
      admin,
      `SELECT count(*) AS writes, count(DISTINCT id) AS requests FROM public.door_answers WHERE id BETWEEN $1 AND $2`,
      [first, last],
    );
    expect(counted).toEqual({ writes: '1000', requests: '1000' });
    // Each is the refusal its id deserves, in its own words.
    const answers = await rowsOf(admin, `SELECT DISTINCT sqlstate, error_type FROM tablefate.sql_requests WHERE id BETWEEN $1 AND $2`, [
      first,
      last,
    ]);
    expect(answers).toEqual([{ sqlstate: '42P01', error_type: 'TableNotFound' }]);
  } finally {
    await second.stop();
    await admin.query('DROP TRIGGER counted ON tablefate.sql_requests');
  }
});

test('answers are kept 30 days, then forgotten; a mark no call took is forgotten after an hour', async () => {
  const { id } = await door.ownedTable('alice', 'aged');
  const alice = await door.sessionOf('alice');
  const old = await firstOf(alice, `CALL tablefate_sql.drop('shop.aged', retention_seconds => 600)`);
  const recent = await firstOf(alice, `CALL tablefate_sql.retention('${id}', 900)`);
  await admin.query(`UPDATE tablefate.sql_requests SET answered_at = now() - interval '31 days' WHERE id = $1`, [old?.request_id]);
  await admin.query(`INSERT INTO tablefate_sql.caller_marks (nonce, xact_start) VALUES (gen_random_uuid(), now() - interval '2 hours')`);
  // A worker's door prunes as it starts, then hourly.
  await h.stopWorker();
  await h.startWorker();
  await waitFor(
    () => rowsOf(admin, 'SELECT id FROM tablefate.sql_requests WHERE id = $1', [old?.request_id]),
    (rows) => rows.length === 0,
    { what: 'the old answer to be forgotten' },
  );
  expect(await rowsOf(admin, `SELECT nonce FROM tablefate_sql.caller_marks WHERE xact_start < now() - interval '1 hour'`)).toEqual([]);
  expect(await firstOf(alice, 'SELECT state FROM tablefate_sql.requests WHERE id = $1', [recent?.request_id])).toEqual({
    state: 'answered',
  });
});

test('wait() answers a request made earlier as its call would; a wait the session bounds ends with TF001, the drop going on', async () => {
  const { id } = await door.ownedTable('alice', 'later');
  const alice = await door.sessionOf('alice');
  await alice.query('BEGIN');
  const asked = await firstOf(alice, `CALL tablefate_sql.drop('shop.later', retention_seconds => 600)`);
  await alice.query('COMMIT');
  expect(await firstOf(alice, 'CALL tablefate_sql.wait($1)', [asked?.request_id])).toMatchObject({
    table_id: String(id),
    state: 'TRASHED',
  });
  // Another role may not wait for it (nor read it): as if there were none.
  expect(await failureOf(await door.sessionOf('bob'), 'CALL tablefate_sql.wait($1)', [asked?.request_id])).toMatchObject({ code: '42704' });

  // A drain that outlasts the session's statement_timeout: the wait ends before it, TF001 naming how to wait again.
  const slow = await door.ownedTable('alice', 'slow');
  const lease = await h.client.acquireLease(slow.id, { ttlSeconds: 120, holder: 'the test' });
  await alice.query(`SET statement_timeout = '1s'`);
  expect(await failureOf(alice, `CALL tablefate_sql.drop('shop.slow', retention_seconds => 600)`)).toMatchObject({
    code: 'TF001',
    message: expect.stringContaining('it goes on') as unknown,
  });
  await alice.query('RESET statement_timeout');
  const request = await firstOf(alice, `SELECT id FROM tablefate_sql.requests WHERE op = 'drop' ORDER BY id DESC LIMIT 1`);
  await h.client.releaseLease(lease.id);
  expect(await firstOf(alice, 'CALL tablefate_sql.wait($1)', [request?.id])).toMatchObject({ table_id: String(slow.id), state: 'TRASHED' });
});

test('a worker brings an older door to its own version, dropping the routines it no longer has, and leaves a newer one as it is', async () => {
  const routine = (signature: string) => firstOf(admin, `SELECT to_regprocedure($1) IS NOT NULL AS there`, [signature]);
  const hold = 'tablefate_sql.hold(text, text, double precision, bigint, bigint, text, text, timestamptz, timestamptz, text, text[])';
  /** A worker's door starting: it prepares the door on its node, as at every worker's start. */
  const workerStarts = async () => {
    const pool = new Pool({ connectionString: door.url });
    try {
      await prepareDoor(pool);
    } finally {
      await pool.end();
    }
  };
  // A newer door (a later release's worker installed it): this worker changes nothing of it.
  await admin.query(`COMMENT ON SCHEMA tablefate_sql IS 'tablefate SQL door 99'; DROP PROCEDURE ${hold}`);
  await workerStarts();
  expect(await routine(hold)).toEqual({ there: false });
  // An older door, with a routine this one does not have: brought to this version, that routine dropped.
  await admin.query(`COMMENT ON SCHEMA tablefate_sql IS 'tablefate SQL door 1';
    CREATE PROCEDURE tablefate_sql.drop(tbl text, INOUT request_id bigint DEFAULT NULL) LANGUAGE sql AS 'SELECT 1'`);
  await workerStarts();
  expect(await routine(hold)).toEqual({ there: true });
  expect(await routine('tablefate_sql.drop(text, bigint)')).toEqual({ there: false });
  expect(await firstOf(admin, `SELECT obj_description('tablefate_sql'::regnamespace, 'pg_namespace') AS note`)).toEqual({
    note: `tablefate SQL door ${DOOR_VERSION}`,
  });
  // And the door works as before.
  const alice = await door.sessionOf('alice');
  const { id } = await door.ownedTable('alice', 'after_upgrade');
  expect(await firstOf(alice, `CALL tablefate_sql.hold('${id}')`)).toMatchObject({ state: 'READY' });
});

test("a table of another node: each node's door answers for its own tables only", async () => {
  const { id, oid } = await door.ownedTable('alice', 'elsewhere', 1);
  const here = await door.sessionOf('alice');
  const there = await door.sessionOf('alice', 1);
  // By name, node-0's door finds no such table; by id, it finds the table's shard is not on node-0.
  expect(await failureOf(here, `CALL tablefate_sql.drop('shop.elsewhere')`)).toMatchObject({ code: '42P01' });
  expect(await failureOf(here, `CALL tablefate_sql.hold('${id}')`)).toMatchObject({
    code: '42P01',
    message: expect.stringContaining("call its node's door") as unknown,
  });
  expect(await h.catalog.getTable(id)).toMatchObject({ state: 'READY', hold: null });
  // Its own node's door drops it, and the trash view there shows it.
  expect(await firstOf(there, `CALL tablefate_sql.drop('shop.elsewhere', retention_seconds => 600)`)).toMatchObject({ state: 'TRASHED' });
  expect(await firstOf(there, 'SELECT table_id FROM tablefate_sql.trash WHERE table_id = $1', [id])).toEqual({ table_id: String(id) });
  expect(await firstOf(here, 'SELECT table_id FROM tablefate_sql.trash WHERE table_id = $1', [id])).toBeUndefined();
  expect(await failureOf(here, `CALL tablefate_sql.recall('${id}')`)).toMatchObject({ code: '42P01' });
  expect(
    await firstOf(there, `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`, [oid]),
  ).toEqual({
    nspname: 'tablefate_trash',
  });
});

test("a door's drop terminated half way is finished by the reconciler with the retention it asked and who asked it", async () => {
  const { id, oid } = await door.ownedTable('alice', 'stuck');
  // A lease keeps the drop draining, so that it is terminated half way.
  const lease = await h.client.acquireLease(id, { ttlSeconds: 120, holder: 'the test' });
  const alice = await door.sessionOf('alice');
  await alice.query('BEGIN');
  const asked = await firstOf(alice, `CALL tablefate_sql.drop('shop.stuck', retention_seconds => 900)`);
  await alice.query('COMMIT');
  const running = await waitFor(
    () => firstOf(alice, 'SELECT workflow_id FROM tablefate_sql.requests WHERE id = $1', [asked?.request_id]),
    (row) => typeof row?.workflow_id === 'string',
    { what: 'the drop started' },
  );
  await door.untilDraining(id);
  await h.temporal.workflow.getHandle(running!.workflow_id as string).terminate('test: an operator terminated it');
  // Its caller hears how it ended: WorkflowTerminated, 57000.
  const answered = await waitFor(
    () => firstOf(alice, 'SELECT state, sqlstate FROM tablefate_sql.requests WHERE id = $1', [asked?.request_id]),
    (row) => row?.state === 'answered',
    { what: 'the terminated drop answered' },
  );
  expect(answered).toEqual({ state: 'answered', sqlstate: '57000' });
  await h.client.releaseLease(lease.id);
  await h.reconcile();
  const trashed = await waitFor(
    () => h.catalog.getTable(id),
    (table) => table?.state === 'TRASHED',
    { what: 'the reconciler to finish the drop' },
  );
  expect(trashed!.expireAt! - trashed!.droppedAt!).toBe(900_000);
  expect(trashed!.droppedBy).toEqual(expect.stringContaining(`sql:${door.roles.alice}`));
  expect(await door.schemaOf(oid)).toBe('tablefate_trash');
});

test("a door's start waits for no caller: with a call waiting, a door of its version is left as it is, an older one's replacement gives way", async () => {
  const { id } = await door.ownedTable('alice', 'waited_on');
  const lease = await h.client.acquireLease(id, { ttlSeconds: 120, holder: 'the test' });
  const alice = await door.sessionOf('alice');
  // A call waiting for its answer (its drop drains a lease) reads the door's requests view all along.
  let ended = false;
  const waiting = alice.query(`CALL tablefate_sql.drop('shop.waited_on', retention_seconds => 600)`).finally(() => (ended = true));
  await door.untilDraining(id);
  const pool = new Pool({ connectionString: door.url });
  try {
    await expect(prepareDoor(pool)).resolves.toMatchObject({ version: DOOR_VERSION });
    expect(ended).toBe(false);
    // An older door to replace: the replacement gives way to the waiting call (55P03), changing nothing.
    await admin.query(`COMMENT ON SCHEMA tablefate_sql IS 'tablefate SQL door 1'`);
    await expect(prepareDoor(pool)).rejects.toMatchObject({ code: '55P03' });
    expect(ended).toBe(false);
    expect(await firstOf(admin, `SELECT obj_description('tablefate_sql'::regnamespace, 'pg_namespace') AS note`)).toEqual({
      note: 'tablefate SQL door 1',
    });
    await h.client.releaseLease(lease.id);
    expect((await waiting).rows[0]).toMatchObject({ state: 'TRASHED' });
    // Once nobody waits, it goes through.
    await expect(prepareDoor(pool)).resolves.toMatchObject({ version: DOOR_VERSION });
  } finally {
    await pool.end();
  }
});

test('a truncate with cascade => true in SQL: only by a role that may TRUNCATE every table it reaches, as PostgreSQL asks of TRUNCATE ... CASCADE', async () => {
  const parent = await door.ownedTable('alice', 'accts');
  const alice = await door.sessionOf('alice');
  const bob = await door.sessionOf('bob');
  await alice.query(
    'CREATE TABLE shop.acct_lines (id int PRIMARY KEY, acct_id int REFERENCES shop.accts); INSERT INTO shop.acct_lines VALUES (1, 1)',
  );
  const child = await h.client.adopt({ table: 'shop.acct_lines', node: 'node-0' });
  await alice.query(`GRANT TRUNCATE ON shop.accts TO ${door.roles.bob!}`);
  expect(await failureOf(bob, `CALL tablefate_sql.truncate('shop.accts', cascade => true)`)).toMatchObject({
    code: '42501',
    message: expect.stringContaining('may not truncate shop.acct_lines, which --cascade would truncate too') as unknown,
  });
  expect(
    await rowsOf(alice, 'SELECT (SELECT count(*)::int FROM shop.accts) AS a, (SELECT count(*)::int FROM shop.acct_lines) AS l'),
  ).toEqual([{ a: 2, l: 1 }]);

  await alice.query(`GRANT TRUNCATE ON shop.acct_lines TO ${door.roles.bob!}`);
  const entry = await firstOf(bob, `CALL tablefate_sql.truncate('shop.accts', cascade => true)`);
  expect(entry).toMatchObject({ table: 'shop.accts', state: 'TRASHED' });
  expect(await h.catalog.getTable(Number(entry?.table_id))).toMatchObject({ truncatedFrom: parent.id });
  expect((await h.client.list({ includeTrashed: true })).filter((t) => t.truncatedFrom === child.id)).toHaveLength(1);
  expect(
    await rowsOf(alice, 'SELECT (SELECT count(*)::int FROM shop.accts) AS a, (SELECT count(*)::int FROM shop.acct_lines) AS l'),
  ).toEqual([{ a: 0, l: 0 }]);
});
