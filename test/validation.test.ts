import { Harness } from './support/harness';
import { InvalidInputError } from '../domain/errors';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { loadClientConfig, TableFateClient } from '../client';
import { catalogPath, TASK_QUEUE } from '../domain/deployment';
import { loadConfig, statePaths, TASK_QUEUE as WORKER_TASK_QUEUE } from '../worker/config';
import { tableNameSchema, tableRefSchema } from '../domain/name-schemas';
import { visibilityCaughtUp } from './support/runs';

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.close();
});

const BAD_NAMES = ['', 'a'.repeat(64), 'ns.' + 'b'.repeat(64), '../x', 'a;drop', 'ta-ble', 'Upper', '1abc', 'a.b.c', 'a.', '.a', 'a b'];

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
    ...BAD_NAMES.map((name): [string, () => Promise<unknown>] => [
      `create ${JSON.stringify(name)}`,
      () => h.client.create({ table: name }),
    ]),
    ['create with 0 shards', () => h.client.create({ table: 'bad.zero', shards: 0 })],
    ['create with 257 shards', () => h.client.create({ table: 'bad.many', shards: 257 })],
    ['create with 2.5 shards', () => h.client.create({ table: 'bad.half', shards: 2.5 })],
    ['create with an unknown field', () => h.client.create({ table: 'bad.extra', replicas: 3 } as never)],
    ['trash with negative retention', () => h.client.trash({ table: 'bad.neg', retentionSeconds: -1 })],
    ['trash of a bad name', () => h.client.trash({ table: '../x' })],
    ['trash naming a node with the files driver', () => h.client.trash({ table: 'bad.unkept', node: 'node-0' })],
    ['trash naming a node that is no node', () => h.client.trash({ table: 'bad.unkept', node: 'node7' })],
    ['undelete of a bad name', () => h.client.undelete({ table: 'a;drop' })],
    ['undelete to a bad new name', () => h.client.undelete({ table: 1, newName: 'ta-ble' })],
    ['purge of id 0', () => h.client.purge({ tableId: 0 })],
    ['purge of a name', () => h.client.purge({ tableId: 'x' })],
    ['describe of a bad name', () => h.client.describe({ table: '' })],
    ['list with a limit of 0', () => h.client.list({ limit: 0 })],
    ['list with a limit of 2.5', () => h.client.list({ limit: 2.5 })],
    ['list after id 0', () => h.client.list({ after: 0 })],
    ['list after a name', () => h.client.list({ after: 'ns.t' })],
    ['create with a timeout of 0 ms', () => h.client.create({ table: 'bad.t0', shards: 1 }, { timeoutMs: 0 })],
    ['trash with a negative timeout', () => h.client.trash({ table: 'bad.t1' }, { timeoutMs: -5 })],
    ['undelete with a timeout that is not a number', () => h.client.undelete({ table: 1 }, { timeoutMs: NaN })],
    ['purge with an endless timeout', () => h.client.purge({ tableId: 1 }, { timeoutMs: Infinity })],
    ['create with a timeout given as text', () => h.client.create({ table: 'bad.t2' }, { timeoutMs: '5000' as never })],
  ];

  test.each(cases)('%s', async (_label, call) => {
    await expect(call()).rejects.toThrow(InvalidInputError);
  });

  test('after all of them: no table, no lock, no workflow on the task queue', async () => {
    for (const [, call] of cases) await call().catch(() => undefined);
    expect(await h.catalog.listTables({ includeTrashed: true })).toEqual([]);
    expect(await h.catalog.listLocks()).toEqual([]);
    await visibilityCaughtUp(h.temporal);
    const count = await h.temporal.workflow.count(`TaskQueue = '${h.taskQueue}'`);
    expect(count.count).toBe(0);
  });

  test('a client whose default timeout is not a positive number of ms is refused when it is made', () => {
    for (const defaultTimeoutMs of [0, -1, NaN, 86_400_001]) {
      expect(() => new TableFateClient({ client: h.temporal, catalog: h.catalog, taskQueue: h.taskQueue, defaultTimeoutMs })).toThrow(
        InvalidInputError,
      );
    }
  });

  test('a client whose lock wait or expiry retry pace is not whole positive ms, or shrinks, is refused when it is made', () => {
    const make = (pace: Record<string, unknown>) => (which: 'lockWait' | 'expiryRetry') => () =>
      new TableFateClient({ client: h.temporal, catalog: h.catalog, taskQueue: h.taskQueue, [which]: pace as never });
    const bad = [
      { firstMs: 0, maxMs: 10, attemptsPerRun: 3 },
      { firstMs: 10, maxMs: 5, attemptsPerRun: 3 },
      { firstMs: 10, maxMs: 20, attemptsPerRun: 0 },
      { firstMs: 1.5, maxMs: 20, attemptsPerRun: 3 },
      { firstMs: 10, maxMs: 20 },
    ];
    for (const pace of bad) {
      for (const which of ['lockWait', 'expiryRetry'] as const) expect(make(pace)(which)).toThrow(InvalidInputError);
    }
    expect(make({ firstMs: 10, maxMs: 5, attemptsPerRun: 3 })('expiryRetry')).toThrow(/maxMs must be at least firstMs/);
    expect(make({ firstMs: 10, maxMs: 20, attemptsPerRun: 3 })('expiryRetry')).not.toThrow();
  });

  test('the error names the field and the rule', async () => {
    await expect(h.client.create({ table: 'ok.name', shards: 300 })).rejects.toThrow(/shards/);
    await expect(h.client.purge({ tableId: 'ns.t' })).rejects.toThrow(
      /tableId: "ns.t" is not a table id: a table id is a positive whole number/,
    );
    await expect(h.client.list({ after: 1.5 })).rejects.toThrow(/after: 1.5 is not a table id/);
    await expect(h.client.create({ table: 'a;drop' })).rejects.toThrow(
      /"a;drop" must be a-z, 0-9 and _, starting with a letter, or be written in double quotes/,
    );
    await expect(h.client.create({ table: 'ok.name' }, { timeoutMs: 0 })).rejects.toThrow(
      /timeoutMs must be a number of milliseconds above 0/,
    );
  });
});

