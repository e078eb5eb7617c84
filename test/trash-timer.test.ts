import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Harness } from './support/harness';
import { failureOf, untilPast, waitFor } from './support/wait';
import { timerEvents, timerFired, armedTimer } from './support/trash-runs';
import { RenameGate } from './support/rename-gate';
import { cancelHeard } from './support/runs';
import { DevServer } from '../servers/dev-server';
import { workflowIdFor } from '../domain/operations';
import { trashTimerQuery } from '../domain/contracts';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { trashExpiry } from '../workflows';

const purgedIn = (h: Harness, tableId: number) =>
  waitFor(
    () => h.catalog.getTable(tableId),
    (t) => t?.state === 'PURGED',
    { what: `table ${tableId} to be purged`, timeoutMs: 60_000 },
  );

describe('on the shared server', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.start();
  });
  afterAll(async () => {
    await h.close();
  });

  test('the trash call answers at once and the timer purges at expiry, although the worker was down', async () => {
    const table = await h.client.create({ table: 'timer.down', shards: 3 });
    const trashed = await h.client.trash({ table: 'timer.down', retentionSeconds: 3 });
    expect(trashed.state).toBe('TRASHED');
    const timer = await armedTimer(h, table.id);
    expect(timer).toEqual({ droppedAt: Date.parse(trashed.droppedAt!), expireAt: trashed.expireAt, ended: null });

    await h.stopWorker();
    // The server's timer fires with no worker to hear it: the table stays in the trash until one comes.
    const run = h.temporal.workflow.getHandle(workflowIdFor.expiry(table.id, h.catalog.id));
    await timerFired(run);
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(trashed.expireAt!));
    expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHED');
    await h.startWorker();

    const purged = await purgedIn(h, table.id);
    expect(purged?.purgedAt).toBeGreaterThanOrEqual(Date.parse(trashed.expireAt!));
    expect(await h.shardAreas(trashed)).toEqual([null, null, null]);
    const result = (await h.temporal.workflow.getHandle(workflowIdFor.expiry(table.id, h.catalog.id)).result()) as unknown;
    expect(result).toMatchObject({ ended: 'expired' });
    expect(await h.catalog.listLocks()).toEqual([]);
  });

  test('a cancel request on a waiting trash is ignored: the run keeps its timer, says why, and purges at expiry', async () => {
    const table = await h.client.create({ table: 'timer.cancel', shards: 2 });
    await h.client.trash({ table: 'timer.cancel', retentionSeconds: 4 });
    const run = h.temporal.workflow.getHandle(workflowIdFor.expiry(table.id, h.catalog.id));
    await run.cancel();
    // What the web UI shows of the run (its current details) once the request has reached it.
    const details = await waitFor(
      () => run.query<{ currentDetails: string }>('__temporal_workflow_metadata').then((m) => m.currentDetails),
      (d) => d.startsWith('cancel request ignored'),
      { what: 'the run to say why it ignored the cancel request' },
    );
    expect(details).toMatch(/recall it or purge it to end this trash/);
    expect((await run.describe()).status.name).toBe('RUNNING');
    expect((await run.query(trashTimerQuery)).ended).toBeNull();
    expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHED');

    await purgedIn(h, table.id);
    expect(await run.result()).toMatchObject({ ended: 'expired' });
    expect(await h.shardAreas(table)).toEqual([null, null]);
  });

  test('an undelete before expiry ends the timer: the table is still READY well after the old expiry', async () => {
    const table = await h.client.create({ table: 'timer.saved', shards: 2 });
    const trashed = await h.client.trash({ table: 'timer.saved', retentionSeconds: 2 });
    await h.client.undelete({ table: 'timer.saved' });
    const result = (await h.temporal.workflow.getHandle(workflowIdFor.expiry(table.id, h.catalog.id)).result()) as unknown;
    expect(result).toMatchObject({ ended: 'restored' });

    // Its timer did not fire (cancelled, or never set: the recall came before the run began); past the old expiry (and
    // two seconds for a purge to show, were one made), the table is READY.
    expect(await timerEvents(h.temporal.workflow.getHandle(workflowIdFor.expiry(table.id, h.catalog.id)))).toMatchObject({
      fired: 0,
    });
    await untilPast(Date.parse(trashed.expireAt!) + 2000);
    expect((await h.client.describe({ table: table.id })).state).toBe('READY');
    expect(await h.shardAreas(table)).toEqual(['live', 'live']);
  });

  test('a timer that fires while an undelete holds the lock finds the table restored and does nothing', async () => {
    const table = await h.client.create({ table: 'timer.overlap', shards: 2 });
    const trashed = await h.client.trash({ table: 'timer.overlap', retentionSeconds: 2 });
    // Moving the shards back fails a few times (both shards in each attempt), so the undelete still holds the lock
    // when the timer fires: four attempts fail, and their backoffs add up to 3 s.
    h.storage.faults.inject({ op: 'moveShard', tableId: table.id, kind: 'transient', times: 8 });
    const restored = await h.client.undelete({ table: table.id });
    expect(restored.state).toBe('READY');
    expect(Date.now()).toBeGreaterThan(Date.parse(trashed.expireAt!));

    const expiryRun = h.temporal.workflow.getHandle<typeof trashExpiry>(workflowIdFor.expiry(table.id, h.catalog.id));
    const ended = await expiryRun.result();
    // The timer fired first and its purge (in the expiry run) waited for the lock, then found the table restored.
    expect(ended.ended).toBe('expired');
    await expect(h.temporal.workflow.getHandle(workflowIdFor.purge(table.id, h.catalog.id)).describe()).rejects.toThrow(
      WorkflowNotFoundError,
    );
    expect((await h.client.describe({ table: table.id })).state).toBe('READY');
    expect(await h.shardAreas(table)).toEqual(['live', 'live']);
    expect(await h.catalog.listLocks()).toEqual([]);
  });

  test("a drop whose expiry id is still taken by an ended trash's run terminates that run and starts its own", async () => {
    const table = await h.client.create({ table: 'timer.taken', shards: 1 });
    const expiryId = workflowIdFor.expiry(table.id, h.catalog.id);
    // An earlier trash's expiry that has not closed: a run at the id, on a queue no worker polls, of another drop time.
    const earlier = await h.temporal.workflow.start('trashExpiry', {
      workflowId: expiryId,
      taskQueue: `nobody-${table.id}`,
      args: [{ tableId: table.id, droppedAt: 1, catalogId: h.catalog.id }],
      memo: { droppedAt: 1 },
    });
    const trashed = await h.client.trash({ table: 'timer.taken', retentionSeconds: 3600 });
    expect(trashed.state).toBe('TRASHED');
    const old = await h.temporal.workflow.getHandle(expiryId, earlier.firstExecutionRunId).describe();
    expect(old.status.name).toBe('TERMINATED');
    const timer = await armedTimer(h, table.id);
    expect(timer).toEqual({ droppedAt: Date.parse(trashed.droppedAt!), expireAt: trashed.expireAt, ended: null });
    await h.client.purge({ tableId: table.id });
    expect((await h.temporal.workflow.getHandle<typeof trashExpiry>(expiryId).result()).ended).toBe('purged');
  });

  test("a drop, a recall and a drop again at once: the first trash's expiry is ended, not waited for, and the second waits", async () => {
    const table = await h.client.create({ table: 'timer.again', shards: 1 });
    await h.client.trash({ table: 'timer.again', retentionSeconds: 3600 });
    const first = await h.temporal.workflow.getHandle(workflowIdFor.expiry(table.id, h.catalog.id)).describe();
    await h.client.undelete({ table: table.id });
    const again = await h.client.trash({ table: 'timer.again', retentionSeconds: 3600 });
    // Terminated by the second drop if it had not begun yet (a second after its drop), or closed by itself, restored.
    const closed = await h.temporal.workflow.getHandle(first.workflowId, first.runId).describe();
    expect(['TERMINATED', 'COMPLETED']).toContain(closed.status.name);
    expect(await armedTimer(h, table.id)).toEqual({ droppedAt: Date.parse(again.droppedAt!), expireAt: again.expireAt, ended: null });
  });
});

