import fs from 'node:fs';
import { Harness } from './support/harness';
import { BreakingRenames } from './support/rename-gate';
import { waitFor } from './support/wait';
import { shardPaths, type ShardRef, type StorageArea } from '../storage';
import { applicationFailureOf } from '../client/errors';

/** Which files of a shard's set are in each area, read straight from the disk (the driver keeps off a quarantined node). */
async function areasOnDisk(h: Harness, shard: ShardRef): Promise<Record<StorageArea, boolean[]>> {
  const areas: StorageArea[] = ['live', 'trash', 'garbage'];
  const present = (file: string) =>
    fs.promises.stat(file).then(
      () => true,
      () => false,
    );
  const entries = await Promise.all(areas.map(async (a) => [a, await Promise.all(shardPaths(h.storage.root, shard, a).map(present))]));
  return Object.fromEntries(entries) as Record<StorageArea, boolean[]>;
}

test('a set that can be neither renamed nor rolled back stops the worker and quarantines its node; once cleared, a new worker finishes the move', async () => {
  const renames = new BreakingRenames();
  const h = await Harness.start({ renameOps: renames });
  try {
    const table = await h.client.create({ table: 'fatal.t', shards: 1 });
    const shard = { tableId: table.id, ...table.placement[0]! };
    renames.armed = true;
    const trashing = h.client.trash({ table: 'fatal.t', retentionSeconds: 3600 });

    await h.workerStopped();
    expect(h.fatalErrors.map((e) => e.name)).toEqual(['FatalStorageError']);
    expect(h.fatalErrors[0]!.message).toMatch(/roll/i);
    expect(h.fatalErrors[0]!.message).toContain(`${shard.node} is quarantined since`);
    // Nothing went on after the fatal error: the table is still TRASHING, its set split across live and trash.
    expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHING');
    // The node is quarantined on disk, with the error that did it.
    expect(await h.storage.quarantineOf(shard.node)).toMatchObject({ node: shard.node, reason: expect.stringMatching(/roll/i) as unknown });

    // An operator has fixed the disk and cleared the quarantine; a new worker retries the move, which finishes
    // the half-moved set.
    renames.armed = false;
    expect(await h.storage.clearQuarantine(shard.node)).not.toBeNull();
    await h.startWorker();
    const trashed = await trashing;
    expect(trashed.state).toBe('TRASHED');
    const report = await h.storage.inspect(shard);
    expect(report.area).toBe('trash');
    await waitFor(
      () => h.catalog.listLocks(),
      (locks) => locks.length === 0,
      { what: 'the lock to be released' },
    );
  } finally {
    await h.close();
  }
});

test('a worker started while the node is quarantined keeps off it: the operation ends with StorageFault, and runs once cleared', async () => {
  const renames = new BreakingRenames();
  const h = await Harness.start({ renameOps: renames });
  try {
    const table = await h.client.create({ table: 'fatal.q', shards: 1 });
    const shard = { tableId: table.id, ...table.placement[0]! };
    renames.armed = true;
    const trashing = h.client.trash({ table: 'fatal.q', retentionSeconds: 3600 }).catch((err: unknown) => err);
    await h.workerStopped();
    const split = await areasOnDisk(h, shard);
    expect(split.live.filter(Boolean).length + split.trash.filter(Boolean).length).toBe(3);
    expect(split.trash.some(Boolean) && split.live.some(Boolean)).toBe(true);

    // The disk works again, but nobody has looked: the quarantine, not the fault, is what keeps workers off.
    renames.armed = false;
    await h.startWorker();
    const started = Date.now();
    const failure = applicationFailureOf(await trashing);
    expect(failure?.type).toBe('StorageFault');
    expect(failure?.message).toMatch(
      new RegExp(
        `^${shard.node} is quarantined since \\S+ \\(FatalStorageError .*\\); inspect it, then run \`tablefate quarantine clear ${shard.node}\`$`,
      ),
    );
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(h.fatalErrors.map((e) => e.name)).toEqual(['FatalStorageError']);
    // Its undo (moving the set back) is refused too, so the table stays TRASHING and the files as they were.
    expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHING');
    expect(await areasOnDisk(h, shard)).toEqual(split);
    await waitFor(
      () => h.catalog.listLocks(),
      (locks) => locks.length === 0,
      { what: 'the lock to be released' },
    );

    // Cleared: the same trash, run again, resumes and finishes the half-moved set.
    await h.storage.clearQuarantine(shard.node);
    const trashed = await h.client.trash({ table: 'fatal.q', retentionSeconds: 3600 });
    expect(trashed.state).toBe('TRASHED');
    expect((await h.storage.inspect(shard)).area).toBe('trash');
  } finally {
    await h.close();
  }
});
