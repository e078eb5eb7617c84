import { workflowIdFor } from '../domain/operations';
import { Harness } from './support/harness';
import { runsOf } from './support/runs';
import { waitFor } from './support/wait';
import { WorkflowNotFoundError } from '@temporalio/client';
import { applicationFailureOf } from '../client/errors';
import type { trashExpiry } from '../workflows';
import Database from 'better-sqlite3';
import { catalogPath } from '../domain/deployment';
import { armedTimer } from './support/trash-runs';

let h: Harness;
beforeAll(async () => {
  h = await Harness.start();
});
afterAll(async () => {
  await h.close();
});

test('when an undo fails too, the table stays TRASHING and the next trash resumes it', async () => {
  const table = await h.client.create({ table: 'recover.trash', shards: 2 });
  // Shard 1 can move neither way: the move fails, and so does its undo.
  h.storage.faults.inject({ op: 'moveShard', tableId: table.id, shard: 1, kind: 'permanent' });
  const failure = await h.client.trash({ table: 'recover.trash', retentionSeconds: 3600 }).catch((err: unknown) => err);
  expect(applicationFailureOf(failure)?.type).toBe('StorageFault');
  // Not READY: shard 0 may be in the trash; the catalog does not claim what the files are not.
  expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHING');
  expect(await h.catalog.listLocks()).toEqual([]);

  h.storage.faults.clear();
  const trashed = await h.client.trash({ table: 'recover.trash', retentionSeconds: 3600 });
  expect(trashed.state).toBe('TRASHED');
  expect(await h.shardAreas(table)).toEqual(['trash', 'trash']);
});

test('a table left TRASHING with no drop time (by an older worker) is resumed: its commit stamps one and starts its expiry', async () => {
  const table = await h.client.create({ table: 'recover.unstamped', shards: 2 });
  h.storage.faults.inject({ op: 'moveShard', tableId: table.id, shard: 1, kind: 'permanent' });
  await h.client.trash({ table: 'recover.unstamped', retentionSeconds: 3600 }).catch(() => undefined);
  expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHING');
  // As a worker of the release before left it: TRASHING, no drop time on the row, no expiry run started.
  const expiry = h.temporal.workflow.getHandle<typeof trashExpiry>(workflowIdFor.expiry(table.id, h.catalog.id));
  await expiry.terminate('test: an older worker started none');
  const db = new Database(catalogPath(h.home));
  try {
    db.prepare('UPDATE tables SET dropped_at = NULL WHERE id = ?').run(table.id);
  } finally {
    db.close();
  }
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'TRASHING', droppedAt: null });

  h.storage.faults.clear();
  const before = Date.now();
  const trashed = await h.client.trash({ table: 'recover.unstamped', retentionSeconds: 3600 });
  expect(trashed.state).toBe('TRASHED');
  expect(Date.parse(trashed.droppedAt!)).toBeGreaterThanOrEqual(before - 1000);
  const { status, memo } = await expiry.describe();
  expect({ status: status.name, memo }).toEqual({ status: 'RUNNING', memo: { droppedAt: Date.parse(trashed.droppedAt!) } });
  expect(await armedTimer(h, table.id)).toEqual({ droppedAt: Date.parse(trashed.droppedAt!), expireAt: trashed.expireAt, ended: null });
});

test('a purge on expiry that fails is tried again until the table is purged', async () => {
  const table = await h.client.create({ table: 'recover.expiry', shards: 2 });
  h.storage.faults.inject({ op: 'markGarbage', tableId: table.id, shard: 0, kind: 'permanent', times: 1 });
  await h.client.trash({ table: 'recover.expiry', retentionSeconds: 1 });
  // The expiry run's first purge fails and is compensated back to TRASHED; it tries again 10 s later.
  await waitFor(
    () => Promise.resolve(h.storage.faults.pending()),
    (n) => n === 0,
    { what: 'the first expiry purge to fail' },
  );
  await waitFor(
    async () => ({ state: (await h.catalog.getTable(table.id))?.state, locks: await h.catalog.listLocks() }),
    (now) => now.state === 'TRASHED' && now.locks.length === 0,
    { what: 'the failed purge to be compensated' },
  );
  expect(await h.shardAreas(table)).toEqual(['trash', 'trash']);

  await waitFor(
    () => h.catalog.getTable(table.id),
    (t) => t?.state === 'PURGED',
    { what: 'the retried purge', timeoutMs: 40_000 },
  );
  expect(await h.shardAreas(table)).toEqual([null, null]);
  const expiryRun = await h.temporal.workflow.getHandle<typeof trashExpiry>(workflowIdFor.expiry(table.id, h.catalog.id)).result();
  expect(expiryRun.ended).toBe('expired');
  // The expiry run purged the table itself, both times: no purge run was started.
  await expect(h.temporal.workflow.getHandle(workflowIdFor.purge(table.id, h.catalog.id)).describe()).rejects.toThrow(
    WorkflowNotFoundError,
  );
});

