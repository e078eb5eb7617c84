import { Client, Pool } from 'pg';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { STORAGE_SESSION } from '../storage/postgres';
import { retargeted } from '../storage/postgres-foreign-keys';
import { qualified, type ShardTableId } from '../storage/postgres-record';
import { PostgresTables } from '../storage/postgres-tables';

/*
 * A table's own foreign keys, detached in the trash, come back referencing their parent where it is at the recall (the
 * record knows it by oid), not whatever has taken the name the key's text gave it: the parent recalled under another
 * name, a table made at its old name since, a truncate's empty twin. The rewrite of the key's text on its own first,
 * then on what a real server writes and takes, then through the driver's moves, judged by a user's own client.
 */

describe('retargeted: only the referenced name after the column list is replaced', () => {
  const to = qualified('new', 'parent');
  test.each([
    [
      'a plain key, its actions after the name',
      'FOREIGN KEY (order_id) REFERENCES shop.orders(id) ON DELETE CASCADE',
      'FOREIGN KEY (order_id) REFERENCES "new"."parent"(id) ON DELETE CASCADE',
    ],
    [
      'quoted columns that hold REFERENCES x.y(, parentheses, commas and doubled quotes',
      'FOREIGN KEY ("REFERENCES x.y(", "a"") REFERENCES b.c(", plain) REFERENCES shop.orders(id, "x)", k)',
      'FOREIGN KEY ("REFERENCES x.y(", "a"") REFERENCES b.c(", plain) REFERENCES "new"."parent"(id, "x)", k)',
    ],
    [
      'a quoted schema and table with dots, spaces and doubled quotes; every tail PostgreSQL writes',
      'FOREIGN KEY (a, b) REFERENCES "my ""sch"".x"."or.ders (old)"(a, b) MATCH FULL ON UPDATE CASCADE ON DELETE SET NULL (a) DEFERRABLE INITIALLY DEFERRED',
      'FOREIGN KEY (a, b) REFERENCES "new"."parent"(a, b) MATCH FULL ON UPDATE CASCADE ON DELETE SET NULL (a) DEFERRABLE INITIALLY DEFERRED',
    ],
    [
      'a schema and table named like the keywords around them',
      'FOREIGN KEY ("FOREIGN KEY") REFERENCES "REFERENCES"."("(")") NOT VALID',
      'FOREIGN KEY ("FOREIGN KEY") REFERENCES "new"."parent"(")") NOT VALID',
    ],
    ['a name without its schema', 'FOREIGN KEY (a) REFERENCES orders(id)', 'FOREIGN KEY (a) REFERENCES "new"."parent"(id)'],
    ['a name of three parts', 'FOREIGN KEY (a) REFERENCES db.shop.orders(id)', 'FOREIGN KEY (a) REFERENCES "new"."parent"(id)'],
    [
      'plain names beyond ASCII, and $',
      'FOREIGN KEY (ilość) REFERENCES sklep.zamówienia$2(id)',
      'FOREIGN KEY (ilość) REFERENCES "new"."parent"(id)',
    ],
    [
      'as written by hand: lower case, spaces before the column list',
      'foreign key  (a)  references shop.orders (id)',
      'foreign key  (a)  references "new"."parent" (id)',
    ],
    [
      'a temporal key (PostgreSQL 18: PERIOD in the column lists)',
      'FOREIGN KEY (id, PERIOD valid_at) REFERENCES shop.orders(id, PERIOD valid_at)',
      'FOREIGN KEY (id, PERIOD valid_at) REFERENCES "new"."parent"(id, PERIOD valid_at)',
    ],
  ])('%s', (_, definition, expected) => {
    expect(retargeted(definition, to)).toBe(expected);
  });

  test('the new name is taken as it is (no replacement patterns)', () => {
    expect(retargeted('FOREIGN KEY (a) REFERENCES s.t(id)', qualified('s', "t$&$'$1"))).toBe(
      `FOREIGN KEY (a) REFERENCES "s"."t$&$'$1"(id)`,
    );
  });

  test.each([
    ['not a foreign key', 'CHECK ((a > 0))'],
    ['no name after REFERENCES', 'FOREIGN KEY (a) REFERENCES (id)'],
    ['no column list after the name', 'FOREIGN KEY (a) REFERENCES shop.orders'],
    ['a quote left open in the columns', 'FOREIGN KEY ("a) REFERENCES s.t(id)'],
    ['a quote left open in the name', 'FOREIGN KEY (a) REFERENCES s."t(id)'],
    ['REFERENCES only inside a quoted column', 'FOREIGN KEY ("x) REFERENCES s.t(id)")'],
    ['four parts', 'FOREIGN KEY (a) REFERENCES w.x.y.z(id)'],
  ])('none when it does not read as a key: %s', (_, definition) => {
    expect(retargeted(definition, to)).toBeNull();
  });
});

