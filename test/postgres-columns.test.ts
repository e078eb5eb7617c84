import { Pool } from 'pg';
import { checkColumnDefinitions } from '../domain/columns';
import { PostgresTables } from '../storage/postgres-tables';
import { sharedPostgres, type TestPostgres } from './support/postgres';

/*
 * domain/columns.ts against PostgreSQL's own lexer: the text a user gives `--columns` goes, if the check lets it,
 * between the parentheses of one CREATE TABLE (PostgresTables.create, as the driver calls it). Each attack below is a
 * text that a scan reading strings, comments or names differently from PostgreSQL would take to stay inside, while
 * PostgreSQL ends the CREATE TABLE early and runs a DROP of a user's table after it. Judged on a real server: the
 * attack is refused, or it makes exactly one table; the user's table is whole either way.
 */

let server: TestPostgres;
let pool: Pool;
let tables: PostgresTables;
let attempts = 0;

const PRECIOUS = [
  { id: 1, note: 'one' },
  { id: 2, note: 'two' },
  { id: 3, note: 'three' },
];

beforeAll(async () => {
  server = await sharedPostgres();
  pool = new Pool({ connectionString: await server.freshDatabase('pgcolumns'), max: 2 });
  tables = new PostgresTables(pool);
  await tables.prepare();
  await pool.query(
    `CREATE SCHEMA victim;
     CREATE TABLE victim.precious (id int PRIMARY KEY, note text);
     INSERT INTO victim.precious VALUES (1, 'one'), (2, 'two'), (3, 'three');
     CREATE SCHEMA other;
     CREATE TABLE other.t (id bigint PRIMARY KEY)`,
  );
  // A type whose name ends in a non-ASCII letter and e (French for "duration"): with it, durée'...' is a valid
  // typed string, so the attack that reads the é as ending a name runs on from there.
  await pool.query('CREATE DOMAIN public.durée AS text');
});

afterAll(async () => {
  await pool?.end();
  await server?.stop();
});

type Attack = { what: string; text: string };

const DROP = 'drop table victim.precious';

/**
 * Attacks that PostgreSQL 15 reads as leaving the parentheses: a DROP after them, or a single statement that makes the
 * new table inherit the user's (which the extended protocol, refusing a second statement, would let through).
 */
const LIVE: Attack[] = [
  {
    what: 'an E-string continued after a line break, then INHERITS',
    text: `a text default E'x'\n'\\' x ') inherits (victim.precious --'\n`,
  },
  {
    what: "an E-string continued after a line break (read with escapes: \\' does not end it)",
    text: `a text default E'x'\n'\\' x '); ${DROP}; select (1 --'\n`,
  },
  { what: 'an E-string continued after a carriage return', text: `a text default E'x'\r'\\' x '); ${DROP}; select (1 --'\n` },
  {
    what: 'an E-string continued after tabs, form feeds and CRLF',
    text: `a text default E'x' \t\f\r\n \t'\\' x '); ${DROP}; select (1 --'\n`,
  },
  { what: 'an E-string continued after a -- comment', text: `a text default E'x' -- note\n'\\' x '); ${DROP}; select (1 --'\n` },
  {
    what: 'a standard string after a name ending in a non-ASCII letter and e',
    text: `a text default durée'\\'); ${DROP}; select (1 --'\n`,
  },
  { what: 'a standard string holding a backslash', text: `a text default '\\'); ${DROP}; select (1 --'\n` },
  { what: 'an E-string holding an escaped backslash', text: `a text default E'\\\\'); ${DROP}; select (1 --'\n` },
  { what: 'a U& string whose UESCAPE makes the backslash plain', text: `a text default U&'\\' UESCAPE '!'); ${DROP}; select ('x' --'\n` },
  { what: 'dollar quoting', text: `a text default $q$'$q$); ${DROP}; select ($q$'$q$` },
  { what: 'dollar quoting with a non-ASCII tag', text: `a text default $é$'$é$); ${DROP}; select ($é$'$é$` },
  { what: 'nested /* */ comments', text: `a int default 1 /* /* */ ' */); ${DROP}; select (1 /* ' */` },
  { what: 'an operator with -- in it (PostgreSQL ends it there)', text: `a bool default 1 <--'\n2); ${DROP}; select ('x' --'\n` },
  { what: 'an operator with /* in it (PostgreSQL ends it there)', text: `a int default 1 +/*'*/ 2); ${DROP}; select (1 +/*'*/ 2` },
];

