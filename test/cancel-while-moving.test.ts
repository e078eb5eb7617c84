import fs from 'node:fs';
import type { WorkflowHandle } from '@temporalio/client';
import { Harness } from './support/harness';
import { cancelHeard } from './support/runs';
import { failureOf, sleep, waitFor } from './support/wait';
import { workflowIdFor } from '../domain/operations';
import type { TableInfo } from '../domain/table';
import type { RenameOps } from '../storage/rename-set';
import { SHARD_EXTENSIONS } from '../storage/shard-files';

/*
 * A cancel request that lands while a trash moves many shards. Until v8 the move was a local activity that the
 * cancel abandoned while it still renamed files: the undo began at once beside it, and the two tore shard sets
 * apart (the worker quarantined a node and stopped), or the SDK's state machine failed the run with a
 * nondeterminism error and left it running with the table TRASHING and locked. Since v14 the move is again made in
 * the workflow task where this worker serves the nodes, a few shards per local activity, each awaited where the
 * cancel cannot reach it: the cancel is taken between two calls. Where other workers serve the nodes, each node's
 * share is an activity that hears the cancel through its heartbeats, stops, and puts back the set it was renaming.
 * Either way the undo begins only once the move has ended.
 */

/** A disk that renames one file at a time, `delayMs` each, and remembers which way each rename went, and whose shard. */
class SlowDisk implements RenameOps {
  delayMs = 0;
  readonly renames: Array<'to trash' | 'back'> = [];
  readonly shards: string[] = [];
  private queue: Promise<void> = Promise.resolve();
  rename(from: string, to: string): Promise<void> {
    const next = this.queue.then(async () => {
      await sleep(this.delayMs);
      await fs.promises.rename(from, to);
      this.renames.push(to.includes('/trash/') ? 'to trash' : 'back');
      this.shards.push(/t\d+-s\d+/.exec(to)?.[0] ?? to);
    });
    this.queue = next.catch(() => undefined);
    return next;
  }
}

/** 64 shards, three files each (SHARD_EXTENSIONS): at 80 ms a rename, the whole move takes 15 seconds, one call of 16 shards 3.8 s. */
const SHARDS = 64;

/**
 * Starts a trash of a table of many shards on the slow disk, cancels it once the move is under way, and checks what
 * must hold whatever the path: the caller told "cancelled" only once the table is READY with every shard live and
 * whole, no storage fault, the run CANCELLED with no failed workflow task and no lock left, and no rename of the undo
 * before the last of the move. Answers the run's history and the renames of the trash, for each path's own checks.
 */
async function cancelMidMove(h: Harness, disk: SlowDisk, name: string) {
  const table: TableInfo = await h.client.create({ table: name, shards: SHARDS }, { timeoutMs: 60_000 });
  const before = await h.shardReports(table);
  const run: WorkflowHandle = h.temporal.workflow.getHandle(workflowIdFor.trash(table.id, h.catalog.id));

  disk.delayMs = 80;
  const first = disk.renames.length;
  const call = failureOf(h.client.trash({ table: name, retentionSeconds: 3600 }, { timeoutMs: 60_000 }));
  await waitFor(
    () => Promise.resolve(disk.renames.length - first),
    (n) => n >= 6,
    { what: 'the move to the trash to be under way', intervalMs: 10 },
  );
  await run.cancel();
  await cancelHeard(run);
  // The rest goes faster: what matters is the order of the renames, not how long the undo takes.
  disk.delayMs = 20;

  const err = await call;
  disk.delayMs = 0;
  expect(err).toMatchObject({ type: 'WorkflowCancelled' });
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY', droppedAt: null, expireAt: null });
  expect(await h.shardReports(table)).toEqual(before);
  expect(h.fatalErrors).toEqual([]);
  expect(await h.storage.listQuarantined()).toEqual([]);

  await run.result().catch(() => undefined);
  expect((await run.describe()).status.name).toBe('CANCELLED');
  expect((await h.catalog.listLocks()).filter((lock) => lock.workflowId === run.workflowId)).toEqual([]);

  const renames = disk.renames.slice(first);
  const moved = renames.filter((way) => way === 'to trash').length;
  const shardsMoved = new Set(disk.shards.slice(first).filter((_, i) => renames[i] === 'to trash')).size;
  // No shard is moved back before its move has ended. (Across shards, a node that hears the cancel puts back the set it
  // was renaming while another node still finishes its own: only each shard's order is the undo's to keep.)
  const shardsOf = disk.shards.slice(first);
  for (const shard of new Set(shardsOf)) {
    const ways = renames.filter((_, i) => shardsOf[i] === shard);
    const firstBack = ways.includes('back') ? ways.indexOf('back') : ways.length;
    expect({ shard, movedAfterBack: ways.slice(firstBack).includes('to trash') }).toEqual({ shard, movedAfterBack: false });
  }
  // Every file the move took to the trash came back (the undo may also find nothing to do for a shard not moved).
  expect(renames.filter((way) => way === 'back')).toHaveLength(moved);
  const events = (await run.fetchHistory()).events ?? [];
  // No workflow task failed: the nondeterminism error of v8 showed here.
  expect(events.filter((e) => e.workflowTaskFailedEventAttributes)).toEqual([]);
  return { table, events, moved, shardsMoved };
}

