import { Harness } from './support/harness';
import { InvalidInputError } from '../domain/errors';
import { tableNameSchema, tableRefSchema } from '../domain/names';
import { sleep } from './support/wait';

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.close();
});

const BAD_NAMES = ['', 'a'.repeat(64), 'ns.' + 'b'.repeat(64), '../x', 'a;drop', 'tàble', 'Upper', '1abc', 'a.b.c', 'a.', '.a', 'a b'];

describe('table names', () => {
  test.each(BAD_NAMES)('%j is refused', (name) => {
    expect(tableNameSchema.safeParse(name).success).toBe(false);
  });

  test('a bare name is in namespace default; 63 characters is the longest part', () => {
    expect(tableNameSchema.parse('orders')).toEqual({ namespace: 'default', name: 'orders' });
    const longest = 'a'.repeat(63);
    expect(tableNameSchema.parse(`${longest}.${longest}`)).toEqual({ namespace: longest, name: longest });
  });

  test('a reference is an id when it is all digits, a name otherwise', () => {
    expect(tableRefSchema.parse('42')).toEqual({ kind: 'id', id: 42 });
    expect(tableRefSchema.parse(7)).toEqual({ kind: 'id', id: 7 });
    expect(tableRefSchema.parse('s.t2')).toEqual({ kind: 'name', namespace: 's', name: 't2' });
    expect(tableRefSchema.safeParse('0').success).toBe(false);
    expect(tableRefSchema.safeParse(-3).success).toBe(false);
  });
});

describe('bad input through the SDK gives InvalidInput, starts no workflow and changes nothing', () => {
  const cases: Array<[string, () => Promise<unknown>]> = [
    ...BAD_NAMES.map((name): [string, () => Promise<unknown>] => [`create ${JSON.stringify(name)}`, () => h.client.create({ table: name })]),
    ['create with 0 shards', () => h.client.create({ table: 'bad.zero', shards: 0 })],
    ['create with 257 shards', () => h.client.create({ table: 'bad.many', shards: 257 })],
    ['create with 2.5 shards', () => h.client.create({ table: 'bad.half', shards: 2.5 })],
    ['create with an unknown field', () => h.client.create({ table: 'bad.extra', replicas: 3 } as never)],
    ['trash with negative retention', () => h.client.trash({ table: 'bad.neg', retentionSeconds: -1 })],
    ['trash of a bad name', () => h.client.trash({ table: '../x' })],
    ['undelete of a bad name', () => h.client.undelete({ table: 'a;drop' })],
    ['undelete to a bad new name', () => h.client.undelete({ table: 1, newName: 'tàble' })],
    ['purge of id 0', () => h.client.purge({ tableId: 0 })],
    ['purge of a name', () => h.client.purge({ tableId: 'x' })],
    ['describe of a bad name', () => h.client.describe({ table: '' })],
  ];

  test.each(cases)('%s', async (_label, call) => {
    await expect(call()).rejects.toThrow(InvalidInputError);
  });

  test('after all of them: no table, no lock, no workflow on the task queue', async () => {
    for (const [, call] of cases) await call().catch(() => undefined);
    expect(await h.catalog.listTables({ includeTrashed: true })).toEqual([]);
    expect(await h.catalog.listLocks()).toEqual([]);
    await sleep(1000); // visibility is eventually consistent
    const count = await h.temporal.workflow.count(`TaskQueue = '${h.taskQueue}'`);
    expect(count.count).toBe(0);
  });

  test('the error names the field and the rule', async () => {
    await expect(h.client.create({ table: 'ok.name', shards: 300 })).rejects.toThrow(/shards/);
    await expect(h.client.create({ table: 'a;drop' })).rejects.toThrow(/1 to 63 characters/);
  });
});
