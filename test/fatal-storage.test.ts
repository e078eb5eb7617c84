import fs from 'node:fs';
import { Harness } from './support/harness';
import { waitFor } from './support/wait';
import type { RenameOps } from '../storage/rename-set';

/** Renames that work until armed; then the second rename of a set fails, and so does every roll-back. */
class BreakingRenames implements RenameOps {
  armed = false;
  private calls = 0;
  async rename(from: string, to: string): Promise<void> {
    if (this.armed && ++this.calls >= 2) {
      throw Object.assign(new Error(`EIO: injected failure renaming ${from}`), { code: 'EIO' });
    }
    await fs.promises.rename(from, to);
  }
}

test('a set that can be neither renamed nor rolled back stops the worker; a new worker finishes the move', async () => {
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
    // Nothing went on after the fatal error: the table is still TRASHING, its set split across live and trash.
    expect((await h.catalog.getTable(table.id))?.state).toBe('TRASHING');

    // An operator has fixed the disk; a new worker retries the move, which finishes the half-moved set.
    renames.armed = false;
    await h.startWorker();
    const trashed = await trashing;
    expect(trashed.state).toBe('TRASHED');
    const report = await h.storage.inspect(shard);
    expect(report.area).toBe('trash');
    await waitFor(() => h.catalog.listLocks(), (locks) => locks.length === 0, { what: 'the lock to be released' });
  } finally {
    await h.close();
  }
});
