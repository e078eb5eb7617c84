import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Client, type Pool } from 'pg';
import { newPool } from '../catalog/pg-session';
import { HasDependentsError } from '../domain/errors';
import { postgresProgram } from '../servers/local-postgres';
import { PermanentStorageError } from '../storage/errors';
import { STORAGE_SESSION } from '../storage/postgres';
import { guardState, installGuard } from '../storage/postgres-guard';
import { parkedName, TRASH_SCHEMA, type ShardTableId } from '../storage/postgres-record';
import { PostgresTables } from '../storage/postgres-tables';
import { sharedPostgres, type TestPostgres } from './support/postgres';

/*
 * Issue 43: what pointed at a truncated table points at its empty twin afterwards, as after PostgreSQL's own TRUNCATE
 * (storage/postgres-repoint.ts): views (and what is built on them), a view's rule, another table's policy and column
 * default. Run as tablefate runs on a node: a worker's role that is no superuser, the guard on. Judged by what a user's
 * own client sees: pg_dump and psql's \d+ and \dp of each view the same before and after, the views reading the twin,
 * pg_depend binding them to it; and by a truncate taken back (untruncate), after which they read the table again.
 * What cannot be pointed at the twin is refused before anything changes, named.
 */

const SUFFIX = randomBytes(4).toString('hex');
const WORKER = `tview_worker_${SUFFIX}`;
/** A service that owns views and a table of its own; the worker is a member of it. */
const OWNER = `tview_owner_${SUFFIX}`;
/** A service given privileges on the views. */
const READER = `tview_reader_${SUFFIX}`;
/** A role the worker is no member of. */
const STRANGER = `tview_stranger_${SUFFIX}`;
const ROLES = [WORKER, OWNER, READER, STRANGER];

let server: TestPostgres;
let admin: Client;
let url: string;
/** The DBA's own client (a superuser, default settings). */
let dba: Client;
let pool: Pool;
let tables: PostgresTables;

const as = (u: string, role: string) => u.replace('postgres://postgres@', `postgres://${role}@`);

beforeAll(async () => {
  server = await sharedPostgres();
  admin = new Client({ connectionString: server.url });
  await admin.connect();
  for (const role of ROLES) await admin.query(`CREATE ROLE ${role} ${role === WORKER ? 'LOGIN' : 'NOLOGIN'}`);
  await admin.query(`GRANT ${OWNER} TO ${WORKER}`);
  url = await server.freshDatabase('pgtruncviews');
  await admin.query(`GRANT CREATE ON DATABASE ${new URL(url).pathname.slice(1)} TO ${WORKER}`);
  dba = new Client({ connectionString: url });
  await dba.connect();
  pool = newPool({ connectionString: as(url, WORKER), max: 2, ...STORAGE_SESSION });
  tables = new PostgresTables(pool);
  await tables.prepare();
  await installGuard(dba, 'node-0');
  await dba.query(`CREATE SCHEMA shop AUTHORIZATION ${WORKER}; GRANT USAGE, CREATE ON SCHEMA shop TO ${OWNER};
                   GRANT USAGE ON SCHEMA shop TO ${READER}, ${STRANGER}`);
});

afterAll(async () => {
  await pool?.end();
  await dba?.end();
  if (admin) {
    await admin.query(`DROP DATABASE IF EXISTS ${new URL(url).pathname.slice(1)} WITH (FORCE)`).catch(() => undefined);
    for (const role of ROLES) await admin.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
    await admin.end();
  }
  await server?.stop();
});

const shard = (tableId: number): ShardTableId => ({ catalogId: 'cat1', tableId, shard: 0 });
const rowsOf = async (sql: string, values: unknown[] = []) => (await dba.query(sql, values)).rows as Array<Record<string, unknown>>;
const count = async (relation: string) => Number((await rowsOf(`SELECT count(*) AS n FROM ${relation}`))[0]!.n);
const oidOf = async (relation: string) => Number((await rowsOf('SELECT $1::regclass::oid::int8 AS oid', [relation]))[0]!.oid);

