/**
 * How long each operation takes end to end on this machine: create (4 shards), trash, undelete and purge,
 * each through the SDK against a real dev server and worker, N rounds, reporting median and p90.
 *
 *   npm run bench            (N = 20)
 *   npm run bench -- 50
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { SqliteCatalog } from '../catalog/sqlite';
import { LocalFileStorage } from '../storage/local-files';
import { TableFateClient } from '../client/client';
import { DevServer } from '../worker/dev-server';
import { createTableFateWorker } from '../worker/worker';
import { createLogger } from '../worker/logger';

const OPS = ['create', 'trash', 'undelete', 'purge'] as const;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function timed<T>(samples: number[], fn: () => Promise<T>): Promise<T> {
  const start = process.hrtime.bigint();
  const result = await fn();
  samples.push(Number(process.hrtime.bigint() - start) / 1e6);
  return result;
}

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 20);
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-bench-'));
  const server = await DevServer.start({ stateDir: dir, headless: true, cliPath: process.env.TEMPORAL_CLI_PATH, log: () => undefined });
  const catalog = new SqliteCatalog(path.join(dir, 'catalog.sqlite'));
  const storage = new LocalFileStorage({ root: path.join(dir, 'storage') });
  const workerConnection = await NativeConnection.connect({ address: server.address });
  const worker = await createTableFateWorker({
    connection: workerConnection,
    namespace: 'default',
    catalog,
    storage,
    defaultRetentionSeconds: 3600,
    logger: createLogger('error'),
  });
  const running = worker.run();
  const connection = await Connection.connect({ address: server.address });
  const client = new TableFateClient({ client: new Client({ connection }), catalog });
  const samples: Record<(typeof OPS)[number], number[]> = { create: [], trash: [], undelete: [], purge: [] };
  try {
    // One warm-up round: the first workflow task of each type loads the bundle into the worker's VM.
    for (let round = -1; round < rounds; round++) {
      const name = `bench.t${round + 1}`;
      const sink = (op: (typeof OPS)[number]) => (round < 0 ? [] : samples[op]);
      const table = await timed(sink('create'), () => client.create({ table: name, shards: 4 }));
      await timed(sink('trash'), () => client.trash({ table: name }));
      await timed(sink('undelete'), () => client.undelete({ table: table.id }));
      await client.trash({ table: name });
      await timed(sink('purge'), () => client.purge({ tableId: table.id }));
    }
  } finally {
    worker.shutdown();
    await running;
    await workerConnection.close();
    await connection.close();
    await catalog.close();
    await server.stop();
    await fs.promises.rm(dir, { recursive: true, force: true });
  }
  console.log(`tablefate lifecycle, ${rounds} rounds, ${os.cpus().length} cores, node ${process.version}`);
  console.log('op        median ms   p90 ms   min ms   max ms');
  for (const op of OPS) {
    const s = samples[op];
    const row = [percentile(s, 50), percentile(s, 90), Math.min(...s), Math.max(...s)].map((v) => v.toFixed(0).padStart(8));
    console.log(`${op.padEnd(9)} ${row.join(' ')}`);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
