/**
 * What each operation costs against the floor of Temporal itself: create (4 shards), trash, undelete, truncate and purge, and
 * the trash's policies (a hold, its release, a lease taken and released, a trashed table's new retention) through the
 * SDK, each beside a bare one-activity workflow (bench/floor-workflow.ts) on the same server, the same worker process
 * and the same run, interleaved so that drift hits both alike. Reports p50 and p90 of each as a multiple of the
 * floor's, then throughput: 32 creates at once against 32 floors at once. Then the contract's create, as a service in
 * another language makes it: by workflow type (`tablefate.v1.create`, `contract`) and from a caller's workflow through
 * the Nexus endpoint (`nexus`). One setting per run (`npm run bench` runs them all, bench/all.ts):
 *
 *   npm run bench:lifecycle                          (20 rounds, the dev server as `tablefate dev` starts it, files)
 *   npm run bench:lifecycle -- --rounds 50
 *   npm run bench:lifecycle -- --server-defaults     (Temporal's own dynamic config instead of tablefate's)
 *   npm run bench:lifecycle -- --temporal cluster    (a Temporal cluster as `tablefate cluster up` makes it, on a
 *                                                     PostgreSQL it starts, instead of the dev server)
 *   npm run bench:lifecycle -- --driver postgres     (shards as PostgreSQL tables, on a PostgreSQL it starts; then the
 *                                                     trash and truncate of a table of 1 GB against one of 1 MB)
 *   npm run bench:lifecycle -- --driver mariadb      (shards as MariaDB tables, on a MariaDB server it starts; then
 *                                                     the trash of a table of 1 GB against one of 1 MB)
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import { EMBEDDED_DYNAMIC_CONFIG } from '../servers/dev-server';
import { benchShapeOf, startBench, startFloor } from './setup';
import { contractWorkflowType } from '../domain/contract';
import { TASK_QUEUE } from '../domain/deployment';
import { benchCli, printCliRows, type CliRow } from './cli';
import { benchWorkerStart } from './worker-start';
import { benchSqlDoor, type DoorReport } from './sql-door';
import { percentile, timed } from './samples';
import { mariadbLoader, postgresLoader, trashBySize, type SizeSamples } from './by-size';

const OPS = [
  'create',
  'trash',
  'undelete',
  'truncate',
  'purge',
  'hold',
  'release',
  'lease',
  'unlease',
  'retention',
  'contract',
  'nexus',
] as const;
type Op = (typeof OPS)[number];
const FLOOR_QUEUE = 'bench-floor';
const NEXUS_CALLER_QUEUE = 'bench-nexus-caller';
const CONCURRENCY = 32;

/** Where a lifecycle bench runs: the Temporal server, its dynamic config, and the storage driver. */
export interface LifecycleSetting {
  driver: 'files' | 'postgres' | 'mariadb';
  temporal: 'dev' | 'cluster';
  /** Temporal's own dynamic config instead of tablefate's (dev server only). */
  serverDefaults?: boolean;
}

/** One lifecycle bench's figures: each op's p50 and p90 (ms) beside the floor's, the throughput, the trash by size. */
export interface LifecycleReport {
  setting: LifecycleSetting;
  rounds: number;
  p50: Record<Op | 'floor', number>;
  p90: Record<Op | 'floor', number>;
  /** Per second, 32 at once (median of 3 batches). */
  throughput: { floor: number; create: number };
  bySize: SizeSamples[];
  /** PostgreSQL: a drop through the SQL door beside the SDK's and a bare move. */
  door?: DoorReport;
  cliRows: CliRow[];
  workerStartMs?: number;
}

export const OPERATION_NAMES = OPS;

/**
 * Runs the lifecycle against the floor on a server and driver of its own, and with `withCli` the command line's times
 * and the worker's start on the same server (files on the dev server only: what a person runs).
 */
