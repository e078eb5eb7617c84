/**
 * How long the command line takes to answer: each command as a person runs it (`node bin/tablefate.js ...`, a new
 * process each time), the median of 10 warm runs (one run before them, not counted), beside `node -e 0`, Node's own
 * start. For create, drop and recall also the same operation through the SDK in this process, interleaved, and the
 * difference: what the command line itself costs on top of the operation.
 *
 *   npm run bench:cli                      (its own dev server and worker, as bench/setup.ts starts them)
 *   npm run bench:cli -- --runs 20 --bin /elsewhere/bin/tablefate.js      (another build of the command line)
 *
 * `npm run bench` runs it too, at its end, on the same server as the lifecycle.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startBench, type Bench } from './setup';

export interface CliRow {
  label: string;
  /** Median wall time of the whole command, ms. */
  ms: number;
  /** The same operation through the SDK in this process (create, drop, recall), ms. */
  opMs?: number;
}

const BIN = path.resolve(__dirname, '..', 'bin', 'tablefate.js');

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Runs a process to its end and returns its wall time in ms; a non-zero exit fails the bench. */
function timedRun(args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const start = process.hrtime.bigint();
  return new Promise((resolve, reject) =>
    execFile(process.execPath, args, { env }, (err, _stdout, stderr) => {
      if (err) reject(new Error(`${args.join(' ')}: ${err.message} ${stderr}`));
      else resolve(Number(process.hrtime.bigint() - start) / 1e6);
    }),
  );
}

async function timedCall(fn: () => Promise<unknown>): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/** The command line's times on a bench's server and state (a few tables of its own, in namespace clibench). */
export async function benchCli(bench: Bench, opts: { runs?: number; bin?: string } = {}): Promise<CliRow[]> {
  const runs = opts.runs ?? 10;
  const bin = opts.bin ?? BIN;
  const env = bench.cliEnv;
  const cli = (...args: string[]) => timedRun([bin, ...args], env);
  const { client } = bench;
  const described = await client.create({ table: 'clibench.described' });
  const rows: CliRow[] = [];
  const simple: Array<[label: string, run: () => Promise<number>]> = [
    ['node -e 0', () => timedRun(['-e', '0'], env)],
    ['--help', () => cli('--help')],
    ['--version', () => cli('--version')],
    ['ls', () => cli('ls')],
    ['describe', () => cli('describe', String(described.id))],
    ['config get', () => cli('config', 'get')],
    ['ops', () => cli('ops')],
  ];
  for (const [label, run] of simple) {
    // A command this build does not have (an older one without --version): not measured.
    if (
      !(await run().then(
        () => true,
        () => false,
      ))
    ) {
      rows.push({ label, ms: NaN });
      continue;
    }
    const samples: number[] = [];
    for (let i = 0; i < runs; i++) samples.push(await run());
    rows.push({ label, ms: median(samples) });
  }
  // create, drop and recall: the command line's and the SDK's in turn, each on a table of its own.
  const times = {
    cli: { create: [] as number[], drop: [] as number[], recall: [] as number[] },
    sdk: { create: [] as number[], drop: [] as number[], recall: [] as number[] },
  };
  for (let i = -1; i < runs; i++) {
    const viaCli = `clibench.cli${i + 1}`;
    const viaSdk = `clibench.sdk${i + 1}`;
    const c = { create: await cli('create', viaCli), drop: await cli('drop', viaCli), recall: await cli('recall', viaCli) };
    const s = {
      create: await timedCall(() => client.create({ table: viaSdk })),
      drop: await timedCall(() => client.trash({ table: viaSdk })),
      recall: await timedCall(() => client.undelete({ table: viaSdk })),
    };
    if (i < 0) continue;
    for (const op of ['create', 'drop', 'recall'] as const) {
      times.cli[op].push(c[op]);
      times.sdk[op].push(s[op]);
    }
  }
  for (const op of ['create', 'drop', 'recall'] as const) rows.push({ label: op, ms: median(times.cli[op]), opMs: median(times.sdk[op]) });
  return rows;
}

export function printCliRows(rows: readonly CliRow[], runs = 10): void {
  console.log(`the command line (node bin/tablefate.js ..., a process each), median of ${runs} warm runs`);
  console.log('command        total ms   op ms (SDK)   total - op');
  for (const { label, ms, opMs } of rows) {
    const op = opMs === undefined ? '' : `${opMs.toFixed(0).padStart(13)} ${(ms - opMs).toFixed(0).padStart(12)}`;
    console.log(`${label.padEnd(12)} ${ms.toFixed(0).padStart(10)}${op}`);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { runs: { type: 'string' }, bin: { type: 'string' } }, strict: true });
  const runs = Number(values.runs ?? 10);
  const bench = await startBench();
  let rows: CliRow[];
  try {
    rows = await benchCli(bench, { runs, bin: values.bin });
  } finally {
    await bench.close();
  }
  printCliRows(rows, runs);
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
