import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { ScheduleOverlapPolicy } from '@temporalio/client';
import { Harness, workflowBundleFile } from './support/harness';
import { defaultIdentity } from '../client/client';
import { armedTimer } from './support/trash-runs';
import { startCrashingWorker } from './support/crashing-worker';
import { copySet, existing, moveSet, setFiles, writeSet } from './support/sets-on-disk';
import { untilPast, waitFor } from './support/wait';
import { lockFor, workflowIdFor } from '../domain/operations';
import type { Finding, ReconcileReport } from '../domain/health';
import { toTableInfo, type TableInfo } from '../domain/table';
import type { ShardRef } from '../storage/driver';
import type { TrashTimerState } from '../domain/contracts';
import type { trashExpiry } from '../workflows';
import { ensureReconcileSchedule, reconcileScheduleId } from '../worker/reconcile-schedule';

// Jest's asymmetric matchers are typed `any`; typed `unknown` they can sit in an expected value lint-clean.
const anyNumber = (): unknown => expect.any(Number);

/** The findings of a report that concern table `id` (its row, its lock, its sets). */
function findingsOf(report: ReconcileReport, id: number): Finding[] {
  return report.findings.filter((f) => {
    switch (f.kind) {
      case 'stale-lock':
        return f.resource === `table:${id}`;
      case 'orphan':
      case 'misplaced':
        return f.set.tableId === id;
      default:
        return f.table.id === id;
    }
  });
}

/** How long an orphan set is left alone: long enough for two reconcile passes on a loaded machine, short enough to wait out. */
const ORPHAN_GRACE_SECONDS = 5;

/** When the orphan grace of `files` is over: it runs from a file's last change (its ctime), the reconciler's clock for it. */
async function graceOverAt(files: string[]): Promise<number> {
  const changed = await Promise.all(files.map(async (file) => (await fs.promises.lstat(file)).ctimeMs));
  return Math.max(...changed) + ORPHAN_GRACE_SECONDS * 1000;
}