export async function benchLifecycle(
  setting: LifecycleSetting,
  opts: { rounds?: number; withCli?: boolean } = {},
): Promise<LifecycleReport> {
  const rounds = opts.rounds ?? 20;
  const { driver, temporal: temporalKind, serverDefaults = false } = setting;
  if (temporalKind === 'cluster' && serverDefaults)
    throw new Error("--server-defaults is for the dev server: a cluster runs deploy/temporal's dynamic config");
  const bench = await startBench({
    dynamicConfig: serverDefaults ? {} : EMBEDDED_DYNAMIC_CONFIG,
    fourPartitions: serverDefaults,
    driver,
    temporal: temporalKind,
  });
  const shape = benchShapeOf(driver);
  // (MariaDB's driver does not truncate yet: its row reads n/a.)
  const truncates = driver !== 'mariadb';
  const { client, temporal } = bench;
  const runFloor = await startFloor(bench, FLOOR_QUEUE);
  const floor = () => runFloor(`floor-${randomUUID()}`);
  // The contract's callers: a service by type name, and a workflow of its own through Nexus (the endpoint `tablefate`,
  // which the bench's server was given, routes to the bench's worker).
  bench.alsoRun(
    await Worker.create({
      connection: bench.workerConnection,
      namespace: 'default',
      taskQueue: NEXUS_CALLER_QUEUE,
      workflowsPath: require.resolve('./nexus-caller-workflow'),
    }),
  );
  const byType = (table: string) =>
    temporal.workflow.execute(contractWorkflowType('create'), {
      taskQueue: TASK_QUEUE,
      workflowId: `bench-contract-${randomUUID()}`,
      args: [{ table, ...shape }],
    });
  const throughNexus = (table: string) =>
    temporal.workflow.execute('createThroughNexus', {
      taskQueue: NEXUS_CALLER_QUEUE,
      workflowId: `bench-nexus-${randomUUID()}`,
      args: [{ table, ...shape }],
    });

  const samples = Object.fromEntries(['floor', ...OPS].map((op) => [op, [] as number[]])) as Record<Op | 'floor', number[]>;
  const throughput = { floor: [] as number[], create: [] as number[] };
  let bySize: LifecycleReport['bySize'] = [];
  let door: DoorReport | undefined;
  let cliRows: CliRow[] = [];
  let workerStartMs: number | undefined;
  try {
    // One warm-up round: the first workflow task of each type loads the bundle into the worker's VM.
    for (let round = -1; round < rounds; round++) {
      const name = `bench.t${round + 1}`;
      const sink = (op: Op | 'floor') => (round < 0 ? [] : samples[op]);
      await timed(sink('floor'), floor);
      const table = await timed(sink('create'), () => client.create({ table: name, ...shape }));
      await timed(sink('floor'), floor);
      await timed(sink('trash'), () => client.trash({ table: name }));
      await timed(sink('floor'), floor);
      await timed(sink('undelete'), () => client.undelete({ table: table.id }));
      await timed(sink('floor'), floor);
      if (truncates) await timed(sink('truncate'), () => client.truncate({ table: name }));
      // The trash's policies: a legal hold and its release, a lease taken and released, a trashed table's retention.
      await timed(sink('floor'), floor);
      await timed(sink('hold'), () => client.hold({ table: table.id, reason: 'bench' }));
      await timed(sink('release'), () => client.release({ table: table.id }));
      await timed(sink('floor'), floor);
      const lease = await timed(sink('lease'), () => client.acquireLease(table.id));
      await timed(sink('unlease'), () => client.releaseLease(lease.id));
      await client.trash({ table: name });
      await timed(sink('floor'), floor);
      await timed(sink('retention'), () => client.setRetention({ table: table.id, retentionSeconds: 7200 }));
      await timed(sink('floor'), floor);
      await timed(sink('purge'), () => client.purge({ tableId: table.id }));
      await timed(sink('floor'), floor);
      await timed(sink('contract'), () => byType(`bench.k${round + 1}`));
      await timed(sink('floor'), floor);
      await timed(sink('nexus'), () => throughNexus(`bench.n${round + 1}`));
    }
    // Throughput: CONCURRENCY at once, floors and creates in turn, three times each.
    for (let batch = 0; batch < 3; batch++) {
      await timed(throughput.floor, () => Promise.all(Array.from({ length: CONCURRENCY }, floor)));
      await timed(throughput.create, () =>
        Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => client.create({ table: `bench.c${batch}_${i}`, ...shape }))),
      );
    }
    if (bench.nodeUrl) bySize = await trashBySize(bench.client, postgresLoader(bench.nodeUrl), { rounds: SIZE_ROUNDS, truncates: true });
    // (MariaDB's driver does not truncate.)
    if (bench.mariadbUrl)
      bySize = await trashBySize(bench.client, mariadbLoader(bench.mariadbUrl), { rounds: SIZE_ROUNDS, truncates: false });
    if (bench.nodeUrl) door = await benchSqlDoor(bench.client, bench.nodeUrl, rounds);
    // The command line's start and its commands (bench/cli.ts), on the embedded default.
    if (opts.withCli && driver === 'files' && temporalKind === 'dev') {
      cliRows = await benchCli(bench);
      workerStartMs = await benchWorkerStart(bench.cliEnv.TEMPORAL_ADDRESS!);
    }
  } finally {
    await bench.close();
  }
  const at = (p: number) =>
    Object.fromEntries(Object.entries(samples).map(([op, s]) => [op, percentile(s, p)])) as Record<Op | 'floor', number>;
  const perSecond = (ms: readonly number[]) => (CONCURRENCY * 1000) / percentile(ms, 50);
  return {
    setting,
    rounds,
    p50: at(50),
    p90: at(90),
    throughput: { floor: perSecond(throughput.floor), create: perSecond(throughput.create) },
    bySize,
    ...(door ? { door } : {}),
    cliRows,
    workerStartMs,
  };
}

