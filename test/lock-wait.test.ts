import { Harness } from './support/harness';
import { runsOf } from './support/runs';
import { waitFor } from './support/wait';
import { workflowIdFor } from '../domain/operations';
import type { LockOwner } from '../catalog/catalog';

describe('an operation waiting for a busy table', () => {
  let h: Harness;
  let holder: LockOwner;
  beforeAll(async () => {
    // Short waits, few tries per run: the same code as the defaults, at a pace a test can watch.
    h = await Harness.start({ lockWait: { firstMs: 50, maxMs: 300, attemptsPerRun: 4 } });
    // A real running workflow to hold locks in these tests: a trash's expiry waiting on its week-long timer.
    const other = await h.client.create({ table: 'wait.holder', shards: 1 });
    await h.client.trash({ table: 'wait.holder' });
    const run = await h.temporal.workflow.getHandle(workflowIdFor.expiry(other.id, h.catalog.id)).describe();
    holder = { workflowId: run.workflowId, runId: run.runId };
  });
  afterAll(async () => {
    await h.close();
  });

  const hold = async (tableId: number) => {
    const taken = await h.catalog.acquireLock(`table:${tableId}`, holder, Date.now(), () => Promise.resolve(false));
    expect(taken).toMatchObject({ acquired: true });
  };

  test('a purge backs off on timers and continues as new while it waits: many tries, every run small, then it purges', async () => {
    const table = await h.client.create({ table: 'wait.purged', shards: 2 });
    await h.client.trash({ table: 'wait.purged' });
    await hold(table.id);
    const purging = h.client.purge({ tableId: table.id });
    const workflowId = workflowIdFor.purge(table.id, h.catalog.id);
    await waitFor(
      () => runsOf(h.temporal, workflowId),
      (runs) => runs.length >= 4,
      { what: 'the purge to continue as new three times' },
    );
    expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHED');

    await h.catalog.releaseLocks(holder);
    expect((await purging).state).toBe('PURGED');
    const runs = await runsOf(h.temporal, workflowId);
    expect(runs.slice(0, -1).every((r) => r.status === 'CONTINUED_AS_NEW')).toBe(true);
    expect(runs.at(-1)!.status).toBe('COMPLETED');
    // Four tries per run, each a handful of events: the history of a run is bounded however long the wait.
    for (const run of runs) expect(run.events).toBeLessThan(60);
    expect(await h.shardAreas(table)).toEqual([null, null]);
  });

  test('a trash whose run continued as new while it waited still answers its caller', async () => {
    const table = await h.client.create({ table: 'wait.trashed', shards: 2 });
    await hold(table.id);
    const trashing = h.client.trash({ table: 'wait.trashed', retentionSeconds: 3600 });
    const workflowId = workflowIdFor.trash(table.id, h.catalog.id);
    await waitFor(
      () => runsOf(h.temporal, workflowId),
      (runs) => runs.length >= 3,
      { what: 'the trash to continue as new twice' },
    );
    expect((await h.catalog.getTable(table.id))?.state).toBe('READY');

    await h.catalog.releaseLocks(holder);
    const trashed = await trashing;
    expect(trashed.state).toBe('TRASHED');
    expect(Date.parse(trashed.expireAt!) - Date.parse(trashed.droppedAt!)).toBe(3600_000);
    expect(await h.shardAreas(table)).toEqual(['trash', 'trash']);
  });

  test('a lock whose holder has closed is taken over at once, without a wait', async () => {
    const table = await h.client.create({ table: 'wait.stale', shards: 1 });
    // The table's create run: it has completed, so its lock is a leftover anyone may take over.
    const create = await h.temporal.workflow.getHandle(workflowIdFor.create({ namespace: 'wait', name: 'stale' }, h.catalog.id)).describe();
    const closed = { workflowId: create.workflowId, runId: create.runId };
    await h.catalog.acquireLock(`table:${table.id}`, closed, Date.now(), () => Promise.resolve(false));
    expect((await h.client.trash({ table: 'wait.stale' })).state).toBe('TRASHED');
    const runs = await runsOf(h.temporal, workflowIdFor.trash(table.id, h.catalog.id));
    expect(runs).toHaveLength(1);
  });
});
