import { Harness, workflowBundleFile } from './support/harness';
import { armedTimer } from './support/trash-runs';
import { startCrashingWorker } from './support/crashing-worker';
import { workflowIdFor } from '../domain/operations';
import type { trashExpiry, trashTable } from '../workflows';
import { toTableInfo } from '../domain/table';
import { OperationFailedError } from '../domain/errors';
import { untilPast, waitFor } from './support/wait';

// A worker killed right after a local activity did its work, before the workflow task that ran it completed:
// the work happened, the history does not know it, and the next worker runs the task again. These tests put
// the kill at the points where that used to corrupt a table (a commit and the lock release in one lost task).
// The next worker gets the lost task once it has timed out: a 3 s workflow task timeout instead of the server's
// 10 s makes each test that much shorter, on the same path.
const LOST_TASK_TIMEOUT_MS = 3_000;

let h: Harness;
let bundleFile: string;
beforeAll(async () => {
  h = await Harness.start({ startWorker: false, workflowTaskTimeoutMs: LOST_TASK_TIMEOUT_MS });
  bundleFile = await workflowBundleFile();
});
afterAll(async () => {
  await h.close();
});

const crashingWorker = (activity: string, extra: Readonly<NodeJS.ProcessEnv> = {}) =>
  startCrashingWorker({ on: h, bundleFile, activity, env: extra });

// Every operation's steps run in calls of the executor's local activity (runStepsHere), each journaling its parts. The
// last change releases the run's locks in the same call (a create's second call commits, a trash's second commits): the
// kill right after that call is the kill after the release.
const afterCall = (n: number) => ['runStepsHere', { CRASH_ON_CALL: String(n) }] as const;

test('a create whose worker dies after it committed and released its locks in one lost task ends READY with its files', async () => {
  const worker = await crashingWorker(...afterCall(2));
  const created = h.client.create({ table: 'crash.create', shards: 3 });
  expect(await worker.exited).toBe('SIGKILL');
  // The catalog already says READY and the locks are gone; the history knows neither.
  const table = await h.catalog.findByName({ namespace: 'crash', name: 'create' });
  expect(table?.state).toBe('READY');
  expect(await h.catalog.listLocks()).toEqual([]);

  await h.startWorker();
  const answer = await created;
  expect(answer).toMatchObject({ id: table!.id, state: 'READY' });
  // The workflow itself succeeded (the SDK would also answer a create whose table exists READY).
  const run = h.temporal.workflow.getHandle(workflowIdFor.create({ namespace: 'crash', name: 'create' }, h.catalog.id));
  expect(await run.result()).toMatchObject({ id: table!.id, state: 'READY' });
  expect(await h.shardAreas(answer)).toEqual(['live', 'live', 'live']);
  expect((await h.catalog.getTable(answer.id))?.state).toBe('READY');
  expect(await h.catalog.listLocks()).toEqual([]);
  await h.stopWorker();
});

// A create's prepare and its shards ride in its first call: the repeat makes none again.
test('a create whose worker dies after its prepare made the first shards in one lost task ends READY, its shards made once', async () => {
  const worker = await crashingWorker(...afterCall(1));
  const created = h.client.create({ table: 'crash.prepared', shards: 3 });
  expect(await worker.exited).toBe('SIGKILL');
  const table = await h.catalog.findByName({ namespace: 'crash', name: 'prepared' });
  expect(table?.state).toBe('CREATING');
  expect(await h.shardAreas(toTableInfo(table!))).toEqual(['live', 'live', 'live']);

  await h.startWorker();
  expect(await created).toMatchObject({ id: table!.id, state: 'READY' });
  expect(await h.shardAreas(toTableInfo(table!))).toEqual(['live', 'live', 'live']);
  expect(await h.catalog.listLocks()).toEqual([]);
  await h.stopWorker();
});

