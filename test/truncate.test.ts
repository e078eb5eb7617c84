import fs from 'node:fs';
import path from 'node:path';
import { Harness } from './support/harness';
import { InvalidInputError, TableBusyError, TableInTrashError, TableNotFoundError, WrongStateError } from '../domain/errors';
import { OPERATIONS } from '../domain/operations';
import type { TableInfo } from '../domain/table';

// `truncate` through the SDK on the real dev server, files driver: the table's rows become a trash entry of their own
// (a new id, under the table's name), and the table stays live, with its id, its shards empty.

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.close();
});

/** A shard's data file, where the files driver keeps its rows. */
const dataFile = (tableId: number, shard: number, node: string, area: 'live' | 'trash') =>
  path.join(h.home, 'storage', node, area, `t${tableId}-s${shard}.dat`);

/** Writes `rows` into each shard's data file, as a user of the table would: what a truncate must keep. */
function writeRows(table: TableInfo, rows: string): void {
  for (const { shard, node } of table.placement) fs.writeFileSync(dataFile(table.id, shard, node, 'live'), `${rows}:${shard}`);
}

const dataOf = (table: TableInfo, area: 'live' | 'trash') =>
  table.placement.map(({ shard, node }) => fs.readFileSync(dataFile(table.id, shard, node, area), 'utf8'));

test('the rows go to a trash entry of their own, the table stays live with its id and empty shards; the entry is recalled under a new name', async () => {
  const table = await h.client.create({ table: 'trunc.orders', shards: 2 });
  writeRows(table, 'before');

  const entry = await h.client.truncate({ table: 'trunc.orders', retentionSeconds: 3600 });
  expect(entry).toMatchObject({
    namespace: 'trunc',
    name: 'orders',
    state: 'TRASHED',
    truncatedFrom: table.id,
    placement: table.placement,
  });
  expect(entry.id).not.toBe(table.id);
  expect(Date.parse(entry.expireAt!) - Date.parse(entry.droppedAt!)).toBe(3600_000);

  // The table: the same id, name and placement, READY, its shards live and empty.
  const live = await h.client.describe({ table: 'trunc.orders' });
  expect(live).toMatchObject({ id: table.id, state: 'READY', placement: table.placement, createdAt: table.createdAt });
  expect(live.truncatedFrom).toBeUndefined();
  expect(dataOf(live, 'live')).toEqual(['', '']);
  // The rows: in the trash, as the entry's shards.
  expect(dataOf(entry, 'trash')).toEqual(['before:0', 'before:1']);
  expect(await h.client.describe({ table: entry.id })).toEqual(entry);
  expect(await h.catalog.listLocks()).toEqual([]);

  // Written to again, the table keeps its new rows when the old ones are recalled, under a name of their own.
  writeRows(live, 'after');
  const recalled = await h.client.undelete({ table: entry.id, newName: 'trunc.orders_before' });
  expect(recalled).toMatchObject({ id: entry.id, name: 'orders_before', state: 'READY', truncatedFrom: entry.truncatedFrom });
  expect(dataOf(recalled, 'live')).toEqual(['before:0', 'before:1']);
  expect(dataOf(live, 'live')).toEqual(['after:0', 'after:1']);

  // The run is the record's: its id, type and search attributes.
  const run = await h.temporal.workflow.getHandle(OPERATIONS.truncate.workflowId(table.id, h.catalog.id)).describe();
  expect({ type: run.type, op: run.searchAttributes.TableOp, id: run.searchAttributes.TableId }).toEqual({
    type: 'truncateTable',
    op: ['truncate'],
    id: [table.id],
  });
});

test('a truncated entry is purged like a dropped table, and a table truncated twice has two entries', async () => {
  const table = await h.client.create({ table: 'trunc.twice', shards: 1 });
  writeRows(table, 'first');
  const first = await h.client.truncate({ table: table.id });
  writeRows(table, 'second');
  const second = await h.client.truncate({ table: 'trunc.twice' });
  expect(second.id).not.toBe(first.id);
  expect(dataOf(first, 'trash')).toEqual(['first:0']);
  expect(dataOf(second, 'trash')).toEqual(['second:0']);
  const purged = await h.client.purge({ tableId: second.id });
  expect(purged).toMatchObject({ id: second.id, state: 'PURGED' });
  expect(fs.existsSync(dataFile(second.id, 0, second.placement[0]!.node, 'trash'))).toBe(false);
  expect(await h.client.describe({ table: first.id })).toMatchObject({ state: 'TRASHED', truncatedFrom: table.id });
  expect(await h.client.describe({ table: 'trunc.twice' })).toMatchObject({ id: table.id, state: 'READY' });
});