/** Texts a careless scan might misread, which PostgreSQL 15 does not read as a way out: refused, or one table. */
const CONTAINED: Attack[] = [
  { what: 'a number right before an E-string', text: `a text default 1E'\\' x '); ${DROP}; select (1 --'\n` },
  { what: 'a name ending in E right before a string', text: `a text default xE'\\'); ${DROP}; select (1 --'\n` },
  {
    what: 'a bit string with a doubled quote (PostgreSQL ends it there and starts another)',
    text: `a bit(2) default B'0''); ${DROP}; select ('`,
  },
  { what: 'a hex string continued after a line break', text: `a bit(16) default X'0a'\n'0b'` },
  { what: 'a standard string continued after a line break', text: `a text default 'x'\n'y'` },
  { what: 'a standard string with a doubled quote', text: `a text default 'x''); ${DROP}; select ('` },
  { what: 'a U& name holding ; and )', text: `U&"\\0061;) b" int` },
  { what: 'a NUL inside a string', text: `a text default 'x\0'); ${DROP}; select ('` },
];

type Outcome = { kind: 'refused'; reason: string } | { kind: 'failed'; error: string } | { kind: 'made'; table: string };

/** What the driver does with a user's columns: the check, then the CREATE TABLE. */
async function createChecked(columns: string): Promise<Outcome> {
  const check = checkColumnDefinitions(columns);
  if (!check.ok) return { kind: 'refused', reason: check.reason };
  const n = ++attempts;
  try {
    await tables.create({ catalogId: 'columns', tableId: n, shard: 0 }, { schema: 'attempt', table: `t${n}` }, { columns });
    return { kind: 'made', table: `attempt.t${n}` };
  } catch (err) {
    return { kind: 'failed', error: (err as Error).message };
  }
}

type Relation = { oid: string; name: string; kind: string; belongs_to: string | null };

/** Every relation outside PostgreSQL's catalogs, with the one it belongs to (an index's table, an owned sequence's, a toast table's). */
async function relations(): Promise<Relation[]> {
  const { rows } = await pool.query<Relation>(
    `SELECT c.oid::int8::text AS oid, n.nspname || '.' || c.relname AS name, c.relkind::text AS kind,
            COALESCE((SELECT i.indrelid FROM pg_index i WHERE i.indexrelid = c.oid),
                     (SELECT d.refobjid FROM pg_depend d
                       WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                         AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i') LIMIT 1),
                     (SELECT t.oid FROM pg_class t WHERE t.reltoastrelid = c.oid))::int8::text AS belongs_to
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')`,
  );
  return rows;
}

/**
 * That the attempt made no relation but the table it reports (and what belongs to that table), and that the user's
 * table is there with all its rows and no table inheriting from it.
 */
async function expectNothingBut(outcome: Outcome, before: Relation[]): Promise<void> {
  const known = new Set(before.map((r) => r.oid));
  const added = (await relations()).filter((r) => !known.has(r.oid));
  const ours = new Set<string>();
  const made = outcome.kind === 'made' ? added.find((r) => r.name === outcome.table) : undefined;
  if (made) ours.add(made.oid);
  for (let grew = true; grew;) {
    grew = false;
    for (const r of added) {
      if (!ours.has(r.oid) && r.belongs_to !== null && ours.has(r.belongs_to)) {
        ours.add(r.oid);
        grew = true;
      }
    }
  }
  expect(added.filter((r) => !ours.has(r.oid)).map((r) => r.name)).toEqual([]);
  expect(added.filter((r) => 'rpvmf'.includes(r.kind)).map((r) => r.name)).toEqual(outcome.kind === 'made' ? [outcome.table] : []);
  expect((await pool.query('SELECT id, note FROM victim.precious ORDER BY id')).rows).toEqual(PRECIOUS);
  expect((await pool.query("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'victim.precious'::regclass")).rows).toEqual(
    [],
  );
}

test('each live attack is real: sent unchecked to PostgreSQL, the statement it smuggles runs', async () => {
  const escaped: Array<[string, boolean]> = [];
  for (const { what, text } of LIVE) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL standard_conforming_strings = on');
      // The simple protocol, which runs every statement in the text: what a scan that misread it would let through.
      await client.query(`CREATE TABLE attempt_control (${text})`);
      const { rows } = await client.query<{ escaped: boolean }>(
        `SELECT to_regclass('victim.precious') IS NULL
                OR EXISTS (SELECT 1 FROM pg_inherits WHERE inhparent = to_regclass('victim.precious')) AS escaped`,
      );
      escaped.push([what, rows[0]!.escaped]);
    } catch (err) {
      escaped.push([`${what}: ${(err as Error).message}`, false]);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  }
  expect(escaped).toEqual(LIVE.map(({ what }) => [what, true]));
  expect((await pool.query('SELECT id, note FROM victim.precious ORDER BY id')).rows).toEqual(PRECIOUS);
  expect((await pool.query("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'victim.precious'::regclass")).rows).toEqual(
    [],
  );
});

