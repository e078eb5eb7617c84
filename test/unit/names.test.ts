import { formatTableName, parseNameParts, quotePart } from '../../domain/names';
import { tableNameSchema, tableRefSchema } from '../../domain/name-schemas';

// Names as psql writes them: bare parts are a-z, 0-9 and _ (starting with a letter), anything else in double quotes,
// a quote inside doubled; one spelling per name, read back as the same name.

describe('parseNameParts', () => {
  test.each([
    ['shop.orders', ['shop', 'orders']],
    ['shop."Orders"', ['shop', 'Orders']],
    ['"App"."UserProfile"', ['App', 'UserProfile']],
    ['"my.app"."a.b"', ['my.app', 'a.b']],
    ['shop."order ""2025"""', ['shop', 'order "2025"']],
    ['"Bestellungen_ü"', ['Bestellungen_ü']],
    ['shop."注文"', ['shop', '注文']],
    ['"orders"', ['orders']],
    ['shop."123"', ['shop', '123']],
  ])('%s reads as %j', (text, parts) => {
    expect(parseNameParts(text)).toEqual({ parts });
  });

  test.each([
    ['Shop.orders', 'has capitals'],
    ['shop.', 'ends with "."'],
    ['.orders', 'empty name part'],
    ['shop.""', 'empty quoted name'],
    ['shop."open', 'not closed'],
    ['shop."a"b', 'expected "." after'],
    ['shop.a b', 'must be a-z'],
    ['shop."tab\there"', 'control character'],
    [`shop."${'é'.repeat(32)}"`, "over PostgreSQL's 63 bytes"],
  ])('%s is refused: %s', (text, why) => {
    expect(parseNameParts(text)).toEqual({ error: expect.stringContaining(why) as unknown });
  });

  test('63 bytes of a multi-byte name fit', () => {
    expect(parseNameParts(`"${'é'.repeat(31)}x"`)).toEqual({ parts: [`${'é'.repeat(31)}x`] });
  });
});

describe('formatTableName', () => {
  test.each([
    [{ namespace: 'shop', name: 'orders' }, 'shop.orders'],
    [{ namespace: 'shop', name: 'Orders' }, 'shop."Orders"'],
    [{ namespace: 'my.app', name: 'a.b' }, '"my.app"."a.b"'],
    [{ namespace: 'a', name: 'b.c' }, 'a."b.c"'],
    [{ namespace: 'a.b', name: 'c' }, '"a.b".c'],
    [{ namespace: 'shop', name: 'say "hi"' }, 'shop."say ""hi"""'],
  ])('%j is written %s, and read back as itself', (table, text) => {
    expect(formatTableName(table)).toBe(text);
    expect(tableNameSchema.parse(text)).toEqual(table);
  });

  test('a plain part stays bare; a part of digits is quoted, so that it is never read as an id', () => {
    expect(quotePart('orders_2025')).toBe('orders_2025');
    expect(formatTableName({ namespace: 'shop', name: '42' })).toBe('shop."42"');
    expect(tableRefSchema.parse('42')).toEqual({ kind: 'id', id: 42 });
    expect(tableRefSchema.parse('"42"')).toEqual({ kind: 'name', namespace: 'default', name: '42' });
  });
});

describe('bare names beyond ASCII, as PostgreSQL reads them', () => {
  test('letters beyond ASCII, a leading _ and a $ inside are read bare, as themselves; written back in quotes', () => {
    expect(parseNameParts('shop.ördérs')).toEqual({ parts: ['shop', 'ördérs'] });
    expect(parseNameParts('_staging.t$1')).toEqual({ parts: ['_staging', 't$1'] });
    expect(formatTableName({ namespace: 'shop', name: 'ördérs' })).toBe('shop."ördérs"');
    expect(tableNameSchema.parse('shop."ördérs"')).toEqual(tableNameSchema.parse('shop.ördérs'));
  });
});