let server: TestPostgres;
let pool: Pool;
let user: Client;
let tables: PostgresTables;

beforeAll(async () => {
  server = await sharedPostgres();
  const url = await server.freshDatabase('retarget');
  // The driver's own sessions (search_path pg_catalog: pg_get_constraintdef qualifies every name).
  pool = new Pool({ connectionString: url, max: 4, ...STORAGE_SESSION });
  user = new Client({ connectionString: url });
  await user.connect();
  tables = new PostgresTables(pool);
  await tables.prepare();
});

afterAll(async () => {
  await user?.end();
  await pool?.end();
  await server?.stop();
});

const shard = (tableId: number): ShardTableId => ({ catalogId: 'retarget', tableId, shard: 0 });
const rowsOf = async (sql: string) => (await user.query(sql)).rows as Array<Record<string, unknown>>;
/** The table the key `name` references, as regclass writes it (user's session: schema-qualified unless public), and whether it is validated. */
const keyNamed = async (name: string) =>
  rowsOf(`SELECT conrelid::regclass::text AS on, confrelid::regclass::text AS references, convalidated FROM pg_constraint
           WHERE conname = '${name}'`);

test('what a real server writes of a key with awkward names, retargeted, is a key it takes, to that table, as it was', async () => {
  await user.query(`CREATE SCHEMA "we.ird ""s"" REFERENCES a.b(";
    CREATE TABLE "we.ird ""s"" REFERENCES a.b("."pa(rent). ""x""" (a int, "b c" int, PRIMARY KEY (a, "b c"));
    CREATE SCHEMA "other.""s""";
    CREATE TABLE "other.""s"""."new (parent)" (a int, "b c" int, PRIMARY KEY (a, "b c"));
    CREATE TABLE public.awkward_child ("REFERENCES x.y(id) "", (" int, "b c" int,
      CONSTRAINT awkward_fk FOREIGN KEY ("REFERENCES x.y(id) "", (", "b c")
        REFERENCES "we.ird ""s"" REFERENCES a.b("."pa(rent). ""x""" MATCH FULL ON UPDATE CASCADE ON DELETE SET NULL ("b c")
        DEFERRABLE INITIALLY DEFERRED)`);
  const definitionOf = async () =>
    (
      await pool.query<{ d: string }>(
        "SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint WHERE conname = 'awkward_fk' AND conrelid = 'public.awkward_child'::regclass",
      )
    ).rows[0]!.d;
  const recorded = await definitionOf();
  expect(recorded).toContain('REFERENCES "we.ird ""s"" REFERENCES a.b("."pa(rent). ""x"""(');

  const moved = retargeted(recorded, qualified('other."s"', 'new (parent)'))!;
  expect(moved).toBe(recorded.replace('"we.ird ""s"" REFERENCES a.b("."pa(rent). ""x"""', '"other.""s"""."new (parent)"'));
  await pool.query(`ALTER TABLE public.awkward_child DROP CONSTRAINT awkward_fk;
    ALTER TABLE public.awkward_child ADD CONSTRAINT awkward_fk ${moved}`);
  expect(await keyNamed('awkward_fk')).toEqual([{ on: 'awkward_child', references: '"other.""s"""."new (parent)"', convalidated: true }]);
  // PostgreSQL writes it back as it was, but for the table it references: the columns, MATCH FULL, the actions, DEFERRABLE.
  expect(await definitionOf()).toBe(moved);
});

