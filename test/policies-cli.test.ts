import fs from 'node:fs';
import { Connection } from '@temporalio/client';
import { jsonOf, runCli, runCliInProcess, type CliProcess, type CliResult } from './support/cli';
import { cliTestHome, ensureNamespace, startCliWorker } from './support/cli-worker';
import { testServerAddress } from './support/test-server';
import type { EffectiveSetting } from '../domain/settings';
import type { LeaseInfo } from '../domain/leases';
import type { TableInfo } from '../domain/table';
import type { PurgeAllSummary } from '../client/client';

/*
 * The trash's policies from the command line: `config get|set|unset`, `hold` and `release`, `retention`, `lease
 * acquire|renew|release|ls`, and `purge --all`, against a `tablefate worker` (a child process) on the shared test
 * server. The worker runs in a Temporal namespace of this file's own, so that its `tablefate` task queue is not the one
 * test/cli.test.ts's worker polls, with the reconcile schedule off, and every trash retention is long enough that no
 * expiry fires while the file runs. Most commands run in this process (cli/main.ts's `main`, what a person sees of it,
 * without the cost of a Node process); the lease's acquire and release run once in a real process too.
 */

const NAMESPACE = 'tablefate-policies-cli-test';
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const SEVEN_DAYS = 7 * 24 * 3600;

let home: string;
let env: NodeJS.ProcessEnv;
let connection: Connection | undefined;
let worker: CliProcess | undefined;

const cli = (...args: string[]) => runCli(args, { env });
const inProcess = (...args: string[]) => runCliInProcess(args, { env });

// Jest's asymmetric matchers are typed `any`; typed `unknown` they can sit in an expected value lint-clean.
const matching = (pattern: RegExp): unknown => expect.stringMatching(pattern);
const anyString = (): unknown => expect.any(String);

beforeAll(async () => {
  ({ home, env } = await cliTestHome('policies', NAMESPACE));
  connection = await Connection.connect({ address: testServerAddress() });
  await ensureNamespace(connection, NAMESPACE);
  worker = await startCliWorker(connection, env);
});

afterAll(async () => {
  try {
    if (worker && !worker.exitStatus) {
      const exit = await worker.stop('SIGINT');
      // (stderr on both sides: it shows in the diff if the exit is wrong)
      expect({ exit, stderr: worker.stderr }).toEqual({ exit: { code: 0, signal: null }, stderr: worker.stderr });
    }
  } finally {
    await connection?.close();
    if (home) await fs.promises.rm(home, { recursive: true, force: true });
  }
});

/** What a person (or a script) sees of a command. */
const seen = (r: CliResult) => ({ args: r.args, code: r.code, stdout: r.stdout, stderr: r.stderrLines });

/** Asserts a command succeeded with nothing on stderr. */
function expectOk(r: CliResult) {
  expect({ args: r.args, code: r.code, stderr: r.stderr }).toEqual({ args: r.args, code: 0, stderr: '' });
}

/** Asserts a command failed with `code` and exactly one stderr line `tablefate: <kind>: <message>`, and printed nothing. */
function expectFailure(r: CliResult, code: number, kind: string, message: RegExp = /./) {
  expect(seen(r)).toEqual({
    args: r.args,
    code,
    stdout: '',
    stderr: [matching(new RegExp(`^tablefate: ${kind}: .*${message.source}`))],
  });
}

