/**
 * Timers at scale: many trashed tables, each a trash run waiting on its durable timer, held by one
 * `tablefate worker` process; then a crowd of them expiring in the same second.
 *
 *   npm run bench:timers                              (10,000 waiting, 1,000 expiring together)
 *   npm run bench:timers -- --waiting 2000 --expiring 200
 *   npm run bench:timers -- --worker-heap-mb 300        (the worker's V8 old space capped, as NODE_OPTIONS does it)
 *
 * Reports the time to create and trash them, the worker's resident memory (VmRSS), the dev server's CPU while
 * they all wait, and how long after the shared expiry every one of the crowd was purged (no error, no lock left),
 * with the CPU the worker and the server spent on it; then the floor for a crowd: as many bare one-activity
 * workflows started at once on the same server.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { SqliteCatalog } from '../catalog/sqlite';
import { TableFateClient } from '../client/client';
import { catalogPath } from '../domain/deployment';
import { DevServer } from '../servers/dev-server';
import { CliProcess } from '../test/support/cli';
import { startCliWorker } from '../test/support/cli-worker';

const CONCURRENCY = 32;
const LONG_RETENTION_S = 30 * 24 * 3600;

/** Resident memory of a process, MB (Linux). */
function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+([0-9]+) kB/.exec(status)![1]) / 1024;
}

