import { promises as fs } from 'node:fs';
import path from 'node:path';
import { applicationFailureOf } from '../client/errors';
import { filesUnder } from './support/temp-root';
import { Harness } from './support/harness';
import { failureOf } from './support/wait';

/*
 * A real file-system fault ends an operation at once on a real worker and dev server, and is compensated (the
 * classification, the driver and the activity boundary are tested without a server: test/unit/fault-classification.test.ts).
 */

describe('end to end, on a real worker and dev server', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await Harness.start();
  });
  afterAll(async () => {
    await h?.close();
  });

  test('a create with a shard on a node whose live directory is a plain file ends at once with StorageFault and is compensated', async () => {
    const live = path.join(h.storage.root, 'node-1', 'live');
    await fs.mkdir(path.dirname(live), { recursive: true });
    await fs.rm(live, { recursive: true, force: true });
    await fs.writeFile(live, 'a file where the live directory belongs');

    const started = Date.now();
    const failure = await failureOf(h.client.create({ table: 'faults.broken', shards: 3 }));
    const elapsed = Date.now() - started;
    const cause = applicationFailureOf(failure);
    expect(cause?.type).toBe('StorageFault');
    expect(cause?.message).toMatch(/createShard of shard t\d+-s\d on node-1 failed: EEXIST/);
    // Not retried for ever, not even for a budget: a permanent fault ends the operation at its first attempt.
    expect(elapsed).toBeLessThan(15_000);

    const table = await h.catalog.findByName({ namespace: 'faults', name: 'broken' });
    expect(table?.state).toBe('CREATE_FAILED');
    expect(table?.placement.map((p) => p.node).sort()).toEqual(['node-0', 'node-1', 'node-2']);
    // The healthy nodes' shards were dropped; the broken node holds nothing but the file in its way.
    expect(await filesUnder(h.storage.root)).toEqual(['node-1/live']);
    expect(await h.catalog.listLocks()).toEqual([]);

    // The disk is repaired: the same create resumes the same table.
    await fs.rm(live);
    const created = await h.client.create({ table: 'faults.broken', shards: 3 });
    expect({ id: created.id, state: created.state }).toEqual({ id: table!.id, state: 'READY' });
    expect(await h.shardAreas(created)).toEqual(['live', 'live', 'live']);
  });
});
