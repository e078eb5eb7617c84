import type { Catalog, LockOwner, StepKey } from '../catalog/catalog';
import type { Hold } from '../domain/table';
import { catalogCalls, describeEachCatalog, leaseOf, never, owner } from './support/catalogs';

// The catalog alone, on a real SQLite file and on a real PostgreSQL server: the compare-and-set rules every
// workflow relies on, the same for both: settings, legal holds, the trash's expiry, drains and leases.

let catalog: Catalog;
const { locked, prepare, readyTable, trashedTable, acquire } = catalogCalls(() => catalog);

describeEachCatalog(
  'policies',
  (opened) => ({ catalog } = opened),
  () => {
    test('settings: global and namespace values are set, replaced, listed and unset; a journaled call answers what it first did', async () => {
      expect(await catalog.listSettings()).toEqual([]);
      await catalog.changeSetting({ key: 'trash.retentionSeconds', namespace: null, value: 3600, now: 10 });
      await catalog.changeSetting({ key: 'trash.retentionSeconds', namespace: 'ns', value: 600, now: 11 });
      await catalog.changeSetting({ key: 'trash.maxBytes', namespace: null, value: null, now: 12 });
      const all = await catalog.changeSetting({ key: 'trash.enabled', namespace: 'ns', value: false, now: 13 });
      // By key, the global value before the namespaces'. A stored null (no cap) and a stored false are values, not absences.
      expect(all).toEqual([
        { key: 'trash.enabled', namespace: 'ns', value: false, updatedAt: 13 },
        { key: 'trash.maxBytes', namespace: null, value: null, updatedAt: 12 },
        { key: 'trash.retentionSeconds', namespace: null, value: 3600, updatedAt: 10 },
        { key: 'trash.retentionSeconds', namespace: 'ns', value: 600, updatedAt: 11 },
      ]);
      expect(await catalog.listSettings()).toEqual(all);
      // Set again: replaced, not added.
      const replaced = await catalog.changeSetting({ key: 'trash.retentionSeconds', namespace: null, value: 7200, now: 14 });
      expect(replaced).toEqual([all[0], all[1], { ...all[2], value: 7200, updatedAt: 14 }, all[3]]);

      // A journaled list, then a change: the same step asked again answers the rows it answered first.
      const step = { runId: 'run-s', step: '1:listSettings' };
      expect(await catalog.listSettings(step)).toEqual(replaced);
      const unset = await catalog.changeSetting({ key: 'trash.retentionSeconds', namespace: 'ns', now: 15 });
      expect(unset).toEqual(replaced.slice(0, 3));
      expect(await catalog.listSettings(step)).toEqual(replaced);
      expect(await catalog.listSettings()).toEqual(unset);
      expect(await catalog.listSettings({ runId: 'run-s', step: '2:listSettings' })).toEqual(unset);
      // Unsetting what is not set changes nothing and is no error.
      expect(await catalog.changeSetting({ key: 'trash.retentionSeconds', namespace: 'ns', now: 16 })).toEqual(unset);

      // A journaled change is made once: made again under its key, it answers what it did and changes nothing.
      const setStep = { runId: 'run-s', step: '3:changeSetting' };
      const first = await catalog.changeSetting({ key: 'trash.maxBytes', namespace: 'ns', value: 1024, now: 17, step: setStep });
      expect(first).toContainEqual({ key: 'trash.maxBytes', namespace: 'ns', value: 1024, updatedAt: 17 });
      await catalog.changeSetting({ key: 'trash.maxBytes', namespace: 'ns', value: 2048, now: 18 });
      expect(await catalog.changeSetting({ key: 'trash.maxBytes', namespace: 'ns', value: 1024, now: 19, step: setStep })).toEqual(first);
      expect(await catalog.listSettings()).toContainEqual({ key: 'trash.maxBytes', namespace: 'ns', value: 2048, updatedAt: 18 });
    });

    test('a legal hold needs the table lock; the same reason again is a success, another is WrongState; updatedAt is left alone', async () => {
      const table = await readyTable('t');
      const who = owner('hold:1');
      const hold = { reason: 'litigation 42', since: 50 };
      const change = (h: Hold | null, by: LockOwner = who) => catalog.changeHold({ tableId: table.id, hold: h, owner: by });
      await expect(change(hold)).rejects.toMatchObject({ name: 'LockLostError' });
      await locked(`table:${table.id}`, who);
      await expect(change(hold, owner('hold:2'))).rejects.toMatchObject({ name: 'LockLostError' });
      await expect(
        catalog.changeHold({ tableId: table.id, hold, owner: who, expectName: { namespace: 'ns', name: 'other' } }),
      ).rejects.toMatchObject({ type: 'WrongState' });
      expect(await catalog.getTable(table.id)).toEqual(table);

      const held = await change(hold);
      expect(held).toEqual({ ...table, hold });
      expect(await catalog.getTable(table.id)).toEqual(held);
      // Held again for the same reason (a retry, later): the table as it is, held since the first time.
      expect(await change({ reason: 'litigation 42', since: 60 })).toEqual(held);
      await expect(change({ reason: 'audit', since: 70 })).rejects.toMatchObject({ type: 'WrongState' });
      await expect(change({ reason: null, since: 70 })).rejects.toMatchObject({ type: 'WrongState' });
      expect(await catalog.getTable(table.id)).toEqual(held);

      // Released: the table as it was before; released again: WrongState.
      expect(await change(null)).toEqual(table);
      await expect(change(null)).rejects.toMatchObject({ type: 'WrongState' });
      expect(await catalog.getTable(table.id)).toEqual(table);

      // A hold without a reason is a hold all the same.
      const anonymous = await change({ reason: null, since: 80 });
      expect(await catalog.getTable(table.id)).toEqual({ ...table, hold: { reason: null, since: 80 } });
      expect(await change({ reason: null, since: 90 })).toEqual(anonymous);
      await expect(change({ reason: 'audit', since: 90 })).rejects.toMatchObject({ type: 'WrongState' });
      await expect(catalog.changeHold({ tableId: 999, hold, owner: who })).rejects.toMatchObject({ type: 'TableNotFound' });
    });

    test('only a READY or trashed table can be held; a hold stays with its table into the trash', async () => {
      const hold = { reason: 'r', since: 20_000 };
      const trashed = await trashedTable('gone', 10_000, 60);
      const holder = await locked(`table:${trashed.id}`, owner('hold:1'));
      expect(await catalog.changeHold({ tableId: trashed.id, hold, owner: holder })).toEqual({ ...trashed, hold });
      expect(await catalog.changeHold({ tableId: trashed.id, hold: null, owner: holder })).toEqual(trashed);

      // Tables on their way somewhere, each under the lock of the operation moving it.
      const creator = await locked('name:ns.new', owner('create:ns.new'));
      const creating = await prepare('new', creator);
      if (creating.outcome !== 'prepared') throw new Error('expected a new table');
      await expect(catalog.changeHold({ tableId: creating.table.id, hold, owner: creator })).rejects.toMatchObject({ type: 'WrongState' });

      const moving = await readyTable('moving');
      const drop = await locked(`table:${moving.id}`, owner('drop:m'));
      await acquire(leaseOf(moving.id, 'lease-m', 1_000_000));
      expect(await catalog.startDrain({ tableId: moving.id, owner: drop, now: 5 }, never)).toMatchObject({ table: { state: 'DRAINING' } });
      await expect(catalog.changeHold({ tableId: moving.id, hold, owner: drop })).rejects.toMatchObject({ type: 'WrongState' });
      await catalog.transition({ tableId: moving.id, from: ['DRAINING'], to: 'TRASHING', owner: drop, now: 6 });
      await expect(catalog.changeHold({ tableId: moving.id, hold, owner: drop })).rejects.toMatchObject({ type: 'WrongState' });
      expect((await catalog.getTable(moving.id))?.hold).toBeNull();

      // A held READY table dropped: the hold goes with it into the trash.
      const kept = await readyTable('kept');
      const op = await locked(`table:${kept.id}`, owner('drop:k'));
      await catalog.changeHold({ tableId: kept.id, hold, owner: op });
      await catalog.transition({ tableId: kept.id, from: ['READY'], to: 'TRASHING', owner: op, now: 30_000 });
      const keptTrashed = await catalog.transition({
        tableId: kept.id,
        from: ['TRASHING'],
        to: 'TRASHED',
        owner: op,
        now: 30_001,
        retentionSeconds: 60,
      });
      expect(keptTrashed).toMatchObject({ state: 'TRASHED', hold });
    });

    test("a held table truncated: its rows' entry is held as the table is, so that no expiry purges them; the table stays held", async () => {
      const hold = { reason: 'litigation 43', since: 40_000 };
      const table = await readyTable('held');
      const truncate = await locked(`table:${table.id}`, owner(`truncate:${table.id}`));
      await catalog.changeHold({ tableId: table.id, hold, owner: truncate });
      const started = await catalog.startDrain({ tableId: table.id, owner: truncate, now: 41_000, truncate: true }, never);
      if ('outcome' in started) throw new Error('a truncate that holds the lock is never busy');
      const into = started.table.truncateInto!;
      const entry = await catalog.commitTruncate({ tableId: table.id, owner: truncate, now: 42_000, retentionSeconds: 60, into });
      expect(entry).toMatchObject({ id: into, state: 'TRASHED', truncatedFrom: table.id, expireAt: 102_000, hold });
      expect(await catalog.getTable(into)).toEqual(entry);
      expect(await catalog.getTable(table.id)).toMatchObject({ state: 'READY', hold });
    });

    test('the trash expiry run moves its expiry: only the trash at its drop time, and not while another operation holds the table', async () => {
      const trashed = await trashedTable('t', 10_000, 60);
      expect(trashed).toMatchObject({ droppedAt: 10_000, expireAt: 70_000 });
      const run = owner(`trash:${trashed.id}`, 'run-trash');
      const move = (expireAt: number, opts: { droppedAt?: number; by?: LockOwner; tableId?: number } = {}) =>
        catalog.changeExpiry({ tableId: opts.tableId ?? trashed.id, droppedAt: opts.droppedAt ?? 10_000, expireAt, owner: opts.by ?? run });

      const moved = await move(130_000);
      expect(moved).toEqual({ ...trashed, expireAt: 130_000, updatedAt: moved.updatedAt });
      expect(await catalog.getTable(trashed.id)).toEqual(moved);
      expect(await move(130_000)).toEqual(moved);

      // Another trash of the table (another drop time): WrongState, nothing changed.
      await expect(move(200_000, { droppedAt: 9_999 })).rejects.toMatchObject({ type: 'WrongState' });
      // A recall under way holds the table: WrongState, nothing changed.
      const recall = await locked(`table:${trashed.id}`, owner('undelete:1'));
      await expect(move(200_000)).rejects.toMatchObject({ type: 'WrongState' });
      expect((await catalog.getTable(trashed.id))?.expireAt).toBe(130_000);
      await catalog.releaseLocks(recall);
      // The run itself may hold the lock.
      await locked(`table:${trashed.id}`, run);
      expect(await move(20_000)).toMatchObject({ state: 'TRASHED', droppedAt: 10_000, expireAt: 20_000 });
      expect((await catalog.getTable(trashed.id))?.expireAt).toBe(20_000);
      // Recalled: no longer in the trash.
      await catalog.transition({ tableId: trashed.id, from: ['TRASHED'], to: 'RESTORING', owner: run, now: 21_000 });
      await expect(move(300_000)).rejects.toMatchObject({ type: 'WrongState' });
      await catalog.transition({ tableId: trashed.id, from: ['RESTORING'], to: 'READY', owner: run, now: 22_000 });
      await catalog.releaseLocks(run);
      await expect(move(300_000)).rejects.toMatchObject({ type: 'WrongState' });
      expect(await catalog.getTable(trashed.id)).toMatchObject({ state: 'READY', droppedAt: null, expireAt: null });
    });

    test('a drop of a READY table with a live lease starts DRAINING, with that lease; found DRAINING or TRASHING, it is answered as it is', async () => {
      const table = await readyTable('t');
      const other = await readyTable('u');
      const live = leaseOf(table.id, 'lease-live', 5_000);
      await acquire(live);
      await acquire(leaseOf(table.id, 'lease-old', 500));
      await acquire(leaseOf(other.id, 'lease-other', 9_000));
      const drop = owner('drop:1', 'run-d');
      const start = async (now: number, more: { expectName?: { namespace: string; name: string }; step?: StepKey } = {}) => {
        const result = await catalog.startDrain({ tableId: table.id, owner: drop, now, ...more }, never);
        if ('outcome' in result) throw new Error('a drop that holds the lock is never busy');
        return result;
      };

      await expect(start(1_000)).rejects.toMatchObject({ name: 'LockLostError' });
      await locked(`table:${table.id}`, drop);
      await expect(start(1_000, { expectName: { namespace: 'ns', name: 'other' } })).rejects.toMatchObject({ type: 'WrongState' });
      expect(await catalog.getTable(table.id)).toEqual(table);

      const step = { runId: drop.runId, step: '2:startDrain' };
      const drained = await start(1_000, { expectName: { namespace: 'ns', name: 't' }, step });
      expect(drained).toEqual({ table: { ...table, state: 'DRAINING', updatedAt: 1_000 }, leases: [live] });
      expect(await catalog.getTable(table.id)).toEqual(drained.table);
      // It takes no new lease; the one it waits for can still be released.
      await expect(acquire(leaseOf(table.id, 'lease-new', 8_000))).rejects.toMatchObject({ type: 'WrongState' });
      // Found DRAINING: as it is, with the leases still live then.
      expect(await start(2_000)).toEqual(drained);
      expect(await start(6_000)).toEqual({ table: drained.table, leases: [] });

      // The DRAINING table keeps its name: found by it, refused to a create and (the unique index) to a rename.
      expect((await catalog.findByName({ namespace: 'ns', name: 't' }))?.id).toBe(table.id);
      const creator = await locked('name:ns.t', owner('create:ns.t', 'run-c'));
      await expect(prepare('t', creator)).rejects.toMatchObject({ type: 'TableExists' });
      const renamer = await locked(`table:${other.id}`, owner('rename:u'));
      await expect(
        catalog.transition({
          tableId: other.id,
          from: ['READY'],
          to: 'READY',
          owner: renamer,
          now: 3_000,
          rename: { namespace: 'ns', name: 't' },
        }),
      ).rejects.toMatchObject({ type: 'NameTaken' });
      expect((await catalog.getTable(other.id))?.name).toBe('u');

      // The drop goes on; found TRASHING, it is answered as it is. The journaled call answers what it did first.
      const trashing = await catalog.transition({ tableId: table.id, from: ['DRAINING'], to: 'TRASHING', owner: drop, now: 7_000 });
      expect(await start(8_000)).toEqual({ table: trashing, leases: [] });
      expect(await start(8_000, { step })).toEqual(drained);
      await expect(start(8_000, { expectName: { namespace: 'ns', name: 'other' } })).rejects.toMatchObject({ type: 'WrongState' });
      // Trashed: no drop to start.
      await catalog.transition({ tableId: table.id, from: ['TRASHING'], to: 'TRASHED', owner: drop, now: 9_000, retentionSeconds: 60 });
      await expect(start(10_000)).rejects.toMatchObject({ type: 'WrongState' });
      await expect(catalog.startDrain({ tableId: 999, owner: drop, now: 1 }, never)).rejects.toMatchObject({ type: 'TableNotFound' });
    });

    test('a drop that takes the table lock itself (v17) is busy while another holds it, and holds it once it starts', async () => {
      const table = await readyTable('t');
      const drop = owner('trash:1', 'run-d');
      const start = () => catalog.startDrain({ tableId: table.id, owner: drop, now: 1_000, takeLock: true }, never);
      await locked(`table:${table.id}`, owner('hold:1', 'run-h'));
      expect(await start()).toMatchObject({ outcome: 'busy', holder: { workflowId: 'hold:1' } });
      expect(await catalog.getTable(table.id)).toEqual(table);
      await catalog.releaseLocks(owner('hold:1', 'run-h'));
      expect(await start()).toEqual({ table: { ...table, state: 'TRASHING', droppedAt: 1_000, updatedAt: 1_000 }, leases: [] });
      expect((await catalog.listLocks()).map((l) => [l.resource, l.workflowId])).toEqual([[`table:${table.id}`, 'trash:1']]);
      // A table that is not there: refused, and no lock is left behind.
      await catalog.releaseLocks(drop);
      await expect(catalog.startDrain({ tableId: 999, owner: drop, now: 1, takeLock: true }, never)).rejects.toMatchObject({
        type: 'TableNotFound',
      });
      expect(await catalog.listLocks()).toEqual([]);
    });

    test('a drop of a READY table whose leases have all expired goes straight to TRASHING', async () => {
      const table = await readyTable('t');
      const other = await readyTable('u');
      await acquire(leaseOf(table.id, 'lease-old', 500));
      await acquire(leaseOf(other.id, 'lease-other', 9_000));
      const drop = await locked(`table:${table.id}`, owner('drop:1'));
      // A lease that ends at `now` has ended.
      expect(await catalog.startDrain({ tableId: table.id, owner: drop, now: 500 }, never)).toEqual({
        table: { ...table, state: 'TRASHING', droppedAt: 500, updatedAt: 500 },
        leases: [],
      });
      expect((await catalog.getTable(table.id))?.state).toBe('TRASHING');
    });

    test('a lease is taken on a READY table only, renewed while it lasts, released once', async () => {
      const table = await readyTable('t');
      const lease = leaseOf(table.id, 'lease-1', 61_000);
      expect(await acquire(lease)).toEqual(lease);
      expect(await catalog.listLeases({ now: 2_000 })).toEqual([lease]);
      expect(await catalog.listLeases({ tableId: table.id, now: 2_000 })).toEqual([lease]);
      expect(await catalog.listLeases({ tableId: 999, now: 2_000 })).toEqual([]);
      await expect(acquire({ ...lease, expiresAt: 99_000 })).rejects.toMatchObject({ type: 'WrongState' });
      await expect(acquire(leaseOf(999, 'lease-x', 61_000))).rejects.toMatchObject({ type: 'TableNotFound' });

      // Renewed: its ttl from now.
      const renewed = await catalog.changeLease({ action: 'renew', leaseId: lease.id, now: 30_000 });
      expect(renewed).toEqual({ ...lease, expiresAt: 90_000 });
      expect(await catalog.listLeases({ now: 30_000 })).toEqual([renewed]);
      const longer = await catalog.changeLease({ action: 'renew', leaseId: lease.id, now: 40_000, ttlSeconds: 120 });
      expect(longer).toMatchObject({ id: lease.id, ttlSeconds: 120, expiresAt: 160_000, acquiredAt: lease.acquiredAt });
      expect(await catalog.listLeases({ now: 100_000 })).toEqual([expect.objectContaining({ id: lease.id, expiresAt: 160_000 })]);
      // Expired (at its expiry exactly): hidden from the list, and not renewed.
      expect(await catalog.listLeases({ now: 160_000 })).toEqual([]);
      await expect(catalog.changeLease({ action: 'renew', leaseId: lease.id, now: 160_000 })).rejects.toMatchObject({
        type: 'LeaseNotFound',
      });
      await expect(catalog.changeLease({ action: 'renew', leaseId: 'no-such', now: 1 })).rejects.toMatchObject({ type: 'LeaseNotFound' });

      // Released: deleted, and answered as it was; a second release finds none.
      const second = leaseOf(table.id, 'lease-2', 200_000);
      await acquire(second);
      expect(await catalog.changeLease({ action: 'release', leaseId: second.id })).toEqual(second);
      expect(await catalog.listLeases({ now: 170_000 })).toEqual([]);
      await expect(catalog.changeLease({ action: 'release', leaseId: second.id })).rejects.toMatchObject({ type: 'LeaseNotFound' });
      // An expired lease can still be released (its holder is done with it).
      expect(await catalog.changeLease({ action: 'release', leaseId: lease.id })).toMatchObject({ id: lease.id });
      await expect(catalog.changeLease({ action: 'release', leaseId: lease.id })).rejects.toMatchObject({ type: 'LeaseNotFound' });

      // A journaled acquire is made once: made again under its key after the lease was released, it answers the same and takes none.
      const step = { runId: 'run-l', step: '1:changeLease' };
      const third = leaseOf(table.id, 'lease-3', 300_000);
      expect(await acquire(third, step)).toEqual(third);
      await catalog.changeLease({ action: 'release', leaseId: third.id });
      expect(await acquire(third, step)).toEqual(third);
      expect(await catalog.listLeases({ now: 250_000 })).toEqual([]);
    });

    test('no lease is taken on a table that is not READY', async () => {
      const trashed = await trashedTable('gone');
      await expect(acquire(leaseOf(trashed.id, 'lease-t', 99_000))).rejects.toMatchObject({ type: 'WrongState' });
      const creator = await locked('name:ns.new', owner('create:ns.new'));
      const creating = await prepare('new', creator);
      if (creating.outcome !== 'prepared') throw new Error('expected a new table');
      await expect(acquire(leaseOf(creating.table.id, 'lease-c', 99_000))).rejects.toMatchObject({ type: 'WrongState' });
      expect(await catalog.listLeases({ now: 0 })).toEqual([]);
    });

    test('a renew with a new ttl keeps that ttl: listed with it, and the next renew uses it', async () => {
      const table = await readyTable('t');
      await acquire(leaseOf(table.id, 'lease-1', 61_000));
      const longer = await catalog.changeLease({ action: 'renew', leaseId: 'lease-1', now: 40_000, ttlSeconds: 120 });
      expect(await catalog.listLeases({ now: 40_000 })).toEqual([longer]);
      expect(await catalog.changeLease({ action: 'renew', leaseId: 'lease-1', now: 50_000 })).toMatchObject({
        ttlSeconds: 120,
        expiresAt: 170_000,
      });
    });

    test('leases are listed soonest to expire first; pruning forgets those expired before a time, and only those', async () => {
      const a = await readyTable('a');
      const b = await readyTable('b');
      const late = leaseOf(a.id, 'lease-late', 9_000);
      const soon = leaseOf(b.id, 'lease-soon', 5_000);
      const atCut = leaseOf(a.id, 'lease-at-cut', 3_000);
      const gone = leaseOf(b.id, 'lease-gone', 2_999);
      for (const lease of [late, soon, atCut, gone]) await acquire(lease);
      expect(await catalog.listLeases({ now: 0 })).toEqual([gone, atCut, soon, late]);
      expect(await catalog.listLeases({ tableId: a.id, now: 0 })).toEqual([atCut, late]);
      expect(await catalog.listLeases({ now: 4_000 })).toEqual([soon, late]);

      expect(await catalog.pruneLeases(3_000)).toBe(1);
      expect(await catalog.pruneLeases(3_000)).toBe(0);
      // The pruned lease is gone for good; the one that ran out at the cut is still there to release.
      await expect(catalog.changeLease({ action: 'release', leaseId: gone.id })).rejects.toMatchObject({ type: 'LeaseNotFound' });
      expect(await catalog.listLeases({ now: 0 })).toEqual([atCut, soon, late]);
      expect(await catalog.pruneLeases(10_000)).toBe(3);
      expect(await catalog.listLeases({ now: 0 })).toEqual([]);
    });
  },
);