/** CPU seconds a process has used so far (user + system, Linux). */
function cpuSeconds(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Runs `work(i)` for i < count, `CONCURRENCY` at a time; reports progress every 10 %. */
async function inParallel(count: number, what: string, work: (i: number) => Promise<unknown>): Promise<number> {
  const started = Date.now();
  let next = 0;
  let done = 0;
  const lane = async () => {
    while (next < count) {
      const i = next++;
      await work(i);
      if (++done % Math.max(1, Math.floor(count / 10)) === 0)
        console.log(`  ${what}: ${done}/${count} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  return Date.now() - started;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts `count` floor workflows at once and waits for every one: ms from the first start to the last result. */
async function floorCrowd(address: string, count: number): Promise<number> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const connection = await NativeConnection.connect({ address });
  const taskQueue = `bench-floor-${randomUUID()}`;
  const worker = await Worker.create({
    connection,
    taskQueue,
    workflowsPath: require.resolve('./floor-workflow'),
    activities: { noop: () => Promise.resolve() },
  });
  const running = worker.run();
  const client = new Client({ connection: await Connection.connect({ address }) });
  try {
    const started = Date.now();
    const handles = await Promise.all(
      Array.from({ length: count }, () => client.workflow.start('floorWorkflow', { taskQueue, workflowId: `floor-${randomUUID()}` })),
    );
    await Promise.all(handles.map((h) => h.result()));
    return Date.now() - started;
  } finally {
    worker.shutdown();
    await running;
    await client.connection.close();
    await connection.close();
  }
}

/** What a timers bench found: the crowd's purge against the floor's crowd, and the worker's memory. */
export interface TimersReport {
  waiting: number;
  expiring: number;
  /** Tables created and trashed per second (the waiting ones). */
  createRate: number;
  /** Seconds from the last (first) expiry to the last purge; NaN if not all were purged within 300 s. */
  purgedAfterLastS: number;
  purgedAfterFirstS: number;
  /** Seconds for as many bare workflows started together. */
  floorCrowdS: number;
  /** The worker's largest resident memory seen, MB. */
  workerRssMaxMb: number;
  locksLeft: number;
}

/**
 * `waiting` tables trashed for 30 days, then `expiring` trashed to expire in the same second; the crowd's purge timed
 * against `expiring` bare workflows started together. Logs as it goes.
 */
export async function benchTimers(opts: {
  waiting: number;
  expiring: number;
  idleSeconds?: number;
  heapMb?: number;
}): Promise<TimersReport> {
  // The worker's V8 old space, as an operator sets it (NODE_OPTIONS=--max-old-space-size=N); unset: Node's default.
  const heapMb = opts.heapMb;
  const workerNodeOptions =
    heapMb === undefined ? {} : { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --max-old-space-size=${heapMb}`.trim() };
  const { waiting, expiring } = opts;
  const idleSeconds = opts.idleSeconds ?? 60;
  const rssSeen: number[] = [];
  const home = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-timers-'));
  const server = await DevServer.start({ stateDir: home, headless: true, cliPath: process.env.TEMPORAL_CLI_PATH, log: () => undefined });
  const connection = await Connection.connect({ address: server.address });
  let worker: CliProcess | undefined;
  let catalog: SqliteCatalog | undefined;
  try {
    worker = await startCliWorker(connection, {
      ...process.env,
      ...workerNodeOptions,
      TABLEFATE_HOME: home,
      TEMPORAL_ADDRESS: server.address,
      TABLEFATE_LOG_LEVEL: 'warn',
    });
    catalog = new SqliteCatalog(catalogPath(home));
    const client = new TableFateClient({ client: new Client({ connection }), catalog });
    console.log(
      `timers at scale: ${waiting} waiting, ${expiring} expiring in one second; ${os.cpus().length} cores, node ${process.version}; ` +
        `worker heap ${heapMb === undefined ? "Node's default" : `--max-old-space-size=${heapMb}`}`,
    );
    console.log(`worker RSS at start: ${rssMb(worker.pid!).toFixed(0)} MB`);
    rssSeen.push(rssMb(worker.pid!));

    const createMs = await inParallel(waiting, 'created and trashed', async (i) => {
      await client.create({ table: `wait.t${i}`, shards: 1 });
      await client.trash({ table: `wait.t${i}`, retentionSeconds: LONG_RETENTION_S });
    });
    console.log(
      `created and trashed ${waiting} tables in ${(createMs / 1000).toFixed(0)} s (${((waiting * 1000) / createMs).toFixed(1)}/s)`,
    );

    // Idle: every one waits on its timer. The worker's memory, the server's CPU, per 5 s slice: right after the
    // last trash the server is still settling the runs' histories, so the slices show when it falls to idle.
    const rssSamples: number[] = [];
    const cpuSlices: number[] = [];
    for (let s = 0; s < idleSeconds; s += 5) {
      const cpuBefore = cpuSeconds(server.pid);
      await sleep(5000);
      cpuSlices.push((cpuSeconds(server.pid) - cpuBefore) / 5);
      rssSamples.push(rssMb(worker.pid!));
    }
    const percent = (share: number) => `${(share * 100).toFixed(1)} %`;
    const settled = cpuSlices.slice(Math.floor(cpuSlices.length / 2));
    console.log(
      `while ${waiting} trash timers wait (${idleSeconds} s): worker RSS ${Math.max(...rssSamples).toFixed(0)} MB at most, ` +
        `dev server CPU ${percent(cpuSlices.reduce((a, b) => a + b, 0) / cpuSlices.length)} of one core ` +
        `(${percent(settled.reduce((a, b) => a + b, 0) / settled.length)} over the second half)`,
    );
    console.log(`  worker RSS per 5 s: ${rssSamples.map((mb) => mb.toFixed(0)).join(', ')} MB`);
    rssSeen.push(...rssSamples);
    console.log(`  dev server CPU per 5 s: ${cpuSlices.map(percent).join(', ')}`);

    // The crowd: trashed so that every expiry falls in the same second, `lead` seconds from now.
    const names = Array.from({ length: expiring }, (_, i) => `crowd.t${i}`);
    const ids: number[] = [];
    await inParallel(expiring, 'crowd created', async (i) => {
      ids[i] = (await client.create({ table: names[i]!, shards: 1 })).id;
    });
    // Far enough ahead that the whole crowd is trashed before it (about 20 trashes a second here), and no further.
    const lead = 20 + Math.ceil(expiring / 10);
    const expireAt = Math.ceil(Date.now() / 1000) * 1000 + lead * 1000;
    const trashMs = await inParallel(expiring, 'crowd trashed', async (i) => {
      await client.trash({ table: names[i]!, retentionSeconds: Math.round((expireAt - Date.now()) / 1000) });
    });
    if (trashMs > (lead - 10) * 1000)
      throw new Error(`trashing the crowd took ${trashMs} ms, past the shared expiry; use a smaller --expiring`);
    const expiries = (await Promise.all(ids.map((id) => catalog!.getTable(id)))).map((t) => t!.expireAt!);
    const spread = Math.max(...expiries) - Math.min(...expiries);
    console.log(
      `crowd of ${expiring} trashed in ${(trashMs / 1000).toFixed(0)} s; expiries within ${(spread / 1000).toFixed(1)} s of each other`,
    );

    const first = Math.min(...expiries);
    await sleep(Math.max(0, first - Date.now()));
    const cpuAtExpiry = { worker: cpuSeconds(worker.pid!), server: cpuSeconds(server.pid) };
    let purged = 0;
    let lastPurgedAt = 0;
    for (;;) {
      rssSeen.push(rssMb(worker.pid!));
      const rows = await Promise.all(ids.map((id) => catalog!.getTable(id)));
      const done = rows.filter((t) => t?.state === 'PURGED');
      purged = done.length;
      if (purged === expiring) {
        lastPurgedAt = Math.max(...done.map((t) => t!.purgedAt!));
        break;
      }
      if (Date.now() - first > 300_000) break;
      await sleep(1000);
    }
    const locks = await catalog.listLocks();
    const crowdLocks = locks.filter((l) => ids.some((id) => l.resource === `table:${id}`));
    console.log(
      purged === expiring
        ? `all ${expiring} purged ${((lastPurgedAt - Math.max(...expiries)) / 1000).toFixed(1)} s after the last expiry ` +
            `(${((lastPurgedAt - first) / 1000).toFixed(1)} s after the first); locks left on them: ${crowdLocks.length}`
        : `ONLY ${purged} of ${expiring} purged within 300 s; locks left on them: ${crowdLocks.length}`,
    );
    const busy = (pid: number, before: number) => `${(cpuSeconds(pid) - before).toFixed(1)} CPU-s`;
    console.log(
      `  while the crowd was purged: worker ${busy(worker.pid!, cpuAtExpiry.worker)}, dev server ${busy(server.pid, cpuAtExpiry.server)}`,
    );
    console.log(`worker RSS at the end: ${rssMb(worker.pid!).toFixed(0)} MB, at most ${Math.max(...rssSeen).toFixed(0)} MB`);

    // The floor for a crowd: as many bare one-activity workflows, all started at once on the same server, each
    // finished by the worker of this process. Nothing built on Temporal finishes a crowd faster here.
    const floorMs = await floorCrowd(server.address, expiring);
    console.log(
      `floor: ${expiring} bare workflows started together all finished ${(floorMs / 1000).toFixed(1)} s after the first start ` +
        `(the crowd's purge took ${(((lastPurgedAt || Date.now()) - first) / floorMs).toFixed(2)}x that)`,
    );
    const all = purged === expiring;
    return {
      waiting,
      expiring,
      createRate: waiting > 0 ? (waiting * 1000) / createMs : NaN,
      purgedAfterLastS: all ? (lastPurgedAt - Math.max(...expiries)) / 1000 : NaN,
      purgedAfterFirstS: all ? (lastPurgedAt - first) / 1000 : NaN,
      floorCrowdS: floorMs / 1000,
      workerRssMaxMb: Math.max(...rssSeen),
      locksLeft: crowdLocks.length,
    };
  } finally {
    if (worker && !worker.exitStatus) await worker.stop('SIGINT');
    await catalog?.close();
    await connection.close();
    await server.stop();
    await fs.promises.rm(home, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      waiting: { type: 'string' },
      expiring: { type: 'string' },
      'idle-seconds': { type: 'string' },
      'worker-heap-mb': { type: 'string' },
    },
    strict: true,
  });
  await benchTimers({
    waiting: Number(values.waiting ?? 10_000),
    expiring: Number(values.expiring ?? 1_000),
    idleSeconds: Number(values['idle-seconds'] ?? 60),
    ...(values['worker-heap-mb'] === undefined ? {} : { heapMb: Number(values['worker-heap-mb']) }),
  });
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