// Operations held half way, at a disk whose renames wait at a gate.
describe('while shards are moving', () => {
  const gate = new RenameGate();
  let slow: Harness;
  beforeAll(async () => {
    slow = await Harness.start({ renameOps: gate });
  });
  afterAll(async () => {
    gate.open();
    await slow.close();
  });

  // Before the table is in the trash, a cancel is an ordinary one: the trash stops and takes back what it moved, and the
  // expiry its move started, begun meanwhile, finds the table live again and ends.
  test('a trash is compensated by a cancel request: the table is READY with its shards live, the run ends cancelled, its expiry ended', async () => {
    const table = await slow.client.create({ table: 'timer.moving', shards: 2 });
    const run = slow.temporal.workflow.getHandle(workflowIdFor.trash(table.id, slow.catalog.id));
    const expiry = slow.temporal.workflow.getHandle<typeof trashExpiry>(workflowIdFor.expiry(table.id, slow.catalog.id));
    gate.hold();
    let call: Promise<unknown>;
    try {
      call = failureOf(slow.client.trash({ table: 'timer.moving', retentionSeconds: 3600 }));
      await gate.someoneWaiting(table.id);
      await waitFor(
        () => expiry.query(trashTimerQuery).catch(() => undefined),
        (state) => state !== undefined,
        { what: 'the expiry to begin while the shards move' },
      );
      await run.cancel();
      await cancelHeard(run);
    } finally {
      gate.open(); // the compensation moves the shards back: it needs the disk too
    }
    expect(await call).toMatchObject({ type: 'WorkflowCancelled' });
    expect((await run.describe()).status.name).toBe('CANCELLED');
    expect(await slow.catalog.getTable(table.id)).toMatchObject({ state: 'READY', droppedAt: null, expireAt: null });
    expect(await slow.shardAreas(table)).toEqual(['live', 'live']);
    expect(await slow.catalog.listLocks()).toEqual([]);
    expect((await expiry.result()).ended).toBe('restored');
  }, 40_000);

  test("a drop whose move outlasts its expiry's first second: the expiry, started with the move, waits for the commit, then for the expiry from the drop time", async () => {
    const table = await slow.client.create({ table: 'timer.longmove', shards: 2 });
    const expiry = slow.temporal.workflow.getHandle<typeof trashExpiry>(workflowIdFor.expiry(table.id, slow.catalog.id));
    gate.hold();
    let dropping: Promise<Awaited<ReturnType<typeof slow.client.trash>>>;
    let moving: Awaited<ReturnType<typeof slow.catalog.getTable>>;
    let startedRun: string;
    try {
      dropping = slow.client.trash({ table: 'timer.longmove', retentionSeconds: 3600 });
      await gate.someoneWaiting(table.id);
      // The table is on its way, stamped with its drop time, and its expiry runs already, with that drop time.
      moving = await slow.catalog.getTable(table.id);
      expect(moving).toMatchObject({ state: 'TRASHING', expireAt: null });
      expect(moving!.droppedAt).toEqual(expect.any(Number));
      const started = await expiry.describe();
      expect(started.memo).toMatchObject({ droppedAt: moving!.droppedAt });
      startedRun = started.runId;
      // Begun (a second after its start), it reads the table still moving and looks again, armed with no expiry.
      await waitFor(
        () => expiry.query(trashTimerQuery).catch(() => undefined),
        (state) => state !== undefined,
        { what: 'the expiry to begin while the shards move' },
      );
      expect(await expiry.query(trashTimerQuery)).toEqual({ droppedAt: moving!.droppedAt, expireAt: null, ended: null });
    } finally {
      gate.open();
    }
    const trashed = await dropping;
    // The drop time is the one stamped when the table went to the trash, not the commit's, and the expiry counts from it.
    expect(Date.parse(trashed.droppedAt!)).toBe(moving!.droppedAt);
    expect(Date.parse(trashed.expireAt!)).toBe(moving!.droppedAt! + 3600 * 1000);
    expect(await armedTimer(slow, table.id)).toEqual({ droppedAt: moving!.droppedAt, expireAt: trashed.expireAt, ended: null });
    // The run started with the move is the one that waits: the commit started none.
    expect((await expiry.describe()).runId).toBe(startedRun!);
    await slow.client.undelete({ table: table.id });
    expect((await expiry.result()).ended).toBe('restored');
  }, 40_000);

  test('a hold asked again for its reason while the held table is being recalled waits for the recall and answers it READY', async () => {
    const table = await slow.client.create({ table: 'timer.heldrecall', shards: 2 });
    await slow.client.hold({ table: table.id, reason: 'audit' });
    await slow.client.trash({ table: 'timer.heldrecall', retentionSeconds: 3600 });
    gate.hold();
    let recall: Promise<unknown>;
    let again: Promise<unknown>;
    try {
      recall = slow.client.undelete({ table: table.id });
      await gate.someoneWaiting(table.id);
      expect(await slow.catalog.getTable(table.id)).toMatchObject({ state: 'RESTORING', hold: { reason: 'audit' } });
      again = slow.client.hold({ table: table.id, reason: 'audit' });
    } finally {
      gate.open();
    }
    expect(await recall).toMatchObject({ state: 'READY' });
    expect(await again).toMatchObject({ id: table.id, state: 'READY', hold: { reason: 'audit' } });
    await slow.client.release({ table: table.id });
  }, 40_000);
});

test('the timer survives a restart of the dev server on the same db file', async () => {
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-restart-'));
  const home = path.join(dir, 'home');
  const dbFile = path.join(dir, 'temporal.db');
  let server = await DevServer.start({ stateDir: dir, dbFile, headless: true });
  let h = await Harness.start({ address: server.address, home });
  const taskQueue = h.taskQueue;
  try {
    const table = await h.client.create({ table: 'timer.restart', shards: 2 });
    const trashed = await h.client.trash({ table: 'timer.restart', retentionSeconds: 3 });
    await h.close();
    await server.stop();

    // The expiry passes while the server is down.
    await untilPast(Date.parse(trashed.expireAt!));
    server = await DevServer.start({ stateDir: dir, dbFile, headless: true });
    h = await Harness.start({ address: server.address, home, taskQueue });
    await purgedIn(h, table.id);
    expect(await h.shardAreas(trashed)).toEqual([null, null]);
    expect((await h.client.describe({ table: table.id })).state).toBe('PURGED');
  } finally {
    await h.close();
    await server.stop();
    await fs.promises.rm(dir, { recursive: true, force: true });
  }
});
