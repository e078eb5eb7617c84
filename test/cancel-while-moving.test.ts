import fs from 'node:fs';
import { Harness } from './support/harness';
import { cancelHeard } from './support/runs';
import { failureOf, sleep, waitFor } from './support/wait';
import { workflowIdFor } from '../domain/operations';
import type { RenameOps } from '../storage/rename-set';

/*
 * A cancel request that lands while a trash moves many shards. Until v8 the move was a local activity in the
 * workflow task: the cancel abandoned it while it still renamed files, the undo began at once beside it, and the
 * two tore shard sets apart (the worker quarantined a node and stopped), or the SDK's state machine failed the run
 * with a nondeterminism error and left it running with the table TRASHING and locked. Now each node's share is an
 * activity that hears the cancel through its heartbeats, stops, puts back the set it was renaming, and only then
 * does the workflow take the move back.
 */

/** A disk that renames one file at a time, `delayMs` each: at 80 ms, moving 64 shards takes ten seconds. */
class SlowDisk implements RenameOps {
  delayMs = 0;
  renamed = 0;
  private queue: Promise<void> = Promise.resolve();
  rename(from: string, to: string): Promise<void> {
    const next = this.queue.then(async () => {
      await sleep(this.delayMs);
      await fs.promises.rename(from, to);
      this.renamed++;
    });
    this.queue = next.catch(() => undefined);
    return next;
  }
}

const disk = new SlowDisk();
let h: Harness;
beforeAll(async () => {
  h = await Harness.start({ renameOps: disk });
});
afterAll(async () => {
  await h.close();
});

test('a trash of many shards cancelled mid-move stops the move, takes it back before answering, and ends cancelled', async () => {
  const table = await h.client.create({ table: 'moving.many', shards: 64 }, { timeoutMs: 60_000 });
  const before = await h.shardReports(table);
  const run = h.temporal.workflow.getHandle(workflowIdFor.trash(table.id, h.catalog.id));

  disk.delayMs = 80;
  const renamedBefore = disk.renamed;
  const call = failureOf(h.client.trash({ table: 'moving.many', retentionSeconds: 3600 }, { timeoutMs: 60_000 }));
  await waitFor(
    () => Promise.resolve(disk.renamed - renamedBefore),
    (n) => n >= 6,
    { what: 'the move to the trash to be under way', intervalMs: 10 },
  );
  await run.cancel();
  await cancelHeard(run);

  const err = await call;
  // The answer comes once the compensation is over: the table is READY, every shard live and whole, right away.
  expect(err).toMatchObject({ type: 'WorkflowCancelled' });
  expect(await h.catalog.getTable(table.id)).toMatchObject({ state: 'READY', droppedAt: null, expireAt: null });
  expect(await h.shardReports(table)).toEqual(before);
  expect(h.fatalErrors).toEqual([]);
  expect(await h.storage.listQuarantined()).toEqual([]);

  await run.result().catch(() => undefined);
  expect((await run.describe()).status.name).toBe('CANCELLED');
  expect((await h.catalog.listLocks()).filter((lock) => lock.workflowId === run.workflowId)).toEqual([]);

  const events = (await run.fetchHistory()).events ?? [];
  // No workflow task failed (the nondeterminism error of v8 showed here), and none was kept alive by a long local
  // activity: the shard changes were activities, one per node and step, and the interrupted ones acknowledged the
  // cancel before the undo was scheduled.
  expect(events.filter((e) => e.workflowTaskFailedEventAttributes)).toEqual([]);
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