test('a create cancelled while its first task, whose call made the shards, is lost: the next worker takes the shards back', async () => {
  const worker = await crashingWorker(...afterCall(1));
  const created = h.client.create({ table: 'crash.cancelled', shards: 3 }).catch((err: unknown) => err);
  expect(await worker.exited).toBe('SIGKILL');
  const table = await h.catalog.findByName({ namespace: 'crash', name: 'cancelled' });
  expect(table?.state).toBe('CREATING');
  await h.temporal.workflow.getHandle(workflowIdFor.create({ namespace: 'crash', name: 'cancelled' }, h.catalog.id)).cancel();

  await h.startWorker();
  // The cancel is taken once the first call is made again (its journal answers it): the prepare and the shards taken back.
  expect(await created).toBeInstanceOf(OperationFailedError);
  expect(await created).toMatchObject({ type: 'WorkflowCancelled' });
  expect(await h.catalog.getTable(table!.id)).toMatchObject({ state: 'CREATE_FAILED' });
  expect(await h.shardAreas(toTableInfo(table!))).toEqual([null, null, null]);
  expect(await h.catalog.listLocks()).toEqual([]);
  await h.stopWorker();
});

// A purge of a few shards is one call: lock, check, PURGING, marks, deletes, PURGED, the locks released and the trash
// expiry told. Its lost task's repeat finds every part journaled.
test('a purge whose worker dies after its one call purged the table in a lost task ends PURGED, its expiry run ended', async () => {
  await h.startWorker();
  const table = await h.client.create({ table: 'crash.purge', shards: 2 });
  await h.client.trash({ table: 'crash.purge', retentionSeconds: 3600 });
  await h.stopWorker();
  const worker = await crashingWorker(...afterCall(1));
  const purging = h.client.purge({ tableId: table.id });
  expect(await worker.exited).toBe('SIGKILL');
  expect((await h.catalog.getTable(table.id))?.state).toBe('PURGED');
  expect(await h.catalog.listLocks()).toEqual([]);

  await h.startWorker();
  expect(await purging).toMatchObject({ id: table.id, state: 'PURGED' });
  expect(await h.shardAreas(table)).toEqual([null, null]);
  const expiryRun = h.temporal.workflow.getHandle<typeof trashExpiry>(workflowIdFor.expiry(table.id, h.catalog.id));
  expect((await expiryRun.result()).ended).toBe('purged');
  await h.stopWorker();
});

// The lost task's repeat must find its catalog calls journaled, even once another operation has taken the table on,
// rather than fail for a lock it let go.
test('a create whose lost task is repeated after another operation trashed its table answers READY and leaves the trash alone', async () => {
  const worker = await crashingWorker(...afterCall(2));
  // The create's lost task waits for its timeout (the server's 10 s here) before it is repeated: the trash goes first.
  h.workflowTaskTimeoutMs = undefined;
  const created = h.client.create({ table: 'crash.overtaken', shards: 2 });
  expect(await worker.exited).toBe('SIGKILL'); // so the create has started
  h.workflowTaskTimeoutMs = LOST_TASK_TIMEOUT_MS;
  await h.startWorker();
  const trashed = await h.client.trash({ table: 'crash.overtaken', retentionSeconds: 3600 });
  expect(await h.shardAreas(trashed)).toEqual(['trash', 'trash']);

  const answer = await created;
  expect(answer).toMatchObject({ id: trashed.id, state: 'READY' });
  expect(await h.shardAreas(trashed)).toEqual(['trash', 'trash']);
  expect((await h.catalog.getTable(trashed.id))?.state).toBe('TRASHED');
  expect(await h.catalog.listLocks()).toEqual([]);
  await h.stopWorker();
});

test('a trash whose worker dies after it committed and released its lock in one lost task stays TRASHED, timer and all', async () => {
  await h.startWorker();
  const table = await h.client.create({ table: 'crash.trash', shards: 2 });
  await h.stopWorker();
  const worker = await crashingWorker(...afterCall(2));
  const trashed = h.client.trash({ table: 'crash.trash', retentionSeconds: 3600 });
  expect(await worker.exited).toBe('SIGKILL');
  expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHED');

  await h.startWorker();
  const answer = await trashed;
  expect(answer).toMatchObject({ id: table.id, state: 'TRASHED' });
  expect(await h.shardAreas(answer)).toEqual(['trash', 'trash']);
  const stored = await h.catalog.getTable(table.id);
  expect(stored).toMatchObject({ state: 'TRASHED', droppedAt: Date.parse(answer.droppedAt!) });
  const timer = await armedTimer(h, table.id);
  expect(timer).toMatchObject({ ended: null, droppedAt: stored!.droppedAt, expireAt: answer.expireAt });
  expect(await h.catalog.listLocks()).toEqual([]);

  // And it can still be recalled: the timer and the catalog agree on which trash this is.
  const restored = await h.client.undelete({ table: table.id });
  expect(restored.state).toBe('READY');
  expect(await h.shardAreas(restored)).toEqual(['live', 'live']);
  await h.stopWorker();
});

