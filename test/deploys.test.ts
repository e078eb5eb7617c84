import fs from 'node:fs';
import path from 'node:path';
import { Harness } from './support/harness';
import { startCrashingWorker } from './support/crashing-worker';
import { releasedWorkflows } from './support/released-workflows';
import { waitFor } from './support/wait';
import { WorkflowNotFoundError } from '@temporalio/client';
import { workflowIdFor } from '../domain/operations';
import type { TrashTimerState } from '../domain/contracts';
import type { trashTable } from '../workflows';

/** A harness whose worker runs release `tag`'s frozen code until `deploy` swaps it for today's (each test its own). */
function onRelease(tag: string): { h: () => Harness; deploy: () => Promise<void> } {
  let h: Harness;
  beforeEach(async () => {
    h = await Harness.start({ startWorker: false });
    await h.startWorker({ workflows: releasedWorkflows(tag) });
  });
  afterEach(async () => {
    await h.close();
  });
  return {
    h: () => h,
    deploy: async () => {
      await h.stopWorker();
      await h.startWorker();
    },
  };
}

/** No workflow task of the run failed: today's code replayed what the old release recorded. */
async function replayedCleanly(h: Harness, workflowId: string): Promise<void> {
  const events = (await h.temporal.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  expect(events.some((e) => e.workflowTaskFailedEventAttributes)).toBe(false);
}

// A deploy replaces the workflow code under runs that are waiting: a trash waits for its whole retention. Each
// test starts runs on the frozen code of an earlier release (test/released: each release whose change it
// exercises), stops that worker, and lets today's code finish them, replaying their histories first: a change
// that is not behind a patch fails here.
describe('runs started on release v2 finish on today’s code', () => {
  const release = onRelease('v2');
  let h: Harness;
  beforeEach(() => {
    h = release.h();
  });
  const deploy = release.deploy;

  test('a trash waiting on its timer is purged at expiry', async () => {
    const table = await h.client.create({ table: 'deploy.expiring', shards: 2 });
    const trashed = await h.client.trash({ table: 'deploy.expiring', retentionSeconds: 4 });
    await deploy();
    const purged = await waitFor(
      () => h.catalog.getTable(table.id),
      (t) => t?.state === 'PURGED',
      { what: 'the purge at expiry' },
    );
    expect(purged!.purgedAt).toBeGreaterThanOrEqual(Date.parse(trashed.expireAt!));
    const timer: TrashTimerState = await h.temporal.workflow
      .getHandle<typeof trashTable>(workflowIdFor.trash(table.id, h.catalog.id))
      .result();
    expect(timer.ended).toBe('expired');
    expect(await h.shardAreas(table)).toEqual([null, null]);
  });

  test('a trash waiting on its timer is recalled, and the signal ends its timer', async () => {
    const table = await h.client.create({ table: 'deploy.recalled', shards: 2 });
    await h.client.trash({ table: 'deploy.recalled', retentionSeconds: 3600 });
    await deploy();
    expect((await h.client.undelete({ table: table.id })).state).toBe('READY');
    const timer: TrashTimerState = await h.temporal.workflow
      .getHandle<typeof trashTable>(workflowIdFor.trash(table.id, h.catalog.id))
      .result();
    expect(timer.ended).toBe('restored');
    expect(await h.shardAreas(table)).toEqual(['live', 'live']);
  });

  test('a purge waiting for a busy table (the old wait: activity retries) purges once the table is free', async () => {
    // The old wait's local activity hands its workflow task over at 80 % of its timeout, and the killed worker's
    // task is given to the next one once it has timed out: 3 s instead of the server's 10 s, on the same path.
    h.workflowTaskTimeoutMs = 3_000;
    const holderTable = await h.client.create({ table: 'deploy.holder', shards: 1 });
    await h.client.trash({ table: 'deploy.holder', retentionSeconds: 3600 });
    const run = await h.temporal.workflow.getHandle(workflowIdFor.trash(holderTable.id, h.catalog.id)).describe();
    const holder = { workflowId: run.workflowId, runId: run.runId };
    const table = await h.client.create({ table: 'deploy.waiting', shards: 2 });
    await h.client.trash({ table: 'deploy.waiting', retentionSeconds: 3600 });
    await h.catalog.acquireLock(`table:${table.id}`, holder, Date.now(), () => Promise.resolve(false));

    // The old wait runs inside a local activity's retries, which a graceful shutdown waits for without end: this
    // deploy kills the old worker (a child process) where it stands, as a supervisor does after its grace period.
    await h.stopWorker();
    const bundleFile = path.join(h.home, 'workflows.v2.js');
    await fs.promises.writeFile(bundleFile, releasedWorkflows('v2').code);
    const old = await startCrashingWorker({ home: h.home, address: h.address, taskQueue: h.taskQueue, bundleFile });
    const purging = h.client.purge({ tableId: table.id }, { timeoutMs: 110_000 });
    // Waiting long enough that the old code's wait is in the history (a workflow task completed while it retried).
    await waitFor(
      async () =>
        (
          await h.temporal.workflow
            .getHandle(workflowIdFor.purge(table.id, h.catalog.id))
            .fetchHistory()
            .catch(() => undefined)
        )?.events ?? [],
      (events) => events.filter((e) => e.workflowTaskCompletedEventAttributes).length >= 1,
      { what: 'the old purge to wait across a workflow task', timeoutMs: 30_000 },
    );
    await old.kill();
    await h.startWorker();
    await h.catalog.releaseLocks(holder);
    expect((await purging).state).toBe('PURGED');
    expect(await h.shardAreas(table)).toEqual([null, null]);
    // The old wait had recorded nothing yet (a local activity's retries leave no event until they end), so
    // today's code was free to wait its own way; a history that recorded the old acquire replays the old path
    // (the v1 and v2 histories in test/replay.test.ts). Either way the run replays without a nondeterminism
    // error and ends as it should.
    await replayedCleanly(h, workflowIdFor.purge(table.id, h.catalog.id));
  });
});

// Release v3 sent shard calls to the workflows' own queue; today they go to each node's queue. A v3 run that
// makes a shard call after the deploy sends it to the node's queue, served here by storage-node workers alone.
describe('runs started on release v3 finish on today’s code, with the storage nodes on workers of their own', () => {
  const release = onRelease('v3');
  let h: Harness;
  beforeEach(() => {
    h = release.h();
  });

  test('a purge waiting for a busy table makes its shard calls on the nodes’ queues once it is free', async () => {
    const holderTable = await h.client.create({ table: 'deploy.v3holder', shards: 1 });
    await h.client.trash({ table: 'deploy.v3holder', retentionSeconds: 3600 });
    const run = await h.temporal.workflow.getHandle(workflowIdFor.trash(holderTable.id, h.catalog.id)).describe();
    const holder = { workflowId: run.workflowId, runId: run.runId };
    const table = await h.client.create({ table: 'deploy.v3waiting', shards: 3 });
    await h.client.trash({ table: 'deploy.v3waiting', retentionSeconds: 3600 });
    await h.catalog.acquireLock(`table:${table.id}`, holder, Date.now(), () => Promise.resolve(false));

    const purging = h.client.purge({ tableId: table.id }, { timeoutMs: 60_000 });
    const purge = h.temporal.workflow.getHandle(workflowIdFor.purge(table.id, h.catalog.id));
    // v3 waits with timers: a few of them in the history before the deploy.
    await waitFor(
      async () => (await purge.fetchHistory().catch(() => undefined))?.events ?? [],
      (events) => events.filter((e) => e.timerFiredEventAttributes).length >= 2,
      { what: 'the v3 purge to wait on its timers', timeoutMs: 30_000 },
    );
    await h.stopWorker();
    await h.startWorker({ storage: 'remote' });
    for (const node of h.storage.nodes) await h.startNode(node);
    await h.catalog.releaseLocks(holder);

    expect((await purging).state).toBe('PURGED');
    expect(await h.shardAreas(table)).toEqual([null, null, null]);
    const events = (await purge.fetchHistory()).events ?? [];
    expect(events.some((e) => e.workflowTaskFailedEventAttributes)).toBe(false);
    const calls = events.flatMap((e) => {
      const scheduled = e.activityTaskScheduledEventAttributes;
      return scheduled ? [`${scheduled.activityType?.name ?? '?'} on ${scheduled.taskQueue?.name ?? '?'}`] : [];
    });
    // Two calls per node (mark as garbage, delete), each on the queue of the node (one call per shard until v8).
    const nodes = [...new Set(table.placement.map((p) => p.node))];
    expect(calls.sort()).toEqual(nodes.flatMap((node) => [1, 2].map(() => `changeShardsOnNode on ${h.taskQueue}-storage-${node}`)).sort());
  });
});

// Release v6 purged at expiry through a purge run of its own (`purge:<id>`), a child of the trash run; today the
// trash run purges the table itself (patch expiry-purges-in-trash-run). A v6 trash whose timer fires after the
// deploy takes today's path.
describe('runs started on release v6 finish on today’s code', () => {
  const release = onRelease('v6');

  test('a trash waiting on its timer purges the table in its own run at expiry, with no purge run', async () => {
    const h = release.h();
    const table = await h.client.create({ table: 'deploy.v6expiring', shards: 2 });
    const trashed = await h.client.trash({ table: 'deploy.v6expiring', retentionSeconds: 4 });
    await release.deploy();
    const purged = await waitFor(
      () => h.catalog.getTable(table.id),
      (t) => t?.state === 'PURGED',
      { what: 'the purge at expiry' },
    );
    expect(purged!.purgedAt).toBeGreaterThanOrEqual(Date.parse(trashed.expireAt!));
    const trashId = workflowIdFor.trash(table.id, h.catalog.id);
    const timer: TrashTimerState = await h.temporal.workflow.getHandle<typeof trashTable>(trashId).result();
    expect(timer.ended).toBe('expired');
    await expect(h.temporal.workflow.getHandle(workflowIdFor.purge(table.id, h.catalog.id)).describe()).rejects.toThrow(
      WorkflowNotFoundError,
    );
    expect(await h.shardAreas(table)).toEqual([null, null]);
    await replayedCleanly(h, trashId);
  });
});

// Release v7 paced the expiry's retries 10 s, 1 min, then every 10 min; today's code paces them by a backoff (the
// trash input's expiryRetry). A v7 trash deployed while it waits to try again finishes on today's code.
describe('runs started on release v7 finish on today’s code', () => {
  const release = onRelease('v7');

  test('a trash whose purge at expiry failed, deployed while it waits to try again, retries and purges', async () => {
    const h = release.h();
    const table = await h.client.create({ table: 'deploy.v7retried', shards: 2 });
    h.storage.faults.inject({ op: 'markGarbage', tableId: table.id, shard: 0, kind: 'permanent', times: 1 });
    await h.client.trash({ table: 'deploy.v7retried', retentionSeconds: 1 });
    await waitFor(
      async () => ({ faults: h.storage.faults.pending(), table: await h.catalog.getTable(table.id), locks: await h.catalog.listLocks() }),
      (now) => now.faults === 0 && now.table?.state === 'TRASHED' && now.locks.length === 0,
      { what: 'the first purge at expiry to fail and be compensated' },
    );
    await release.deploy();
    await waitFor(
      () => h.catalog.getTable(table.id),
      (t) => t?.state === 'PURGED',
      { what: 'the retried purge', timeoutMs: 40_000 },
    );
    expect(await h.shardAreas(table)).toEqual([null, null]);
    await replayedCleanly(h, workflowIdFor.trash(table.id, h.catalog.id));
  });
});

// Release v8 changed a table's shards in a local activity, in the workflow task; today each node's share is an
// activity on the node's queue (patch shard-changes-on-node-activities). A v8 trash whose timer fires after the
// deploy purges through those activities.
describe('runs started on release v8 finish on today’s code', () => {
  const release = onRelease('v8');

  test('a trash waiting on its timer purges at expiry with one activity per node and step, not in its workflow task', async () => {
    const h = release.h();
    const table = await h.client.create({ table: 'deploy.v8expiring', shards: 3 });
    await h.client.trash({ table: 'deploy.v8expiring', retentionSeconds: 3 });
    const trashId = workflowIdFor.trash(table.id, h.catalog.id);
    const before = (await h.temporal.workflow.getHandle(trashId).fetchHistory()).events ?? [];
    // The v8 move to the trash: a local activity (a marker), no activity task.
    expect(before.some((e) => e.activityTaskScheduledEventAttributes)).toBe(false);
    await release.deploy();
    await waitFor(
      () => h.catalog.getTable(table.id),
      (t) => t?.state === 'PURGED',
      { what: 'the purge at expiry' },
    );
    expect(await h.shardAreas(table)).toEqual([null, null, null]);
    await h.temporal.workflow.getHandle(trashId).result();
    const events = (await h.temporal.workflow.getHandle(trashId).fetchHistory()).events ?? [];
    const scheduled = events.flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
    const nodes = new Set(table.placement.map((p) => p.node)).size;
    expect(scheduled).toEqual(Array.from({ length: 2 * nodes }, () => 'changeShardsOnNode'));
    await replayedCleanly(h, trashId);
  });
});
