/**
 * Every figure of tablefate's speed in one run, then side by side (`npm run bench`, about 15 minutes here):
 *
 * - the lifecycle against the floor (bench/lifecycle.ts) on the embedded default (files, dev server), with the
 *   command line's times (bench/cli.ts) and the worker's start (bench/worker-start.ts);
 * - the same with the PostgreSQL driver, and the trash of a table of 1 MB against one of 1 GB;
 * - the same with the MariaDB driver (no truncate), and its trash of a table of 1 MB against one of 1 GB;
 * - a family's cost with the PostgreSQL driver (bench/family.ts): `drop --cascade` of a table with 3 views and 2 keys on
 *   it against a single table's drop, its recall, both by size, and the SQL statements each sends to the node;
 * - a whole namespace of 20 tables dropped and recalled as one against one table (bench/namespace.ts);
 * - the same on a Temporal cluster as `tablefate cluster up` starts it;
 * - a crowd of tables expiring in the same second, beside as many bare workflows started together, and the
 *   worker's memory meanwhile (bench/timers.ts).
 *
 *   npm run bench
 *   npm run bench -- --rounds 10 --expiring 100 --skip cluster      (shorter; --skip any of: postgres, mariadb, family, namespace, cluster, timers)
 */
import { parseArgs } from 'node:util';
import { benchLifecycle, OPERATION_NAMES, printLifecycle, type LifecycleReport } from './lifecycle';
import { percentile } from './samples';
import { benchTimers, type TimersReport } from './timers';
import { benchFamily, printFamily, summarizeFamily, type FamilyReport } from './family';
import { benchNamespace, printNamespace, summarizeNamespace, type NamespaceReport } from './namespace';

const PARTS = ['postgres', 'mariadb', 'family', 'namespace', 'cluster', 'timers'] as const;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string' },
      expiring: { type: 'string' },
      waiting: { type: 'string' },
      skip: { type: 'string', multiple: true },
    },
    strict: true,
  });
  const rounds = Number(values.rounds ?? 20);
  const skip = new Set(values.skip ?? []);
  for (const part of skip) if (!(PARTS as readonly string[]).includes(part)) throw new Error(`--skip: one of ${PARTS.join(', ')}`);

  const reports: Array<{ label: string; report: LifecycleReport }> = [];
  const run = async (label: string, setting: LifecycleReport['setting'], withCli = false) => {
    console.log(`\n== ${label}`);
    const report = await benchLifecycle(setting, { rounds, withCli });
    printLifecycle(report);
    reports.push({ label, report });
  };
  await run('files, dev server', { driver: 'files', temporal: 'dev' }, true);
  if (!skip.has('postgres')) await run('postgres, dev server', { driver: 'postgres', temporal: 'dev' });
  if (!skip.has('mariadb')) await run('mariadb, dev server', { driver: 'mariadb', temporal: 'dev' });
  let family: FamilyReport | undefined;
  if (!skip.has('family')) {
    console.log('\n== a family (postgres, dev server): drop --cascade against a single drop');
    // 30 rounds unless told: the per-member difference is a few ms, under the rounds' spread with fewer.
    family = await benchFamily({ rounds: values.rounds === undefined ? 30 : rounds });
    printFamily(family);
  }
  let namespace: NamespaceReport | undefined;
  if (!skip.has('namespace')) {
    console.log('\n== a namespace of 20 tables (postgres, dev server): drop --namespace against a single drop');
    namespace = await benchNamespace({ rounds });
    printNamespace(namespace);
  }
  if (!skip.has('cluster')) await run('files, cluster', { driver: 'files', temporal: 'cluster' });
  let timers: TimersReport | undefined;
  if (!skip.has('timers')) {
    console.log('\n== timers');
    const expiring = Number(values.expiring ?? 300);
    timers = await benchTimers({ waiting: Number(values.waiting ?? expiring), expiring, idleSeconds: 10 });
  }
  printSummary(reports, timers);
  if (family) for (const line of summarizeFamily(family)) console.log(line);
  if (namespace) for (const line of summarizeNamespace(namespace)) console.log(line);
}

/** The ratios of every setting side by side, each beside its goal (issue 31). */
function printSummary(reports: ReadonlyArray<{ label: string; report: LifecycleReport }>, timers: TimersReport | undefined): void {
  const width = 22;
  console.log("\n== side by side: p50 / the floor's p50 (throughput: creates / floors, 32 at once)");
  console.log(`${'op'.padEnd(12)}${reports.map((r) => r.label.padStart(width)).join('')}   goal`);
  const goals: Record<string, string> = {
    create: '<= 1.0x (mariadb <= 1.1x)',
    trash: '<= 1.0x (postgres, mariadb <= 1.1x)',
    undelete: '<= 1.3x',
    truncate: '(against trash: the same drain and move, and a table made)',
    purge: '<= 1.3x',
    contract: '(a create by type name; no goal)',
    nexus: '(a create through Nexus; no goal)',
  };
  for (const op of OPERATION_NAMES) {
    const cells = reports.map(({ report }) =>
      (report.p50[op] === undefined ? 'n/a' : `${(report.p50[op] / report.p50.floor).toFixed(2)}x`).padStart(width),
    );
    console.log(`${op.padEnd(12)}${cells.join('')}   ${goals[op] ?? ''}`);
  }
  const floors = reports.map(({ report }) => `${report.p50.floor.toFixed(0)} ms`.padStart(width));
  console.log(`${'(floor p50)'.padEnd(12)}${floors.join('')}`);
  const rates = reports.map(({ report }) => `${(report.throughput.create / report.throughput.floor).toFixed(2)}x`.padStart(width));
  console.log(`${'throughput'.padEnd(12)}${rates.join('')}   >= 1.0x`);
  for (const { report } of reports) {
    const [small, big] = report.bySize;
    if (!small || !big) continue;
    for (const op of ['trash', 'truncate'] as const) {
      if (small[`${op}Ms`].length === 0) continue;
      const [a, b] = [percentile(small[`${op}Ms`], 50), percentile(big[`${op}Ms`], 50)];
      console.log(
        `${report.setting.driver} ${op} by size: ${small.label} ${a.toFixed(0)} ms, ${big.label} ${b.toFixed(0)} ms (${(((b - a) / a) * 100).toFixed(0)} %; goal within 10 %)`,
      );
    }
  }
  if (timers) {
    console.log(
      `${timers.expiring} tables expiring in one second: ` +
        (Number.isNaN(timers.purgedAfterLastS)
          ? 'NOT all purged within 300 s'
          : `all purged ${timers.purgedAfterLastS.toFixed(1)} s after the last expiry (goal 15 s)`) +
        `; worker RSS at most ${timers.workerRssMaxMb.toFixed(0)} MB (goal under 400); locks left ${timers.locksLeft}`,
    );
    console.log(
      `the crowd's purge against ${timers.expiring} bare workflows started together: ` +
        `${timers.purgedAfterFirstS.toFixed(1)} s / ${timers.floorCrowdS.toFixed(1)} s = ${(timers.purgedAfterFirstS / timers.floorCrowdS).toFixed(2)}x (goal <= 1.0x)`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