test('a purge that resumes a table left PURGING only goes forward: a failure never brings shards back from garbage', async () => {
  const table = await h.client.create({ table: 'recover.purge', shards: 2 });
  await h.client.trash({ table: 'recover.purge', retentionSeconds: 3600 });
  // The first purge deletes shard 0, then fails on shard 1: past its point of no return, it stays PURGING.
  h.storage.faults.inject({ op: 'deleteGarbage', tableId: table.id, shard: 1, kind: 'permanent', times: 1 });
  await expect(h.client.purge({ tableId: table.id })).rejects.toMatchObject({ type: 'StorageFault' });
  expect((await h.catalog.getTable(table.id))?.state).toBe('PURGING');
  expect(await h.shardAreas(table)).toEqual([null, 'garbage']);

  // The next purge fails too, earlier in its steps: it must not undo anything (no unmarking, no TRASHED).
  h.storage.faults.inject({ op: 'markGarbage', tableId: table.id, shard: 1, kind: 'permanent', times: 1 });
  await expect(h.client.purge({ tableId: table.id })).rejects.toMatchObject({ type: 'StorageFault' });
  expect((await h.catalog.getTable(table.id))?.state).toBe('PURGING');
  expect(await h.shardAreas(table)).toEqual([null, 'garbage']);

  const purged = await h.client.purge({ tableId: table.id });
  expect(purged.state).toBe('PURGED');
  expect(await h.shardAreas(table)).toEqual([null, null]);
  expect(await h.catalog.listLocks()).toEqual([]);
});

// A purge deletes nothing before every shard is marked garbage, however many calls the marks take (16 shards a call): a
// mark that fails on the last shard is taken back whole. (v14 deleted each call's shards after its own marks, so a table
// of more than 16 shards lost its first 16 to a failure that was to leave it in the trash.)
test('a purge whose marks fail on the last of 20 shards leaves every shard in the trash, the table TRASHED', async () => {
  const table = await h.client.create({ table: 'recover.wide', shards: 20 });
  await h.client.trash({ table: 'recover.wide', retentionSeconds: 3600 });
  h.storage.faults.inject({ op: 'markGarbage', tableId: table.id, shard: 19, kind: 'permanent', times: 1 });
  await expect(h.client.purge({ tableId: table.id })).rejects.toMatchObject({ type: 'StorageFault' });
  expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHED');
  expect(await h.shardAreas(table)).toEqual(Array.from({ length: 20 }, () => 'trash'));
  expect(await h.catalog.listLocks()).toEqual([]);

  const purged = await h.client.purge({ tableId: table.id });
  expect(purged.state).toBe('PURGED');
  expect(await h.shardAreas(table)).toEqual(Array.from({ length: 20 }, () => null));
});

// Since v18 the lock attempt of an undelete and of a purge makes their first shard call too: a failure there is the
// step's, which takes back what the call made, as when the step made the call itself.
test('a purge whose marks fail in the call that took its lock leaves every shard in the trash, the table TRASHED', async () => {
  const table = await h.client.create({ table: 'recover.narrow', shards: 4 });
  await h.client.trash({ table: 'recover.narrow', retentionSeconds: 3600 });
  h.storage.faults.inject({ op: 'markGarbage', tableId: table.id, shard: 2, kind: 'permanent', times: 1 });
  await expect(h.client.purge({ tableId: table.id })).rejects.toMatchObject({ type: 'StorageFault' });
  expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHED');
  expect(await h.shardAreas(table)).toEqual(['trash', 'trash', 'trash', 'trash']);
  expect(await h.catalog.listLocks()).toEqual([]);

  const purged = await h.client.purge({ tableId: table.id });
  expect(purged.state).toBe('PURGED');
  expect(await h.shardAreas(table)).toEqual([null, null, null, null]);
});