test('a trash whose lost task is repeated after a purge ended it hears that end and stops, instead of waiting for its expiry', async () => {
  await h.startWorker();
  const table = await h.client.create({ table: 'crash.ended', shards: 2 });
  await h.stopWorker();
  const worker = await crashingWorker(...afterCall(2));
  const trashing = h.client.trash({ table: 'crash.ended', retentionSeconds: 3600 });
  expect(await worker.exited).toBe('SIGKILL');
  // The trash's task is lost after its commit: the table is TRASHED and free, and a purge goes first.
  await h.startWorker();
  expect((await h.client.purge({ tableId: table.id })).state).toBe('PURGED');

  expect(await trashing).toMatchObject({ id: table.id, state: 'TRASHED' });
  const timer = await h.temporal.workflow.getHandle<typeof trashExpiry>(workflowIdFor.expiry(table.id, h.catalog.id)).result();
  expect(timer.ended).toBe('purged');
  expect(await h.catalog.listLocks()).toEqual([]);
  await h.stopWorker();
});

// The same lost task, repeated after a recall and a second trash: that trash read the table READY, so the answer of the
// trash before the recall (which its run, joined with the repeat still to come, has not learned yet) is not its answer.
test('a trash called after a recall is not handed the answer of the recalled trash whose lost task is repeated', async () => {
  await h.startWorker();
  const table = await h.client.create({ table: 'crash.again', shards: 2 });
  await h.stopWorker();
  const worker = await crashingWorker(...afterCall(2));
  // The lost task waits for its timeout (the server's 10 s here): the recall and the second trash go first.
  h.workflowTaskTimeoutMs = undefined;
  const first = h.client.trash({ table: 'crash.again', retentionSeconds: 3600 });
  expect(await worker.exited).toBe('SIGKILL');
  h.workflowTaskTimeoutMs = LOST_TASK_TIMEOUT_MS;
  await h.startWorker();
  const restored = await h.client.undelete({ table: table.id });
  expect(restored.state).toBe('READY');

  const second = await h.client.trash({ table: 'crash.again', retentionSeconds: 3600 });
  expect(await first).toMatchObject({ id: table.id, state: 'TRASHED' });
  expect(second).toMatchObject({ id: table.id, state: 'TRASHED' });
  // The second answer is a trash made after the recall: the table is in that trash, its timer waiting.
  const stored = await h.catalog.getTable(table.id);
  expect(stored).toMatchObject({ state: 'TRASHED', droppedAt: Date.parse(second.droppedAt!) });
  expect(Date.parse(second.droppedAt!)).toBeGreaterThan(Date.parse((await first).droppedAt!));
  expect(await h.shardAreas(second)).toEqual(['trash', 'trash']);
  const timer = await armedTimer(h, table.id);
  expect(timer).toMatchObject({ ended: null, droppedAt: stored!.droppedAt });
  expect(await h.catalog.listLocks()).toEqual([]);
  await h.stopWorker();
}, 60_000);

/**
 * A trash whose worker is killed right after `activity` moved the table's shards, before the server heard: the next
 * worker finishes the trash with every shard moved once. `events` checks the trash run's history.
 */