test('parent and child trashed together, the parent recalled under a new name, a new table at its old name: the child comes back keyed to the parent', async () => {
  const [parent, child] = [shard(1), shard(2)];
  await tables.create(parent, { schema: 'shop', table: 'orders' }, { columns: 'id int PRIMARY KEY, note text' });
  await tables.create(
    child,
    { schema: 'shop', table: 'lines' },
    { columns: 'id int, order_id int CONSTRAINT lines_order_fk REFERENCES shop.orders (id) ON DELETE CASCADE' },
  );
  await user.query("INSERT INTO shop.orders VALUES (1, 'first'); INSERT INTO shop.lines VALUES (10, 1)");

  await tables.moveTogether([{ id: parent }, { id: child }], 'trash');
  expect(await keyNamed('lines_order_fk')).toEqual([]);
  const back = await tables.move(parent, 'live', { schema: 'shop', table: 'orders_old' });
  expect(back.notes).toEqual([]);
  await user.query("INSERT INTO shop.orders_old VALUES (7, 'only in the recalled parent')");
  // A table of the same columns at the parent's old name, with rows of its own.
  await user.query("CREATE TABLE shop.orders (id int PRIMARY KEY, note text); INSERT INTO shop.orders VALUES (2, 'only in the new table')");

  const recalled = await tables.move(child, 'live', { schema: 'shop', table: 'lines' });
  // Validated against the recalled parent, which has order 1 (the new table has not: it would have stayed NOT VALID).
  expect(recalled.notes).toEqual([]);
  expect(await keyNamed('lines_order_fk')).toEqual([{ on: 'shop.lines', references: 'shop.orders_old', convalidated: true }]);
  await user.query('INSERT INTO shop.lines VALUES (11, 7)');
  await expect(user.query('INSERT INTO shop.lines VALUES (12, 2)')).rejects.toThrow(/violates foreign key constraint "lines_order_fk"/);
  // Its action too: the recalled parent's delete cascades to the child.
  await user.query('DELETE FROM shop.orders_old WHERE id = 1');
  expect(await rowsOf('SELECT id, order_id FROM shop.lines ORDER BY id')).toEqual([{ id: 11, order_id: 7 }]);
});

test("a child recalled while its parent, truncated, is in the trash: its key waits, and comes back to the parent's entry, not the twin at its name", async () => {
  const [parent, child, entry] = [shard(21), shard(22), shard(23)];
  await tables.create(parent, { schema: 'trunc', table: 'orders' }, { columns: 'id int PRIMARY KEY, note text' });
  await tables.create(
    child,
    { schema: 'trunc', table: 'lines' },
    { columns: 'id int, order_id int CONSTRAINT trunc_lines_order_fk REFERENCES trunc.orders (id)' },
  );
  await user.query("INSERT INTO trunc.orders VALUES (1, 'first'), (7, 'seventh'); INSERT INTO trunc.lines VALUES (10, 1)");

  // The child out of the way (its key detached), so that the parent can be truncated: into the trash, an empty twin at its name.
  await tables.move(child, 'trash');
  await tables.truncate([{ id: parent, into: entry.tableId }]);
  expect(await rowsOf('SELECT count(*)::int AS n FROM trunc.orders')).toEqual([{ n: 0 }]);
  const alone = await tables.move(child, 'live', { schema: 'trunc', table: 'lines' });
  expect(alone.notes).toEqual([
    expect.stringMatching(/^foreign key trunc_lines_order_fk stays detached while the table it references is in the trash/),
  ]);

  // The truncated rows recalled under a name of their own (the twin keeps the table's): the key that waited comes with them.
  const back = await tables.move(entry, 'live', { schema: 'trunc', table: 'orders_before' });
  expect(back.notes).toEqual([]);
  expect(await keyNamed('trunc_lines_order_fk')).toEqual([{ on: 'trunc.lines', references: 'trunc.orders_before', convalidated: true }]);
  await user.query("INSERT INTO trunc.orders VALUES (2, 'in the twin')");
  await user.query('INSERT INTO trunc.lines VALUES (11, 7)');
  await expect(user.query('INSERT INTO trunc.lines VALUES (12, 2)')).rejects.toThrow(
    /violates foreign key constraint "trunc_lines_order_fk"/,
  );
  expect(await rowsOf('SELECT count(*)::int AS n FROM tablefate.shards WHERE foreign_keys IS NOT NULL')).toEqual([{ n: 0 }]);
});

