import { Worker } from '@temporalio/worker';
import { Harness, workflowBundle } from './support/harness';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { failureOf, untilPast, waitFor } from './support/wait';
import { admittedUpdates, heldPastExpiry, timerEvents } from './support/trash-runs';
import { workflowIdFor } from '../domain/operations';
import { retentionUpdate, trashTimerQuery } from '../domain/contracts';
import { InvalidInputError, LeaseNotFoundError, OnHoldError, TableBusyError, TableInTrashError, WrongStateError } from '../domain/errors';
import type { TableInfo } from '../domain/table';
import type { trashExpiry, trashTable } from '../workflows';

/**
 * The trash's policies and safety valves (issue 17) on the real dev server: runtime settings, legal holds, a trashed
 * table's retention changed through its expiry run's timer, leases and the drain, the trash switched off, the space cap.
 * The same suite on each catalog store, but for the tests of the runs' own logic (onOneStore).
 */
describe.each(['sqlite', 'postgres'] as const)('trash policies on a %s catalog', (store) => {
  let h: Harness;
  let pg: TestPostgres | undefined;
  beforeAll(async () => {
    if (store === 'postgres') pg = await sharedPostgres();
    h = await Harness.start({ catalogUrl: pg ? await pg.freshDatabase('policies') : undefined });
  });
  afterAll(async () => {
    await h.close();
    await pg?.stop();
  });

  /**
   * A test of the runs' own logic (a retention's timer, a lease's clock), the same whatever the store: the catalog's part
   * of it is catalog-policies.test.ts's, on both stores. Run on the first store only.
   */
  const onOneStore = (name: string, fn: () => Promise<void>, timeoutMs?: number) => {
    if (store === 'sqlite') test(name, fn, timeoutMs);
  };

  const stateOf = async (id: number) => (await h.catalog.getTable(id))?.state;
  const purged = (id: number, timeoutMs = 30_000) =>
    waitFor(
      () => stateOf(id),
      (s) => s === 'PURGED',
      { what: `table ${id} to be purged`, timeoutMs },
    );
  /** The run of table `id`'s trash's expiry, which its drop started. */
  const expiryRun = (id: number) => h.temporal.workflow.getHandle<typeof trashExpiry>(workflowIdFor.expiry(id, h.catalog.id));
  /** Once table `id`'s expiry run has met its expiry and found the table held: it waits for the release now. */
  const waitsForRelease = (id: number) => heldPastExpiry(expiryRun(id));

  test('a held table outlives its expiry, a purge by hand is OnHold naming the reason, and its release purges it', async () => {
    const table = await h.client.create({ table: 'hold.expiry', shards: 2 });
    const held = await h.client.hold({ table: 'hold.expiry', reason: 'case 42' });
    expect(held.hold).toMatchObject({ reason: 'case 42' });
    // Holding again for the same reason answers the table; for another, WrongState naming the first.
    expect((await h.client.hold({ table: table.id, reason: 'case 42' })).hold?.reason).toBe('case 42');
    await expect(h.client.hold({ table: table.id, reason: 'other' })).rejects.toThrow(/already on hold since .*case 42/);

    const trashed = await h.client.trash({ table: 'hold.expiry', retentionSeconds: 1 });
    expect(trashed.hold?.reason).toBe('case 42');
    await waitsForRelease(table.id);
    expect(await stateOf(table.id)).toBe('TRASHED');
    expect(await h.shardAreas(trashed)).toEqual(['trash', 'trash']);
    const refused = await failureOf(h.client.purge({ tableId: table.id }));
    expect(refused).toBeInstanceOf(OnHoldError);
    expect((refused as Error).message).toMatch(/case 42/);
    expect((await h.client.describe({ table: table.id })).hold?.reason).toBe('case 42');

    const released = await h.client.release({ table: table.id });
    expect(released.hold).toBeNull();
    await purged(table.id);
    expect(await h.shardAreas(trashed)).toEqual([null, null]);
    expect(await expiryRun(table.id).result()).toMatchObject({ ended: 'expired' });
    await expect(h.client.release({ table: table.id })).rejects.toThrow(/does not exist or was purged/);
  });

  test('a held table past its expiry is not being purged: it can be recalled, and keeps its hold', async () => {
    const table = await h.client.create({ table: 'hold.recall', shards: 1 });
    await h.client.hold({ table: table.id, reason: 'keep' });
    await h.client.trash({ table: 'hold.recall', retentionSeconds: 1 });
    await waitsForRelease(table.id);
    const back = await h.client.undelete({ table: table.id });
    expect(back).toMatchObject({ state: 'READY', hold: { reason: 'keep' } });
    expect(await h.shardAreas(back)).toEqual(['live']);
    expect(await expiryRun(table.id).result()).toMatchObject({ ended: 'restored' });
    await h.client.release({ table: table.id });
  });

  test('releasing a table not held is WrongState, and holds are refused for tables that are not READY or trashed', async () => {
    const table = await h.client.create({ table: 'hold.plain', shards: 1 });
    await expect(h.client.release({ table: 'hold.plain' })).rejects.toThrow(WrongStateError);
    await expect(h.client.release({ table: 'hold.plain' })).rejects.toThrow(/not on hold/);
    await expect(h.client.hold({ table: 'hold.plain', reason: 'x\ny' })).rejects.toThrow(InvalidInputError);
    expect((await h.client.describe({ table: table.id })).hold).toBeNull();
  });

  onOneStore('a retention shortened into the past purges the table now, through the same expiry run', async () => {
    const table = await h.client.create({ table: 'ret.short', shards: 2 });
    const trashed = await h.client.trash({ table: 'ret.short', retentionSeconds: 3600 });
    const { runId } = await expiryRun(table.id).describe();
    const shortened = Date.parse(trashed.droppedAt!) + 1000;
    await untilPast(shortened);
    const changed = await h.client.setRetention({ table: table.id, retentionSeconds: 1 });
    expect(changed.expireAt).toBe(new Date(shortened).toISOString());
    await purged(table.id);
    expect(await h.shardAreas(trashed)).toEqual([null, null]);
    // One run: the update re-armed its timer, no second run started.
    const after = await expiryRun(table.id).describe();
    expect(after.runId).toBe(runId);
    expect(await expiryRun(table.id).result()).toMatchObject({ ended: 'expired' });
  });

  onOneStore('two retention changes that reach the run in one workflow task are made in turn, and the run replays', async () => {
    const table = await h.client.create({ table: 'ret.twice', shards: 1 });
    const trashed = await h.client.trash({ table: 'ret.twice', retentionSeconds: 3600 });
    // (The expiry's run, which the drop started, has read its table and armed its timer: it takes retentions now.)
    await waitFor(
      () => expiryRun(table.id).query(trashTimerQuery),
      (timer) => timer.expireAt !== null,
      { what: 'the expiry run to arm its timer' },
    );
    await h.stopWorker();
    // Both wait for a worker, admitted by the server before it comes: its first task takes both updates at once.
    const updates = admittedUpdates(h);
    const first = updates.client.setRetention({ table: table.id, retentionSeconds: 7200 }, { timeoutMs: 60_000 });
    await updates.admitted(expiryRun(table.id), 1);
    const second = updates.client.setRetention({ table: table.id, retentionSeconds: 5400 }, { timeoutMs: 60_000 });
    await updates.admitted(expiryRun(table.id), 2);
    await h.startWorker();
    const answers = await Promise.all([first, second]);
    const dropped = Date.parse(trashed.droppedAt!);
    expect(answers.map((t) => Date.parse(t.expireAt!) - dropped).sort()).toEqual([5400_000, 7200_000]);
    const stored = (await h.catalog.getTable(table.id))!.expireAt!;
    expect([dropped + 5400_000, dropped + 7200_000]).toContain(stored);
    expect((await expiryRun(table.id).query(trashTimerQuery)).expireAt).toBe(new Date(stored).toISOString());
    // What a worker that lost the run from its cache does: replay its history so far, exactly.
    const history = await expiryRun(table.id).fetchHistory();
    // Both were accepted by one workflow task (their events follow the same task's completion).
    const events = history.events ?? [];
    const taskOf = (i: number) => events.slice(0, i).filter((e) => e.workflowTaskCompletedEventAttributes).length;
    const acceptedIn = events.flatMap((e, i) =>
      e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name === retentionUpdate.name ? [taskOf(i)] : [],
    );
    expect(acceptedIn).toEqual([acceptedIn[0], acceptedIn[0]]);
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, workflowIdFor.expiry(table.id, h.catalog.id));
  });

  onOneStore('a retention made longer shows at once and holds the table past its first expiry', async () => {
    const table = await h.client.create({ table: 'ret.long', shards: 1 });
    const trashed = await h.client.trash({ table: 'ret.long', retentionSeconds: 2 });
    const changed = await h.client.setRetention({ table: 'ret.long', retentionSeconds: 3600 });
    const expected = new Date(Date.parse(trashed.droppedAt!) + 3600_000).toISOString();
    expect(changed.expireAt).toBe(expected);
    expect((await h.client.describe({ table: table.id })).expireAt).toBe(expected);
    expect((await h.client.list({ includeTrashed: true })).find((t) => t.id === table.id)?.expireAt).toBe(expected);
    expect((await expiryRun(table.id).query(trashTimerQuery)).expireAt).toBe(expected);
    // The timer of the first expiry did not fire (moved, or set on the new one at once); past that expiry (and a second for a purge to
    // show, were one made), the table is still in the trash.
    const firstExpiry = Date.parse(trashed.expireAt!);
    expect(await timerEvents(expiryRun(table.id))).toMatchObject({ fired: 0 });
    await untilPast(firstExpiry + 1000);
    expect(await stateOf(table.id)).toBe('TRASHED');
    expect(await timerEvents(expiryRun(table.id))).toMatchObject({ fired: 0 });
    await expect(h.client.setRetention({ table: table.id, retentionSeconds: 0 })).rejects.toThrow(InvalidInputError);
    // Recalled: no retention left to change.
    await h.client.undelete({ table: table.id });
    await expect(h.client.setRetention({ table: table.id, retentionSeconds: 60 })).rejects.toThrow(
      /is READY; only a trashed table has a retention/,
    );
  });

  test('a drop waits in DRAINING for a lease, takes no new one meanwhile, and goes on when the lease is released', async () => {
    const table = await h.client.create({ table: 'lease.release', shards: 2 });
    const lease = await h.client.acquireLease('lease.release', { ttlSeconds: 120, holder: 'report@svc' });
    expect(lease).toMatchObject({ tableId: table.id, holder: 'report@svc', ttlSeconds: 120 });
    expect((await h.client.listLeases({ table: table.id })).map((l) => l.id)).toEqual([lease.id]);

    const drop = h.client.trash({ table: 'lease.release', retentionSeconds: 600 });
    await waitFor(
      () => stateOf(table.id),
      (s) => s === 'DRAINING',
      { what: 'the drop to drain' },
    );
    // No new lease on a draining table, and its name is still its own.
    await expect(h.client.acquireLease(table.id)).rejects.toThrow(/DRAINING/);
    expect((await h.client.describe({ table: 'lease.release' })).state).toBe('DRAINING');
    const released = await h.client.releaseLease(lease.id);
    expect(released.id).toBe(lease.id);
    const trashed = await drop;
    expect(trashed.state).toBe('TRASHED');
    expect(await h.shardAreas(trashed)).toEqual(['trash', 'trash']);
    expect(await h.client.listLeases({ table: table.id })).toEqual([]);
    await expect(h.client.releaseLease(lease.id)).rejects.toThrow(LeaseNotFoundError);
    // A lease on a table in the trash is refused.
    await expect(h.client.acquireLease(table.id)).rejects.toThrow(WrongStateError);
  });

  onOneStore('a drain ends when the lease expires, and an expired lease never blocks', async () => {
    const table = await h.client.create({ table: 'lease.expire', shards: 1 });
    const lease = await h.client.acquireLease(table.id, { ttlSeconds: 2 });
    const started = Date.now();
    const trashed = await h.client.trash({ table: 'lease.expire', retentionSeconds: 600 });
    expect(trashed.state).toBe('TRASHED');
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(lease.expiresAt) - 200);
    expect(Date.now() - started).toBeLessThan(20_000);
    await expect(h.client.renewLease(lease.id)).rejects.toThrow(LeaseNotFoundError);

    // A lease that expired before the drop: the drop goes straight to TRASHING.
    const other = await h.client.create({ table: 'lease.stale', shards: 1 });
    const stale = await h.client.acquireLease(other.id, { ttlSeconds: 1 });
    await untilPast(Date.parse(stale.expiresAt));
    const quick = Date.now();
    await h.client.trash({ table: 'lease.stale' });
    expect(Date.now() - quick).toBeLessThan(5000);
  });

  onOneStore('a drain past its deadline is TableBusy naming the lease, and the table is READY again and leasable', async () => {
    const table = await h.client.create({ table: 'lease.busy', shards: 2 });
    const lease = await h.client.acquireLease(table.id, { ttlSeconds: 300, holder: 'etl@host9' });
    const renewed = await h.client.renewLease(lease.id, { ttlSeconds: 600 });
    expect(Date.parse(renewed.expiresAt)).toBeGreaterThan(Date.parse(lease.expiresAt));
    const failure = await failureOf(h.client.trash({ table: 'lease.busy', drainTimeoutSeconds: 2 }));
    expect(failure).toBeInstanceOf(TableBusyError);
    expect((failure as Error).message).toContain(lease.id);
    expect((failure as Error).message).toContain('etl@host9');
    const back = await h.client.describe({ table: 'lease.busy' });
    expect(back.state).toBe('READY');
    expect(await h.shardAreas(back)).toEqual(['live', 'live']);
    expect(await h.catalog.listLocks()).toEqual([]);
    const second = await h.client.acquireLease(table.id);
    await h.client.releaseLease(second.id);
    await h.client.releaseLease(lease.id);
    expect((await h.client.trash({ table: 'lease.busy' })).state).toBe('TRASHED');
  });

  test('settings change while the worker runs: a namespace overrides the global value, and get says which applies', async () => {
    expect(await h.client.getSettings({ key: 'trash.retentionSeconds' })).toEqual([
      { key: 'trash.retentionSeconds', value: 604800, source: 'default', namespace: null },
    ]);
    await h.client.setSetting({ key: 'trash.retentionSeconds', value: '300' });
    await h.client.setSetting({ key: 'trash.retentionSeconds', value: '60', namespace: 'cfgshort' });
    expect(await h.client.getSettings({ key: 'trash.retentionSeconds', namespace: 'cfgshort' })).toEqual([
      { key: 'trash.retentionSeconds', value: 60, source: 'namespace', namespace: 'cfgshort' },
    ]);
    expect((await h.client.getSettings({ namespace: 'other' })).find((s) => s.key === 'trash.retentionSeconds')).toMatchObject({
      value: 300,
      source: 'global',
    });
    await h.client.create({ table: 'cfgshort.a', shards: 1 });
    await h.client.create({ table: 'cfglong.a', shards: 1 });
    const short = await h.client.trash({ table: 'cfgshort.a' });
    const long = await h.client.trash({ table: 'cfglong.a' });
    expect(Date.parse(short.expireAt!) - Date.parse(short.droppedAt!)).toBe(60_000);
    expect(Date.parse(long.expireAt!) - Date.parse(long.droppedAt!)).toBe(300_000);
    // A retention the drop names wins.
    await h.client.create({ table: 'cfgshort.b', shards: 1 });
    const named = await h.client.trash({ table: 'cfgshort.b', retentionSeconds: 900 });
    expect(Date.parse(named.expireAt!) - Date.parse(named.droppedAt!)).toBe(900_000);

    // The policy follows the table: recalled into another namespace, its next drop takes that namespace's retention.
    const recalled = await h.client.undelete({ table: short.id, newName: 'cfglong.from_short' });
    expect(recalled).toMatchObject({ namespace: 'cfglong', name: 'from_short' });
    const again = await h.client.trash({ table: 'cfglong.from_short' });
    expect(Date.parse(again.expireAt!) - Date.parse(again.droppedAt!)).toBe(300_000);

    await expect(h.client.setSetting({ key: 'trash.retentionSeconds', value: '0' })).rejects.toThrow(/trash.retentionSeconds/);
    await expect(h.client.setSetting({ key: 'trash.nope', value: '1' })).rejects.toThrow(InvalidInputError);
    const unset = await h.client.unsetSetting({ key: 'trash.retentionSeconds', namespace: 'cfgshort' });
    expect(unset).toMatchObject({ value: 300, source: 'global' });
    await h.client.unsetSetting({ key: 'trash.retentionSeconds' });
    expect((await h.client.getSettings({ key: 'trash.retentionSeconds' }))[0]!.source).toBe('default');
  });

  test('with the trash off, a drop deletes at once (PURGED), even one that was waiting in its drain when it was switched', async () => {
    const table = await h.client.create({ table: 'off.drain', shards: 2 });
    const lease = await h.client.acquireLease(table.id, { ttlSeconds: 120 });
    const drop = h.client.trash({ table: 'off.drain', retentionSeconds: 600 });
    await waitFor(
      () => stateOf(table.id),
      (s) => s === 'DRAINING',
      { what: 'the drop to drain' },
    );
    await h.client.setSetting({ key: 'trash.enabled', value: 'false', namespace: 'off' });
    await h.client.releaseLease(lease.id);
    const answer = await drop;
    expect(answer.state).toBe('PURGED');
    expect(await h.shardAreas(answer)).toEqual([null, null]);
    // The drop's run purged the table itself, and the expiry it had started heard that its trash ended so.
    const dropRun = h.temporal.workflow.getHandle<typeof trashTable>(workflowIdFor.trash(table.id, h.catalog.id));
    expect(await dropRun.result()).toMatchObject({ id: table.id, state: 'PURGED' });
    expect(await expiryRun(table.id).result()).toMatchObject({ ended: 'purged' });

    // A held table is kept in the trash all the same, until its release.
    const kept = await h.client.create({ table: 'off.held', shards: 1 });
    await h.client.hold({ table: kept.id });
    const trashed = await h.client.trash({ table: 'off.held', retentionSeconds: 1 });
    expect(trashed.state).toBe('TRASHED');
    await waitsForRelease(kept.id);
    expect(await stateOf(kept.id)).toBe('TRASHED');
    await h.client.release({ table: kept.id });
    await purged(kept.id);
    await h.client.unsetSetting({ key: 'trash.enabled', namespace: 'off' });
  });

  test('the space cap purges the oldest trashed tables first until the trash fits, never a held one', async () => {
    // A namespace of its own, capped alone: the other tests' trash is not counted.
    const made: TableInfo[] = [];
    for (const [name, shards] of [
      ['oldest', 3],
      ['held', 2],
      ['middle', 2],
      ['newest', 1],
    ] as const) {
      made.push(await h.client.create({ table: `cap.${name}`, shards }));
    }
    await h.client.hold({ table: 'cap.held', reason: 'audit' });
    const dropped: TableInfo[] = [];
    for (const t of made) dropped.push(await h.client.trash({ table: `cap.${t.name}` }));
    const sizes = new Map((await h.client.list({ includeTrashed: true, withSizes: true })).map((t) => [t.id, t.bytes!]));
    const [oldest, held, middle, newest] = dropped.map((t) => ({ id: t.id, bytes: sizes.get(t.id)! }));
    for (const t of [oldest, held, middle, newest]) expect(t!.bytes).toBeGreaterThan(0);
    // Room for the held table and the newest only: the oldest and the middle one go, oldest first.
    const cap = held!.bytes + newest!.bytes;
    await h.client.setSetting({ key: 'trash.maxBytes', value: String(cap), namespace: 'cap' });
    await purged(oldest!.id);
    await purged(middle!.id);
    expect(await stateOf(held!.id)).toBe('TRASHED');
    expect(await stateOf(newest!.id)).toBe('TRASHED');
    const oldestRow = await h.catalog.getTable(oldest!.id);
    const middleRow = await h.catalog.getTable(middle!.id);
    expect(oldestRow!.purgedAt!).toBeLessThanOrEqual(middleRow!.purgedAt!);

    // A new drop over the cap evicts the oldest that is not held: the newest of before, not the held one.
    const late = await h.client.create({ table: 'cap.late', shards: 1 });
    await h.client.trash({ table: 'cap.late' });
    await purged(newest!.id);
    expect(await stateOf(held!.id)).toBe('TRASHED');
    expect(await stateOf(late.id)).toBe('TRASHED');
    await h.client.unsetSetting({ key: 'trash.maxBytes', namespace: 'cap' });
  });

  test('purge all purges every trashed table of a namespace that is not held, and says which were held', async () => {
    const tables: TableInfo[] = [];
    for (const name of ['a', 'b', 'c']) tables.push(await h.client.create({ table: `pall.${name}`, shards: 1 }));
    await h.client.hold({ table: 'pall.b', reason: 'keep' });
    for (const t of tables) await h.client.trash({ table: `pall.${t.name}` });
    const plan = await h.client.planPurgeAll({ namespace: 'pall' });
    expect(plan.purge.map((t) => t.name).sort()).toEqual(['a', 'c']);
    expect(plan.held.map((t) => t.name)).toEqual(['b']);
    const seen: number[] = [];
    const summary = await h.client.purgeAll({ namespace: 'pall', concurrency: 2 }, { onProgress: (p) => seen.push(p.done) });
    expect(summary).toEqual({ purged: [tables[0]!.id, tables[2]!.id], held: [tables[1]!.id], skipped: [], failed: [] });
    expect(seen.sort()).toEqual([1, 2]);
    expect(await stateOf(tables[1]!.id)).toBe('TRASHED');
    await expect(h.client.describe({ table: 'pall.b' })).rejects.toThrow(TableInTrashError);
  });
});