async function trashKilledAfterMove(
  name: string,
  activity: string,
  env: Readonly<NodeJS.ProcessEnv> = {},
  killedAfter: 'every shard' | 'a node' = 'every shard',
) {
  await h.startWorker();
  const table = await h.client.create({ table: `crash.${name}`, shards: 3 });
  const before = await h.shardReports(table);
  await h.stopWorker();
  const worker = await crashingWorker(activity, env);
  const trashing = h.client.trash({ table: `crash.${name}`, retentionSeconds: 3600 }, { timeoutMs: 90_000 });
  expect(await worker.exited).toBe('SIGKILL');
  // The shards (a node's, where each node has its own activity) are in the trash already; the history does not know it.
  const areas = await h.shardAreas(table);
  // So is the trash's expiry, started by the call that moved them, with the drop time stamped on the table.
  const expiry = h.temporal.workflow.getHandle(workflowIdFor.expiry(table.id, h.catalog.id));
  const begun = await expiry.describe();
  expect({ memo: begun.memo }).toEqual({ memo: { droppedAt: (await h.catalog.getTable(table.id))!.droppedAt } });
  if (killedAfter === 'every shard') expect(areas).toEqual(['trash', 'trash', 'trash']);
  else expect(areas).toContain('trash');
  await h.startWorker();

  expect(await trashing).toMatchObject({ id: table.id, state: 'TRASHED' });
  const after = await h.shardReports(table);
  expect(after.map((report) => report.area)).toEqual(['trash', 'trash', 'trash']);
  expect(after.map(({ bytes, checksum }) => ({ bytes, checksum }))).toEqual(before.map(({ bytes, checksum }) => ({ bytes, checksum })));
  expect(await h.catalog.listLocks()).toEqual([]);
  // The repeat found that run and started none: it waits for the expiry of the trash the table is in.
  expect(await armedTimer(h, table.id)).toMatchObject({ droppedAt: begun.memo!.droppedAt, ended: null });
  expect((await expiry.describe()).runId).toBe(begun.runId);
  const events = (await h.temporal.workflow.getHandle(workflowIdFor.trash(table.id, h.catalog.id)).fetchHistory()).events ?? [];
  expect(events.some((e) => e.workflowTaskFailedEventAttributes)).toBe(false);
  await h.stopWorker();
  return events;
}

// The nodes this worker serves change in the workflow task (a trash's first call drains and moves): killed after it, the
// task is lost with its answer, and the next worker's repeat of the call finds it journaled.
test('a trash whose worker dies after it moved its shards in the workflow task, the task lost, ends TRASHED with every shard moved once', async () => {
  const events = await trashKilledAfterMove('moved_here', ...afterCall(1));
  expect(events.some((e) => e.workflowTaskTimedOutEventAttributes)).toBe(true);
  expect(events.filter((e) => e.activityTaskScheduledEventAttributes)).toEqual([]);
}, 90_000);

// Where the nodes have workers of their own, a node's share of a step is an activity (changeShardsOnNode): killed after
// it moved its shards, before the server heard, it is tried again once its heartbeat times out, finds its work done.
test('a trash whose node worker dies after it moved its shards, before the server heard, ends TRASHED with every shard moved once', async () => {
  const events = await trashKilledAfterMove('moved_there', 'changeShardsOnNode', { CRASH_NODE_WORKERS: '1' }, 'a node');
  expect(events.some((e) => e.activityTaskTimedOutEventAttributes)).toBe(false);
}, 90_000);

// A recall's check decides on the workflow time at which it first read the table (journaled with the read): the whole
// recall is one workflow task, and its repeat, made after the table's expiry, must not refuse a recall whose name it
// has claimed already (found by chaos: the repeat said "expired", and the table stayed half recalled).
test('an undelete whose worker dies after it claimed the name, its lost task repeated past the expiry, still recalls the table', async () => {
  await h.startWorker();
  const table = await h.client.create({ table: 'crash.late', shards: 2 });
  // (Long enough for the worker's stop and the crashing one's start, some 5 s under the load of a full run, to come
  // before the expiry: the recall must claim the table first, and be repeated after it.)
  const trashed = await h.client.trash({ table: 'crash.late', retentionSeconds: 10 });
  await h.stopWorker();
  // (The catalog's change, inside the call that takes the lock, checks, claims the name and brings the shards back.)
  const worker = await crashingWorker('catalog.transition');
  const recalled = h.client.undelete({ table: table.id }, { timeoutMs: 60_000 });
  expect(await worker.exited).toBe('SIGKILL');
  expect((await h.catalog.getTable(table.id))?.state).toBe('RESTORING');
  await untilPast(Date.parse(trashed.expireAt!));
  await h.startWorker();

  expect(await recalled).toMatchObject({ id: table.id, state: 'READY' });
  expect(await h.shardAreas(table)).toEqual(['live', 'live']);
  // (Its timer fired while the recall held the table: the expiry run found it recalled, and ended.)
  const expiryRun = h.temporal.workflow.getHandle<typeof trashExpiry>(workflowIdFor.expiry(table.id, h.catalog.id));
  expect(['restored', 'expired']).toContain((await expiryRun.result()).ended);
  expect(await h.catalog.listLocks()).toEqual([]);
  await h.stopWorker();
}, 60_000);

