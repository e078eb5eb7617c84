import * as client from '@temporalio/client';
import { Harness } from './support/harness';
import { releasedWorkflows } from './support/released-workflows';
import { waitFor } from './support/wait';
import { lockFor, workflowIdFor } from '../domain/operations';
import { randomUUID } from 'node:crypto';
import { trashedUpdate, type TrashTimerState } from '../domain/contracts';
import type { TableInfo } from '../domain/table';
import type { trashExpiry } from '../workflows';
import { PATCHES } from '../workflows/patches';

// A deploy replaces the workflow code under runs that are in flight, and a trash waits for its whole retention. The
// supported upgrade is from the previous release (docs/changing-workflows.md): each test starts runs on its frozen
// code (test/released/workflows.v19.js.gz), stops that worker, starts today's, and every run ends as it should,
// replaying what v19 recorded first. A change that is not behind a patch fails here. On v19 a trash was one run at
// `trash:<id>` (today's expiry id), its drop and its expiry in one: today's code finishes it on v19's code.
const PREVIOUS_RELEASE = 'v19';

let h: Harness;
beforeEach(async () => {
  h = await Harness.start({ startWorker: false });
  await h.startWorker({ workflows: releasedWorkflows(PREVIOUS_RELEASE) });
});
afterEach(async () => {
  await h.close();
});

/** The deploy: the previous release's worker stops (gracefully, as a rolling deploy does), today's starts. */
async function deploy(): Promise<void> {
  await h.stopWorker();
  await h.startWorker();
}