/** The JSON a successful command printed. */
function okJson<T>(r: CliResult): T {
  expectOk(r);
  return jsonOf<T>(r);
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Aligned columns (`ls`, `lease ls`, `config get`): the header names them, every row's cells start where their header
 * starts (a blank before). Returns the header's names and the rows as header -> cell.
 */
function parseColumns(text: string): { columns: string[]; rows: Array<Record<string, string>> } {
  const [header, ...rows] = text.replace(/\n$/, '').split('\n');
  const columns = [...header!.matchAll(/\S+/g)].map((m) => ({ name: m[0], at: m.index }));
  return {
    columns: columns.map((c) => c.name),
    rows: rows.map((row) => {
      for (const { name, at } of columns.slice(1)) {
        expect({ row, column: name, before: row[at - 1], at: row[at] }).toEqual({ row, column: name, before: ' ', at: matching(/\S/) });
      }
      return Object.fromEntries(columns.map(({ name, at }, i) => [name, row.slice(at, columns[i + 1]?.at).trim()]));
    }),
  };
}

/** One table as `describe` (and every write without --json) prints it: a field per line, the values in one column. */
function fieldsOf(text: string): Record<string, string> {
  const lines = text.trimEnd().split('\n');
  const valueAt = lines[0]!.search(/ {2}\S/) + 2;
  expect(lines.map((line) => line.search(/ {2}\S/) + 2)).toEqual(lines.map(() => valueAt));
  return Object.fromEntries(lines.map((line) => [line.slice(0, valueAt).trim(), line.slice(valueAt)]));
}

const createTable = async (name: string, shards = 2) => {
  const table = okJson<TableInfo>(await inProcess('create', name, '--shards', String(shards), '--json'));
  expect(table).toMatchObject({ state: 'READY', shards, hold: null });
  return table;
};
const dropTable = async (name: string, retentionSeconds = 3600) => {
  const table = okJson<TableInfo>(await inProcess('drop', name, '-r', String(retentionSeconds), '--json'));
  expect(table.state).toBe('TRASHED');
  return table;
};
const describeJson = async (id: number) => okJson<TableInfo>(await inProcess('describe', String(id), '--json'));

describe('config', () => {
  const settingsOf = async (...args: string[]) => okJson<EffectiveSetting[]>(await inProcess('config', 'get', ...args, '--json'));

  test('get shows every key with its default; set globally then for a namespace, get says which applies; unset', async () => {
    const defaults = await inProcess('config', 'get');
    expectOk(defaults);
    const text = parseColumns(defaults.stdout);
    expect(text.columns).toEqual(['KEY', 'VALUE', 'FROM']);
    expect(text.rows).toEqual([
      { KEY: 'trash.enabled', VALUE: 'true', FROM: 'default' },
      { KEY: 'trash.retentionSeconds', VALUE: String(SEVEN_DAYS), FROM: 'default' },
      { KEY: 'trash.maxBytes', VALUE: 'unlimited', FROM: 'default' },
    ]);
    expect(await settingsOf()).toEqual([
      { key: 'trash.enabled', value: true, source: 'default', namespace: null },
      { key: 'trash.retentionSeconds', value: SEVEN_DAYS, source: 'default', namespace: null },
      { key: 'trash.maxBytes', value: null, source: 'default', namespace: null },
    ]);
    // The same in a real process: stdout is that JSON alone, and the exit code 0.
    expect(okJson(await cli('config', 'get', '--json'))).toEqual(await settingsOf());

    // Set globally: the answer is the setting in force, and where it comes from.
    const setGlobal = await inProcess('config', 'set', 'trash.retentionSeconds', '7200');
    expectOk(setGlobal);
    expect(parseColumns(setGlobal.stdout).rows).toEqual([{ KEY: 'trash.retentionSeconds', VALUE: '7200', FROM: 'global' }]);
    // Then for one namespace (--json: the same as an object in an array).
    expect(okJson(await inProcess('config', 'set', 'trash.retentionSeconds', '3600', '--namespace', 'cfg', '--json'))).toEqual([
      { key: 'trash.retentionSeconds', value: 3600, source: 'namespace', namespace: 'cfg' },
    ]);
    // Values of the other keys, for that namespace only (a global maxBytes or trash.enabled would touch every test here).
    expectOk(await inProcess('config', 'set', 'trash.enabled', 'false', '--namespace', 'cfg'));
    expectOk(await inProcess('config', 'set', 'trash.maxBytes', '1048576', '--namespace', 'cfg'));

    const inCfg = await inProcess('config', 'get', 'trash.retentionSeconds', '--namespace', 'cfg');
    expectOk(inCfg);
    expect(parseColumns(inCfg.stdout).rows).toEqual([{ KEY: 'trash.retentionSeconds', VALUE: '3600', FROM: 'namespace cfg' }]);
    const inOther = await inProcess('config', 'get', 'trash.retentionSeconds', '--namespace', 'other');
    expectOk(inOther);
    expect(parseColumns(inOther.stdout).rows).toEqual([{ KEY: 'trash.retentionSeconds', VALUE: '7200', FROM: 'global' }]);
    expect(await settingsOf('--namespace', 'cfg')).toEqual([
      { key: 'trash.enabled', value: false, source: 'namespace', namespace: 'cfg' },
      { key: 'trash.retentionSeconds', value: 3600, source: 'namespace', namespace: 'cfg' },
      { key: 'trash.maxBytes', value: 1048576, source: 'namespace', namespace: 'cfg' },
    ]);
    expect(await settingsOf('--namespace', 'other')).toEqual([
      { key: 'trash.enabled', value: true, source: 'default', namespace: 'other' },
      { key: 'trash.retentionSeconds', value: 7200, source: 'global', namespace: 'other' },
      { key: 'trash.maxBytes', value: null, source: 'default', namespace: 'other' },
    ]);
    expect(await settingsOf('trash.retentionSeconds')).toEqual([
      { key: 'trash.retentionSeconds', value: 7200, source: 'global', namespace: null },
    ]);

    // Bad keys and values: exit 2 naming what is wrong, and nothing changes.
    const before = [await settingsOf(), await settingsOf('--namespace', 'cfg')];
    const refusals: Array<[args: string[], kind: 'InvalidInput' | 'Usage', message: RegExp]> = [
      [
        ['config', 'set', 'trash.nope', '1'],
        'InvalidInput',
        /key: no setting "trash.nope": a setting is one of trash\.enabled, trash\.retentionSeconds, trash\.maxBytes/,
      ],
      [['config', 'set', 'trash.nope', '1', '--namespace', 'cfg'], 'InvalidInput', /key: no setting "trash.nope": a setting is one of/],
      [['config', 'unset', 'trash.nope'], 'InvalidInput', /key: no setting "trash.nope": a setting is one of/],
      [['config', 'get', 'trash.nope'], 'InvalidInput', /key: no setting "trash.nope": a setting is one of/],
      [['config', 'set', 'trash.enabled', 'maybe'], 'InvalidInput', /trash\.enabled is true or false, not "maybe"/],
      [['config', 'set', 'trash.enabled', 'maybe', '--namespace', 'cfg'], 'InvalidInput', /not "maybe"/],
      [['config', 'set', 'trash.retentionSeconds', '0'], 'InvalidInput', /trash\.retentionSeconds is a whole number of seconds .*not "0"/],
      [['config', 'set', 'trash.retentionSeconds', '1.5', '--namespace', 'cfg'], 'InvalidInput', /not "1\.5"/],
      [['config', 'set', 'trash.maxBytes', '--', '-5'], 'InvalidInput', /trash\.maxBytes is a whole number of bytes .*not "-5"/],
      // As typed without `--`, -5 is an option to the parser: still exit 2, naming it.
      [['config', 'set', 'trash.maxBytes', '-5'], 'Usage', /'-5'/],
      [
        ['config', 'set', 'trash.retentionSeconds', '60', '--namespace', 'Bad!'],
        'InvalidInput',
        /namespace: "Bad!" must be a-z, 0-9 and _, starting with a letter, or be written in double quotes/,
      ],
      [['config', 'set', 'trash.enabled'], 'Usage', /config: expected 2 argument\(s\), got 1/],
      [['config'], 'Usage', /config: expected get, set or unset, got nothing/],
      [['config', 'show'], 'Usage', /config: expected get, set or unset, got "show"/],
    ];
    const results: CliResult[] = [];
    for (const [args] of refusals) results.push(await inProcess(...args));
    expect(results.map(seen)).toEqual(
      refusals.map(([args, kind, message]) => ({
        args,
        code: 2,
        stdout: '',
        stderr: [matching(new RegExp(`^tablefate: ${kind}: .*${message.source}`))],
      })),
    );
    // With --json, the error is one JSON object on stderr.
    const json = await inProcess('config', 'set', 'trash.enabled', 'maybe', '--json');
    expect({ code: json.code, stdout: json.stdout }).toEqual({ code: 2, stdout: '' });
    expect(JSON.parse(json.stderr)).toEqual({ error: 'InvalidInput', message: matching(/"maybe"/) });
    expect([await settingsOf(), await settingsOf('--namespace', 'cfg')]).toEqual(before);

    // Unset for the namespace: the global value applies there again; unset globally: the default.
    const unsetCfg = await inProcess('config', 'unset', 'trash.retentionSeconds', '--namespace', 'cfg');
    expectOk(unsetCfg);
    expect(parseColumns(unsetCfg.stdout).rows).toEqual([{ KEY: 'trash.retentionSeconds', VALUE: '7200', FROM: 'global' }]);
    expect(okJson(await inProcess('config', 'unset', 'trash.retentionSeconds', '--json'))).toEqual([
      { key: 'trash.retentionSeconds', value: SEVEN_DAYS, source: 'default', namespace: null },
    ]);
    for (const key of ['trash.enabled', 'trash.maxBytes']) expectOk(await inProcess('config', 'unset', key, '--namespace', 'cfg'));
    expect(await settingsOf('--namespace', 'cfg')).toEqual([
      { key: 'trash.enabled', value: true, source: 'default', namespace: 'cfg' },
      { key: 'trash.retentionSeconds', value: SEVEN_DAYS, source: 'default', namespace: 'cfg' },
      { key: 'trash.maxBytes', value: null, source: 'default', namespace: 'cfg' },
    ]);
    expect(parseColumns((await inProcess('config', 'get')).stdout).rows).toEqual(text.rows);

    // (Last, so that all of the above is checked whatever this says.) A bad key is refused naming it, as a bad value is
    // (README: "A bad key or value is exit 2, naming it"), not only the keys there are.
    const badKeys = results.filter((r) => r.args.includes('trash.nope'));
    expect(badKeys.map((r) => ({ args: r.args, stderr: r.stderr }))).toEqual(
      badKeys.map((r) => ({ args: r.args, stderr: matching(/trash\.nope/) })),
    );
  });
});

test('hold with a reason: describe and ls -a show it, a purge is OnHold naming it; release, and the purge goes through', async () => {
  const table = await createTable('pol.held');
  const hold = await inProcess('hold', 'pol.held', '--reason', 'case 42');
  expectOk(hold);
  const heldFields = fieldsOf(hold.stdout);
  expect(heldFields).toMatchObject({ id: String(table.id), name: 'pol.held', state: 'READY', hold: matching(/^since \S+: case 42$/) });
  const since = /^since (\S+):/.exec(heldFields.hold!)![1]!;
  expect(since).toMatch(ISO_8601);

  const described = await inProcess('describe', 'pol.held');
  expectOk(described);
  expect(fieldsOf(described.stdout).hold).toBe(`since ${since}: case 42`);
  expect((await describeJson(table.id)).hold).toEqual({ reason: 'case 42', since });
  // Holding again for the same reason answers the table as it is; for another reason is WrongState naming the first.
  expect(okJson<TableInfo>(await inProcess('hold', String(table.id), '--reason', 'case 42', '--json')).hold).toEqual({
    reason: 'case 42',
    since,
  });
  expectFailure(await inProcess('hold', String(table.id), '--reason', 'other'), 4, 'WrongState', /case 42/);

  const trashed = await dropTable('pol.held');
  expect(trashed.hold).toEqual({ reason: 'case 42', since });
  const refused = await inProcess('purge', String(table.id));
  expectFailure(refused, 4, 'OnHold', /case 42/);
  expect(refused.stderr).toContain(String(table.id));
  // (a real process too: the exit code a shell sees)
  expectFailure(await cli('purge', String(table.id)), 4, 'OnHold', /case 42/);
  expect(await describeJson(table.id)).toMatchObject({ state: 'TRASHED', hold: { reason: 'case 42', since } });

  // A table held without a reason, for the listing's other cell.
  const plain = await createTable('pol.plain', 1);
  expect(fieldsOf((await inProcess('hold', 'pol.plain')).stdout).hold).toMatch(/^since \S+ \(no reason given\)$/);
  const listed = await inProcess('ls', '-a');
  expectOk(listed);
  const { columns, rows } = parseColumns(listed.stdout);
  expect(columns).toEqual(['ID', 'STATE', 'NAMESPACE', 'NAME', 'SHARDS', 'SIZE', 'CREATED', 'DROPPED', 'BY', 'EXPIRES', 'HOLD', 'WITH']);
  expect(rows.find((r) => r.ID === String(table.id))).toMatchObject({ STATE: 'TRASHED', NAME: 'held', HOLD: 'case 42' });
  expect(rows.find((r) => r.ID === String(plain.id))).toMatchObject({ STATE: 'READY', NAME: 'plain', HOLD: 'held' });
  expect(rows.filter((r) => r.ID !== String(table.id) && r.ID !== String(plain.id)).map((r) => r.HOLD)).toEqual(
    rows.filter((r) => r.ID !== String(table.id) && r.ID !== String(plain.id)).map(() => '-'),
  );

  const released = await inProcess('release', String(table.id));
  expectOk(released);
  expect(fieldsOf(released.stdout)).toMatchObject({ state: 'TRASHED', hold: '-' });
  expect((await describeJson(table.id)).hold).toBeNull();
  // Released again: not held, WrongState; nothing changed.
  expectFailure(await inProcess('release', String(table.id)), 4, 'WrongState', /not on hold/);
  expect(await describeJson(table.id)).toMatchObject({ state: 'TRASHED', hold: null, expireAt: trashed.expireAt });

  const purged = okJson<TableInfo>(await inProcess('purge', String(table.id), '--json'));
  expect(purged).toMatchObject({ id: table.id, state: 'PURGED', purgedAt: matching(ISO_8601) });
  // A purged table has no hold to release.
  expectFailure(
    await inProcess('release', String(table.id)),
    3,
    'TableNotFound',
    new RegExp(`table ${table.id} does not exist or was purged`),
  );
  expectOk(await inProcess('release', 'pol.plain'));
});

test('retention moves a trashed table’s expiry from its drop time; 0 is refused; a READY table has no retention', async () => {
  const table = await createTable('pol.kept');
  const dropped = await dropTable('pol.kept', 3600);
  expect(Date.parse(dropped.expireAt!) - Date.parse(dropped.droppedAt!)).toBe(3600 * 1000);

  const longer = await inProcess('retention', String(table.id), '7200');
  expectOk(longer);
  const expected = new Date(Date.parse(dropped.droppedAt!) + 7200 * 1000).toISOString();
  expect(fieldsOf(longer.stdout)).toMatchObject({
    id: String(table.id),
    name: 'pol.kept',
    state: 'TRASHED',
    dropped: dropped.droppedAt!,
    expires: expected,
  });
  expect(await describeJson(table.id)).toMatchObject({ state: 'TRASHED', droppedAt: dropped.droppedAt, expireAt: expected });
  // By name (the most recently trashed of that name), --json.
  const shorter = okJson<TableInfo>(await inProcess('retention', 'pol.kept', '5400', '--json'));
  expect(shorter).toMatchObject({
    id: table.id,
    droppedAt: dropped.droppedAt,
    expireAt: new Date(Date.parse(dropped.droppedAt!) + 5400_000).toISOString(),
  });

  expectFailure(await inProcess('retention', String(table.id), '0'), 2, 'InvalidInput', /retentionSeconds/);
  expectFailure(await inProcess('retention', String(table.id), 'soon'), 2, 'InvalidInput', /retentionSeconds/);
  expectFailure(await inProcess('retention', String(table.id)), 2, 'Usage', /retention: expected 2 argument\(s\), got 1/);
  expect((await describeJson(table.id)).expireAt).toBe(shorter.expireAt);

  const ready = await createTable('pol.ready', 1);
  expectFailure(await inProcess('retention', String(ready.id), '3600'), 4, 'WrongState', /READY/);
  expect(await describeJson(ready.id)).toMatchObject({ state: 'READY', droppedAt: null, expireAt: null });
});

test('leases: acquire (a real process, --json), ls lists it, a drop past its drain is TableBusy naming it, release', async () => {
  const table = await createTable('pol.leased');
  const acquired = await cli('lease', 'acquire', 'pol.leased', '--ttl', '300', '--holder', 'etl@host9', '--json');
  const lease = okJson<LeaseInfo>(acquired);
  expect(lease).toEqual({
    id: matching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
    tableId: table.id,
    holder: 'etl@host9',
    ttlSeconds: 300,
    acquiredAt: matching(ISO_8601),
    expiresAt: matching(ISO_8601),
  });
  expect(Date.parse(lease.expiresAt) - Date.parse(lease.acquiredAt)).toBe(300_000);

  expect(okJson<LeaseInfo[]>(await inProcess('lease', 'ls', '--json'))).toContainEqual(lease);
  expect(okJson<LeaseInfo[]>(await inProcess('lease', 'ls', '--table', 'pol.leased', '--json'))).toEqual([lease]);
  const text = await inProcess('lease', 'ls', '--table', String(table.id));
  expectOk(text);
  expect(parseColumns(text.stdout)).toEqual({
    columns: ['LEASE', 'TABLE', 'HOLDER', 'TTL', 'ACQUIRED', 'EXPIRES'],
    rows: [
      { LEASE: lease.id, TABLE: String(table.id), HOLDER: 'etl@host9', TTL: '300 s', ACQUIRED: lease.acquiredAt, EXPIRES: lease.expiresAt },
    ],
  });

  // Renewed: the same lease, later.
  const renewed = okJson<LeaseInfo>(await inProcess('lease', 'renew', lease.id, '--ttl', '600', '--json'));
  expect(renewed).toMatchObject({ id: lease.id, tableId: table.id, ttlSeconds: 600 });
  expect(Date.parse(renewed.expiresAt)).toBeGreaterThan(Date.parse(lease.expiresAt));

  const busy = await inProcess('drop', 'pol.leased', '--drain-timeout', '1', '-r', '3600');
  expectFailure(busy, 4, 'TableBusy', new RegExp(escape(lease.id)));
  expect(busy.stderr).toContain('etl@host9');
  // Taken back: READY, still leased, and by name again.
  expect(okJson<TableInfo>(await inProcess('describe', 'pol.leased', '--json'))).toMatchObject({
    id: table.id,
    state: 'READY',
    droppedAt: null,
  });
  expect(okJson<LeaseInfo[]>(await inProcess('lease', 'ls', '--table', String(table.id), '--json')).map((l) => l.id)).toEqual([lease.id]);

  const released = await cli('lease', 'release', lease.id, '--json');
  expect(okJson<LeaseInfo>(released)).toMatchObject({ id: lease.id, tableId: table.id });
  expect(okJson<LeaseInfo[]>(await inProcess('lease', 'ls', '--table', String(table.id), '--json'))).toEqual([]);
  expectFailure(await inProcess('lease', 'release', lease.id), 3, 'LeaseNotFound', new RegExp(escape(lease.id)));
  expectFailure(await inProcess('lease', 'renew', lease.id), 3, 'LeaseNotFound');
  expectFailure(await inProcess('lease', 'release', 'not-a-lease'), 2, 'InvalidInput', /a lease id is the uuid its acquire printed/);
  expectFailure(await inProcess('lease', 'acquire', 'pol.leased', '--ttl', '0'), 2, 'InvalidInput', /ttl/i);
  expectFailure(await inProcess('lease'), 2, 'Usage', /lease: expected acquire, renew, release or ls, got nothing/);

  // Without its lease the drop goes through; a trashed table takes no lease.
  await dropTable('pol.leased');
  expectFailure(await inProcess('lease', 'acquire', String(table.id)), 4, 'WrongState', /TRASHED/);
  expect(okJson<LeaseInfo[]>(await inProcess('lease', 'ls', '--table', String(table.id), '--json'))).toEqual([]);
});

test('purge --all: without --yes it lists what it would purge and changes nothing; with --yes it purges all but the held', async () => {
  const [a, b, c] = [await createTable('pall.a', 1), await createTable('pall.b', 1), await createTable('pall.c', 1)];
  const elsewhere = await createTable('pallx.kept', 1);
  expectOk(await inProcess('hold', 'pall.c', '--reason', 'audit'));
  for (const name of ['pall.a', 'pall.b', 'pall.c', 'pallx.kept']) await dropTable(name);
  const ids = (...tables: TableInfo[]) => tables.map((t) => t.id);

  const dry = await inProcess('purge', '--all', '--namespace', 'pall');
  expectOk(dry);
  const lines = dry.stdout.trimEnd().split('\n');
  expect(lines[0]).toBe('would purge 2 table(s):');
  expect(lines.at(-2)).toBe(`held, never purged (1): ${c.id}`);
  expect(lines.at(-1)).toBe('nothing was changed: run again with --yes to purge them');
  const listed = parseColumns(lines.slice(1, -2).join('\n')).rows;
  expect(listed.map((r) => [r.ID, r.STATE, r.NAMESPACE, r.NAME])).toEqual([
    [String(a.id), 'TRASHED', 'pall', 'a'],
    [String(b.id), 'TRASHED', 'pall', 'b'],
  ]);
  const dryJson = okJson<{ wouldPurge: TableInfo[]; held: TableInfo[] }>(
    await inProcess('purge', '--all', '--namespace', 'pall', '--json'),
  );
  expect({ wouldPurge: dryJson.wouldPurge.map((t) => t.id), held: dryJson.held.map((t) => t.id) }).toEqual({
    wouldPurge: ids(a, b),
    held: ids(c),
  });
  for (const t of [a, b, c, elsewhere]) expect((await describeJson(t.id)).state).toBe('TRASHED');

  expectFailure(await inProcess('purge', String(a.id), '--all', '--yes'), 2, 'Usage', /purge --all takes no table id/);
  expectFailure(await inProcess('purge', String(a.id), '--yes'), 2, 'Usage', /purge: give a table id, or --all/);
  expectFailure(await inProcess('purge', '--all', '--namespace', 'Bad!', '--yes'), 2, 'InvalidInput', /namespace/);

  const summary = okJson<PurgeAllSummary>(await inProcess('purge', '--all', '--namespace', 'pall', '--yes', '--json'));
  expect(summary).toEqual({ purged: ids(a, b), held: ids(c), skipped: [], failed: [] });
  expect([(await describeJson(a.id)).state, (await describeJson(b.id)).state]).toEqual(['PURGED', 'PURGED']);
  expect(await describeJson(c.id)).toMatchObject({ state: 'TRASHED', hold: { reason: 'audit', since: anyString() } });
  // Another namespace's trash is not touched.
  expect((await describeJson(elsewhere.id)).state).toBe('TRASHED');

  // Run again, in text: nothing left to purge but the held table.
  const again = await cli('purge', '--all', '--namespace', 'pall', '--yes');
  expect(seen(again)).toEqual({ args: again.args, code: 0, stdout: `purged 0\nheld 1: ${c.id}\nskipped 0\nfailed 0\n`, stderr: [] });
});