test('a compensation whose worker dies after it released the lock in one lost task still ends compensated', async () => {
  // (The first call fails at a shard; the second takes the create back and releases its locks.)
  const worker = await crashingWorker('runStepsHere', { CRASH_ON_CALL: '2', CRASH_FAULT: 'createShard:1:permanent' });
  const failed = h.client.create({ table: 'crash.undo', shards: 2 }).catch((err: unknown) => err);
  expect(await worker.exited).toBe('SIGKILL');
  await h.startWorker();
  const err = await failed;
  expect(err).toBeInstanceOf(Error);
  expect(String((err as Error).message)).toMatch(/injected permanent fault/);
  const table = await h.catalog.findByName({ namespace: 'crash', name: 'undo' });
  expect(table?.state).toBe('CREATE_FAILED');
  expect(await h.shardAreas({ ...table!, shards: 2, createdAt: '', droppedAt: null, expireAt: null, purgedAt: null, hold: null })).toEqual([
    null,
    null,
  ]);
  expect(await h.catalog.listLocks()).toEqual([]);
  await h.stopWorker();
});

test('a drop whose worker dies once the table is DRAINING, its run then lost, is resumed by the reconciler and waits for the lease', async () => {
  await h.startWorker();
  const table = await h.client.create({ table: 'crash.draining', shards: 2 });
  const lease = await h.client.acquireLease(table.id, { ttlSeconds: 300 });
  await h.stopWorker();
  const worker = await crashingWorker(...afterCall(1));
  const dropping = h.client.trash({ table: 'crash.draining', retentionSeconds: 3600 }).catch((err: unknown) => err);
  expect(await worker.exited).toBe('SIGKILL');
  expect((await h.catalog.getTable(table.id))?.state).toBe('DRAINING');
  // The run is lost for good (an operator terminated it): only the reconciler can finish the drop now.
  await h.temporal.workflow.getHandle(workflowIdFor.trash(table.id, h.catalog.id)).terminate('test: a lost drop');
  await dropping;
  await h.startWorker();
  const report = await h.reconcile();
  expect(report.findings).toContainEqual(expect.objectContaining({ kind: 'stuck', state: 'DRAINING', resume: 'trash' }));
  // Resumed, it drains again: still DRAINING while the lease lasts, no new lease meanwhile.
  const resumed = h.temporal.workflow.getHandle<typeof trashTable>(workflowIdFor.trash(table.id, h.catalog.id));
  await expect(h.client.acquireLease(table.id)).rejects.toThrow(/DRAINING/);
  expect((await h.catalog.getTable(table.id))?.state).toBe('DRAINING');
  await h.client.releaseLease(lease.id);
  const trashed = await waitFor(
    () => h.catalog.getTable(table.id),
    (t) => t?.state === 'TRASHED',
    { what: 'the resumed drop to trash the table' },
  );
  expect(await h.shardAreas({ ...toTableInfo(trashed!) })).toEqual(['trash', 'trash']);
  // The resumed drop ends at TRASHED, having started the trash's expiry, which waits for this trash.
  expect(await resumed.result()).toMatchObject({ id: table.id, state: 'TRASHED', droppedAt: new Date(trashed!.droppedAt!).toISOString() });
  const timer = await armedTimer(h, table.id);
  expect(timer).toMatchObject({ ended: null, droppedAt: trashed!.droppedAt });
  expect(await h.catalog.listLocks()).toEqual([]);
  await h.stopWorker();
});