async function historyOf(workflowId: string) {
  return (await h.temporal.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
}

/** No workflow task of the run failed: today's code replayed what the old release recorded. */
async function replayedCleanly(workflowId: string): Promise<void> {
  expect((await historyOf(workflowId)).some((e) => e.workflowTaskFailedEventAttributes)).toBe(false);
}

/** The patch markers a run recorded, and whether each was recorded as deprecated (a retired patch's) or not (a live one's). */
async function patchMarkers(workflowId: string): Promise<Array<{ id: string; deprecated: boolean }>> {
  return (await historyOf(workflowId)).flatMap((e) => {
    const marker = e.markerRecordedEventAttributes;
    if (marker?.markerName !== 'core_patch') return [];
    return Object.values(marker.details ?? {}).flatMap((payloads) =>
      (payloads.payloads ?? []).map((p) => JSON.parse(Buffer.from(p.data!).toString('utf8')) as { id: string; deprecated: boolean }),
    );
  });
}

/** The history shows a durable timer started: the run waits in workflow code (a lock wait, the drain's poll). */
async function untilWaitingOnTimer(workflowId: string, what: string): Promise<void> {
  await waitFor(
    () => historyOf(workflowId).catch(() => []),
    (events) => events.some((e) => e.timerStartedEventAttributes),
    { what },
  );
}

/**
 * A drop as a v19 client asked it: the trash run at the table's `trash:<id>` (today's expiry id), started with the
 * `trashed` update, which answers once the table is TRASHED. (Today's client starts today's drop, which a v19 worker
 * does not know: the workers are deployed before the callers.)
 */
async function trashOnV19(table: string, more: { retentionSeconds: number; drainTimeoutSeconds?: number }): Promise<TableInfo> {
  const [namespace, name] = table.split('.') as [string, string];
  const found = (await h.catalog.findByName({ namespace, name }))!;
  const requestId = randomUUID();
  const { WithStartWorkflowOperation } = client;
  return h.temporal.workflow.executeUpdateWithStart(trashedUpdate, {
    args: [requestId],
    startWorkflowOperation: new WithStartWorkflowOperation('trashTable', {
      workflowId: workflowIdFor.expiry(found.id, h.catalog.id),
      taskQueue: h.taskQueue,
      args: [{ tableId: found.id, expectedName: { namespace, name }, requestId, catalogId: h.catalog.id, ...more }],
      workflowIdConflictPolicy: 'USE_EXISTING',
    }),
  });
}

/** How the trash run of v19 (or, moved, today's expiry run) of the table ended. */
const trashResult = (tableId: number) =>
  h.temporal.workflow.getHandle<typeof trashExpiry>(workflowIdFor.expiry(tableId, h.catalog.id)).result();

describe(`runs started on the previous release (${PREVIOUS_RELEASE}) end correctly on today’s code`, () => {
  test('a trash waiting on its timer is purged at expiry', async () => {
    const table = await h.client.create({ table: 'deploy.expiring', shards: 2 });
    const trashed = await trashOnV19('deploy.expiring', { retentionSeconds: 4 });
    // v19 recorded the markers of its own patches, and not today's: today's code replays it, and finishes it, with v19's
    // code (workflows/legacy/v19/).
    const markers = await patchMarkers(workflowIdFor.expiry(table.id, h.catalog.id));
    expect(markers.map((m) => m.id)).toContain(PATCHES.stepExecutor.id);
    expect(markers.filter((m) => m.id === PATCHES.dropEndsAtTrashed.id || m.deprecated)).toEqual([]);
    await deploy();
    const purged = await waitFor(
      () => h.catalog.getTable(table.id),
      (t) => t?.state === 'PURGED',
      { what: 'the purge at expiry' },
    );
    expect(purged!.purgedAt).toBeGreaterThanOrEqual(Date.parse(trashed.expireAt!));
    expect((await trashResult(table.id)).ended).toBe('expired');
    expect(await h.shardAreas(table)).toEqual([null, null]);
    await replayedCleanly(workflowIdFor.expiry(table.id, h.catalog.id));
  });

  test('a trash waiting on its timer is recalled, and the recall ends its timer', async () => {
    const table = await h.client.create({ table: 'deploy.recalled', shards: 2 });
    await trashOnV19('deploy.recalled', { retentionSeconds: 3600 });
    await deploy();
    expect((await h.client.undelete({ table: table.id })).state).toBe('READY');
    expect((await trashResult(table.id)).ended).toBe('restored');
    expect(await h.shardAreas(table)).toEqual(['live', 'live']);
    await replayedCleanly(workflowIdFor.expiry(table.id, h.catalog.id));
  });

  test('a purge and a create waiting for their locks finish once the locks are free', async () => {
    // The holder: a live run (a waiting trash), so that neither waiter takes its locks over as stale.
    const holderTable = await h.client.create({ table: 'deploy.holder', shards: 1 });
    await trashOnV19('deploy.holder', { retentionSeconds: 3600 });
    const run = await h.temporal.workflow.getHandle(workflowIdFor.expiry(holderTable.id, h.catalog.id)).describe();
    const holder = { workflowId: run.workflowId, runId: run.runId };
    const table = await h.client.create({ table: 'deploy.waiting', shards: 2 });
    await trashOnV19('deploy.waiting', { retentionSeconds: 3600 });
    const fresh = { namespace: 'deploy', name: 'fresh' };
    for (const lock of [lockFor.table(table.id), lockFor.name(fresh)]) {
      expect(await h.catalog.acquireLock(lock, holder, Date.now(), () => Promise.resolve(false))).toMatchObject({ acquired: true });
    }

    const purging = h.client.purge({ tableId: table.id }, { timeoutMs: 110_000 });
    const creating = h.client.create({ table: 'deploy.fresh', shards: 1 }, { timeoutMs: 110_000 });
    const purgeId = workflowIdFor.purge(table.id, h.catalog.id);
    await untilWaitingOnTimer(purgeId, 'the v19 purge to wait for its lock on a timer');
    const createId = (await h.client.operations({ running: true })).find((op) => op.operation === 'create')!.workflowId;
    await untilWaitingOnTimer(createId, 'the v19 create to wait for its name on a timer');
    await deploy();
    await h.catalog.releaseLocks(holder);

    expect((await purging).state).toBe('PURGED');
    expect(await h.shardAreas(table)).toEqual([null, null]);
    const created = await creating;
    expect(created.state).toBe('READY');
    expect(await h.shardAreas(created)).toEqual(['live']);
    await replayedCleanly(purgeId);
    await replayedCleanly(createId);
  });

  test('a drop waiting for a lease to end finishes once it is released', async () => {
    const table = await h.client.create({ table: 'deploy.leased', shards: 2 });
    const lease = await h.client.acquireLease(table.id, { ttlSeconds: 600, holder: 'report-job' });
    const trashing = trashOnV19('deploy.leased', { retentionSeconds: 3600, drainTimeoutSeconds: 100 });
    await waitFor(
      () => h.catalog.getTable(table.id),
      (t) => t?.state === 'DRAINING',
      { what: 'the v19 drop to wait for the lease' },
    );
    await deploy();
    await h.client.releaseLease(lease.id);
    expect((await trashing).state).toBe('TRASHED');
    expect(await h.shardAreas(table)).toEqual(['trash', 'trash']);
    // The v19 run goes on as that trash's expiry, on v19's code: a recall ends it.
    expect((await h.client.undelete({ table: table.id })).state).toBe('READY');
    expect((await trashResult(table.id)).ended).toBe('restored');
    await replayedCleanly(workflowIdFor.expiry(table.id, h.catalog.id));
  });

  test("a table recalled from a v19 trash is dropped again as today's drop, whose expiry takes the id after v19's run", async () => {
    const table = await h.client.create({ table: 'deploy.again', shards: 2 });
    await trashOnV19('deploy.again', { retentionSeconds: 3600 });
    const v19Run = await h.temporal.workflow.getHandle(workflowIdFor.expiry(table.id, h.catalog.id)).describe();
    await deploy();
    await h.client.undelete({ table: table.id });
    const again = await h.client.trash({ table: 'deploy.again', retentionSeconds: 600 });
    expect(again.state).toBe('TRASHED');
    const drop = await h.temporal.workflow.getHandle(workflowIdFor.trash(table.id, h.catalog.id)).describe();
    expect({ type: drop.type, status: drop.status.name }).toEqual({ type: 'trashTable', status: 'COMPLETED' });
    expect((await patchMarkers(drop.workflowId)).map((m) => m.id)).toEqual([PATCHES.dropEndsAtTrashed.id]);
    const expiry = await waitFor(
      () => h.temporal.workflow.getHandle(workflowIdFor.expiry(table.id, h.catalog.id)).describe(),
      (d) => d.runId !== v19Run.runId,
      { what: "today's expiry run" },
    );
    expect({ type: expiry.type, status: expiry.status.name }).toEqual({ type: 'trashExpiry', status: 'RUNNING' });
    const timer = await waitFor(
      () => h.temporal.workflow.getHandle<typeof trashExpiry>(expiry.workflowId).query<TrashTimerState>('trashTimer'),
      (state) => state.expireAt !== null,
      { what: 'the expiry to read its table' },
    );
    expect(timer).toEqual({
      droppedAt: Date.parse(again.droppedAt!),
      expireAt: again.expireAt,
      ended: null,
    });
    expect((await h.client.undelete({ table: table.id })).state).toBe('READY');
    expect((await trashResult(table.id)).ended).toBe('restored');
  });
});

// Before a release removes the last call that meets a retired patch's marker, every run that recorded the marker
// must be gone: the short ones end by themselves; a waiting trash is moved to the current code, as the operator does
// it (docs/changing-workflows.md).
describe('a trash run waiting since the previous release moves to today’s code', () => {
  test('terminated and re-armed by the reconciler, it keeps its expiry and recalls', async () => {
    const table = await h.client.create({ table: 'deploy.moved', shards: 2 });
    const trashed = await trashOnV19('deploy.moved', { retentionSeconds: 3600 });
    const trashId = workflowIdFor.expiry(table.id, h.catalog.id);
    const old = await h.temporal.workflow.getHandle(trashId).describe();
    expect(old.type).toBe('trashTable');
    await deploy();

    await h.temporal.workflow.getHandle(trashId, old.runId).terminate('moved to the current workflow code');
    const repaired = await h.reconcile();
    expect(repaired.findings.map((f) => f.kind)).toContain('missing-timer');
    const moved = await h.temporal.workflow.getHandle(trashId).describe();
    expect(moved.runId).not.toBe(old.runId);
    expect(moved.status.name).toBe('RUNNING');
    // Today's run is the table's expiry, which records only today's live patches (workflows/patches.ts), if any.
    expect(moved.type).toBe('trashExpiry');
    await waitFor(
      () => h.temporal.workflow.getHandle<typeof trashExpiry>(trashId).query<TrashTimerState>('trashTimer'),
      (s) => s.expireAt === trashed.expireAt,
      { what: 'the re-armed run to wait for the same expiry' },
    );
    const live: string[] = Object.values(PATCHES).map((patch) => patch.id);
    expect((await patchMarkers(trashId)).every((m) => live.includes(m.id) && !m.deprecated)).toBe(true);

    expect((await h.client.undelete({ table: table.id })).state).toBe('READY');
    expect((await trashResult(table.id)).ended).toBe('restored');
    expect(await h.shardAreas(table)).toEqual(['live', 'live']);
  });
});
