import { runChaosInTest } from './chaos/in-jest';
import { POLICY_KINDS } from './chaos/ops';

/**
 * The short form of `npm run chaos`: the same runner with its own dev server and worker child, fewer
 * operations and one server restart. The seed is fixed so a failure can be repeated (timing aside);
 * TABLEFATE_CHAOS_SEED picks another. Then a shorter one with the PostgreSQL driver (`--driver postgres`): real
 * tables in databases of the run's PostgreSQL server, rows inserted meanwhile, views and keys made on them (families,
 * which drops take along with cascade), storage connections cut. And one with the MariaDB driver (`--driver mariadb`): a
 * MariaDB server per node, the worker on its own least-privilege account, rows inserted meanwhile, triggers and keys made
 * on the tables, the worker's sessions cut and a node's server SIGKILLed and started again.
 */

const SEED = Number(process.env.TABLEFATE_CHAOS_SEED ?? 20261129);

test('under worker kills and a server restart, every answer stays true and catalog, files and workflows come to rest', async () => {
  const report = await runChaosInTest({
    seed: SEED,
    ops: 40,
    clients: 4,
    serverRestarts: 1,
    // Bounded so that a stalled product fails this test in about 2.5 minutes instead of hanging it.
    callTimeoutMs: 15_000,
    opsTimeLimitMs: 45_000,
    convergenceTimeoutMs: 50_000,
  });

  // Not vacuous: the operations ran, some were answered, the trash's policies (holds, retentions, leases) among them,
  // and the chaos really happened.
  expect(report.ops.length).toBeGreaterThan(0);
  expect(report.ops.filter((op) => op.outcome.kind === 'ok').length).toBeGreaterThan(0);
  expect(report.ops.filter((op) => POLICY_KINDS.includes(op.request.kind)).length).toBeGreaterThan(0);
  expect(report.stats.workerKills).toBeGreaterThan(0);
  expect(report.stats.serverRestarts).toBe(1);
  expect(report.convergence).toBeDefined();
  expect(report.problems).toEqual([]);
}, 175_000);

test('with the postgres driver, under worker kills and cut connections, every row seen committed stays in its table', async () => {
  const report = await runChaosInTest({
    seed: SEED,
    ops: 16,
    clients: 4,
    serverRestarts: 0,
    driver: 'postgres',
    // Bounded so that a stalled product fails this test in about 2 minutes instead of hanging it.
    callTimeoutMs: 15_000,
    opsTimeLimitMs: 30_000,
    convergenceTimeoutMs: 40_000,
  });

  // Not vacuous: operations answered, workers killed, rows written and seen committed, families made, the user's tables
  // in place.
  expect(report.ops.filter((op) => op.outcome.kind === 'ok').length).toBeGreaterThan(0);
  expect(report.stats.workerKills).toBeGreaterThan(0);
  expect(report.postgres?.rowsCommitted).toBeGreaterThan(0);
  const made = report.postgres?.families.made;
  expect((made?.view ?? 0) + (made?.['materialized view'] ?? 0) + (made?.['foreign key'] ?? 0)).toBeGreaterThan(0);
  expect(report.postgres?.userTables.length).toBeGreaterThan(0);
  expect(report.convergence).toBeDefined();
  expect(report.problems).toEqual([]);
}, 150_000);

test('with the mariadb driver, under worker kills, cut sessions and a server crash, every row seen committed stays with its table', async () => {
  const report = await runChaosInTest({
    seed: SEED,
    ops: 20,
    clients: 4,
    serverRestarts: 0,
    driver: 'mariadb',
    mariadbRestarts: 1,
    // Bounded so that a stalled product fails this test in about 2 minutes instead of hanging it.
    callTimeoutMs: 15_000,
    opsTimeLimitMs: 40_000,
    convergenceTimeoutMs: 40_000,
  });

  // Not vacuous: operations answered, workers killed, the worker's sessions cut, a node's server crashed, rows written
  // and seen committed, triggers or keys made, the hand-made table adopted, the user's tables in place.
  expect(report.ops.filter((op) => op.outcome.kind === 'ok').length).toBeGreaterThan(0);
  expect(report.stats.workerKills).toBeGreaterThan(0);
  expect(report.mariadb?.connectionCuts).toBeGreaterThan(0);
  expect(report.mariadb?.serverRestarts).toBe(1);
  expect(report.mariadb?.rowsCommitted).toBeGreaterThan(0);
  const made = report.mariadb?.objects.made;
  expect((made?.trigger ?? 0) + (made?.['foreign key'] ?? 0)).toBeGreaterThan(0);
  expect(report.mariadb?.adopted).toMatch(/^chaos_legacy\.accounts \(table \d+/);
  expect(report.mariadb?.userTables.length).toBeGreaterThan(0);
  expect(report.ops.some((op) => op.request.kind === 'truncate')).toBe(false);
  expect(report.convergence).toBeDefined();
  expect(report.problems).toEqual([]);
}, 150_000);