test('a drop with the trash off whose worker dies after the commit purges at once on the next worker, as the commit said', async () => {
  await h.startWorker();
  await h.client.setSetting({ key: 'trash.enabled', value: 'false', namespace: 'crashoff' });
  const table = await h.client.create({ table: 'crashoff.t', shards: 2 });
  await h.stopWorker();
  const worker = await crashingWorker(...afterCall(2));
  const dropping = h.client.trash({ table: 'crashoff.t' });
  expect(await worker.exited).toBe('SIGKILL');
  expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHED');
  // Switched on again before the lost task is repeated: the repeat answers the commit, and its policy, from the journal.
  await h.startWorker();
  await h.client.unsetSetting({ key: 'trash.enabled', namespace: 'crashoff' });
  const answer = await dropping;
  expect(answer.state).toBe('PURGED');
  expect(await h.shardAreas(answer)).toEqual([null, null]);
  expect(await h.catalog.listLocks()).toEqual([]);
  await h.stopWorker();
});

test('a worker that runs every call twice holds, leases, drains, changes a retention and a setting as once', async () => {
  const twice = await Harness.start({ everyCallTwice: true });
  try {
    const table = await twice.client.create({ table: 'flaky.policy', shards: 2 });
    expect((await twice.client.hold({ table: table.id, reason: 'r' })).hold?.reason).toBe('r');
    const lease = await twice.client.acquireLease(table.id, { ttlSeconds: 60 });
    expect(await twice.client.listLeases({ table: table.id })).toHaveLength(1);
    const dropping = twice.client.trash({ table: 'flaky.policy', retentionSeconds: 3600 });
    await waitFor(
      () => twice.catalog.getTable(table.id),
      (t) => t?.state === 'DRAINING',
      { what: 'the drain' },
    );
    await twice.client.releaseLease(lease.id);
    const trashed = await dropping;
    expect(await twice.shardAreas(trashed)).toEqual(['trash', 'trash']);
    const changed = await twice.client.setRetention({ table: table.id, retentionSeconds: 7200 });
    expect(Date.parse(changed.expireAt!) - Date.parse(trashed.droppedAt!)).toBe(7200_000);
    expect((await twice.client.release({ table: table.id })).hold).toBeNull();
    expect(await twice.client.setSetting({ key: 'trash.maxBytes', value: '123', namespace: 'flaky' })).toMatchObject({ value: 123 });
    expect((await twice.catalog.listSettings()).filter((r) => r.namespace === 'flaky')).toHaveLength(1);
    expect((await twice.client.purge({ tableId: table.id })).state).toBe('PURGED');
    expect(await twice.catalog.listLocks()).toEqual([]);
  } finally {
    await twice.close();
  }
});

test('a worker that runs every call twice still walks a table through its whole life', async () => {
  const twice = await Harness.start({ everyCallTwice: true });
  try {
    const table = await twice.client.create({ table: 'flaky.t', shards: 3 });
    expect(await twice.shardAreas(table)).toEqual(['live', 'live', 'live']);
    const trashed = await twice.client.trash({ table: 'flaky.t', retentionSeconds: 3600 });
    expect(await twice.shardAreas(trashed)).toEqual(['trash', 'trash', 'trash']);
    const restored = await twice.client.undelete({ table: table.id, newName: 'flaky.back' });
    expect(restored).toMatchObject({ name: 'back', state: 'READY' });
    await twice.client.trash({ table: 'flaky.back', retentionSeconds: 3600 });
    const purged = await twice.client.purge({ tableId: table.id });
    expect(purged.state).toBe('PURGED');
    expect(await twice.shardAreas(purged)).toEqual([null, null, null]);
    expect(await twice.catalog.listLocks()).toEqual([]);
  } finally {
    await twice.close();
  }
});

test('drop times and expiries come from workflow time: a worker whose clock is a year fast cannot purge early', async () => {
  const yearMs = 365 * 24 * 3600 * 1000;
  const skewed = await Harness.start({ activityClock: () => Date.now() + yearMs });
  try {
    await skewed.client.create({ table: 'skew.t', shards: 1 });
    const before = Date.now();
    const trashed = await skewed.client.trash({ table: 'skew.t', retentionSeconds: 3600 });
    const droppedAt = Date.parse(trashed.droppedAt!);
    expect(droppedAt).toBeGreaterThanOrEqual(before - 5_000);
    expect(droppedAt).toBeLessThanOrEqual(Date.now() + 5_000);
    expect(Date.parse(trashed.expireAt!) - droppedAt).toBe(3600 * 1000);
    expect((await skewed.catalog.getTable(trashed.id))?.state).toBe('TRASHED');
  } finally {
    await skewed.close();
  }
});