/** One of PostgreSQL's own programs on the test's database, as the DBA: what it prints. */
function run(program: 'psql' | 'pg_dump', args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(postgresProgram(program), args, { env: { ...process.env, PGCLIENTENCODING: 'UTF8' } }, (err, stdout, stderr) =>
      err ? reject(new Error(`${program} ${args.join(' ')}: ${err.message}\n${stderr}`)) : resolve(stdout),
    );
  });
}

/**
 * What a user's own tools show of some relations: pg_dump's schema of them (its `\restrict` key, drawn anew for every
 * dump, left out), and psql's \d+ and \dp of each.
 */
async function seenBy(relations: string[]): Promise<{ dump: string; described: string }> {
  const dump = await run('pg_dump', ['--schema-only', ...relations.flatMap((r) => ['-t', r]), '-d', url]);
  const commands = relations.flatMap((r) => ['-c', `\\d+ ${r}`, '-c', `\\dp ${r}`]);
  return {
    dump: dump.replace(/^\\(un)?restrict .*$/gm, ''),
    described: await run('psql', ['-X', '-v', 'ON_ERROR_STOP=1', '-d', url, ...commands]),
  };
}

/**
 * What depends on the table (by oid, or on its sequences) from outside it, as pg_depend has it: each view's rule, each
 * policy and default of another relation, named as PostgreSQL names them.
 */
async function dependentsOf(oid: number): Promise<string[]> {
  const rows = await rowsOf(
    `SELECT DISTINCT pg_describe_object(d.classid, d.objid, 0) AS what FROM pg_depend d
       LEFT JOIN pg_attrdef own ON d.classid = 'pg_attrdef'::regclass AND own.oid = d.objid AND own.adrelid = $1
      WHERE d.deptype = 'n' AND d.refclassid = 'pg_class'::regclass AND own.oid IS NULL
        AND (d.refobjid = $1 OR d.refobjid IN (SELECT objid FROM pg_depend WHERE refobjid = $1 AND classid = 'pg_class'::regclass
                                                 AND deptype IN ('a', 'i') AND objid IN (SELECT oid FROM pg_class WHERE relkind = 'S')))
      ORDER BY 1`,
    [oid],
  );
  return rows.map((r) => r.what as string);
}