describe("the SDK's configuration", () => {
  test('comes from TABLEFATE_HOME, TABLEFATE_CATALOG_URL, the storage driver and the TEMPORAL_ variables, with the same defaults as the worker', () => {
    expect(loadClientConfig({})).toEqual({
      home: path.resolve('.tablefate'),
      catalogUrl: undefined,
      temporalAddress: '127.0.0.1:7233',
      temporalNamespace: 'default',
      temporalSecurity: {},
      storageDriver: 'files',
      storageUrls: [],
    });
    const env = {
      TABLEFATE_HOME: 'x/home',
      TABLEFATE_CATALOG_URL: 'postgres://db.internal/tablefate',
      TEMPORAL_ADDRESS: 'temporal:7233',
      TEMPORAL_NAMESPACE: 'tables',
      TEMPORAL_API_KEY: 'k',
      TABLEFATE_STORAGE_DRIVER: 'postgres',
      TABLEFATE_STORAGE_URLS: 'postgres://tf:pw@db0/app, postgresql://tf:pw@db1/app',
    };
    const worker = loadConfig(env);
    expect(loadClientConfig(env)).toEqual({
      home: worker.home,
      catalogUrl: 'postgres://db.internal/tablefate',
      temporalAddress: worker.temporalAddress,
      temporalNamespace: worker.temporalNamespace,
      temporalSecurity: worker.temporalSecurity,
      storageDriver: 'postgres',
      storageUrls: ['postgres://tf:pw@db0/app', 'postgresql://tf:pw@db1/app'],
    });
    // A node per url; a count that says otherwise is a mistake.
    expect(worker.storageNodes).toBe(2);
    expect(() => loadConfig({ ...env, TABLEFATE_STORAGE_NODES: '3' })).toThrow(
      /TABLEFATE_STORAGE_NODES: is 3, but TABLEFATE_STORAGE_URLS names 2/,
    );
    expect(() => loadConfig({ TABLEFATE_STORAGE_URLS: 'postgres://tf:pw@db0/app' })).toThrow(/is for the postgres and mariadb drivers/);
    // MariaDB: a node per server url, of its own scheme.
    const mariadb = loadConfig({
      TABLEFATE_STORAGE_DRIVER: 'mariadb',
      TABLEFATE_STORAGE_URLS: 'mariadb://tf:pw@db0:3306/,mysql://tf:pw@db1/',
    });
    expect(mariadb).toMatchObject({ storageDriver: 'mariadb', storageNodes: 2 });
    expect(() =>
      loadConfig({ TABLEFATE_STORAGE_DRIVER: 'mariadb', TABLEFATE_STORAGE_URLS: 'mariadb://a@db0/,postgres://tf:pw@db1/app' }),
    ).toThrow(/entry 2 is not a mariadb:\/\/ url, as the mariadb driver needs/);
    expect(() => loadConfig({ TABLEFATE_STORAGE_DRIVER: 'mariadb' })).toThrow(/the mariadb driver needs one url per storage node/);
    expect(() => loadConfig({ TABLEFATE_STORAGE_DRIVER: 'oracle' })).toThrow(/TABLEFATE_STORAGE_DRIVER/);
    expect(loadClientConfig({})).toEqual(expect.objectContaining({ home: loadConfig({}).home }) as unknown);
  });

  test('an empty variable is InvalidInput naming it', () => {
    expect(() => loadClientConfig({ TEMPORAL_ADDRESS: '' })).toThrow(InvalidInputError);
    expect(() => loadClientConfig({ TEMPORAL_ADDRESS: '' })).toThrow(/TEMPORAL_ADDRESS/);
  });

  test('client and worker agree on the catalog file and the task queue', () => {
    expect(catalogPath('/srv/tablefate')).toBe('/srv/tablefate/catalog.sqlite');
    expect(catalogPath('/srv/tablefate')).toBe(statePaths('/srv/tablefate').catalog);
    expect(TASK_QUEUE).toBe(WORKER_TASK_QUEUE);
  });

  test('the SDK loads no worker, activity or storage code', () => {
    const root = path.resolve(__dirname, '..');
    const script =
      "require('./client'); const root = process.cwd() + '/';" +
      "console.log(JSON.stringify(Object.keys(require.cache).filter((f) => f.startsWith(root) && !f.includes('node_modules')).map((f) => f.slice(root.length))))";
    const loaded = JSON.parse(execFileSync(process.execPath, ['-r', 'tsx/cjs', '-e', script], { cwd: root, encoding: 'utf8' })) as string[];
    expect(loaded).toContain('client/client.ts');
    expect(loaded.filter((f) => /^(worker|activities|storage)\//.test(f))).toEqual([]);
  });

  test('the command line loads the Temporal worker only for the commands that run one', () => {
    const root = path.resolve(__dirname, '..');
    const script =
      "require('./cli/main'); const files = Object.keys(require.cache);" +
      "console.log(JSON.stringify({ ours: files.includes(require.resolve('./worker/main')), sdk: files.some((f) => f.includes('/@temporalio/worker/')) }))";
    const loaded = JSON.parse(execFileSync(process.execPath, ['-r', 'tsx/cjs', '-e', script], { cwd: root, encoding: 'utf8' })) as unknown;
    expect(loaded).toEqual({ ours: false, sdk: false });
  });
});
