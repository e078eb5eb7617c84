import { Harness } from './support/harness';
import { armedTimer } from './support/trash-runs';
import { runsOf } from './support/runs';
import { waitFor } from './support/wait';
import { TableFateError, WrongStateError } from '../domain/errors';
import { workflowIdFor } from '../domain/operations';

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.close();
});

const AREA_OF_STATE = { READY: 'live', TRASHED: 'trash', PURGED: null } as const;

test('a trash, an undelete and a purge racing on one READY table: the trash wins, and the table ends as the others answered', async () => {
  const tables = await Promise.all([1, 2, 3, 4].map((i) => h.client.create({ table: `racing.t${i}`, shards: 3 })));
  const outcomes = await Promise.all(
    tables.map((t) =>
      Promise.allSettled([
        h.client.trash({ table: `racing.${t.name}`, retentionSeconds: 3600 }),
        h.client.undelete({ table: t.id }),
        h.client.purge({ tableId: t.id }),
      ]),
    ),
  );
  for (const [k, [trash, undelete, purge]] of outcomes.entries()) {
    const t = tables[k]!;
    // The trash is the only one of the three a READY table allows, and nothing can take its table away first: it wins.
    expect({ table: t.name, trash: trash.status }).toEqual({ table: t.name, trash: 'fulfilled' });
    // Every refusal is a domain error the caller can act on, never a crash.
    for (const result of [undelete, purge]) if (result.status === 'rejected') expect(result.reason).toBeInstanceOf(TableFateError);
    // At most one of the other two follows it (a recalled table cannot be purged, a purged one cannot be recalled),
    // and the table ends where the answers say.
    expect([undelete.status, purge.status]).not.toEqual(['fulfilled', 'fulfilled']);
    const expected = undelete.status === 'fulfilled' ? 'READY' : purge.status === 'fulfilled' ? 'PURGED' : 'TRASHED';
    const final = await h.client.describe({ table: t.id });
    expect({ table: t.name, state: final.state }).toEqual({ table: t.name, state: expected });
    const area = AREA_OF_STATE[expected];
    expect(await h.shardAreas(t)).toEqual([area, area, area]);
  }
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('a second operation waits for the lock instead of failing, then runs', async () => {
  const table = await h.client.create({ table: 'racing.waits', shards: 2 });
  // The trash holds the lock for a few seconds while its shard moves fail and are retried.
  h.storage.faults.inject({ op: 'moveShard', tableId: table.id, kind: 'transient', times: 4 });
  const trashing = h.client.trash({ table: 'racing.waits', retentionSeconds: 3600 });
  await waitFor(
    () => h.catalog.getTable(table.id),
    (t) => t?.state === 'TRASHING',
    { what: 'the trash to begin' },
  );
  const purging = h.client.purge({ tableId: table.id });
  const [trashed, purged] = await Promise.all([trashing, purging]);
  expect(trashed.state).toBe('TRASHED');
  expect(purged.state).toBe('PURGED');
  expect(await h.shardAreas(table)).toEqual([null, null]);
});

// A drop's run at drop:<id> is joined by any drop of the table asked while it runs: its answer is every caller's.
test('a second drop of a table being dropped joins its run: both are answered the same TRASHED table, one drop run, one expiry', async () => {
  const table = await h.client.create({ table: 'racing.twice', shards: 2 });
  // The first drop holds the table a few seconds while its shard moves fail and are retried: the others come meanwhile.
  h.storage.faults.inject({ op: 'moveShard', tableId: table.id, kind: 'transient', times: 4 });
  const first = h.client.trash({ table: 'racing.twice', retentionSeconds: 3600 });
  await waitFor(
    () => h.catalog.getTable(table.id),
    (t) => t?.state === 'TRASHING',
    { what: 'the first drop to begin' },
  );
  const second = h.client.trash({ table: 'racing.twice', retentionSeconds: 3600 });
  // One that asks another retention joins the same run, whose retention holds: it is told so.
  const other = h.client.trash({ table: 'racing.twice', retentionSeconds: 7200 }).catch((err: unknown) => err);
  const [a, b] = await Promise.all([first, second]);
  expect(a).toMatchObject({ id: table.id, state: 'TRASHED' });
  expect(Date.parse(a.expireAt!) - Date.parse(a.droppedAt!)).toBe(3600_000);
  expect(b).toEqual(a);
  const refused = await other;
  expect(refused).toBeInstanceOf(WrongStateError);
  expect((refused as Error).message).toMatch(/trashed meanwhile by another request, with a retention of 3600 s/);

  const drops = await waitFor(
    () => runsOf(h.temporal, workflowIdFor.trash(table.id, h.catalog.id)),
    (runs) => runs.length > 0 && runs.every((r) => r.status !== 'RUNNING'),
    { what: 'the drop run listed closed' },
  );
  expect(drops.map((r) => r.status)).toEqual(['COMPLETED']);
  const timer = await armedTimer(h, table.id);
  expect(timer).toMatchObject({ droppedAt: Date.parse(a.droppedAt!), expireAt: a.expireAt, ended: null });
  expect(await h.shardAreas(table)).toEqual(['trash', 'trash']);
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('a create terminated while holding its lock is resumed by the next run of the same create', async () => {
  h.storage.faults.inject({ op: 'createShard', shard: 1, kind: 'transient' });
  const workflowId = workflowIdFor.create({ namespace: 'racing', name: 'killed' }, h.catalog.id);
  const first = h.client.create({ table: 'racing.killed', shards: 3 }).catch((err: unknown) => err);
  const stuck = await waitFor(
    () => h.catalog.findByName({ namespace: 'racing', name: 'killed' }),
    (t) => t?.state === 'CREATING',
    { what: 'the create to prepare' },
  );
  // The name's lock and the table's, both the create's (counted as its own: a lock of another test's is not it).
  await waitFor(
    () => h.catalog.listLocks(),
    (locks) => locks.filter((lock) => lock.workflowId === workflowId).length === 2,
    { what: 'the create to hold its locks' },
  );
  await h.temporal.workflow.getHandle(workflowId).terminate('test: a crash that runs no compensation');
  await first;
  expect((await h.catalog.listLocks()).map((l) => l.workflowId)).toEqual([workflowId, workflowId]);

  h.storage.faults.clear();
  const created = await h.client.create({ table: 'racing.killed', shards: 3 });
  expect(created).toMatchObject({ id: stuck!.id, state: 'READY', placement: stuck!.placement });
  expect(await h.shardAreas(created)).toEqual(['live', 'live', 'live']);
  expect(await h.catalog.listLocks()).toEqual([]);
});

test('every run carries the table search attributes: the visibility API finds a table by id', async () => {
  const table = await h.client.create({ table: 'racing.visible', shards: 1 });
  await h.client.trash({ table: 'racing.visible', retentionSeconds: 3600 });
  await h.client.undelete({ table: table.id });
  const runs = await waitFor(
    async () => {
      const found: Array<{ workflowId: string; op: unknown; name: unknown }> = [];
      for await (const wf of h.temporal.workflow.list({ query: `TableId = ${table.id}` })) {
        found.push({
          workflowId: wf.workflowId,
          op: wf.searchAttributes.TableOp?.[0],
          name: wf.searchAttributes.TableName?.[0],
        });
      }
      return found.sort((a, b) => a.workflowId.localeCompare(b.workflowId));
    },
    (found) => found.length === 4,
    { what: 'four runs of the table in visibility' },
  );
  // (The trash's expiry, a run of its own that the drop started, carries the table's attributes but no operation.)
  expect(runs).toEqual([
    { workflowId: `create:racing.visible@${h.catalog.id}`, op: 'create', name: 'visible' },
    { workflowId: `drop:${table.id}@${h.catalog.id}`, op: 'trash', name: 'visible' },
    { workflowId: `trash:${table.id}@${h.catalog.id}`, op: undefined, name: 'visible' },
    { workflowId: `undelete:${table.id}@${h.catalog.id}`, op: 'undelete', name: 'visible' },
  ]);
});
