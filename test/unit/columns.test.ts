import { checkColumnDefinitions, MAX_COLUMN_DEFINITIONS_LENGTH } from '../../domain/columns';

const reasonOf = (text: string) => {
  const check = checkColumnDefinitions(text);
  return check.ok ? 'ok' : check.reason;
};

test('column definitions as PostgreSQL users write them are accepted, with quotes holding any character', () => {
  for (const text of [
    'id bigint primary key, total numeric(12,2) not null',
    "id int generated always as identity, name text default 'it''s; (not) -- a comment'",
    '"we;ird ) name" text, "quote""d" int',
    "note text default E'it\\'s ) here'",
    'a int, b int, check (a < b), unique (a, b)',
    'LIKE other.table INCLUDING ALL',
    "flags bit(4) default B'0101', data bytea default '\\x00'",
  ]) {
    expect([text, reasonOf(text)]).toEqual([text, 'ok']);
  }
});

test('definitions that would leave the parentheses, add a statement or hide text are refused, saying where', () => {
  expect(reasonOf('id int); drop table x; --')).toMatch(/close a parenthesis they did not open, at character 7/);
  expect(reasonOf('id int) inherits (secrets')).toMatch(/close a parenthesis they did not open/);
  expect(reasonOf('id int; drop table x')).toMatch(/";" at character 7/);
  expect(reasonOf('id int -- the rest')).toMatch(/comment at character 8/);
  expect(reasonOf('id int /* ) */')).toMatch(/comment at character 8/);
  expect(reasonOf('id text default $$a$$')).toMatch(/"\$" at character 17 .*dollar quoting/);
  expect(reasonOf("id text default 'open")).toMatch(/string opened at character 17 and never closed/);
  expect(reasonOf('"open int')).toMatch(/quoted name opened at character 1/);
  expect(reasonOf('id int, check ((id > 0)')).toMatch(/leave a parenthesis open/);
  expect(reasonOf('id int\0')).toMatch(/NUL/);
  expect(reasonOf('   ')).toMatch(/are empty/);
  expect(reasonOf('a'.repeat(MAX_COLUMN_DEFINITIONS_LENGTH + 1))).toMatch(/longer than/);
});

test("a backslash escapes a quote only in an E'...' string: elsewhere the string ends there and the rest is read", () => {
  // In a standard string \' is a backslash, then the closing quote: the ")" after it is outside and unbalanced.
  expect(reasonOf("a text default '\\'); drop table x; '")).toMatch(/close a parenthesis/);
  // In an E-string it is an escaped quote, and the string goes on to the final quote.
  expect(reasonOf("a text default E'\\'); drop table x; '")).toBe('ok');
  // A name that merely ends in e is not an E-string prefix.
  expect(reasonOf("a text default somee'\\'); x'")).toMatch(/close a parenthesis/);
});