/** How a setting reads in a title: "dev server as `tablefate dev` starts it, files driver". */
export function describeSetting({ driver, temporal, serverDefaults }: LifecycleSetting): string {
  const server =
    temporal === 'cluster'
      ? 'a Temporal cluster as `tablefate cluster up` starts it (four services, two history processes, PostgreSQL)'
      : `dev server ${serverDefaults ? "with Temporal's default dynamic config" : 'as `tablefate dev` starts it'}`;
  return `${server}, ${driver} driver`;
}

export function printLifecycle(report: LifecycleReport): void {
  const { p50, p90, throughput } = report;
  console.log(
    `tablefate lifecycle against the floor: ${report.rounds} rounds, ${os.cpus().length} cores, node ${process.version}, ${describeSetting(report.setting)}`,
  );
  console.log('op          p50 ms   p90 ms   p50/floor   p90/floor');
  for (const op of ['floor', ...OPS] as const) {
    if (p50[op] === undefined) {
      console.log(`${op.padEnd(9)} ${'n/a'.padStart(8)}`);
      continue;
    }
    console.log(
      `${op.padEnd(9)} ${p50[op].toFixed(0).padStart(8)} ${p90[op].toFixed(0).padStart(8)} ${`${(p50[op] / p50.floor).toFixed(2)}x`.padStart(11)} ${`${(p90[op] / p90.floor).toFixed(2)}x`.padStart(11)}`,
    );
  }
  console.log(
    `throughput, ${CONCURRENCY} at once (median of 3 batches): floor ${throughput.floor.toFixed(1)}/s, create ${throughput.create.toFixed(1)}/s = ` +
      `${(throughput.create / throughput.floor).toFixed(2)}x the floor's`,
  );
  for (const { label, bytes, trashMs, truncateMs } of report.bySize) {
    for (const [op, samples] of [
      ['trash', trashMs],
      ['truncate', truncateMs],
    ] as const) {
      if (samples.length === 0) continue;
      const ms = samples.map((t) => t.toFixed(0)).join(', ');
      console.log(
        `${op} of a table of ${label} (${(bytes / 2 ** 20).toFixed(1)} MiB as ${report.setting.driver === 'mariadb' ? 'MariaDB' : 'PostgreSQL'} counts it): ${ms} ms (${(percentile(samples, 50) / p50.floor).toFixed(2)}x the floor)`,
      );
    }
  }
  if (report.door) {
    const { sdkDropMs, doorDropMs, pickUpMs, bareMoveMs } = report.door;
    const [sdk, sql] = [percentile(sdkDropMs, 50), percentile(doorDropMs, 50)];
    console.log(
      `SQL door: CALL tablefate_sql.drop p50 ${sql.toFixed(0)} ms against the SDK's drop ${sdk.toFixed(0)} ms (+${(sql - sdk).toFixed(0)} ms, ` +
        `goal +20 ms at most); its request picked up ${percentile(pickUpMs, 50).toFixed(1)} ms after its commit (p50); ` +
        `a bare ALTER TABLE ... SET SCHEMA ${percentile(bareMoveMs, 50).toFixed(1)} ms`,
    );
  }
  if (report.cliRows.length > 0) printCliRows(report.cliRows);
  if (report.workerStartMs !== undefined)
    console.log(`tablefate worker, start to polling (median of 5): ${(report.workerStartMs / 1000).toFixed(2)} s`);
}

/** Trashes of each size measured (trashBySize). */
const SIZE_ROUNDS = 21;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string' },
      'server-defaults': { type: 'boolean' },
      driver: { type: 'string' },
      temporal: { type: 'string' },
    },
    strict: true,
  });
  if (values.temporal !== undefined && values.temporal !== 'dev' && values.temporal !== 'cluster')
    throw new Error('--temporal: dev or cluster');
  if (values.driver !== undefined && values.driver !== 'files' && values.driver !== 'postgres' && values.driver !== 'mariadb')
    throw new Error('--driver: files, postgres or mariadb');
  const setting: LifecycleSetting = {
    driver: values.driver === 'postgres' || values.driver === 'mariadb' ? values.driver : 'files',
    temporal: values.temporal === 'cluster' ? 'cluster' : 'dev',
    serverDefaults: values['server-defaults'] === true,
  };
  printLifecycle(await benchLifecycle(setting, { rounds: Number(values.rounds ?? 20), withCli: true }));
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
