/**
 * Records one history of every path through the workflows into test/histories/, for the replay test.
 * Those files stand for the runs already in the field: re-record them only when a change is compatible (or
 * behind `patched()`), never to make a failing replay pass.
 *
 *   npx tsx test/support/record-histories.ts
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { DevServer } from '../../worker/dev-server';
import { findTemporalCli } from '../../worker/temporal-cli';
import { workflowIdFor } from '../../domain/operations';
import { Harness } from './harness';
import { waitFor } from './wait';

const OUT = path.resolve(__dirname, '../histories');

async function main(): Promise<void> {
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-record-'));
  const cli = await findTemporalCli({ stateDir: path.resolve(__dirname, '../../.tablefate') });
  const server = await DevServer.start({ stateDir: dir, headless: true, cliPath: cli });
  const h = await Harness.start({ address: server.address });
  const save = async (file: string, workflowId: string) => {
    const handle = h.temporal.workflow.getHandle(workflowId);
    await handle.result().catch(() => undefined);
    // The CLI writes the history in the proto3 JSON form that historyFromJSON reads back.
    const { stdout } = await promisify(execFile)(
      cli,
      ['workflow', 'show', '--workflow-id', workflowId, '--address', server.address, '--output', 'json'],
      { maxBuffer: 64 * 1024 * 1024 },
    );
    await fs.promises.writeFile(path.join(OUT, `${file}.json`), stdout);
    console.log(`recorded ${file} (${workflowId})`);
  };
  try {
    await fs.promises.mkdir(OUT, { recursive: true });
    // create that fails on a shard (compensated), then the same create resumed
    h.storage.faults.inject({ op: 'createShard', shard: 1, kind: 'permanent' });
    await h.client.create({ table: 'rec.failed', shards: 2 }).catch(() => undefined);
    await save('create-failed', workflowIdFor.create({ namespace: 'rec', name: 'failed' }));
    h.storage.faults.clear();
    const resumed = await h.client.create({ table: 'rec.failed', shards: 2 });
    await save('create', workflowIdFor.create({ namespace: 'rec', name: 'failed' }));

    // trash, then undelete under a new name (ends the timer)
    await h.client.trash({ table: 'rec.failed', retentionSeconds: 3600 });
    await h.client.undelete({ table: resumed.id, newName: 'rec.restored' });
    await save('trash-restored', workflowIdFor.trash(resumed.id));
    await save('undelete', workflowIdFor.undelete(resumed.id));

    // trash, then purge by hand (ends the timer)
    await h.client.trash({ table: 'rec.restored', retentionSeconds: 3600 });
    await h.client.purge({ tableId: resumed.id });
    await save('trash-purged', workflowIdFor.trash(resumed.id));
    await save('purge', workflowIdFor.purge(resumed.id));

    // trash with a short retention: the timer fires and runs the purge as a child
    const expiring = await h.client.create({ table: 'rec.expiring', shards: 2 });
    await h.client.trash({ table: 'rec.expiring', retentionSeconds: 1 });
    await waitFor(() => h.catalog.getTable(expiring.id), (t) => t?.state === 'PURGED', { what: 'expiry' });
    await save('trash-expired', workflowIdFor.trash(expiring.id));
    await save('purge-expiry', workflowIdFor.purge(expiring.id));
  } finally {
    await h.close();
    await server.stop();
    await fs.promises.rm(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
