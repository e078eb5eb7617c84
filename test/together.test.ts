import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { Harness } from './support/harness';
import { shardPaths } from '../storage/shard-files';
import { workflowIdFor } from '../domain/operations';

/*
 * Several tables dropped as one with the files driver: every shard of each goes to the trash, or none does; one recall
 * brings back every one still in the trash from that drop, bytes for bytes; one of them can come back alone; with the
 * trash off, every one is purged (the command line's `drop a b`: cli.test.ts).
 */

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.close();
});

test('three tables of several shards go into the trash as one, and come back together, every byte as it was', async () => {
  const tables = await Promise.all(['a', 'b', 'c'].map((name, i) => h.client.create({ table: `many.${name}`, shards: i + 2 })));
  for (const table of tables)
    for (const p of table.placement) {
      const [dat] = shardPaths(h.storage.root, { tableId: table.id, ...p }, 'live');
      await fs.promises.appendFile(dat!, randomBytes(1024 + p.shard));
    }
  const before = await Promise.all(tables.map((t) => h.shardReports(t)));

  const trashed = await h.client.trash({ table: 'many.c', together: ['many.a', 'many.b'], retentionSeconds: 600 });
  // (The answer is of the table named first; the others by id, in order.)
  const others = [tables[0]!.id, tables[1]!.id].sort((x, y) => x - y);
  expect(trashed).toMatchObject({ id: tables[2]!.id, state: 'TRASHED', droppedWith: others });
  for (const table of tables) {
    expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHED');
    for (const report of await h.shardReports(table)) expect(report.area).toBe('trash');
  }
  const back = await h.client.undelete({ table: 'many.a' });
  expect(back).toMatchObject({ id: tables[0]!.id, state: 'READY' });
  const after = await Promise.all(tables.map((t) => h.shardReports(t)));
  expect(after).toEqual(before);
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('one comes back alone; the others stay one entry of the trash, and come back together later', async () => {
  const [a, b, c] = await Promise.all(['a', 'b', 'c'].map((name) => h.client.create({ table: `alone.${name}` })));
  await h.client.trash({ table: 'alone.a', together: ['alone.b', 'alone.c'], retentionSeconds: 600 });
  expect(await h.client.undelete({ table: b!.id, alone: true })).toMatchObject({ state: 'READY', name: 'b' });
  expect((await h.catalog.getTable(a!.id))?.state).toBe('TRASHED');
  expect((await h.catalog.getTable(c!.id))?.state).toBe('TRASHED');
  await h.client.undelete({ table: c!.id });
  expect((await h.catalog.getTable(a!.id))?.state).toBe('READY');
  expect((await h.catalog.getTable(c!.id))?.state).toBe('READY');
});

test('a table of them in the trash already refuses the drop of all before anything starts', async () => {
  const [a, b] = await Promise.all(['a', 'b'].map((name) => h.client.create({ table: `half.${name}` })));
  await h.client.trash({ table: 'half.b', retentionSeconds: 600 });
  // b is in the trash already: refused before anything starts.
  await expect(h.client.trash({ table: 'half.a', together: ['half.b'] })).rejects.toMatchObject({ type: 'TableInTrash' });
  expect((await h.catalog.getTable(a!.id))?.state).toBe('READY');
  expect((await h.catalog.getTable(b!.id))?.state).toBe('TRASHED');
});

test('with the trash off where they are dropped, every one of them is purged', async () => {
  await h.client.setSetting({ key: 'trash.enabled', value: 'false', namespace: 'offmany' });
  try {
    const tables = await Promise.all(['a', 'b'].map((name) => h.client.create({ table: `offmany.${name}` })));
    expect(await h.client.trash({ table: 'offmany.a', together: ['offmany.b'] })).toMatchObject({ state: 'PURGED' });
    for (const table of tables) {
      expect((await h.catalog.getTable(table.id))?.state).toBe('PURGED');
      for (const report of await h.shardReports(table)) expect(report.area).toBeNull();
    }
  } finally {
    await h.client.unsetSetting({ key: 'trash.enabled', namespace: 'offmany' });
  }
});

test('a whole namespace as one: every table of it into the trash, and back into another namespace under their names', async () => {
  const tables = await Promise.all(['a', 'b'].map((name) => h.client.create({ table: `wholens.${name}`, shards: 2 })));
  const kept = await h.client.create({ table: 'otherns.a' });
  const trashed = await h.client.trash({ namespace: 'wholens', retentionSeconds: 600 });
  // (The answer of a namespace's drop is of its first table by id, with the others.)
  const [first, second] = tables.map((t) => t.id).sort((x, y) => x - y);
  expect(trashed).toMatchObject({ id: first, state: 'TRASHED', droppedWith: [second] });
  expect((await h.catalog.getTable(kept.id))?.state).toBe('READY');
  const back = await h.client.undelete({ table: tables[1]!.id, newNamespace: 'wholens_old' });
  expect(back).toMatchObject({ namespace: 'wholens_old', name: 'b', state: 'READY' });
  expect(await h.catalog.getTable(tables[0]!.id)).toMatchObject({ namespace: 'wholens_old', name: 'a', state: 'READY' });
  for (const table of tables) for (const report of await h.shardReports(table)) expect(report.area).toBe('live');
  await expect(h.client.trash({ namespace: 'wholens' })).rejects.toMatchObject({ type: 'TableNotFound' });
  await expect(h.client.trash({ namespace: 'wholens_old', table: 'wholens_old.a' })).rejects.toMatchObject({ type: 'InvalidInput' });
});

test('a drop of several terminated half way (leases held it): the reconciler resumes it as one, and every table goes', async () => {
  const tables = [];
  for (const name of ['a', 'b', 'c']) tables.push(await h.client.create({ table: `cut.${name}` }));
  // A lease on one of them keeps the drop DRAINING, every table stopped and naming the others.
  const lease = await h.client.acquireLease(tables[1]!.id, { ttlSeconds: 300, holder: 'test' });
  const dropping = h.client.trash({ table: 'cut.a', together: ['cut.b', 'cut.c'], retentionSeconds: 600 });
  for (;;) {
    if ((await h.catalog.getTable(tables[1]!.id))?.state === 'DRAINING') break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await h.temporal.workflow.getHandle(workflowIdFor.trash(tables[0]!.id, h.catalog.id)).terminate('operator slip');
  await expect(dropping).rejects.toThrow();
  await h.client.releaseLease(lease.id);
  for (const table of tables)
    expect((await h.catalog.getTable(table.id))?.droppedWith).toEqual(tables.map((t) => t.id).filter((id) => id !== table.id));

  const stuck = (await h.reconcile('report')).findings.filter((f) => f.kind === 'stuck');
  expect(stuck.map((f) => f.table.id).sort()).toEqual(tables.map((t) => t.id).sort());
  await h.reconcile();
  await h.temporal.workflow
    .getHandle(workflowIdFor.trash(tables[0]!.id, h.catalog.id))
    .result()
    .catch((err: unknown) => {
      throw new Error(`the resumed drop failed: ${String((err as { cause?: unknown }).cause)}`);
    });
  for (const table of tables) expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'TRASHED' });
  for (const table of tables) for (const report of await h.shardReports(table)) expect(report.area).toBe('trash');
});

test('a table trashed by another drop while this one waited for it: refused, and the others are as they were', async () => {
  const a = await h.client.create({ table: 'raced.a' });
  const b = await h.client.create({ table: 'raced.b' });
  // b's own drop waits for a lease on it, holding b's lock; the drop of both waits behind it for that lock.
  const lease = await h.client.acquireLease(b.id, { ttlSeconds: 300, holder: 'test' });
  const alone = h.client.trash({ table: 'raced.b', retentionSeconds: 600 });
  for (;;) {
    if ((await h.catalog.getTable(b.id))?.state === 'DRAINING') break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const both = h.client.trash({ table: 'raced.a', together: ['raced.b'], retentionSeconds: 600 });
  for (;;) {
    const locks = await h.catalog.listLocks();
    if (locks.some((l) => l.resource === `table:${a.id}` && l.workflowId.startsWith(`drop:${a.id}`))) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await h.client.releaseLease(lease.id);
  expect(await alone).toMatchObject({ state: 'TRASHED' });
  await expect(both).rejects.toMatchObject({ type: 'WrongState' });
  expect(await h.catalog.getTable(a.id)).toMatchObject({ state: 'READY' });
  expect(await h.catalog.getTable(b.id)).toMatchObject({ state: 'TRASHED' });
  expect((await h.catalog.getTable(a.id))?.droppedWith).toBeUndefined();
  for (const report of await h.shardReports(a)) expect(report.area).toBe('live');
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('a recall of the whole unit read before one of its tables left the trash: that run recalls nothing, and the rest come back', async () => {
  const tables = await Promise.all(['a', 'b', 'c'].map((name) => h.client.create({ table: `leaving.${name}` })));
  const [a, b, c] = tables as [(typeof tables)[0], (typeof tables)[0], (typeof tables)[0]];
  await h.client.trash({ table: 'leaving.a', together: ['leaving.b', 'leaving.c'], retentionSeconds: 600 });
  // Planned (b among the tables that come back), then b purged alone before the run takes the locks.
  const planned = await h.client.planCall('undelete', { table: a.id });
  await h.client.purge({ tableId: b.id });
  // A repeatable execute (a contract call's) hears the refusal, and nothing came back.
  const plan = (planned as { plan: unknown }).plan;
  await expect(h.client.executeCall('undelete', plan, { requestId: 'leaving-1' })).rejects.toMatchObject({
    type: 'WrongState',
    message: expect.stringMatching(
      new RegExp(`^table ${b.id}, dropped with table ${a.id} as one, was purged meanwhile; nothing was recalled`),
    ) as unknown,
  });
  for (const table of [a, c]) expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'TRASHED' });
  expect(await h.catalog.listLocks()).toEqual([]);
  // The SDK's call asks again, for those still in the trash: a and c come back, together.
  expect(await h.client.executeCall('undelete', plan, {})).toMatchObject({ id: a.id, state: 'READY' });
  expect(await h.catalog.getTable(c.id)).toMatchObject({ state: 'READY', name: 'c' });
  expect(await h.catalog.getTable(b.id)).toMatchObject({ state: 'PURGED' });
  for (const table of [a, c]) for (const report of await h.shardReports(table)) expect(report.area).toBe('live');
});
