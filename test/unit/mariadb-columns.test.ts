import { checkMariadbColumnDefinitions } from '../../domain/mariadb-columns';

const reasonOf = (text: string) => {
  const check = checkMariadbColumnDefinitions(text);
  return check.ok ? 'ok' : check.reason;
};
const verdicts = (texts: string[]) => texts.map((text) => [text, reasonOf(text)]);

test('column definitions as MariaDB users write them are accepted, with quotes holding any character', () => {
  const texts = [
    'id BIGINT AUTO_INCREMENT PRIMARY KEY, total DECIMAL(12,2) NOT NULL DEFAULT 0',
    "name VARCHAR(20) DEFAULT 'it''s; (not) -- a # comment /* either */'",
    'note TEXT DEFAULT "double ) quoted; string"',
    "note TEXT DEFAULT 'back\\'slash ) escaped; \\\\'",
    '`we;ird ) name` INT, `back``tick` INT, `#hash` INT',
    "flags BIT(4) DEFAULT b'0101', h VARBINARY(4) DEFAULT x'ff', n VARCHAR(3) DEFAULT N'abc', u VARCHAR(3) DEFAULT _utf8mb4'é'",
    'a INT, b INT, CHECK (a < b), UNIQUE KEY ab (a, b), INDEX (b)',
    'prénom VARCHAR(10), größe INT, 名前 TEXT',
    'at DATETIME(3) DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3), c INT DEFAULT -1, d INT CHECK (c - -1 > 0)',
    "kind ENUM('a', 'b)', 'c;') NOT NULL, owner INT, CONSTRAINT o_fk FOREIGN KEY (owner) REFERENCES other.t (id) ON DELETE CASCADE",
    "id INT,\n  name TEXT DEFAULT 'x'\n",
  ];
  expect(verdicts(texts)).toEqual(texts.map((text) => [text, 'ok']));
});

test('anything that could reach beyond the parentheses, or hide a part of the statement, is refused and named', () => {
  expect(verdicts(['id INT) SELECT * FROM mysql.user WHERE (1', 'id INT); DROP TABLE t; (', 'id INT, (x INT'])).toEqual([
    ['id INT) SELECT * FROM mysql.user WHERE (1', 'the column definitions close a parenthesis they did not open, at character 7'],
    ['id INT); DROP TABLE t; (', 'the column definitions close a parenthesis they did not open, at character 7'],
    ['id INT, (x INT', 'the column definitions leave a parenthesis open'],
  ]);
  expect(
    verdicts([
      'id INT /*!50000 ) SELECT 1 */',
      'id INT /*M! , x INT */',
      'id INT # ) no',
      'id INT -- ) no',
      'id INT --1',
      'id INT; x INT',
      "name TEXT DEFAULT 'open",
      'name TEXT DEFAULT "open',
      "name TEXT DEFAULT 'a\\'",
      '`open INT',
      'id INT DEFAULT \\N',
      '',
      'id INT\u0000',
    ]),
  ).toEqual([
    ['id INT /*!50000 ) SELECT 1 */', 'the column definitions hold a comment at character 8'],
    ['id INT /*M! , x INT */', 'the column definitions hold a comment at character 8'],
    ['id INT # ) no', 'the column definitions hold a comment at character 8'],
    ['id INT -- ) no', 'the column definitions hold a comment at character 8'],
    ['id INT --1', 'the column definitions hold a comment at character 8'],
    ['id INT; x INT', 'the column definitions hold a ";" at character 7: one table\'s columns, not statements'],
    ["name TEXT DEFAULT 'open", 'the column definitions have a string opened at character 19 and never closed'],
    ['name TEXT DEFAULT "open', 'the column definitions have a string opened at character 19 and never closed'],
    ["name TEXT DEFAULT 'a\\'", 'the column definitions have a string opened at character 19 and never closed'],
    ['`open INT', 'the column definitions have a quoted name opened at character 1 and never closed'],
    ['id INT DEFAULT \\N', 'the column definitions hold a backslash outside a string, at character 16'],
    ['', 'the column definitions are empty'],
    ['id INT\u0000', 'the column definitions hold a NUL character at character 7'],
  ]);
});
