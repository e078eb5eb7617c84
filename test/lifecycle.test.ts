import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { Harness } from './support/harness';
import { defaultIdentity, TableFateClient } from '../client/client';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { shardPaths } from '../storage/shard-files';
import { TableInTrashError, TableNotFoundError, NameTakenError, WrongStateError } from '../domain/errors';

// The same suite on each catalog store: the SQLite file of the embedded default, and a PostgreSQL this file starts.
describe.each(['sqlite', 'postgres'] as const)('the lifecycle on a %s catalog', (store) => {
  let h: Harness;
  let pg: TestPostgres | undefined;
  beforeAll(async () => {
    if (store === 'postgres') pg = await sharedPostgres();
    h = await Harness.start({ catalogUrl: pg ? await pg.freshDatabase('lifecycle') : undefined });
  });
  afterAll(async () => {
    await h.close();
    await pg?.stop();
  });

  test('the Pegasus walk-through: create two, drop one, ls hides it, ls -a shows it, recall under a new name', async () => {
    const temp = await h.client.create({ table: 'pegasus.temp', shards: 8 });
    const mytable = await h.client.create({ table: 'pegasus.mytable', shards: 8 });
    expect(mytable.id).toBeGreaterThan(temp.id);
    expect(mytable.state).toBe('READY');

    const dropped = await h.client.trash({ table: 'pegasus.mytable', retentionSeconds: 3600 });
    expect(dropped.state).toBe('TRASHED');
    expect(Date.parse(dropped.expireAt!) - Date.parse(dropped.droppedAt!)).toBe(3600 * 1000);

    const live = await h.client.list();
    expect(live.map((t) => t.name)).toContain('temp');
    expect(live.map((t) => t.name)).not.toContain('mytable');
    const all = await h.client.list({ includeTrashed: true });
    const trashed = all.find((t) => t.id === mytable.id);
    expect(trashed).toMatchObject({ state: 'TRASHED', expireAt: dropped.expireAt });

    await expect(h.client.describe({ table: 'pegasus.mytable' })).rejects.toThrow(TableInTrashError);
    await expect(h.client.describe({ table: 'pegasus.mytable' })).rejects.toThrow(`id ${mytable.id}`);

    const recalled = await h.client.undelete({ table: mytable.id, newName: 'pegasus.mytable2' });
    expect(recalled).toMatchObject({ id: mytable.id, name: 'mytable2', state: 'READY', droppedAt: null, expireAt: null });
    expect((await h.client.describe({ table: 'pegasus.temp' })).state).toBe('READY');
    expect((await h.client.describe({ table: 'pegasus.mytable2' })).id).toBe(mytable.id);
    await expect(h.client.describe({ table: 'pegasus.mytable' })).rejects.toThrow(TableNotFoundError);
    for (const report of await h.shardReports(recalled)) expect(report.area).toBe('live');
  });

  test('data survives: every shard has the same checksum before trash and after undelete', async () => {
    const table = await h.client.create({ table: 'data.kept', shards: 5 });
    for (const p of table.placement) {
      const [dat] = shardPaths(h.storage.root, { tableId: table.id, ...p }, 'live');
      await fs.promises.appendFile(dat!, randomBytes(4096 + p.shard));
    }
    const before = await h.shardReports(table);
    expect(new Set(before.map((r) => r.checksum)).size).toBe(5);

    await h.client.trash({ table: 'data.kept' });
    const inTrash = await h.shardReports(table);
    expect(inTrash.map((r) => r.area)).toEqual(Array(5).fill('trash'));
    expect(inTrash.map((r) => r.checksum)).toEqual(before.map((r) => r.checksum));

    const restored = await h.client.undelete({ table: 'data.kept' });
    const after = await h.shardReports(restored);
    expect(after.map((r) => r.area)).toEqual(Array(5).fill('live'));
    expect(after.map((r) => [r.checksum, r.bytes])).toEqual(before.map((r) => [r.checksum, r.bytes]));
  });

  test('name reuse: after a trash the name can be created again and gets a larger id', async () => {
    const first = await h.client.create({ table: 'reuse.t' });
    await h.client.trash({ table: 'reuse.t' });
    const second = await h.client.create({ table: 'reuse.t' });
    expect(second.id).toBeGreaterThan(first.id);
    expect(second.state).toBe('READY');

    // Recalling the old one under its old name now collides with the new table.
    await expect(h.client.undelete({ table: first.id })).rejects.toThrow(NameTakenError);
    expect((await h.client.describe({ table: first.id })).state).toBe('TRASHED');
    const back = await h.client.undelete({ table: first.id, newName: 'reuse.t_old' });
    expect(back).toMatchObject({ id: first.id, name: 't_old', state: 'READY' });
  });

  test('purge by hand deletes the shards and leaves a PURGED tombstone that ls does not show', async () => {
    const table = await h.client.create({ table: 'purge.me', shards: 3 });
    await expect(h.client.purge({ tableId: table.id })).rejects.toThrow(WrongStateError);
    await h.client.trash({ table: 'purge.me' });
    const purged = await h.client.purge({ tableId: table.id });
    expect(purged.state).toBe('PURGED');
    for (const report of await h.shardReports(table)) expect(report.area).toBeNull();
    const tombstone = await h.client.describe({ table: table.id });
    expect(tombstone.state).toBe('PURGED');
    expect(tombstone.purgedAt).not.toBeNull();
    expect((await h.client.list({ includeTrashed: true })).map((t) => t.id)).not.toContain(table.id);
    await expect(h.client.undelete({ table: table.id })).rejects.toThrow(TableNotFoundError);
    expect(await h.catalog.listLocks()).toEqual([]);
  });

  test('the catalog records who dropped a table: in describe and the trash listing, cleared by a recall, kept on the tombstone', async () => {
    // A second client on the same catalog and task queue, with an identity of its own.
    const alice = new TableFateClient({ client: h.temporal, catalog: h.catalog, taskQueue: h.taskQueue, identity: 'alice@test' });
    const table = await h.client.create({ table: 'who.dropped', shards: 2 });
    expect(table.droppedBy).toBeNull();

    const dropped = await alice.trash({ table: 'who.dropped', retentionSeconds: 3600 });
    expect(dropped).toMatchObject({ id: table.id, state: 'TRASHED', droppedBy: 'alice@test' });
    expect(await h.client.describe({ table: table.id })).toEqual(dropped);
    expect((await h.client.list({ includeTrashed: true })).find((t) => t.id === table.id)).toEqual(dropped);
    expect((await h.catalog.getTable(table.id))?.droppedBy).toBe('alice@test');

    const recalled = await h.client.undelete({ table: 'who.dropped' });
    expect(recalled).toMatchObject({ id: table.id, state: 'READY', droppedAt: null, droppedBy: null });
    expect((await alice.describe({ table: 'who.dropped' })).droppedBy).toBeNull();

    // Dropped again, by the other client (user@host by default), then purged: the tombstone keeps its dropper.
    expect((await h.client.trash({ table: 'who.dropped' })).droppedBy).toBe(defaultIdentity());
    const purged = await alice.purge({ tableId: table.id });
    expect(purged).toMatchObject({ state: 'PURGED', droppedBy: defaultIdentity() });
    expect((await h.client.describe({ table: table.id })).droppedBy).toBe(defaultIdentity());
  });
});