test.each(LIVE)('$what: refused by the check, nothing made, victim.precious whole', async ({ text }) => {
  const before = await relations();
  const outcome = await createChecked(text);
  expect(outcome).toMatchObject({ kind: 'refused' });
  await expectNothingBut(outcome, before);
});

test.each(CONTAINED)('$what: refused, or exactly one table made; victim.precious whole', async ({ text }) => {
  const before = await relations();
  const outcome = await createChecked(text);
  await expectNothingBut(outcome, before);
});

/** Legitimate definitions, the columns PostgreSQL made from each, and the row `DEFAULT VALUES` inserts. */
const LEGIT: Array<{ what: string; columns: string; made: Array<[string, string]>; defaults: Record<string, unknown> }> = [
  {
    what: 'an identity key, a checked numeric, a reference',
    columns:
      'id bigint generated always as identity primary key, total numeric(12,2) not null default 0 check (total >= 0), owner bigint references other.t(id)',
    made: [
      ['id', 'bigint'],
      ['total', 'numeric(12,2)'],
      ['owner', 'bigint'],
    ],
    defaults: { id: '1', total: '0.00', owner: null },
  },
  {
    what: 'non-ASCII names, a quoted name holding ; and ), an E-string and a standard one holding comment starts',
    columns: `prénom text default E'l\\'été\\n(ok); -- not a comment', "we;ird ) name" text default 'it''s; (not) /* a comment', 名前 varchar(10) default N'名'`,
    made: [
      ['prénom', 'text'],
      ['we;ird ) name', 'text'],
      ['名前', 'character varying(10)'],
    ],
    defaults: { prénom: "l'été\n(ok); -- not a comment", 'we;ird ) name': "it's; (not) /* a comment", 名前: '名' },
  },
  {
    what: "U& strings with and without UESCAPE, a U& name, an E-string holding \\')",
    columns: `a text default U&'d\\0061t\\+000061', b text default U&'d!0061t!+000061' UESCAPE '!', U&"c\\00e9" text default 'a' || E'\\')'`,
    made: [
      ['a', 'text'],
      ['b', 'text'],
      ['cé', 'text'],
    ],
    defaults: { a: 'data', b: 'data', cé: "a')" },
  },
  {
    what: 'bit, hex and bytea strings',
    columns: `flags bit(4) default B'0101', mask bit(8) default X'0F', raw bytea default '\\x00ff'`,
    made: [
      ['flags', 'bit(4)'],
      ['mask', 'bit(8)'],
      ['raw', 'bytea'],
    ],
    defaults: { flags: '0101', mask: '00001111', raw: Buffer.from([0x00, 0xff]) },
  },
  {
    what: 'definitions over several lines (LF and CRLF), a doubled quote holding ); DROP ...',
    columns: `id int,\n  name text default 'x'\n  , note text default E'tab\\there'\r\n, quoted text default 'x''); ${DROP}; select ('`,
    made: [
      ['id', 'integer'],
      ['name', 'text'],
      ['note', 'text'],
      ['quoted', 'text'],
    ],
    defaults: { id: null, name: 'x', note: 'tab\there', quoted: `x'); ${DROP}; select (` },
  },
];

test.each(LEGIT)('accepted and made as written, columns and defaults: $what', async ({ columns, made, defaults }) => {
  const before = await relations();
  const outcome = await createChecked(columns);
  expect(outcome).toMatchObject({ kind: 'made' });
  await expectNothingBut(outcome, before);
  const table = (outcome as { table: string }).table;
  const { rows: attributes } = await pool.query<{ name: string; type: string }>(
    `SELECT attname AS name, format_type(atttypid, atttypmod) AS type FROM pg_attribute
      WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
    [table],
  );
  expect(attributes.map((a) => [a.name, a.type])).toEqual(made);
  const { rows } = await pool.query(`INSERT INTO ${table} DEFAULT VALUES RETURNING *`);
  expect(rows).toEqual([defaults]);
});
