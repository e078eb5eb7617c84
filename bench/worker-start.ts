/**
 * How long `tablefate worker` takes from its process's start to polling (its `worker polling` line, which it logs once
 * the server lists it among the queue's pollers): the median of 5 starts after one not counted, on the embedded
 * default (files, 3 nodes, SQLite catalog), against a dev server of the run's own, in a namespace of its own.
 *
 *   npm run bench:worker-start                    (this checkout's command line)
 *   npm run bench:worker-start -- --bin /elsewhere/bin/tablefate.js --runs 9
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Connection } from '@temporalio/client';
import { DevServer } from '../servers/dev-server';
import { ensureNamespace } from '../servers/namespaces';

const BIN = path.resolve(__dirname, '..', 'bin', 'tablefate.js');
const NAMESPACE = 'workerstart';

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** One start: ms from spawn to the `worker polling` line; then Ctrl-C, and its exit waited for. */
function timedStart(bin: string, env: NodeJS.ProcessEnv): Promise<number> {
  const start = process.hrtime.bigint();
  const child = spawn(process.execPath, [bin, 'worker'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  return new Promise((resolve, reject) => {
    let polled: number | undefined;
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
      if (polled === undefined && stderr.includes('worker polling')) {
        polled = Number(process.hrtime.bigint() - start) / 1e6;
        child.kill('SIGINT');
      }
    });
    child.on('exit', (code) =>
      polled === undefined ? reject(new Error(`worker exited ${code} before polling: ${stderr}`)) : resolve(polled),
    );
  });
}

export async function benchWorkerStart(address: string, opts: { runs?: number; bin?: string } = {}): Promise<number> {
  const home = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-worker-start-'));
  try {
    const connection = await Connection.connect({ address });
    try {
      await ensureNamespace(connection, NAMESPACE, { retentionMs: 24 * 3600_000, timeoutMs: 30_000 });
    } finally {
      await connection.close();
    }
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      TABLEFATE_HOME: home,
      TEMPORAL_ADDRESS: address,
      TEMPORAL_NAMESPACE: NAMESPACE,
      TABLEFATE_LOG_LEVEL: 'info',
    };
    delete env.TABLEFATE_WORKFLOW_BUNDLE;
    await timedStart(opts.bin ?? BIN, env); // the first start makes the catalog and the schedule: not counted
    const times: number[] = [];
    for (let k = 0; k < (opts.runs ?? 5); k++) times.push(await timedStart(opts.bin ?? BIN, env));
    return median(times);
  } finally {
    await fs.promises.rm(home, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const { values } = parseArgs({ options: { runs: { type: 'string' }, bin: { type: 'string' } } });
  void (async () => {
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-worker-start-server-'));
    const server = await DevServer.start({ stateDir: dir, headless: true, cliPath: process.env.TEMPORAL_CLI_PATH, log: () => undefined });
    try {
      const ms = await benchWorkerStart(server.address, { runs: values.runs ? Number(values.runs) : undefined, bin: values.bin });
      console.log(`tablefate worker, start to polling (median of ${values.runs ?? 5}): ${(ms / 1000).toFixed(2)} s`);
    } finally {
      await server.stop();
      await fs.promises.rm(dir, { recursive: true, force: true });
    }
  })().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