describe('the reconciler', () => {
  let h: Harness;
  let bundleFile: string;
  let storageRoot: string;
  beforeAll(async () => {
    h = await Harness.start({ orphanGraceSeconds: ORPHAN_GRACE_SECONDS });
    storageRoot = path.join(h.home, 'storage');
    // The crashing worker is a child process: it loads the run's bundle from its file instead of building it again.
    bundleFile = await workflowBundleFile();
  });
  afterAll(async () => {
    await h.close();
  });

  const shardOf = (table: TableInfo, shard = 0): ShardRef => ({ tableId: table.id, ...table.placement[shard]! });

  test('a re-armed trash whose table was recalled meanwhile ends at once and touches nothing', async () => {
    const table = await h.client.create({ table: 'rec.recalled', shards: 2 });
    const trashed = await h.client.trash({ table: 'rec.recalled', retentionSeconds: 3600 });
    await h.client.undelete({ table: table.id });
    // The recall ends the trash's expiry run, which closes a moment later: only then can a run of the same id start.
    await h.temporal.workflow.getHandle(workflowIdFor.expiry(table.id, h.catalog.id)).result();
    // (What the reconciler's re-arm starts: an expiry of that trash.)
    const timer = await h.temporal.workflow.execute<typeof trashExpiry>('trashExpiry', {
      workflowId: workflowIdFor.expiry(table.id, h.catalog.id),
      taskQueue: h.taskQueue,
      args: [{ tableId: table.id, catalogId: h.catalog.id, droppedAt: Date.parse(trashed.droppedAt!) }],
    });
    expect(timer.ended).toBe('restored');
    expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY', droppedAt: null });
    expect(await h.shardAreas(table)).toEqual(['live', 'live']);
  });

  test('a terminated trash expiry run: the doctor reports the missing timer, the reconciler re-arms it and the table is purged at its expiry', async () => {
    const table = await h.client.create({ table: 'rec.terminated', shards: 2 });
    const trashed = await h.client.trash({ table: 'rec.terminated', retentionSeconds: 4 });
    await h.temporal.workflow.getHandle(workflowIdFor.expiry(table.id, h.catalog.id)).terminate('operator slip');

    const report = await h.reconcile('report');
    const missing = report.findings.filter((f) => f.kind === 'missing-timer');
    expect(missing.map((f) => f.table.id)).toEqual([table.id]);
    expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHED');

    const repaired = await h.reconcile();
    expect(repaired.actions).toContainEqual(expect.objectContaining({ outcome: `started expiry of table ${table.id}` }));
    const purged = await waitFor(
      () => h.catalog.getTable(table.id),
      (t) => t?.state === 'PURGED',
      { what: 'the purge at expiry' },
    );
    expect(purged!.purgedAt).toBeGreaterThanOrEqual(Date.parse(trashed.expireAt!));
    expect(await h.shardAreas(trashed)).toEqual([null, null]);
    expect((await h.reconcile('report')).findings).toEqual([]);
  });

  test('a trash expiry run terminated and found only after its expiry: the reconciler re-arms it and it purges at once', async () => {
    const table = await h.client.create({ table: 'rec.lateexpiry', shards: 2 });
    const trashed = await h.client.trash({ table: 'rec.lateexpiry', retentionSeconds: 1 });
    await h.temporal.workflow.getHandle(workflowIdFor.expiry(table.id, h.catalog.id)).terminate('operator slip');
    await untilPast(Date.parse(trashed.expireAt!));

    const report = await h.reconcile('report');
    expect(findingsOf(report, table.id)).toEqual([
      expect.objectContaining({ kind: 'missing-timer', droppedAt: Date.parse(trashed.droppedAt!), expired: true }),
    ]);
    expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHED');

    const repaired = await h.reconcile();
    expect(repaired.actions).toContainEqual(expect.objectContaining({ outcome: `started expiry of table ${table.id}` }));
    const timer: TrashTimerState = await h.temporal.workflow
      .getHandle<typeof trashExpiry>(workflowIdFor.expiry(table.id, h.catalog.id))
      .result();
    expect(timer).toMatchObject({ ended: 'expired', droppedAt: Date.parse(trashed.droppedAt!) });
    expect((await h.catalog.getTable(table.id))?.state).toBe('PURGED');
    expect(await h.shardAreas(trashed)).toEqual([null, null]);
  });

  describe('a worker killed between a transitional state and the next step, and the operation terminated: the doctor reports the table stuck, and the reconciler finishes it', () => {
    /**
     * Runs `operation` on a worker that SIGKILLs itself right after the operation's first `activity` (by default the
     * catalog's transition, whichever call makes it: the catalog has the transitional state, nothing else happened), then terminates the operation's
     * workflow as an operator would, and brings this harness's worker back. Returns the run that was terminated.
     */
    async function killedAfterTransition(
      workflowId: string,
      operation: () => Promise<unknown>,
      activity = 'catalog.transition',
    ): Promise<{ runId: string }> {
      await h.stopWorker();
      const crashing = await startCrashingWorker({
        on: h,
        bundleFile,
        activity,
      });
      const answer = operation().then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(await crashing.exited).toBe('SIGKILL');
      const handle = h.temporal.workflow.getHandle(workflowId);
      const { runId, status } = await handle.describe();
      expect(status.name).toBe('RUNNING');
      await handle.terminate('test: its worker is gone and an operator terminated it');
      // The caller hears of it: the operation did not answer.
      expect(await answer).toBeInstanceOf(Error);
      await h.startWorker();
      return { runId };
    }

    /** The two findings of a table whose operation died holding it: its lock is stale, and it is stuck. */
    async function expectReportedStuck(
      table: { id: number; namespace: string; name: string; shards: number },
      state: string,
      resume: string,
      holder: { workflowId: string; runId: string },
    ) {
      const report = await h.reconcile('report');
      expect(report.findings).toEqual([
        { kind: 'stale-lock', resource: `table:${table.id}`, workflowId: holder.workflowId, runId: holder.runId, since: anyNumber() },
        { kind: 'stuck', table, state, resume },
      ]);
      expect(report.actions).toEqual([]);
      // Report mode changes nothing: the lock is still there, the table still where it was left.
      expect(await h.catalog.listLocks()).toEqual([expect.objectContaining({ resource: `table:${table.id}`, ...holder })]);
      expect((await h.catalog.getTable(table.id))?.state).toBe(state);
    }

    /** A repair releases the stale lock first, then starts the operation that finishes the table. */
    async function expectRepairResumes(tableId: number, state: string, op: string, holderWorkflowId: string) {
      const repaired = await h.reconcile();
      expect(repaired.actions).toEqual([
        { finding: `lock table:${tableId} is held by ${holderWorkflowId}, which has closed: release it`, outcome: 'released' },
        {
          finding: `table ${tableId} is ${state} and no operation holds it: run ${op} again`,
          outcome: `started ${op} of table ${tableId}`,
        },
      ]);
    }

    /** Waits for a report with no findings (a trash timer just started may take a moment to show in visibility). */
    async function expectHealthy() {
      await waitFor(
        () => h.reconcile('report'),
        (r) => r.findings.length === 0,
        { what: 'a report with no findings', intervalMs: 500 },
      );
      expect(await h.catalog.listLocks()).toEqual([]);
    }

    test('a create killed right after its prepare (CREATING, no shard yet) is finished on the id and placement it chose', async () => {
      const name = { namespace: 'rec', name: 'killedcreate' };
      const createId = workflowIdFor.create(name, h.catalog.id);
      const { runId } = await killedAfterTransition(
        createId,
        () => h.client.create({ table: 'rec.killedcreate', shards: 2 }),
        'catalog.prepareCreate',
      );
      const prepared = await h.catalog.findByName(name);
      expect(prepared?.state).toBe('CREATING');
      expect(await h.shardAreas(toTableInfo(prepared!))).toEqual([null, null]);

      // Both of the create's locks outlived it: its name's, and the table's own, taken with the prepare.
      const holder = { workflowId: createId, runId, since: anyNumber() };
      const report = await h.reconcile('report');
      expect(report.findings).toEqual([
        { kind: 'stale-lock', resource: lockFor.name(name), ...holder },
        { kind: 'stale-lock', resource: lockFor.table(prepared!.id), ...holder },
        { kind: 'stuck', table: { id: prepared!.id, ...name, shards: 2, params: { shards: 2 } }, state: 'CREATING', resume: 'create' },
      ]);
      expect(report.actions).toEqual([]);

      const repaired = await h.reconcile();
      expect(repaired.actions.map((a) => a.outcome)).toEqual(['released', 'released', `started create of table ${prepared!.id}`]);
      const ready = await waitFor(
        () => h.catalog.getTable(prepared!.id),
        (t) => t?.state === 'READY',
        { what: 'the resumed create' },
      );
      expect(ready!.placement).toEqual(prepared!.placement);
      expect(await h.shardAreas(toTableInfo(ready!))).toEqual(['live', 'live']);
      await expectHealthy();
    });

    test('a trash killed right after it marked the table TRASHING is finished, keeping the retention it asked for and who dropped it', async () => {
      const table = await h.client.create({ table: 'rec.killedtrash', shards: 2 });
      const trashId = workflowIdFor.trash(table.id, h.catalog.id);
      const retentionSeconds = 4321;
      // (A drop's first change is the catalog's startDrain: straight to TRASHING, the table having no lease.)
      const { runId } = await killedAfterTransition(
        trashId,
        () => h.client.trash({ table: 'rec.killedtrash', retentionSeconds }),
        'catalog.startDrain',
      );
      expect(await h.shardAreas(table)).toEqual(['live', 'live']);

      const key = { id: table.id, namespace: 'rec', name: 'killedtrash', shards: 2, params: { shards: 2 } };
      await expectReportedStuck(key, 'TRASHING', 'trash', { workflowId: trashId, runId });
      await expectRepairResumes(table.id, 'TRASHING', 'trash', trashId);

      const stored = await waitFor(
        () => h.catalog.getTable(table.id),
        (t) => t?.state === 'TRASHED',
        { what: 'the resumed trash' },
      );
      expect(await h.shardAreas(table)).toEqual(['trash', 'trash']);
      // The retention of the terminated run's request, not the worker's default (7 days in the harness); and who dropped
      // it, the starter of that run, though the reconciler started the run that committed it.
      expect(stored!.expireAt! - stored!.droppedAt!).toBe(retentionSeconds * 1000);
      expect(stored!.droppedBy).toBe(defaultIdentity());
      // The resumed drop started the trash's expiry, which waits for it.
      const timer = await armedTimer(h, table.id);
      expect(timer).toEqual({ droppedAt: stored!.droppedAt, expireAt: new Date(stored!.expireAt!).toISOString(), ended: null });
      await expectHealthy();

      // The resumed trash is an ordinary one: the table can be recalled from it.
      const restored = await h.client.undelete({ table: table.id });
      expect(restored.state).toBe('READY');
      expect(await h.shardAreas(restored)).toEqual(['live', 'live']);
    });

    test('a purge killed right after it marked the table PURGING is finished, and ends the trash timer', async () => {
      const table = await h.client.create({ table: 'rec.killedpurge', shards: 2 });
      const trashed = await h.client.trash({ table: 'rec.killedpurge', retentionSeconds: 3600 });
      const purgeId = workflowIdFor.purge(table.id, h.catalog.id);
      const { runId } = await killedAfterTransition(purgeId, () => h.client.purge({ tableId: table.id }));
      expect(await h.shardAreas(table)).toEqual(['trash', 'trash']);

      const key = { id: table.id, namespace: 'rec', name: 'killedpurge', shards: 2, params: { shards: 2 } };
      await expectReportedStuck(key, 'PURGING', 'purge', { workflowId: purgeId, runId });
      await expectRepairResumes(table.id, 'PURGING', 'purge', purgeId);

      const purged = await waitFor(
        () => h.catalog.getTable(table.id),
        (t) => t?.state === 'PURGED',
        { what: 'the resumed purge' },
      );
      expect(purged!.droppedAt).toBe(Date.parse(trashed.droppedAt!));
      expect(await h.shardAreas(table)).toEqual([null, null]);
      for (const p of table.placement) expect(existing(setFiles(storageRoot, { tableId: table.id, ...p }, 'garbage'))).toEqual([]);
      const timer: TrashTimerState = await h.temporal.workflow
        .getHandle<typeof trashExpiry>(workflowIdFor.expiry(table.id, h.catalog.id))
        .result();
      expect(timer.ended).toBe('purged');
      await expectHealthy();
    });

    test('an undelete under a new name killed right after it marked the table RESTORING is finished under that name', async () => {
      const table = await h.client.create({ table: 'rec.killedundelete', shards: 2 });
      await h.client.trash({ table: 'rec.killedundelete', retentionSeconds: 3600 });
      const undeleteId = workflowIdFor.undelete(table.id, h.catalog.id);
      const { runId } = await killedAfterTransition(undeleteId, () => h.client.undelete({ table: table.id, newName: 'rec.back' }));
      expect(await h.shardAreas(table)).toEqual(['trash', 'trash']);

      // The name is claimed with the move to RESTORING: the stuck table already bears the new one.
      const key = { id: table.id, namespace: 'rec', name: 'back', shards: 2, params: { shards: 2 } };
      await expectReportedStuck(key, 'RESTORING', 'undelete', { workflowId: undeleteId, runId });
      await expectRepairResumes(table.id, 'RESTORING', 'undelete', undeleteId);

      const ready = await waitFor(
        () => h.catalog.getTable(table.id),
        (t) => t?.state === 'READY',
        { what: 'the resumed undelete' },
      );
      expect(ready).toMatchObject({ namespace: 'rec', name: 'back', droppedAt: null, expireAt: null });
      expect(await h.shardAreas(table)).toEqual(['live', 'live']);
      const timer: TrashTimerState = await h.temporal.workflow
        .getHandle<typeof trashExpiry>(workflowIdFor.expiry(table.id, h.catalog.id))
        .result();
      expect(timer.ended).toBe('restored');
      await expectHealthy();
    });
  });

  test('orphan files are collected only after the grace period, and a misplaced shard is reported and never touched', async () => {
    // A READY table with data in its live copy, and a stale spare copy of it in the trash.
    const keeper = await h.client.create({ table: 'rec.keeper', shards: 1 });
    const keeperShard = shardOf(keeper);
    const [liveDat] = setFiles(storageRoot, keeperShard, 'live');
    await fs.promises.appendFile(liveDat!, 'the rows of rec.keeper');
    const spare = await copySet(storageRoot, keeperShard, 'live', 'trash');
    await fs.promises.writeFile(spare[0]!, 'older rows');
    const keeperBefore = await h.shardReports(keeper);
    expect(keeperBefore.map((r) => r.area)).toEqual(['live']);
    // A copy of the same shard on a node the placement does not name.
    const otherNode = h.storage.nodes.find((n) => n !== keeperShard.node)!;
    const offPlacement = await writeSet(storageRoot, { ...keeperShard, node: otherNode }, 'live');
    // A set of a table the catalog never heard of.
    const ghost: ShardRef = { tableId: keeper.id + 500, shard: 0, node: 'node-0' };
    const ghostFiles = await writeSet(storageRoot, ghost, 'live');
    // A set of a purged table, left behind (a tombstone keeps no files).
    const gone = await h.client.create({ table: 'rec.gone', shards: 1 });
    await h.client.trash({ table: 'rec.gone', retentionSeconds: 3600 });
    await h.client.purge({ tableId: gone.id });
    const goneFiles = await writeSet(storageRoot, shardOf(gone), 'trash');
    // A READY table whose only copy was moved to the trash area by hand: its data, in the wrong place.
    const moved = await h.client.create({ table: 'rec.moved', shards: 1 });
    await moveSet(storageRoot, shardOf(moved), 'live', 'trash');
    const movedFiles = setFiles(storageRoot, shardOf(moved), 'trash');

    const orphanFiles = [...spare, ...offPlacement, ...ghostFiles, ...goneFiles];
    // Their grace runs from now (a file's ctime is when it last changed), not from when the setup above began to write
    // them: however slow that was, the two passes below start well within it.
    const now = new Date();
    for (const file of orphanFiles) await fs.promises.utimes(file, now, now);
    const orphanSummary = (report: ReconcileReport) =>
      report.findings.map((f) =>
        f.kind === 'orphan'
          ? [f.kind, f.set.tableId, f.set.node, f.set.area, f.collectable]
          : f.kind === 'misplaced'
            ? [f.kind, f.set.tableId, f.set.area]
            : [f.kind],
      );

    // Right away: all reported, none collectable yet; a repair leaves every file where it is.
    const first = await h.reconcile('report');
    expect(orphanSummary(first).sort()).toEqual(
      [
        ['orphan', keeper.id, keeperShard.node, 'trash', false],
        ['orphan', keeper.id, otherNode, 'live', false],
        ['orphan', ghost.tableId, 'node-0', 'live', false],
        ['orphan', gone.id, shardOf(gone).node, 'trash', false],
        ['misplaced', moved.id, 'trash'],
      ].sort(),
    );
    expect(findingsOf(first, ghost.tableId)).toEqual([expect.objectContaining({ why: `no table ${ghost.tableId} in the catalog` })]);
    expect(findingsOf(first, gone.id)).toEqual([expect.objectContaining({ why: `table ${gone.id} is PURGED and keeps no files` })]);
    const early = await h.reconcile();
    expect(early.actions).toEqual([
      { finding: expect.stringContaining(`shard t${moved.id}-s0 in trash`) as unknown, outcome: 'left for an operator' },
    ]);
    expect(existing(orphanFiles)).toEqual(orphanFiles);

    // Past the grace: a repair collects every orphan, and only them.
    const collectableAt = Math.max(...first.findings.map((f) => (f.kind === 'orphan' ? f.collectableAt : 0)));
    await untilPast(collectableAt);
    const repaired = await h.reconcile();
    expect(repaired.actions.map((a) => a.outcome).sort()).toEqual([
      'collected',
      'collected',
      'collected',
      'collected',
      'left for an operator',
    ]);
    expect(existing(orphanFiles)).toEqual([]);
    for (const area of ['garbage', 'live', 'trash'] as const) {
      expect(existing(setFiles(storageRoot, ghost, area))).toEqual([]);
    }
    // The READY table's own copy is untouched, byte for byte.
    expect(await h.shardReports(keeper)).toEqual(keeperBefore);
    // The misplaced set is still all there, where it was.
    expect(existing(movedFiles)).toEqual(movedFiles);
    expect(orphanSummary(await h.reconcile('report'))).toEqual([['misplaced', moved.id, 'trash']]);

    // Put back where it belongs, nothing is left to report.
    await moveSet(storageRoot, shardOf(moved), 'trash', 'live');
    expect((await h.reconcile('report')).findings).toEqual([]);
  });

  test('a stale lock of a terminated operation is released, and nothing else of its table is touched', async () => {
    const table = await h.client.create({ table: 'rec.stalelock', shards: 1 });
    // A lock taken in the name of a run that has since been terminated (it never released it).
    const holder = await h.temporal.workflow.start('reconcileTables', {
      workflowId: `holder-${randomUUID()}`,
      taskQueue: `nobody-polls-${randomUUID()}`,
      args: [{ catalogId: h.catalog.id, mode: 'report' }],
    });
    const owner = { workflowId: holder.workflowId, runId: holder.firstExecutionRunId };
    expect(await h.catalog.acquireLock(`table:${table.id}`, owner, Date.now(), () => Promise.resolve(false))).toMatchObject({
      acquired: true,
    });
    await holder.terminate('test: gone without releasing');

    const report = await h.reconcile('report');
    expect(report.findings).toEqual([{ kind: 'stale-lock', resource: `table:${table.id}`, ...owner, since: anyNumber() }]);
    const repaired = await h.reconcile();
    expect(repaired.actions).toEqual([
      { finding: expect.stringContaining(`lock table:${table.id} is held by ${owner.workflowId}`) as unknown, outcome: 'released' },
    ]);
    expect(await h.catalog.listLocks()).toEqual([]);
    expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY' });
    expect(await h.shardAreas(table)).toEqual(['live']);
  });

  test('the reconciler never touches a table a running operation holds', async () => {
    // A running run to hold the lock: another table's trash expiry, waiting.
    const waiting = await h.client.create({ table: 'rec.waiting', shards: 1 });
    await h.client.trash({ table: 'rec.waiting', retentionSeconds: 3600 });
    const running = await h.temporal.workflow.getHandle(workflowIdFor.expiry(waiting.id, h.catalog.id)).describe();
    expect(running.status.name).toBe('RUNNING');
    const owner = { workflowId: running.workflowId, runId: running.runId };

    // A table with a spare copy that is an orphan past its grace...
    const held = await h.client.create({ table: 'rec.held', shards: 1 });
    const spare = await copySet(storageRoot, shardOf(held), 'live', 'trash');
    const stray = await writeSet(storageRoot, { ...shardOf(held), shard: 7 }, 'live');
    await untilPast(await graceOverAt([...spare, ...stray]));
    const before = await h.shardReports(held);
    // ... that the running run holds.
    expect(await h.catalog.acquireLock(`table:${held.id}`, owner, Date.now(), () => Promise.resolve(false))).toMatchObject({
      acquired: true,
    });

    // Its holder runs: the lock is not stale, the table is skipped, its sets are not judged.
    const report = await h.reconcile('report');
    expect(report.findings).toEqual([]);
    const repaired = await h.reconcile();
    expect(repaired.actions).toEqual([]);
    expect(existing([...spare, ...stray])).toEqual([...spare, ...stray]);
    expect(await h.catalog.listLocks()).toEqual([expect.objectContaining({ resource: `table:${held.id}`, ...owner })]);

    // Once it lets go, the same sets are orphans, and the next repair collects them.
    await h.catalog.releaseLocks(owner);
    const free = await h.reconcile('report');
    // (Sets come node by node, live before trash: the stray shard 7 is on shard 0's node.)
    expect(free.findings.map((f) => f.kind === 'orphan' && [f.set.tableId, f.set.shard, f.set.area, f.collectable])).toEqual([
      [held.id, 7, 'live', true],
      [held.id, 0, 'trash', true],
    ]);
    const collected = await h.reconcile();
    expect(collected.actions.map((a) => a.outcome)).toEqual(['collected', 'collected']);
    expect(existing([...spare, ...stray])).toEqual([]);
    expect(await h.shardReports(held)).toEqual(before);
  });

  test('the worker creates the reconcile schedule if missing, and leaves it as it is on the next start', async () => {
    const catalogId = `sched${randomUUID().slice(0, 8)}`;
    const taskQueue = `tablefate-test-schedule-${randomUUID()}`;
    const handle = h.temporal.schedule.getHandle(reconcileScheduleId(catalogId));
    expect(handle.scheduleId).toBe(`tablefate-reconcile@${catalogId}`);
    const describe = async () => {
      const d = await handle.describe();
      return {
        action: d.action,
        intervals: d.spec.intervals,
        overlap: d.policies.overlap,
        catchupWindow: d.policies.catchupWindow,
      };
    };
    const expected = (queue: string, everyMs: number) => ({
      action: expect.objectContaining({
        type: 'startWorkflow',
        workflowType: 'reconcileTables',
        workflowId: `reconcile@${catalogId}`,
        taskQueue: queue,
        args: [{ catalogId, mode: 'repair' }],
      }) as unknown,
      intervals: [{ every: everyMs }],
      overlap: ScheduleOverlapPolicy.SKIP,
      catchupWindow: 60_000,
    });
    try {
      expect(await ensureReconcileSchedule(h.temporal, { catalogId, taskQueue, everySeconds: 3600 })).toBe('created');
      expect(await describe()).toEqual(expected(taskQueue, 3_600_000));
      expect(await ensureReconcileSchedule(h.temporal, { catalogId, taskQueue, everySeconds: 3600 })).toBe('kept');
      expect(await describe()).toEqual(expected(taskQueue, 3_600_000));

      expect(await ensureReconcileSchedule(h.temporal, { catalogId, taskQueue, everySeconds: 7200 })).toBe('updated');
      expect(await describe()).toEqual(expected(taskQueue, 7_200_000));
      expect(await ensureReconcileSchedule(h.temporal, { catalogId, taskQueue, everySeconds: 7200 })).toBe('kept');

      const otherQueue = `${taskQueue}-other`;
      expect(await ensureReconcileSchedule(h.temporal, { catalogId, taskQueue: otherQueue, everySeconds: 7200 })).toBe('updated');
      expect(await describe()).toEqual(expected(otherQueue, 7_200_000));
    } finally {
      // The test server is shared by every file: a schedule left behind would keep firing.
      await handle.delete();
    }
  });
});