test('refused: a table in the trash, none of that name or id, one that another operation holds', async () => {
  const table = await h.client.create({ table: 'trunc.gone', shards: 1 });
  await h.client.trash({ table: 'trunc.gone' });
  await expect(h.client.truncate({ table: 'trunc.gone' })).rejects.toBeInstanceOf(TableInTrashError);
  await expect(h.client.truncate({ table: table.id })).rejects.toThrow(/TRASHED; only a READY table can be truncated/);
  await expect(h.client.truncate({ table: 'trunc.none' })).rejects.toBeInstanceOf(TableNotFoundError);
  await expect(h.client.truncate({ table: 999_999_999 })).rejects.toBeInstanceOf(TableNotFoundError);
  await expect(h.client.truncate({ table: 'trunc.x', retentionSeconds: 0 })).rejects.toThrow(/retentionSeconds/);
});

test('a lease held: the truncate takes no new one and waits for it; past its drain deadline it is TableBusy, the table READY with its rows', async () => {
  const table = await h.client.create({ table: 'trunc.leased', shards: 1 });
  writeRows(table, 'kept');
  const lease = await h.client.acquireLease(table.id, { ttlSeconds: 300 });
  await expect(h.client.truncate({ table: table.id, drainTimeoutSeconds: 1 })).rejects.toBeInstanceOf(TableBusyError);
  expect(await h.client.describe({ table: table.id })).toMatchObject({ state: 'READY' });
  expect(dataOf(table, 'live')).toEqual(['kept:0']);
  expect(await h.catalog.listLocks()).toEqual([]);

  // Waiting, it is TRUNCATING: no new lease is taken; the release lets it go on.
  const truncating = h.client.truncate({ table: table.id });
  await waitFor(async () => (await h.client.describe({ table: table.id })).state === 'TRUNCATING');
  await expect(h.client.acquireLease(table.id)).rejects.toThrow(/a truncate waits for its leases to end/);
  await expect(h.client.rename({ table: table.id, newName: 'trunc.other' })).rejects.toBeInstanceOf(WrongStateError);
  await h.client.releaseLease(lease.id);
  const entry = await truncating;
  expect(dataOf(entry, 'trash')).toEqual(['kept:0']);
  expect(dataOf(table, 'live')).toEqual(['']);
});

test('the trash off where the table lives: the entry is purged in the same run, the table stays live and empty', async () => {
  await h.client.setSetting({ key: 'trash.enabled', value: 'false', namespace: 'truncoff' });
  const table = await h.client.create({ table: 'truncoff.t', shards: 1 });
  writeRows(table, 'gone');
  const entry = await h.client.truncate({ table: 'truncoff.t' });
  expect(entry).toMatchObject({ state: 'PURGED', truncatedFrom: table.id });
  expect(fs.existsSync(dataFile(entry.id, 0, entry.placement[0]!.node, 'trash'))).toBe(false);
  expect(await h.client.describe({ table: table.id })).toMatchObject({ state: 'READY' });
  expect(dataOf(table, 'live')).toEqual(['']);
});