describe('the nodes served by the worker that runs the trash (the embedded default)', () => {
  const disk = new SlowDisk();
  let h: Harness;
  beforeAll(async () => {
    // A workflow task kept alive past 80 % of its timeout is handed on (the SDK's heartbeat): at 2 s, every 1.6 s, so
    // that each call of the move outlasts a task, as a long move on a 10 s task does.
    h = await Harness.start({ renameOps: disk, workflowTaskTimeoutMs: 2000 });
  });
  afterAll(() => h.close());

  test('a trash cancelled mid-move ends the call under way, takes the cancel before the next, and undoes only then', async () => {
    const { events, moved, shardsMoved } = await cancelMidMove(h, disk, 'moving.here');
    // The move was local activities only, and the cancel stopped it between two of them: whole calls of 16 shards.
    expect(events.filter((e) => e.activityTaskScheduledEventAttributes)).toEqual([]);
    expect(moved).toBeGreaterThan(0);
    expect(shardsMoved).toBeLessThan(SHARDS);
    expect(shardsMoved % 16).toBe(0);
    // Every shard the move began it finished: no set was stopped and put back mid-way, as an abandoned call's is.
    expect(moved).toBe(shardsMoved * SHARD_EXTENSIONS.length);
    // The calls outlasted their workflow tasks (handed on by the SDK, not failed, as the check above says).
    expect(events.filter((e) => e.workflowTaskCompletedEventAttributes).length).toBeGreaterThan(2);
  }, 90_000);

  // Since v18 a recall's lock attempt makes its first shard call too: a cancel waits for that call as for any other.
  test('a recall cancelled during the call that took its lock ends that call, then takes the cancel: TRASHED, every shard in the trash', async () => {
    const table = await h.client.create({ table: 'moving.back', shards: 4 });
    await h.client.trash({ table: 'moving.back', retentionSeconds: 3600 });
    const trashed = await h.shardReports(table);
    const run: WorkflowHandle = h.temporal.workflow.getHandle(workflowIdFor.undelete(table.id, h.catalog.id));
    disk.delayMs = 150;
    const first = disk.renames.length;
    const call = failureOf(h.client.undelete({ table: table.id }));
    await waitFor(
      () => Promise.resolve(disk.renames.length - first),
      (n) => n >= 1,
      { what: 'the recall to be moving shards back', intervalMs: 10 },
    );
    await run.cancel();
    await cancelHeard(run);
    disk.delayMs = 0;

    expect(await call).toMatchObject({ type: 'WorkflowCancelled' });
    expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'TRASHED', name: 'back' });
    expect(await h.shardReports(table)).toEqual(trashed);
    expect(h.fatalErrors).toEqual([]);
    // The call was not abandoned: it brought all four shards back, and only then did the undo take them to the trash.
    const renames = disk.renames.slice(first);
    expect(renames.filter((way) => way === 'back')).toHaveLength(4 * SHARD_EXTENSIONS.length);
    expect(renames.lastIndexOf('back')).toBeLessThan(renames.indexOf('to trash'));
    const events = (await run.fetchHistory()).events ?? [];
    expect(events.filter((e) => e.workflowTaskFailedEventAttributes)).toEqual([]);
    expect((await h.catalog.listLocks()).filter((lock) => lock.workflowId === run.workflowId)).toEqual([]);
  }, 60_000);

  // Where other workers serve the nodes, node by node as they answer: storage-nodes.test.ts.
  test('a long recall reports how many shards are back as its calls end (Pegasus recall progress)', async () => {
    const table = await h.client.create({ table: 'moving.recalled', shards: SHARDS }, { timeoutMs: 60_000 });
    await h.client.trash({ table: 'moving.recalled', retentionSeconds: 3600 }, { timeoutMs: 60_000 });
    // About a second a call of 16 shards: the progress is asked while the task that runs them is handed on.
    disk.delayMs = 20;
    const seen: Array<{ shardsBack: number; shards: number }> = [];
    const restored = await h.client.undelete({ table: table.id }, { onProgress: (p) => seen.push({ ...p }), timeoutMs: 60_000 });
    disk.delayMs = 0;
    expect(restored.state).toBe('READY');
    expect(seen.every((p) => p.shards === SHARDS && p.shardsBack % 16 === 0)).toBe(true);
    expect(seen.some((p) => p.shardsBack > 0 && p.shardsBack < SHARDS)).toBe(true);
    const counts = seen.map((p) => p.shardsBack);
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
  }, 90_000);
});

describe('the nodes served by workers of their own (remote storage)', () => {
  const disk = new SlowDisk();
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.start({ renameOps: disk, storage: 'remote' });
  });
  afterAll(() => h.close());

  test('a trash cancelled mid-move stops each node’s activity, which acknowledges before the undo is scheduled', async () => {
    const { table, events, moved } = await cancelMidMove(h, disk, 'moving.remote');
    // Each node's activity stopped within about a second of the cancel, before the last of its files.
    expect(moved).toBeLessThan(SHARD_EXTENSIONS.length * SHARDS);
    const scheduled = events.filter((e) => e.activityTaskScheduledEventAttributes);
    expect(new Set(scheduled.map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name))).toEqual(
      new Set(['changeShardsOnNode']),
    );
    const nodes = new Set(table.placement.map((p) => p.node)).size;
    const [moves, undos] = [scheduled.slice(0, nodes), scheduled.slice(nodes)];
    expect(undos.length).toBeLessThanOrEqual(nodes);
    const moveIds = new Set(moves.map((e) => Number(e.eventId)));
    const ends = events.filter((e) => {
      const ended = e.activityTaskCanceledEventAttributes ?? e.activityTaskCompletedEventAttributes ?? e.activityTaskFailedEventAttributes;
      return ended && moveIds.has(Number(ended.scheduledEventId));
    });
    expect(ends.some((e) => e.activityTaskCanceledEventAttributes)).toBe(true);
    expect(ends).toHaveLength(nodes);
    const lastEnd = Math.max(...ends.map((e) => Number(e.eventId)));
    for (const undo of undos) expect(Number(undo.eventId)).toBeGreaterThan(lastEnd);
  }, 90_000);
});