test("parent and child truncated as one (a cascade), recalled together under new names: the child's key is to the parent's rows, not its twin", async () => {
  const [parent, child] = [shard(41), shard(42)];
  const [parentEntry, childEntry] = [shard(43), shard(44)];
  await tables.create(parent, { schema: 'cascaded', table: 'orders' }, { columns: 'id int PRIMARY KEY, note text' });
  await tables.create(
    child,
    { schema: 'cascaded', table: 'lines' },
    { columns: 'id int, order_id int CONSTRAINT cascaded_lines_order_fk REFERENCES cascaded.orders (id) ON DELETE CASCADE' },
  );
  await user.query("INSERT INTO cascaded.orders VALUES (1, 'first'), (7, 'seventh'); INSERT INTO cascaded.lines VALUES (10, 1)");

  await tables.truncate([
    { id: parent, into: parentEntry.tableId },
    { id: child, into: childEntry.tableId },
  ]);
  // The twins have the names, and a key between them; the rows are in the trash.
  expect(await keyNamed('cascaded_lines_order_fk')).toEqual([{ on: 'cascaded.lines', references: 'cascaded.orders', convalidated: true }]);
  expect(
    await rowsOf('SELECT (SELECT count(*) FROM cascaded.orders)::int AS orders, (SELECT count(*) FROM cascaded.lines)::int AS lines'),
  ).toEqual([{ orders: 0, lines: 0 }]);

  const back = await tables.moveTogether(
    [
      { id: childEntry, live: { schema: 'cascaded', table: 'lines_before' } },
      { id: parentEntry, live: { schema: 'cascaded', table: 'orders_before' } },
    ],
    'live',
  );
  expect(back.map((b) => b.notes)).toEqual([[], []]);
  expect(await keyNamed('cascaded_lines_order_fk')).toEqual([
    { on: 'cascaded.lines', references: 'cascaded.orders', convalidated: true },
    { on: 'cascaded.lines_before', references: 'cascaded.orders_before', convalidated: true },
  ]);
  await user.query('INSERT INTO cascaded.lines_before VALUES (11, 7)');
  await user.query("INSERT INTO cascaded.orders VALUES (2, 'in the twin')");
  await expect(user.query('INSERT INTO cascaded.lines_before VALUES (12, 2)')).rejects.toThrow(
    /violates foreign key constraint "cascaded_lines_order_fk"/,
  );
  await user.query('DELETE FROM cascaded.orders_before WHERE id = 1');
  expect(await rowsOf('SELECT id, order_id FROM cascaded.lines_before ORDER BY id')).toEqual([{ id: 11, order_id: 7 }]);
});

test('a parent dropped while its child was in the trash: the key is tried by the name it recorded, as before (bound to a table there now)', async () => {
  const [parent, child] = [shard(31), shard(32)];
  await tables.create(parent, { schema: 'gone', table: 'orders' }, { columns: 'id int PRIMARY KEY' });
  await tables.create(
    child,
    { schema: 'gone', table: 'lines' },
    { columns: 'order_id int CONSTRAINT gone_lines_fk REFERENCES gone.orders (id)' },
  );
  await user.query('INSERT INTO gone.orders VALUES (1); INSERT INTO gone.lines VALUES (1)');
  await tables.move(child, 'trash');
  await tables.drop(parent);
  await user.query('CREATE TABLE gone.orders (id int PRIMARY KEY); INSERT INTO gone.orders VALUES (1)');

  const recalled = await tables.move(child, 'live', { schema: 'gone', table: 'lines' });
  expect(recalled.notes).toEqual([]);
  expect(await keyNamed('gone_lines_fk')).toEqual([{ on: 'gone.lines', references: 'gone.orders', convalidated: true }]);
});
