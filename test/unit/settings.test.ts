import { InvalidInputError } from '../../domain/errors';
import { MAX_RETENTION_SECONDS } from '../../domain/limits';
import { configSetRequestSchema, holdRequestSchema, leaseRequestSchema, parseRequest } from '../../domain/requests';
import { defaultSettings, effectiveSetting, parseSettingValue, spaceCaps, trashPolicy, type SettingRow } from '../../domain/settings';

/*
 * The runtime settings' pure rules: what a value as typed means for its key, which value is in force where (a
 * namespace's over the global over the default), and how the trash's space caps group the namespaces.
 */

const row = (key: SettingRow['key'], namespace: string | null, value: SettingRow['value']): SettingRow => ({
  key,
  namespace,
  value,
  updatedAt: 0,
});

describe('parseSettingValue', () => {
  test('a switch is true or false, nothing looser', () => {
    expect(parseSettingValue('trash.enabled', 'false')).toEqual({ value: false });
    expect(parseSettingValue('trash.enabled', 'true')).toEqual({ value: true });
    for (const text of ['False', '0', 'yes', '']) {
      expect(parseSettingValue('trash.enabled', text)).toMatchObject({ refused: expect.stringContaining('trash.enabled') as string });
    }
  });

  test('a retention has the bounds of a drop, in whole seconds', () => {
    expect(parseSettingValue('trash.retentionSeconds', '60')).toEqual({ value: 60 });
    expect(parseSettingValue('trash.retentionSeconds', String(MAX_RETENTION_SECONDS))).toEqual({ value: MAX_RETENTION_SECONDS });
    for (const text of ['0', String(MAX_RETENTION_SECONDS + 1), '1.5', '-1', '1e3', ' 5', 'week']) {
      expect(parseSettingValue('trash.retentionSeconds', text)).toHaveProperty('refused');
    }
  });

  test('a space cap is a number of bytes, 0 included, or unlimited', () => {
    expect(parseSettingValue('trash.maxBytes', '0')).toEqual({ value: 0 });
    expect(parseSettingValue('trash.maxBytes', '1073741824')).toEqual({ value: 1073741824 });
    expect(parseSettingValue('trash.maxBytes', 'unlimited')).toEqual({ value: null });
    for (const text of ['-5', '1GB', '9007199254740993', '']) expect(parseSettingValue('trash.maxBytes', text)).toHaveProperty('refused');
  });

  test('config set is refused at the edge, naming the key and the value', () => {
    expect(() => parseRequest(configSetRequestSchema, { key: 'trash.nope', value: '1' })).toThrow(
      /key: no setting "trash.nope": a setting is one of trash.enabled/,
    );
    expect(() => parseRequest(configSetRequestSchema, { key: 'trash.enabled', value: 'maybe' })).toThrow(
      /value: trash.enabled is true or false, not "maybe"/,
    );
    expect(() => parseRequest(configSetRequestSchema, { key: 'trash.enabled', value: 'true', namespace: 'Bad-Ns' })).toThrow(
      InvalidInputError,
    );
    expect(parseRequest(configSetRequestSchema, { key: 'trash.maxBytes', value: 'unlimited', namespace: 'shop' })).toEqual({
      key: 'trash.maxBytes',
      value: null,
      namespace: 'shop',
    });
  });
});

describe('effectiveSetting', () => {
  const rows = [row('trash.retentionSeconds', null, 300), row('trash.retentionSeconds', 'shop', 60), row('trash.enabled', 'lab', false)];

  test("a namespace's own value wins, then the global one, then the default", () => {
    const defaults = defaultSettings(604800);
    expect(effectiveSetting(rows, 'trash.retentionSeconds', 'shop', defaults)).toMatchObject({ value: 60, source: 'namespace' });
    expect(effectiveSetting(rows, 'trash.retentionSeconds', 'lab', defaults)).toMatchObject({ value: 300, source: 'global' });
    expect(effectiveSetting(rows, 'trash.retentionSeconds', null, defaults)).toMatchObject({ value: 300, source: 'global' });
    expect(effectiveSetting(rows, 'trash.enabled', 'shop', defaults)).toMatchObject({ value: true, source: 'default' });
    expect(effectiveSetting(rows, 'trash.maxBytes', 'lab', defaults)).toMatchObject({ value: null, source: 'default' });
  });

  test("the trash policy of a namespace is the settings in force there; the worker's retention is the default's", () => {
    expect(trashPolicy(rows, 'lab', defaultSettings(86400))).toEqual({ enabled: false, retentionSeconds: 300, maxBytes: null });
    expect(trashPolicy([], 'any', defaultSettings(86400))).toEqual({ enabled: true, retentionSeconds: 86400, maxBytes: null });
  });
});

describe('spaceCaps', () => {
  test('a namespace with a cap of its own is capped alone; the others together under the global cap', () => {
    const rows = [row('trash.maxBytes', null, 1000), row('trash.maxBytes', 'big', 5000), row('trash.maxBytes', 'free', null)];
    expect(spaceCaps(rows, ['shop', 'big', 'lab', 'shop', 'free'])).toEqual([
      { namespaces: ['big'], maxBytes: 5000, scope: 'namespace big' },
      { namespaces: ['free'], maxBytes: null, scope: 'namespace free' },
      { namespaces: ['lab', 'shop'], maxBytes: 1000, scope: 'global' },
    ]);
  });

  test('with no cap set anywhere nothing is capped', () => {
    expect(spaceCaps([], ['a', 'b']).every((cap) => cap.maxBytes === null)).toBe(true);
  });
});

describe('the requests of holds and leases', () => {
  test('a reason or a holder is one line of printable text', () => {
    expect(parseRequest(holdRequestSchema, { table: 12, reason: 'case 42' })).toEqual({ table: { kind: 'id', id: 12 }, reason: 'case 42' });
    expect(() => parseRequest(holdRequestSchema, { table: 12, reason: 'a\nb' })).toThrow(/reason: a reason must be one line/);
    expect(() => parseRequest(holdRequestSchema, { table: 12, reason: '' })).toThrow(InvalidInputError);
    expect(() => parseRequest(leaseRequestSchema, { table: 'a.b', holder: 'x'.repeat(201) })).toThrow(/at most 200/);
  });

  test('a lease lasts 60 s unless asked, from 1 s to a day', () => {
    expect(parseRequest(leaseRequestSchema, { table: 'a.b' }).ttlSeconds).toBe(60);
    expect(() => parseRequest(leaseRequestSchema, { table: 'a.b', ttlSeconds: 0 })).toThrow(InvalidInputError);
    expect(() => parseRequest(leaseRequestSchema, { table: 'a.b', ttlSeconds: 86401 })).toThrow(InvalidInputError);
  });
});
