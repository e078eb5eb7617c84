import type { Catalog } from '../catalog/catalog';
import { placeShards } from '../domain/table';
import { NAME_HOLDING_STATES, TABLE_STATES } from '../domain/states';
import { catalogCalls, describeEachCatalog, never, NODES, owner } from './support/catalogs';

// The catalog alone, on a real SQLite file and on a real PostgreSQL server: the compare-and-set rules every
// workflow relies on, the same for both: ids, prepares, state changes, names and the trash.

let catalog: Catalog;
const { locked, prepare, readyTable } = catalogCalls(() => catalog);

let store: string;

describeEachCatalog(
  'tables',
  (opened) => ({ catalog, store } = opened),
  (backend) => {
    test('ids increase and are never reused; the placement is chosen once from the id', async () => {
      const a = await readyTable('a');
      const b = await readyTable('b');
      expect(b.id).toBe(a.id + 1);
      expect(a.placement).toEqual(placeShards(a.id, 2, NODES));
    });

    test('ids and times past 2^32 come back as the same numbers', async () => {
      const big = await backend.open(await backend.newStore(), { firstTableId: 5_000_000_000 });
      const now = 1_760_000_000_123;
      const was = catalog;
      catalog = big;
      try {
        const table = await readyTable('t', now);
        expect(table).toMatchObject({ id: 5_000_000_000, createdAt: now, updatedAt: now + 1 });
        expect(typeof table.id).toBe('number');
        await catalog.acquireLock(`table:${table.id}`, owner('drop:1'), now + 2, never);
        expect(await catalog.listLocks()).toEqual([expect.objectContaining({ resource: 'table:5000000000', since: now + 2 })]);
        expect(await catalog.getTable(5_000_000_000)).toEqual(table);
      } finally {
        catalog = was;
        await big.close();
      }
    });

    test('a prepare takes the table lock with the name lock, and waits while another operation holds the table', async () => {
      const creator = await locked('name:ns.t', owner('create:ns.t'));
      const first = await prepare('t', creator);
      if (first.outcome !== 'prepared') throw new Error('expected a new table');
      expect((await catalog.listLocks()).map((l) => l.resource).sort()).toEqual(['name:ns.t', `table:${first.table.id}`]);
      await catalog.transition({ tableId: first.table.id, from: ['CREATING'], to: 'CREATE_FAILED', owner: creator, now: 2 });
      await catalog.releaseLocks(creator);
      expect(await catalog.listLocks()).toEqual([]);

      // A stray operation (a trash with a stale idea of the table) holds the table's lock: the retry waits for it.
      await locked(`table:${first.table.id}`, owner('drop:x'));
      const retry = await locked('name:ns.t', owner('create:ns.t', 'run-2'));
      expect(await prepare('t', retry)).toMatchObject({ outcome: 'busy', holder: { workflowId: 'drop:x' } });
      expect((await catalog.getTable(first.table.id))?.state).toBe('CREATE_FAILED');
      await catalog.releaseLocks(owner('drop:x'));
      expect(await prepare('t', retry)).toMatchObject({
        outcome: 'prepared',
        resumed: true,
        table: { id: first.table.id, state: 'CREATING' },
      });
    });

    test('a prepare that takes the name lock itself (v17) holds both locks, and is busy while another holds the name', async () => {
      const take = (workflowId: string, runId?: string) =>
        catalog.prepareCreate(
          {
            namespace: 'ns',
            name: 't',
            params: { shards: 2 },
            owner: owner(workflowId, runId),
            nameLock: 'name:ns.t',
            takeNameLock: true,
            place: (id) => placeShards(id, 2, NODES),
            now: 1,
          },
          never,
        );
      // Another operation holds the name: busy, naming it, and nothing is made or taken.
      await locked('name:ns.t', owner('create:ns.t', 'run-other'));
      expect(await take('create:ns.t', 'run-1')).toMatchObject({
        outcome: 'busy',
        holder: { workflowId: 'create:ns.t', runId: 'run-other' },
      });
      expect(await catalog.findByName({ namespace: 'ns', name: 't' })).toBeUndefined();
      expect((await catalog.listLocks()).map((l) => l.resource)).toEqual(['name:ns.t']);
      await catalog.releaseLocks(owner('create:ns.t', 'run-other'));

      const first = await take('create:ns.t', 'run-1');
      if (first.outcome !== 'prepared') throw new Error('expected a new table');
      expect((await catalog.listLocks()).map((l) => [l.resource, l.runId]).sort()).toEqual([
        ['name:ns.t', 'run-1'],
        [`table:${first.table.id}`, 'run-1'],
      ]);
      // The same run again (a retried call): the same table, the locks still its own.
      expect(await take('create:ns.t', 'run-1')).toMatchObject({ outcome: 'prepared', table: { id: first.table.id } });
      expect(await catalog.listLocks()).toHaveLength(2);
    });

    test('a prepare without the name lock is LockLost; one with other parameters is TableExists', async () => {
      await expect(prepare('t', owner('create:ns.t'))).rejects.toMatchObject({ name: 'LockLostError' });
      await readyTable('t');
      const other = await locked('name:ns.t', owner('create:ns.t', 'run-9'));
      await expect(
        catalog.prepareCreate(
          { namespace: 'ns', name: 't', params: { shards: 3 }, owner: other, nameLock: 'name:ns.t', place: () => [], now: 5 },
          never,
        ),
      ).rejects.toMatchObject({ type: 'TableExists' });
      expect(await prepare('t', other)).toMatchObject({ outcome: 'exists' });
    });

    test('a state change needs the expected state and the table lock; repeating one already made is a success', async () => {
      const table = await readyTable('t');
      const trash = await locked(`table:${table.id}`, owner('drop:1'));
      await expect(catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', owner: trash, now: 3 })).rejects.toThrow(
        /is READY/,
      );
      await expect(
        catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: owner('purge:1'), now: 3 }),
      ).rejects.toThrow(/does not hold the lock/);
      const trashing = await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: trash, now: 3 });
      const again = await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: trash, now: 4 });
      expect(again).toEqual(trashing);
      await expect(catalog.transition({ tableId: 999, from: ['READY'], to: 'TRASHING', owner: trash, now: 3 })).rejects.toThrow(
        /does not exist/,
      );
    });

    test('a rename is a move from READY to READY: the name changes, a taken one is NameTaken, the same one is made', async () => {
      const table = await readyTable('t');
      const taken = await readyTable('u');
      const rename = await locked(`table:${table.id}`, owner('rename:1'));
      const move = (name: string, now: number) =>
        catalog.transition({ tableId: table.id, from: ['READY'], to: 'READY', owner: rename, now, rename: { namespace: 'ns2', name } });
      await expect(
        catalog.transition({
          tableId: table.id,
          from: ['READY'],
          to: 'READY',
          owner: rename,
          now: 3,
          rename: { namespace: taken.namespace, name: taken.name },
        }),
      ).rejects.toMatchObject({ type: 'NameTaken' });
      const renamed = await move('t2', 4);
      expect(renamed).toMatchObject({ id: table.id, state: 'READY', namespace: 'ns2', name: 't2', placement: table.placement });
      expect(await move('t2', 5)).toEqual(renamed);
      expect(await catalog.findByName({ namespace: table.namespace, name: table.name })).toBeUndefined();
      expect((await catalog.findByName({ namespace: 'ns2', name: 't2' }))?.id).toBe(table.id);
    });

    test('a state change that expects another name is refused and changes nothing', async () => {
      const table = await readyTable('t');
      const trash = await locked(`table:${table.id}`, owner('drop:1'));
      await expect(
        catalog.transition({
          tableId: table.id,
          from: ['READY'],
          to: 'TRASHING',
          owner: trash,
          now: 3,
          expectName: { namespace: 'ns', name: 'other' },
        }),
      ).rejects.toThrow(/named ns\.t, not ns\.other/);
      expect((await catalog.getTable(table.id))?.state).toBe('READY');
    });

    test('the trash stamps its drop time as the table goes to it, its expiry from that at the commit; going back to the trash keeps them', async () => {
      const table = await readyTable('t');
      const op = await locked(`table:${table.id}`, owner('drop:1'));
      const going = await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: 3_000 });
      expect(going).toMatchObject({ state: 'TRASHING', droppedAt: 3_000, expireAt: null });
      const trashed = await catalog.transition({
        tableId: table.id,
        from: ['TRASHING'],
        to: 'TRASHED',
        owner: op,
        now: 10_000,
        retentionSeconds: 60,
      });
      expect(trashed).toMatchObject({ droppedAt: 3_000, expireAt: 63_000 });
      await catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', owner: op, now: 20_000 });
      const back = await catalog.transition({ tableId: table.id, from: ['PURGING'], to: 'TRASHED', owner: op, now: 30_000 });
      expect(back).toMatchObject({ droppedAt: 3_000, expireAt: 63_000 });
    });

    test('a commit that restamps (a drop of several as one) records its own time as the drop time', async () => {
      const table = await readyTable('t');
      const op = await locked(`table:${table.id}`, owner('drop:1'));
      await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: 1_000 });
      const trashed = await catalog.transition({
        tableId: table.id,
        from: ['TRASHING'],
        to: 'TRASHED',
        owner: op,
        now: 5_000,
        retentionSeconds: 60,
        restamp: true,
      });
      expect(trashed).toMatchObject({ droppedAt: 5_000, expireAt: 65_000 });
    });

    test('a move to the trash taken back leaves no drop time: READY again, and an adopt-and-drop CREATING again', async () => {
      const table = await readyTable('t');
      const op = await locked(`table:${table.id}`, owner('drop:1'));
      await catalog.transition({ tableId: table.id, from: ['READY'], to: 'DRAINING', owner: op, now: 1_000 });
      expect(await catalog.transition({ tableId: table.id, from: ['DRAINING'], to: 'TRASHING', owner: op, now: 2_000 })).toMatchObject({
        droppedAt: 2_000,
      });
      expect(await catalog.transition({ tableId: table.id, from: ['TRASHING'], to: 'READY', owner: op, now: 3_000 })).toMatchObject({
        state: 'READY',
        droppedAt: null,
      });
      await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: 4_000 });
      expect(await catalog.transition({ tableId: table.id, from: ['TRASHING'], to: 'CREATING', owner: op, now: 5_000 })).toMatchObject({
        state: 'CREATING',
        droppedAt: null,
      });
    });

    test('the trash records who dropped the table: kept back in the trash and on the tombstone, cleared by a recall', async () => {
      const table = await readyTable('t');
      expect(table.droppedBy).toBeNull();
      const op = await locked(`table:${table.id}`, owner('drop:1'));
      const trash = async (now: number, droppedBy?: string) => {
        await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now, droppedBy: 'not-at-trashing' });
        return catalog.transition({
          tableId: table.id,
          from: ['TRASHING'],
          to: 'TRASHED',
          owner: op,
          now: now + 1,
          retentionSeconds: 60,
          droppedBy,
        });
      };
      const trashed = await trash(10_000, 'alice@test');
      expect(trashed).toMatchObject({ state: 'TRASHED', droppedAt: 10_000, droppedBy: 'alice@test' });
      // Only the commit into the trash writes it; the same commit made again answers the same.
      expect(
        await catalog.transition({ tableId: table.id, from: ['TRASHING'], to: 'TRASHED', owner: op, now: 10_002, retentionSeconds: 60 }),
      ).toEqual(trashed);
      expect((await catalog.listTables({ includeTrashed: true })).find((t) => t.id === table.id)?.droppedBy).toBe('alice@test');
      expect((await catalog.findTrashed({ namespace: 'ns', name: 't' }))?.droppedBy).toBe('alice@test');

      // A recall taken back leaves it in the trash as it was; a recall made clears it, with the drop time.
      await catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'RESTORING', owner: op, now: 20_000 });
      expect(await catalog.transition({ tableId: table.id, from: ['RESTORING'], to: 'TRASHED', owner: op, now: 20_001 })).toMatchObject({
        droppedAt: 10_000,
        droppedBy: 'alice@test',
      });
      await catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'RESTORING', owner: op, now: 20_002 });
      const recalled = await catalog.transition({ tableId: table.id, from: ['RESTORING'], to: 'READY', owner: op, now: 20_003 });
      expect(recalled).toMatchObject({ state: 'READY', droppedAt: null, droppedBy: null });

      // A drop that does not say who records null, not the one before it; a purge keeps the dropper on the tombstone.
      expect(await trash(30_000)).toMatchObject({ droppedAt: 30_000, droppedBy: null });
      await catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'RESTORING', owner: op, now: 30_002 });
      await catalog.transition({ tableId: table.id, from: ['RESTORING'], to: 'READY', owner: op, now: 30_003 });
      await trash(40_000, 'sql:app_owner on node-0');
      await catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', owner: op, now: 40_002 });
      const purged = await catalog.transition({ tableId: table.id, from: ['PURGING'], to: 'PURGED', owner: op, now: 40_003 });
      expect(purged).toMatchObject({ state: 'PURGED', droppedAt: 40_000, purgedAt: 40_003, droppedBy: 'sql:app_owner on node-0' });
      expect(await catalog.getTable(table.id)).toEqual(purged);
    });

    test('a trashed table frees its name; restoring into a taken name is NameTaken and changes nothing', async () => {
      const old = await readyTable('t');
      const op = await locked(`table:${old.id}`, owner('drop:1'));
      await catalog.transition({ tableId: old.id, from: ['READY'], to: 'TRASHING', owner: op, now: 3 });
      await catalog.transition({ tableId: old.id, from: ['TRASHING'], to: 'TRASHED', owner: op, now: 4, retentionSeconds: 60 });
      expect(await catalog.findByName({ namespace: 'ns', name: 't' })).toBeUndefined();
      const newer = await readyTable('t');
      await expect(
        catalog.transition({
          tableId: old.id,
          from: ['TRASHED'],
          to: 'RESTORING',
          owner: op,
          now: 5,
          rename: { namespace: 'ns', name: 't' },
        }),
      ).rejects.toMatchObject({ type: 'NameTaken' });
      expect((await catalog.getTable(old.id))?.state).toBe('TRASHED');
      expect((await catalog.findByName({ namespace: 'ns', name: 't' }))?.id).toBe(newer.id);
      expect((await catalog.findTrashed({ namespace: 'ns', name: 't' }))?.id).toBe(old.id);
    });

    test('the trash of a name lists its newest first; listing hides the trash unless asked, and tombstones always', async () => {
      const trash = async (name: string, at: number, purge = false) => {
        const table = await readyTable(name, at);
        const op = await locked(`table:${table.id}`, owner(`drop:${table.id}`));
        await catalog.transition({ tableId: table.id, from: ['READY'], to: 'TRASHING', owner: op, now: at + 2 });
        await catalog.transition({ tableId: table.id, from: ['TRASHING'], to: 'TRASHED', owner: op, now: at + 3, retentionSeconds: 60 });
        if (purge) {
          await catalog.transition({ tableId: table.id, from: ['TRASHED'], to: 'PURGING', owner: op, now: at + 4 });
          await catalog.transition({ tableId: table.id, from: ['PURGING'], to: 'PURGED', owner: op, now: at + 5 });
        }
        await catalog.releaseLocks(op);
        return table.id;
      };
      const older = await trash('t', 100);
      const newer = await trash('t', 200);
      const purged = await trash('t', 300, true);
      const live = await readyTable('t', 400);
      expect((await catalog.findTrashed({ namespace: 'ns', name: 't' }))?.id).toBe(newer);
      expect((await catalog.listTables({ includeTrashed: false })).map((t) => t.id)).toEqual([live.id]);
      expect((await catalog.listTables({ includeTrashed: true })).map((t) => t.id)).toEqual([older, newer, live.id]);
      // A page at a time, by id: the ids after `afterId`, `limit` of them at most.
      expect((await catalog.listTables({ includeTrashed: true, limit: 2 })).map((t) => t.id)).toEqual([older, newer]);
      expect((await catalog.listTables({ includeTrashed: true, afterId: newer, limit: 2 })).map((t) => t.id)).toEqual([live.id]);
      expect((await catalog.listTables({ includeTrashed: false, afterId: older })).map((t) => t.id)).toEqual([live.id]);
      expect(await catalog.listTables({ includeTrashed: true, afterId: live.id })).toEqual([]);
      expect((await catalog.getTable(purged))?.state).toBe('PURGED');
    });

    test("a new catalog's schema holds a name in exactly the domain's name-holding states, and takes every state", async () => {
      const insert = (id: number, state: string) =>
        backend.exec(
          store,
          `INSERT INTO tables (id, namespace, name, state, params, placement, created_at, updated_at)
         VALUES (${id}, 'raw', 'n-${state}', '${state}', '{"shards":1}', '[]', 1, 1)`,
        );
      // Each state's outcome, compared at once: a failure names the state (and the error) that went wrong.
      const outcomes: Array<{ state: string; second: string }> = [];
      for (const [i, state] of TABLE_STATES.entries()) {
        await insert(100 + 2 * i, state);
        const second = await insert(101 + 2 * i, state).then(
          () => 'inserted',
          (err: unknown) => (/unique constraint/i.test(String(err)) ? 'refused: name taken' : `failed: ${String(err)}`),
        );
        outcomes.push({ state, second });
      }
      expect(outcomes).toEqual(
        TABLE_STATES.map((state) => ({ state, second: NAME_HOLDING_STATES.includes(state) ? 'refused: name taken' : 'inserted' })),
      );
      const rows = await catalog.listTables({ includeTrashed: true });
      expect(rows.filter((t) => t.namespace === 'raw').every((t) => t.hold === null)).toBe(true);
    });
  },
);