test('an undelete whose move back fails in the call that took its lock is taken back: TRASHED, under its trashed name', async () => {
  const table = await h.client.create({ table: 'recover.back', shards: 4 });
  await h.client.trash({ table: 'recover.back', retentionSeconds: 3600 });
  h.storage.faults.inject({ op: 'moveShard', tableId: table.id, shard: 3, kind: 'permanent', times: 1 });
  await expect(h.client.undelete({ table: table.id, newName: 'recover.back2' })).rejects.toMatchObject({ type: 'StorageFault' });
  const after = await h.catalog.getTable(table.id);
  expect(after).toMatchObject({ state: 'TRASHED', name: 'back' });
  expect(await h.shardAreas(table)).toEqual(['trash', 'trash', 'trash', 'trash']);
  expect(await h.catalog.listLocks()).toEqual([]);

  const recalled = await h.client.undelete({ table: table.id, newName: 'recover.back2' });
  expect(recalled).toMatchObject({ state: 'READY', name: 'back2' });
  expect(await h.shardAreas(table)).toEqual(['live', 'live', 'live', 'live']);
});

describe('a trash whose purge at expiry keeps failing', () => {
  let paced: Harness;
  beforeAll(async () => {
    // The default pace's code at a pace a test can watch: 100 ms growing to 300 ms, three tries a run.
    paced = await Harness.start({ expiryRetry: { firstMs: 100, maxMs: 300, attemptsPerRun: 3 } });
  });
  afterAll(async () => {
    await paced.close();
  });

  test('backs off on timers and continues as new, re-armed on the same drop time: many tries, every run small, then it purges', async () => {
    const table = await paced.client.create({ table: 'recover.stubborn', shards: 2 });
    const failures = 10;
    paced.storage.faults.inject({ op: 'markGarbage', tableId: table.id, shard: 0, kind: 'permanent', times: failures });
    const trashed = await paced.client.trash({ table: 'recover.stubborn', retentionSeconds: 1 });
    const workflowId = workflowIdFor.expiry(table.id, paced.catalog.id);
    await waitFor(
      () => runsOf(paced.temporal, workflowId),
      (runs) => runs.length >= 3,
      { what: 'the trash expiry to continue as new twice' },
    );
    // Between tries the failed purge is compensated: still in the same trash, nothing lost.
    expect(await paced.catalog.getTable(table.id)).toMatchObject({ droppedAt: Date.parse(trashed.droppedAt!) });

    const purged = await waitFor(
      () => paced.catalog.getTable(table.id),
      (t) => t?.state === 'PURGED',
      { what: 'the purge once the faults run out' },
    );
    expect(paced.storage.faults.pending()).toBe(0);
    expect(purged!.droppedAt).toBe(Date.parse(trashed.droppedAt!));
    expect(await paced.shardAreas(table)).toEqual([null, null]);
    // The run closes just after its last change: wait for it, then for visibility to list it closed.
    expect(await paced.temporal.workflow.getHandle(workflowId).result()).toMatchObject({ ended: 'expired' });
    const runs = await waitFor(
      () => runsOf(paced.temporal, workflowId),
      (found) => found.length >= 4 && found.every((r) => r.status !== 'RUNNING'),
      { what: 'every run of the trash to be listed closed' },
    );
    // Ten failed tries and the one that purged, three a run: four runs, the first three continued as new.
    expect(runs.map((r) => r.status)).toEqual(['CONTINUED_AS_NEW', 'CONTINUED_AS_NEW', 'CONTINUED_AS_NEW', 'COMPLETED']);
    // However many tries in all, no run's history outgrows its three tries (since v9 a try costs some 35 events: a
    // round of node activities per step, three events each, and the workflow tasks between them), and no later run
    // asks for more than the first re-armed one. (Commands, not events: how many workflow tasks carry the same commands
    // depends on the machine's load.)
    for (const run of runs) expect(run.events).toBeLessThan(140);
    for (const run of runs.slice(2)) expect(run.commands).toBeLessThanOrEqual(runs[1]!.commands);
    expect(await paced.catalog.listLocks()).toEqual([]);
  });
});