async function waitFor(condition: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

test("one shard's truncate refused: those made are taken back, the table READY with every row, no entry", async () => {
  const table = await h.client.create({ table: 'trunc.refused', shards: 3 });
  writeRows(table, 'kept');
  h.storage.faults.inject({ op: 'truncateShard', tableId: table.id, shard: 2, kind: 'permanent' });
  try {
    await expect(h.client.truncate({ table: table.id })).rejects.toThrow(/injected permanent fault on truncateShard/);
  } finally {
    h.storage.faults.clear();
  }
  expect(await h.client.describe({ table: table.id })).toMatchObject({ state: 'READY' });
  expect((await h.catalog.getTable(table.id))?.truncateInto).toBeUndefined();
  expect(dataOf(table, 'live')).toEqual(['kept:0', 'kept:1', 'kept:2']);
  expect(await h.shardAreas(table)).toEqual(['live', 'live', 'live']);
  expect((await h.client.list({ includeTrashed: true })).filter((t) => t.truncatedFrom === table.id)).toEqual([]);
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('recalled in place: the rows come back under the name, the table with the rows written since goes to the trash, recallable', async () => {
  const table = await h.client.create({ table: 'trunc.inplace', shards: 2 });
  writeRows(table, 'before');
  const entry = await h.client.truncate({ table: 'trunc.inplace' });
  writeRows(table, 'since');

  const back = await h.client.undelete({ table: entry.id, inPlace: true });
  expect(back).toMatchObject({ id: entry.id, namespace: 'trunc', name: 'inplace', state: 'READY' });
  expect(back.notes?.join(' ')).toMatch(
    new RegExp(`table ${table.id}, with the rows written to trunc.inplace since its truncate, is in the trash`),
  );
  expect(dataOf(back, 'live')).toEqual(['before:0', 'before:1']);
  expect(await h.client.describe({ table: 'trunc.inplace' })).toMatchObject({ id: entry.id, state: 'READY' });
  const since = await h.client.describe({ table: table.id });
  expect(since).toMatchObject({ state: 'TRASHED', name: 'inplace' });
  expect(dataOf(since, 'trash')).toEqual(['since:0', 'since:1']);
  expect(await h.catalog.listLocks()).toEqual([]);
  // The rows written since come back too, under a name of their own.
  const recalled = await h.client.undelete({ table: table.id, newName: 'trunc.inplace_since' });
  expect(dataOf(recalled, 'live')).toEqual(['since:0', 'since:1']);
  // Its run: the recall's, with the drop's and the recall's runs of their own.
  const run = await h.temporal.workflow.getHandle(OPERATIONS.recallInPlace.workflowId(entry.id, h.catalog.id)).describe();
  expect({ type: run.type, op: run.searchAttributes.TableOp }).toEqual({ type: 'recallInPlace', op: ['recallInPlace'] });
});

test('refused in place: a table no truncate made, an entry whose table left its name, a new name beside it; nothing changes', async () => {
  const dropped = await h.client.create({ table: 'trunc.plain', shards: 1 });
  await h.client.trash({ table: 'trunc.plain' });
  await expect(h.client.undelete({ table: dropped.id, inPlace: true })).rejects.toThrow(/no truncate's entry/);
  const table = await h.client.create({ table: 'trunc.moved', shards: 1 });
  const entry = await h.client.truncate({ table: table.id });
  await expect(h.client.undelete({ table: entry.id, inPlace: true, newName: 'trunc.x' })).rejects.toBeInstanceOf(InvalidInputError);
  await h.client.rename({ table: table.id, newName: 'trunc.moved_on' });
  await expect(h.client.undelete({ table: entry.id, inPlace: true })).rejects.toThrow(/is READY as trunc.moved_on/);
  expect(await h.client.describe({ table: entry.id })).toMatchObject({ state: 'TRASHED' });
  expect(await h.client.describe({ table: table.id })).toMatchObject({ state: 'READY', name: 'moved_on' });
});

test('in place, the entry refused on its way back: the table is recalled under its name with the rows written since', async () => {
  const table = await h.client.create({ table: 'trunc.undone', shards: 1 });
  writeRows(table, 'before');
  const entry = await h.client.truncate({ table: table.id });
  writeRows(table, 'since');
  h.storage.faults.inject({ op: 'moveShard', tableId: entry.id, kind: 'permanent', times: 1 });
  try {
    await expect(h.client.undelete({ table: entry.id, inPlace: true })).rejects.toThrow(/injected permanent fault on moveShard/);
  } finally {
    h.storage.faults.clear();
  }
  expect(await h.client.describe({ table: 'trunc.undone' })).toMatchObject({ id: table.id, state: 'READY' });
  expect(dataOf(table, 'live')).toEqual(['since:0']);
  expect(await h.client.describe({ table: entry.id })).toMatchObject({ state: 'TRASHED' });
  expect(dataOf(entry, 'trash')).toEqual(['before:0']);
  expect(await h.catalog.listLocks()).toEqual([]);
});