describe('what points at the table points at its twin, and back at the table when the truncate is taken back', () => {
  const VIEWS = ['shop.items_v', 'shop.items_vv', 'shop.cheap', 'shop.names', 'shop.invoked', 'shop.orders'];
  const POINTING = [
    'default value for column ref of table shop.orders',
    'policy known_items on table shop.orders',
    'rule _RETURN on view shop.cheap',
    'rule _RETURN on view shop.invoked',
    'rule _RETURN on view shop.items_v',
    'rule _RETURN on view shop.names',
    'rule items_v_delete on view shop.items_v',
  ];
  let before: { dump: string; described: string };
  let original: number;

  beforeAll(async () => {
    await tables.create(shard(1), { schema: 'shop', table: 'items' }, { columns: 'id serial primary key, name text, price numeric(10,2)' });
    await dba.query(`
      INSERT INTO shop.items (name, price) VALUES ('pen', 2), ('ink', 5), ('desk', 300);
      -- A statistics object: the twin takes its name; taken back, the table has it again under that name.
      CREATE STATISTICS shop.items_name_price ON name, price FROM shop.items;
      ALTER STATISTICS shop.items_name_price OWNER TO ${WORKER};
      GRANT SELECT, DELETE ON shop.items TO ${OWNER};
      -- A view with a comment, column comment and default, an INSTEAD OF trigger and a rule, owned by a service.
      CREATE VIEW shop.items_v AS SELECT id, name FROM shop.items WHERE price > 0;
      COMMENT ON VIEW shop.items_v IS 'what is for sale';
      COMMENT ON COLUMN shop.items_v.name IS 'what it is called';
      ALTER VIEW shop.items_v ALTER COLUMN name SET DEFAULT 'unnamed';
      CREATE FUNCTION shop.items_v_insert() RETURNS trigger LANGUAGE plpgsql
        AS $$ BEGIN INSERT INTO shop.items (name, price) VALUES (NEW.name, 1); RETURN NEW; END $$;
      CREATE TRIGGER items_v_insert INSTEAD OF INSERT ON shop.items_v FOR EACH ROW EXECUTE FUNCTION shop.items_v_insert();
      CREATE RULE items_v_delete AS ON DELETE TO shop.items_v DO INSTEAD DELETE FROM shop.items WHERE id = OLD.id;
      COMMENT ON RULE items_v_delete ON shop.items_v IS 'deletes the item';
      ALTER VIEW shop.items_v OWNER TO ${OWNER};
      -- A view of that view: it reads the view, by oid, and needs nothing.
      CREATE VIEW shop.items_vv AS SELECT id FROM shop.items_v;
      -- A security barrier view with a check option, owned by the worker.
      CREATE VIEW shop.cheap WITH (security_barrier) AS SELECT id, name, price FROM shop.items WHERE price < 100 WITH CASCADED CHECK OPTION;
      ALTER VIEW shop.cheap OWNER TO ${WORKER};
      -- A view owned by a service, granted to a third role (and a column of it).
      CREATE VIEW shop.names AS SELECT id, upper(name) AS name FROM shop.items;
      ALTER VIEW shop.names OWNER TO ${OWNER};
      GRANT SELECT ON shop.names TO ${READER};
      GRANT UPDATE (id) ON shop.names TO ${READER};
      CREATE VIEW shop.invoked WITH (security_invoker) AS SELECT count(*) AS n FROM shop.items;
      ALTER VIEW shop.invoked OWNER TO ${WORKER};
      -- Another table: its policy reads the table, its default takes ids from the table's sequence.
      CREATE TABLE shop.orders (id int, item_id int, ref bigint DEFAULT nextval('shop.items_id_seq'));
      ALTER TABLE shop.orders ENABLE ROW LEVEL SECURITY;
      CREATE POLICY known_items ON shop.orders FOR SELECT TO ${READER} USING (item_id IN (SELECT id FROM shop.items));
      COMMENT ON POLICY known_items ON shop.orders IS 'only orders of known items';
      ALTER TABLE shop.orders OWNER TO ${OWNER};
    `);
    before = await seenBy(VIEWS);
    original = await oidOf('shop.items');
    expect(await dependentsOf(original)).toEqual(POINTING);
  });

  test('truncated: each view dumps and reads in psql as before, reads the empty twin, and is bound to it', async () => {
    const { notes } = (await tables.truncate([{ id: shard(1), into: 11 }]))[0]!;
    expect(notes).toContainEqual(
      'pointed at its empty twin: view shop.cheap, view shop.invoked, view shop.items_v, view shop.names, ' +
        'rule items_v_delete of view shop.items_v, policy known_items of shop.orders, default of shop.orders.ref',
    );
    const entry = `${TRASH_SCHEMA}.${parkedName(shard(11))}`;
    expect(await oidOf(entry)).toBe(original);
    const twin = await oidOf('shop.items');
    expect(twin).not.toBe(original);

    expect(await seenBy(VIEWS)).toEqual(before);
    expect(await dependentsOf(twin)).toEqual(POINTING);
    expect(await dependentsOf(original)).toEqual([]);
    expect((await guardState(dba)).enabled).toBe(true);

    for (const view of ['shop.items_v', 'shop.items_vv', 'shop.cheap', 'shop.names']) expect(await count(view)).toBe(0);
    expect(await rowsOf('SELECT n::int FROM shop.invoked')).toEqual([{ n: 0 }]);
    expect(await count(entry)).toBe(3);
    // Written through the views, into the twin: the trigger (its function names the table), the check option, the rule.
    await dba.query(`INSERT INTO shop.items_v (name) VALUES ('lamp')`);
    await expect(dba.query(`INSERT INTO shop.cheap (name, price) VALUES ('sofa', 900)`)).rejects.toThrow(/violates check option/);
    await dba.query(`INSERT INTO shop.cheap (name, price) VALUES ('cup', 3)`);
    expect(await rowsOf('SELECT name FROM shop.names ORDER BY name')).toEqual([{ name: 'CUP' }, { name: 'LAMP' }]);
    expect(await rowsOf('SELECT id FROM shop.items_vv ORDER BY id')).toEqual(await rowsOf('SELECT id FROM shop.items ORDER BY id'));
    await dba.query(`DELETE FROM shop.items_v WHERE name IN ('lamp', 'cup')`);
    expect(await count('shop.items')).toBe(0);
    expect(await count(entry)).toBe(3);
    // The other table's default takes ids from the twin's sequence, which went on from the original's 3: lamp 4, the
    // refused sofa 5, cup 6.
    const { rows } = await dba.query<{ ref: string }>('INSERT INTO shop.orders (id, item_id) VALUES (1, 1) RETURNING ref');
    expect(Number(rows[0]!.ref)).toBe(7);
    await dba.query('DELETE FROM shop.orders');
  });

  test('taken back: refused while a materialized view reads the twin, then each view reads the table again', async () => {
    const twin = await oidOf('shop.items');
    await dba.query('CREATE MATERIALIZED VIEW shop.items_mv AS SELECT count(*) AS n FROM shop.items');
    const refused = tables.untruncate(shard(1), 11);
    await expect(refused).rejects.toThrow(PermanentStorageError);
    await expect(refused).rejects.toThrow(/^shop\.items's truncate is not taken back: materialized view shop\.items_mv reads it/);
    expect(await oidOf('shop.items')).toBe(twin);
    await dba.query('DROP MATERIALIZED VIEW shop.items_mv');

    await tables.untruncate(shard(1), 11);
    expect(await oidOf('shop.items')).toBe(original);
    expect(await rowsOf(`SELECT count(*)::int AS n FROM pg_class WHERE oid = $1`, [twin])).toEqual([{ n: 0 }]);
    expect(await seenBy(VIEWS)).toEqual(before);
    expect(await dependentsOf(original)).toEqual(POINTING);
    expect(await rowsOf('SELECT name FROM shop.names ORDER BY name')).toEqual([{ name: 'DESK' }, { name: 'INK' }, { name: 'PEN' }]);
    expect(await count('shop.cheap')).toBe(2);
    expect(await tables.locate(shard(1))).toMatchObject({ oid: original, area: 'live', schema: 'shop', table: 'items' });
    expect(await tables.locate(shard(11))).toBeNull();
    expect(
      await rowsOf(
        `SELECT format('%I.%I', n.nspname, x.stxname) AS stats FROM pg_statistic_ext x JOIN pg_namespace n ON n.oid = x.stxnamespace
          WHERE x.stxrelid = $1`,
        [original],
      ),
    ).toEqual([{ stats: 'shop.items_name_price' }]);
  });
});

describe('what cannot point at the twin: refused before anything changes, named', () => {
  let schemaBefore: string;

  beforeAll(async () => {
    await tables.create(shard(2), { schema: 'shop', table: 'stock' }, { columns: 'id int primary key, qty int' });
    await tables.create(shard(3), { schema: 'shop', table: 'parents' }, { columns: 'id int primary key' });
    await dba.query(`
      INSERT INTO shop.stock VALUES (1, 10); INSERT INTO shop.parents VALUES (1);
      CREATE MATERIALIZED VIEW shop.stock_total AS SELECT sum(qty) AS qty FROM shop.stock;
      CREATE VIEW shop.stock_rows AS SELECT s FROM shop.stock s;
      ALTER VIEW shop.stock_rows OWNER TO ${WORKER};
      CREATE VIEW shop.stock_seen AS SELECT id FROM shop.stock;
      ALTER VIEW shop.stock_seen OWNER TO ${STRANGER};
      CREATE SCHEMA hidden; CREATE FUNCTION hidden.twice(int) RETURNS int LANGUAGE sql AS 'SELECT 2 * $1';
      CREATE VIEW shop.stock_hidden AS SELECT hidden.twice(qty) AS qty FROM shop.stock;
      ALTER VIEW shop.stock_hidden OWNER TO ${WORKER};
      CREATE SCHEMA reports; GRANT USAGE ON SCHEMA reports TO ${WORKER};
      CREATE VIEW reports.stock AS SELECT id, qty FROM shop.stock;
      ALTER VIEW reports.stock OWNER TO ${WORKER};
      CREATE TABLE shop.children (id int, parent_id int CONSTRAINT children_parent_fk REFERENCES shop.parents);
    `);
    schemaBefore = await run('pg_dump', ['--schema-only', '-n', 'shop', '-n', 'reports', '-n', 'hidden', '-d', url]);
  });

  const normalised = (text: string) => text.replace(/^\\(un)?restrict .*$/gm, '');

  test('a materialized view, a view of the row type, views the worker may not make again: each named, with why', async () => {
    const refused = tables.truncate([{ id: shard(2), into: 21 }]);
    await expect(refused).rejects.toThrow(HasDependentsError);
    await expect(refused).rejects.toThrow(
      'shop.stock cannot be truncated into the trash while others depend on it: ' +
        "materialized view shop.stock_total reads it: PostgreSQL's TRUNCATE would leave its rows until its next REFRESH, and no " +
        'materialized view can be pointed at another table in place (made again, it would lose its rows): drop it first, and make it ' +
        'again after; ' +
        `view reports.stock cannot be pointed at the empty twin: the worker's role ${WORKER} lacks CREATE on schema reports; ` +
        `view shop.stock_hidden cannot be pointed at the empty twin: the worker's role ${WORKER} lacks USAGE on schema hidden, ` +
        'which its text names; ' +
        "view shop.stock_rows has a column of the table's row type (s): the empty twin's row type is another type; " +
        `view shop.stock_seen cannot be pointed at the empty twin: the worker's role ${WORKER} lacks the privileges of its owner ` +
        `${STRANGER} (a member of that role with INHERIT has them)`,
    );
  });

  test("another session's temporary view: refused, named (no other session can replace it)", async () => {
    const session = new Client({ connectionString: url });
    await session.connect();
    try {
      await session.query('CREATE TEMPORARY VIEW stock_now AS SELECT id FROM shop.stock');
      const refused = tables.truncate([{ id: shard(2), into: 21 }]);
      await expect(refused).rejects.toThrow(HasDependentsError);
      await expect(refused).rejects.toThrow(
        /; view pg_temp_\d+\.stock_now is a temporary view of a session: no other session can make it again; view reports\.stock/,
      );
    } finally {
      await session.end();
    }
  });

  test("another table's foreign key: refused in PostgreSQL's words, as its own TRUNCATE refuses it", async () => {
    const refused = tables.truncate([{ id: shard(3), into: 31 }]);
    await expect(refused).rejects.toThrow(HasDependentsError);
    await expect(refused).rejects.toThrow(
      'shop.parents cannot be truncated into the trash: cannot truncate a table referenced in a foreign key constraint ' +
        "(foreign key children_parent_fk of shop.children references it), as PostgreSQL's own TRUNCATE says: it truncates a table " +
        'others reference only together with them (TRUNCATE ... CASCADE): truncate it with --cascade to truncate them too',
    );
    // PostgreSQL's own, for the same table (its check of keys comes before the guard's trigger).
    await dba.query('BEGIN');
    await expect(dba.query('TRUNCATE shop.parents')).rejects.toThrow('cannot truncate a table referenced in a foreign key constraint');
    await dba.query('ROLLBACK');
  });

  test('nothing changed: the schemas dump as before, the rows are there, the records as they were', async () => {
    const schemaNow = await run('pg_dump', ['--schema-only', '-n', 'shop', '-n', 'reports', '-n', 'hidden', '-d', url]);
    expect(normalised(schemaNow)).toBe(normalised(schemaBefore));
    expect([await count('shop.stock'), await count('shop.parents'), await count('shop.stock_total')]).toEqual([1, 1, 1]);
    expect(await tables.locate(shard(2))).toMatchObject({ area: 'live', schema: 'shop', table: 'stock' });
    expect(await tables.locate(shard(21))).toBeNull();
    expect(await tables.locate(shard(31))).toBeNull();
  });
});
