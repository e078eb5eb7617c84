import type { Catalog, LockOwner, StepKey } from '../catalog/catalog';
import { CatalogNotFoundError } from '../domain/errors';
import { catalogCalls, closed, describeEachCatalog, never, owner } from './support/catalogs';

// The catalog alone, on a real SQLite file and on a real PostgreSQL server: the compare-and-set rules every
// workflow relies on, the same for both: locks, the journal of step outcomes, the catalog's identity.

let catalog: Catalog;
const { locked, prepare, readyTable } = catalogCalls(() => catalog);

let store: string;

describeEachCatalog(
  'locks and journal',
  (opened) => ({ catalog, store } = opened),
  (backend) => {
    test('a lock is re-entrant for its owner, refused to others, and taken over only from a closed owner', async () => {
      const first = owner('trash:7', 'run-a');
      await locked('table:7', first);
      expect(await catalog.acquireLock('table:7', first, 2, never)).toMatchObject({ acquired: true });
      const other = owner('purge:7');
      expect(await catalog.acquireLock('table:7', other, 3, never)).toMatchObject({ outcome: 'busy', holder: first });
      const asked: string[] = [];
      const closedAndAsked = (holder: LockOwner) => {
        asked.push(holder.workflowId);
        return Promise.resolve(true);
      };
      expect(await catalog.acquireLock('table:7', other, 4, closedAndAsked)).toMatchObject({ acquired: true, tookOverFrom: first });
      expect(asked).toEqual(['trash:7']);
      expect(await catalog.holdsLock('table:7', other)).toBe(true);
      expect(await catalog.holdsLock('table:7', first)).toBe(false);
      await catalog.releaseLocks(first); // not the holder any more: no effect
      expect(await catalog.listLocks()).toHaveLength(1);
      await catalog.releaseLocks(other);
      expect(await catalog.listLocks()).toEqual([]);
    });

    test('a call repeated under its step key answers what it answered, even after its run released the lock', async () => {
      const table = await readyTable('t');
      const op = owner('trash:1', 'run-t');
      const key = (step: string): StepKey => ({ runId: op.runId, step });
      await catalog.acquireLock(`table:${table.id}`, op, 1, never, key('1:acquireLock'));
      const trashing = await catalog.transition({
        tableId: table.id,
        from: ['READY'],
        to: 'TRASHING',
        owner: op,
        now: 3,
        step: key('2:transition'),
      });
      const trashed = await catalog.transition({
        tableId: table.id,
        from: ['TRASHING'],
        to: 'TRASHED',
        owner: op,
        now: 4,
        retentionSeconds: 60,
        step: key('3:commitTrash'),
      });
      await catalog.releaseLocks(op);

      // The workflow task that made these calls was lost; meanwhile another operation took the table.
      const undelete = await locked(`table:${table.id}`, owner('undelete:1'));
      await catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'RESTORING', owner: undelete, now: 5 });

      // The replayed calls answer as before and change nothing; a new call is refused for want of the lock.
      expect(await catalog.acquireLock(`table:${table.id}`, op, 6, never, key('1:acquireLock'))).toMatchObject({ acquired: true });
      expect(
        await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: 7, step: key('2:transition') }),
      ).toEqual(trashing);
      expect(
        await catalog.transition({
          tableId: table.id,
          from: ['TRASHING'],
          to: 'TRASHED',
          owner: op,
          now: 8,
          retentionSeconds: 60,
          step: key('3:commitTrash'),
        }),
      ).toEqual(trashed);
      expect((await catalog.getTable(table.id))?.state).toBe('RESTORING');
      await expect(
        catalog.transition({ tableId: table.id, from: ['RESTORING'], to: 'READY', owner: op, now: 9, step: key('4:transition') }),
      ).rejects.toThrow(/does not hold the lock/);
      expect(await catalog.listLocks()).toEqual([expect.objectContaining({ workflowId: 'undelete:1' })]);
    });

    test('a busy lock is not journaled: the same step asked again takes the lock once it is free', async () => {
      await locked('table:5', owner('trash:5'));
      const step = { runId: 'run-p', step: '1:acquireLock' };
      expect(await catalog.acquireLock('table:5', owner('purge:5', 'run-p'), 2, never, step)).toMatchObject({ outcome: 'busy' });
      await catalog.releaseLocks(owner('trash:5'));
      expect(await catalog.acquireLock('table:5', owner('purge:5', 'run-p'), 3, never, step)).toMatchObject({ acquired: true });
      expect(await catalog.holdsLock('table:5', owner('purge:5', 'run-p'))).toBe(true);
    });

    test('a domain error is journaled too: the repeated call fails the same way though the table has changed', async () => {
      const table = await readyTable('t');
      const op = await locked(`table:${table.id}`, owner('purge:1', 'run-p'));
      const step = { runId: op.runId, step: '2:transition' };
      await expect(
        catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', owner: op, now: 3, step }),
      ).rejects.toMatchObject({ type: 'WrongState' });
      await catalog.releaseLocks(op);
      const trash = await locked(`table:${table.id}`, owner('trash:1'));
      await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: trash, now: 4 });
      await catalog.transition({ tableId: table.id, from: ['TRASHING'], to: 'TRASHED', owner: trash, now: 5, retentionSeconds: 60 });
      await expect(
        catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', owner: op, now: 6, step }),
      ).rejects.toMatchObject({ type: 'WrongState' });
      expect((await catalog.getTable(table.id))?.state).toBe('TRASHED');
    });

    test('a NameTaken under a step key is journaled and undoes nothing else', async () => {
      const old = await readyTable('t');
      const op = await locked(`table:${old.id}`, owner('trash:1', 'run-u'));
      await catalog.transition({ tableId: old.id, from: ['READY'], to: 'TRASHING', owner: op, now: 3 });
      await catalog.transition({ tableId: old.id, from: ['TRASHING'], to: 'TRASHED', owner: op, now: 4, retentionSeconds: 60 });
      await readyTable('t');
      const step = { runId: 'run-u', step: '5:restore' };
      const restore = () =>
        catalog.transition({
          tableId: old.id,
          from: ['TRASHED'],
          to: 'RESTORING',
          owner: op,
          now: 5,
          rename: { namespace: 'ns', name: 't' },
          step,
        });
      await expect(restore()).rejects.toMatchObject({ type: 'NameTaken' });
      await expect(restore()).rejects.toMatchObject({ type: 'NameTaken' });
      expect((await catalog.getTable(old.id))?.state).toBe('TRASHED');
    });

    test('a pruned journal entry is forgotten: the call under its key is made anew', async () => {
      const table = await readyTable('t');
      const step = { runId: 'run-g', step: '1:getTable' };
      expect(await catalog.getTable(table.id, step)).toEqual(table);
      expect(await catalog.getTable(999, { runId: 'run-g', step: '2:getTable' })).toBeUndefined();
      expect(await catalog.pruneJournal(0)).toBe(0);
      expect(await catalog.pruneJournal(Date.now() + 1000)).toBe(2);
      const op = await locked(`table:${table.id}`, owner('trash:1'));
      await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: 3 });
      expect((await catalog.getTable(table.id, step))?.state).toBe('TRASHING');
    });

    test('a catalog has an identity of its own, kept across opens; a reader never creates a catalog', async () => {
      const other = await backend.open(await backend.newStore());
      const again = await backend.open(store);
      const reader = await backend.open(store, { mustExist: true });
      try {
        expect(catalog.id).toMatch(/^[0-9a-f]{8}$/);
        expect(again.id).toBe(catalog.id);
        expect(reader.id).toBe(catalog.id);
        expect(other.id).not.toBe(catalog.id);
      } finally {
        await other.close();
        await again.close();
        await reader.close();
      }
      const missing = await backend.newStore();
      await expect(backend.open(missing, { mustExist: true })).rejects.toThrow(CatalogNotFoundError);
      expect(await backend.isUntouched(missing)).toBe(true);
    });

    test('a lock left by a closed owner is taken over by a prepare that needs it', async () => {
      const creator = await locked('name:ns.t', owner('create:ns.t'));
      const first = await prepare('t', creator);
      if (first.outcome !== 'prepared') throw new Error('expected a new table');
      // The first create was terminated while holding both locks.
      const retry = owner('create:ns.t', 'run-2');
      expect(await catalog.acquireLock('name:ns.t', retry, 2, closed)).toMatchObject({ acquired: true });
      const resumed = await catalog.prepareCreate(
        { namespace: 'ns', name: 't', params: { shards: 2 }, owner: retry, nameLock: 'name:ns.t', place: () => [], now: 3 },
        closed,
      );
      expect(resumed).toMatchObject({ outcome: 'prepared', resumed: true, table: { id: first.table.id } });
      expect(await catalog.holdsLock(`table:${first.table.id}`, retry)).toBe(true);
    });
  },
);
