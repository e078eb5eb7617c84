import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { catalogLocation, openCatalog } from '../../catalog/open';
import { LocalFileStorage } from '../../storage/local-files';
import { loadConfig, statePaths, TASK_QUEUE } from '../../worker/config';
import { waitForConvergence } from './convergence';
import { sharedPostgres, type TestPostgres } from '../support/postgres';
import { TableFateClient } from '../../client/client';
import { checkFiles, ShardFingerprints } from './files';
import { checkInvariants, type StorageFindings } from './invariants';
import { checkStorageAtRest } from './storage-at-rest';
import type { ChaosOptions, ChaosReport } from './run-options';
import { Progress, restartServerDuringOps } from './server-restarts';
import { preparePostgresLoad } from './user-load';
import { CHAOS_COLUMNS, type NodeDatabase } from './rows';
import { makeUserTables, USER_TABLE_TABLEFATE_NAMES, type UserTable } from './tables';
import { ChaosMonkey, workerSpecs, type ProcessSpec } from './monkey';
import { storageQueue } from '../../domain/operations';
import { summarizeWorkerLog } from './report';
import { ChaosCluster, ChaosServer, type ChaosTemporal } from './processes';
import { Random } from './random';
import { runScenario } from './scenario';
import { idsMentioned } from './ops';
import { checkHolds, releaseEveryHold } from './policies';
import { MariadbRun } from './mariadb-load';
import { allTables, LockWaitWatch } from './observe';
import { countDoorAnswers, DOOR_COUNT_SCHEMA, makeDoorCallerRole, urlAs } from './sql-caller';
import { unitHints } from './units';
import { AnswerChecks } from './on-answer';
import { TruncatedSets } from './truncate-files';

/**
 * One chaos run, start to end: its own dev server and state directory, a worker child killed again and again,
 * a server crashed and restarted, clients issuing operations, then the wait for rest and every invariant.
 * Whatever happens, the processes it started are stopped before it returns or throws.
 */

const NAMESPACE = 'default';
/** postgres and mariadb drivers: how often tablefate's storage connections are cut, by default. */
export const DEFAULT_CUTS_EVERY_MS: readonly [number, number] = [3000, 8000];
const NODES = ['node-0', 'node-1', 'node-2'];

/**
 * The processes of the run: the workers, then (remote storage) a storage node each, serving its directory, (postgres
 * driver) its database or (mariadb driver) its server; the first `kill*` are killed.
 */
function processesOf(
  settings: ChaosReport['options'],
  nodeRoots: readonly string[],
  nodeDbs: readonly NodeDatabase[],
  mariadb: MariadbRun | undefined,
): ProcessSpec[] {
  const remote = settings.storage === 'remote';
  const workers = workerSpecs(settings.workers, remote ? ['worker', '--storage', 'remote'] : ['worker']).map((spec, i) => ({
    ...spec,
    killable: i < settings.killWorkers,
  }));
  if (!remote) return workers;
  const nodes = NODES.map((node, k): ProcessSpec => ({
    name: node,
    args: [
      'storage-node',
      node,
      ...(settings.driver === 'postgres'
        ? ['--postgres', nodeDbs[k]!.url]
        : mariadb
          ? ['--mariadb', mariadb.workerUrls[k]!]
          : ['--dir', nodeRoots[k]!]),
    ],
    queue: { name: storageQueue(TASK_QUEUE, node), kind: 'activity' },
    killable: k < settings.killNodes,
    orchestrates: false,
  }));
  return [...workers, ...nodes];
}

function emptyReport(seed: number, options: ChaosReport['options'], dir: string): ChaosReport {
  return {
    seed,
    options,
    ops: [],
    stats: {
      workerStarts: 0,
      workerKills: 0,
      killsOnOpStart: 0,
      workerExits: [],
      workersNeverReady: 0,
      serverRestarts: 0,
      killedAt: new Map(),
      killsOf: {},
      serverKills: [],
    },
    holdCheckpoint: undefined,
    convergence: undefined,
    problems: [],
    notes: [],
    tables: 0,
    storageSummary: '',
    opsPhaseMs: 0,
    durationMs: 0,
    aborted: false,
    dir,
    kept: true,
    workerLog: path.join(dir, 'worker.log'),
    workerLogSummary: [],
    serverLog:
      options.temporal === 'cluster' ? path.join(dir, 'temporal', 'cluster', 'logs', 'frontend.log') : path.join(dir, 'temporal.log'),
  };
}

/** How many times the log shows a process ended by an 'error' event nobody listened to, emitted by a pg Client. */
function uncaughtPgErrors(logFile: string): number {
  let text: string;
  try {
    text = fs.readFileSync(logFile, 'utf8');
  } catch {
    return 0;
  }
  return text.split('\n').filter((line) => line.startsWith("Emitted 'error' event on Client instance")).length;
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const started = Date.now();
  const signal = options.signal ?? new AbortController().signal;
  const log = (line: string) => options.log?.(`[${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}`);
  const settings = {
    ops: options.ops,
    clients: options.clients,
    serverRestarts: options.serverRestarts,
    temporal: options.temporal ?? 'dev',
    catalog: options.catalog ?? 'sqlite',
    driver: options.driver ?? 'files',
    connectionCuts: (options.driver ?? 'files') !== 'files' && options.connectionCutsEveryMs !== false,
    mariadbRestarts: options.driver === 'mariadb' ? (options.mariadbRestarts ?? 2) : 0,
    workers: options.workers ?? 1,
    storage: options.storage ?? 'local',
    killWorkers: options.killWorkers ?? options.workers ?? 1,
    killNodes: options.storage === 'remote' ? (options.killNodes ?? 1) : 0,
    caller: options.caller ?? 'sdk',
    callTimeoutMs: options.callTimeoutMs ?? 60_000,
    opsTimeLimitMs: options.opsTimeLimitMs ?? 600_000,
    convergenceTimeoutMs: options.convergenceTimeoutMs ?? 180_000,
  };
  if (settings.caller === 'sql' && settings.driver !== 'postgres') {
    throw new Error('the SQL caller (caller sql) calls the SQL door of PostgreSQL storage nodes: it needs driver postgres');
  }
  const rng = new Random(options.seed);
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-chaos-'));
  const home = path.join(dir, 'home');
  const cleanups: Array<() => Promise<void>> = [];
  let completed = false;
  const report = emptyReport(options.seed, settings, dir);
  const { workerLog } = report;
  log(`seed ${options.seed}; state in ${dir}`);

  try {
    // One throwaway PostgreSQL server for the catalog and the storage nodes alike, each a database of its own.
    let pgServer: TestPostgres | undefined;
    const postgres = async (): Promise<TestPostgres> => {
      if (pgServer) return pgServer;
      const started = await sharedPostgres();
      cleanups.push(() => started.stop());
      pgServer = started;
      return started;
    };
    let catalogUrl: string | undefined;
    if (settings.catalog === 'postgres') {
      catalogUrl = await (await postgres()).freshDatabase('chaos');
      log(`catalog in PostgreSQL: ${catalogUrl}`);
    }
    const nodeDbs: NodeDatabase[] = [];
    let userTables: UserTable[] = [];
    if (settings.driver === 'postgres') {
      // One after the other: CREATE DATABASE copies template1, and two at once may find it in use.
      for (const node of NODES) nodeDbs.push({ node, url: await (await postgres()).freshDatabase(`chaos_${node.replace('-', '')}`) });
      log(`storage nodes in PostgreSQL: ${nodeDbs.map((n) => n.url).join(', ')}`);
      userTables = await makeUserTables(nodeDbs);
      log(`the user's own tables, made by hand: ${userTables.map((u) => `${u.node} ${u.schema}.${u.table}`).join(', ')}`);
    }
    // A MariaDB server per node, the worker's own account on each, and the user's tables, before any worker starts.
    const mariadb = settings.driver === 'mariadb' ? await MariadbRun.start(NODES, log) : undefined;
    if (mariadb) cleanups.push(() => mariadb.close());
    // The SQL caller's role, made as a DBA would before the workers prepare the nodes (they grant the door to
    // tablefate_caller as they install it): a member of the worker's role, which owns the tables.
    let doorCallerRole: string | undefined;
    if (settings.caller === 'sql') {
      const owner = decodeURIComponent(new URL(nodeDbs[0]!.url).username);
      doorCallerRole = await makeDoorCallerRole((await postgres()).url, owner);
      log(`the SQL caller connects as ${doorCallerRole}: granted tablefate_caller and membership in ${owner}, the tables' owner`);
    }
    // Remote storage: each node's directory is of its own (as on a host of its own); `view` links them under one
    // root, for the checks alone.
    const nodeRoots = NODES.map((node) => path.join(dir, 'hosts', node));
    const viewRoot = settings.storage === 'remote' ? path.join(dir, 'view') : statePaths(home).storage;
    if (settings.storage === 'remote' && settings.driver === 'files') {
      await fs.promises.mkdir(viewRoot, { recursive: true });
      for (const [k, node] of NODES.entries()) {
        await fs.promises.mkdir(path.join(nodeRoots[k]!, node), { recursive: true });
        await fs.promises.symlink(path.join(nodeRoots[k]!, node), path.join(viewRoot, node));
      }
    }
    const server: ChaosTemporal =
      settings.temporal === 'cluster' ? await ChaosCluster.start(dir, (await postgres()).url, log) : await ChaosServer.start(dir, log);
    cleanups.push(() => server.stop());
    log(`${settings.temporal === 'cluster' ? 'Temporal cluster' : 'dev server'} on ${server.address}`);
    const admin = await Connection.connect({ address: server.address });
    cleanups.push(() => admin.close());
    const temporal = new Client({ connection: admin, namespace: NAMESPACE });

    const env: NodeJS.ProcessEnv = {
      ...process.env,
      TABLEFATE_HOME: home,
      TEMPORAL_ADDRESS: server.address,
      TEMPORAL_NAMESPACE: NAMESPACE,
      TABLEFATE_LOG_LEVEL: 'warn',
      TABLEFATE_STORAGE_NODES: '3',
      ...(catalogUrl === undefined ? {} : { TABLEFATE_CATALOG_URL: catalogUrl }),
      ...(settings.driver === 'postgres'
        ? { TABLEFATE_STORAGE_DRIVER: 'postgres', TABLEFATE_STORAGE_URLS: nodeDbs.map((n) => n.url).join(',') }
        : {}),
      ...(mariadb ? { TABLEFATE_STORAGE_DRIVER: 'mariadb', TABLEFATE_STORAGE_URLS: mariadb.workerUrls.join(',') } : {}),
    };
    const monkey = new ChaosMonkey({
      rng: rng.fork('monkey'),
      server,
      admin,
      namespace: NAMESPACE,
      workerEnv: env,
      workerLog,
      processes: processesOf(settings, nodeRoots, nodeDbs, mariadb),
      killAfterReadyMs: options.killAfterReadyMs ?? [1500, 5000],
      restartPauseMs: [200, 1500],
      killOnOpStartChance: 0.2,
      serverDowntimeMs: [500, 3000],
      readyTimeoutMs: 30_000,
      log,
    });
    report.stats = monkey.stats;
    cleanups.push(() => monkey.stop());
    // The worker creates the catalog (file, or schema); no SDK call before it has started once.
    await monkey.startFirstWorker();
    if (doorCallerRole !== undefined) {
      await countDoorAnswers(nodeDbs);
      log(`the SQL door is on every node; its answers are counted into ${DOOR_COUNT_SCHEMA}.answers`);
    }
    log('first worker polls; unleashing');

    const catalog = await openCatalog(catalogLocation(catalogUrl, home));
    cleanups.push(() => catalog.close());
    const files = settings.driver === 'files' ? new LocalFileStorage({ root: viewRoot, nodeCount: NODES.length }) : undefined;
    const fingerprints = files ? new ShardFingerprints(files) : undefined;
    // Watched until the checks begin: a stall of the operations, or of the rest after them, shows whom it waited for.
    const lockWatch =
      settings.driver === 'postgres'
        ? new LockWaitWatch(
            (await postgres()).url,
            nodeDbs.map((n) => new URL(n.url).pathname.slice(1)),
          )
        : undefined;
    cleanups.push(async () => lockWatch?.stop());
    const load =
      settings.driver === 'postgres'
        ? await preparePostgresLoad({
            nodes: nodeDbs,
            catalog,
            sdk: new TableFateClient({ client: temporal, catalog, storageDriver: settings.driver }),
            rng,
            cutConnections: settings.connectionCuts
              ? { serverUrl: (await postgres()).url, everyMs: options.connectionCutsEveryMs ?? DEFAULT_CUTS_EVERY_MS }
              : undefined,
            log,
          })
        : undefined;
    const { inserter, cutter, rowsOnAnswer, families, unitKeys, partitions, namespaces } = load ?? {};
    await mariadb?.prepare({
      catalog,
      sdk: new TableFateClient({ client: temporal, catalog, storageDriver: settings.driver }),
      rng,
      cutEveryMs: settings.connectionCuts ? (options.connectionCutsEveryMs ?? DEFAULT_CUTS_EVERY_MS) : false,
      log,
    });
    const truncatedSets = files && fingerprints ? new TruncatedSets(files, fingerprints, catalog) : undefined;
    const answerChecks = new AnswerChecks({ fingerprints, truncatedSets, families, rowsOnAnswer, heard: (r) => mariadb?.onAnswer(r) });
    const stopLoad = async () => {
      await load?.stop();
      await mariadb?.stop();
    };
    cleanups.push(stopLoad);

    monkey.unleash();
    lockWatch?.start();
    load?.start();
    mariadb?.start();
    const progress = new Progress();
    const restarts = restartServerDuringOps(monkey, progress, settings.ops, settings.serverRestarts, signal);
    const storageRestarts = mariadb?.restartsDuringOps(progress, settings.ops, settings.mariadbRestarts, signal);
    const opsStarted = Date.now();
    try {
      report.ops = await runScenario({
        rng: rng.fork('clients'),
        ops: settings.ops,
        clients: settings.clients,
        config: loadConfig(env),
        columns: settings.driver === 'files' ? undefined : CHAOS_COLUMNS,
        userNames: settings.driver === 'files' ? undefined : USER_TABLE_TABLEFATE_NAMES,
        truncates: settings.driver !== 'mariadb',
        caller:
          settings.caller === 'cli'
            ? { kind: 'cli', cwd: await fs.promises.mkdtemp(path.join(dir, 'elsewhere-')) }
            : doorCallerRole !== undefined
              ? {
                  kind: 'sql',
                  nodes: nodeDbs.map((n) => ({ node: n.node, url: urlAs(n.url, doorCallerRole) })),
                  userTables: userTables.map((u) => `${u.node} ${u.schema}.${u.table}`),
                }
              : undefined,
        catalog,
        units: unitHints(unitKeys, partitions, catalog),
        ...(load ? { truncatable: (table) => load.truncatable(table) } : {}),
        callTimeoutMs: settings.callTimeoutMs,
        deadline: Date.now() + settings.opsTimeLimitMs,
        signal,
        onOpStarted: () => monkey.onOperationStarted(),
        onAnswer: (record) => answerChecks.onAnswer(record),
        onProgress: (done) => {
          progress.set(done);
          if (done % 10 === 0) log(`${done}/${settings.ops} operations answered`);
        },
        deferClose: (close) => cleanups.push(close),
      });
    } finally {
      progress.finish();
      await stopLoad();
    }
    report.opsPhaseMs = Date.now() - opsStarted;
    report.problems.push(...answerChecks.problems);
    report.truncatesCheckedOnAnswer = answerChecks.truncatesChecked;
    if (inserter) {
      report.postgres = {
        shardsCheckedOnAnswer: rowsOnAnswer?.checked ?? 0,
        inserts: inserter.stats,
        rowsCommitted: inserter.ledger.size,
        connectionCuts: cutter?.cuts ?? 0,
        userTables: userTables.map((u) => `${u.node} ${u.schema}.${u.table}`),
        lockWaits: [],
        families: families!.stats,
      };
      log(`${inserter.ledger.size} rows seen committed; ${cutter?.cuts ?? 0} storage connections cut`);
    }
    const restartError = (await restarts) ?? (await storageRestarts);
    if (restartError) throw restartError;
    if (mariadb) {
      report.mariadb = mariadb.summary();
      log(`${report.mariadb.rowsCommitted} rows seen committed; ${report.mariadb.connectionCuts} worker sessions cut`);
    }
    if (report.ops.length < settings.ops && !signal.aborted) {
      report.notes.push(
        `only ${report.ops.length} of ${settings.ops} operations started within the time limit of ${settings.opsTimeLimitMs / 1000} s`,
      );
    }

    if (signal.aborted) {
      report.aborted = true;
      completed = true;
      return report;
    }
    log(`operations done in ${(report.opsPhaseMs / 1000).toFixed(1)} s; calming down`);
    if (!(await monkey.calm(60_000))) {
      report.problems.push({ invariant: 'worker', detail: `no worker polled within 60 s after the chaos stopped; see ${workerLog}` });
    }
    // First at rest with the holds still on: a held table must outlive its expiry, so it counts as at rest in the trash.
    // There the holds are checked (no table held since a hold answered, and not released, is purged), then the run
    // releases every hold and waits for rest again, where every expired trash must be purged (policies.ts's rule).
    const knownIds = () => idsMentioned(report.ops);
    const workerFate = (identity: string) => monkey.fateOf(identity);
    report.holdCheckpoint = await waitForConvergence({
      catalog,
      temporal,
      knownIds,
      timeoutMs: settings.convergenceTimeoutMs,
      signal,
      log,
      workerFate,
      heldAtRest: true,
    });
    const checkpoint = report.holdCheckpoint;
    log(
      checkpoint.converged
        ? `at rest with the holds on after ${(checkpoint.waitedMs / 1000).toFixed(1)} s`
        : 'did not come to rest with the holds on',
    );
    if (!checkpoint.converged) {
      report.problems.push({
        invariant: 'convergence',
        detail:
          `not at rest with the holds on after ${(checkpoint.waitedMs / 1000).toFixed(0)} s: ` +
          checkpoint.unsettled.slice(0, 8).join('; '),
      });
      for (const line of checkpoint.diagnosis) report.problems.push({ invariant: 'stuck', detail: line });
    }
    const atCheckpoint = await allTables(catalog, knownIds());
    const holdFindings = checkHolds(report.ops, new Map(atCheckpoint.map((t) => [t.id, t])), Date.now());
    report.problems.push(...holdFindings.problems);
    const sdk = new TableFateClient({ client: temporal, catalog, storageDriver: settings.driver });
    const released = await releaseEveryHold(sdk, catalog, knownIds, log);
    report.holds = { held: holdFindings.held, heldPastExpiry: holdFindings.heldPastExpiry, released };
    report.convergence = await waitForConvergence({
      catalog,
      temporal,
      knownIds,
      // Bounded again in full only when the first wait came to rest: otherwise this one is for the diagnosis (and short,
      // so that a stuck product still ends the run with its report within a jest test's time).
      timeoutMs: checkpoint.converged ? settings.convergenceTimeoutMs : Math.min(15_000, settings.convergenceTimeoutMs),
      signal,
      log,
      workerFate,
    });
    log(report.convergence.converged ? `at rest after ${(report.convergence.waitedMs / 1000).toFixed(1)} s` : 'did not come to rest');
    await lockWatch?.stop();
    if (report.postgres && lockWatch) report.postgres.lockWaits = lockWatch.seen();
    // A process of ours that died of an uncaught exception is a defect whatever caused it; with PostgreSQL, the
    // usual cause is a client whose connection was lost while it was checked out of its pool, with no 'error'
    // listener: a lost connection must fail the activity (transient), not end the worker.
    const crashes = uncaughtPgErrors(workerLog);
    if (crashes > 0) {
      report.problems.push({
        invariant: 'worker',
        detail:
          `${crashes} tablefate process(es) died of an unhandled 'error' event of a PostgreSQL client ` +
          `(a lost storage connection ended the process instead of failing one activity); see ${workerLog}`,
      });
    }
    const checkStorage = (tables: Parameters<typeof checkFiles>[1]): Promise<StorageFindings> =>
      mariadb
        ? mariadb.checkAtRest({ ops: report.ops, catalog, sdk }, tables)
        : checkStorageAtRest(
            {
              ops: report.ops,
              catalog,
              sdk,
              ...(files && fingerprints ? { files: { files, fingerprints } } : {}),
              ...(inserter
                ? {
                    postgres: {
                      nodes: nodeDbs,
                      userTables,
                      inserter,
                      families: families!,
                      unitKeys: unitKeys!,
                      partitions: partitions!,
                      namespaces: namespaces!,
                    },
                  }
                : {}),
            },
            tables,
          );
    const findings = await checkInvariants(
      { catalog, temporal, checkStorage, ...(doorCallerRole === undefined ? {} : { doorNodes: nodeDbs }) },
      {
        ops: report.ops,
        convergence: report.convergence,
        workerExits: monkey.stats.workerExits,
        userTables: userTables.length > 0 || mariadb !== undefined,
        driver: settings.driver,
        finalReleases: released,
      },
    );
    report.problems.push(...findings.problems);
    report.notes.push(...findings.notes);
    report.tables = findings.tables;
    report.storageSummary = findings.storageSummary;
    if (findings.door) report.door = findings.door;
    report.aborted = signal.aborted;
    completed = true;
    return report;
  } finally {
    for (const cleanup of cleanups.reverse()) {
      await cleanup().catch((err: unknown) => log(`cleanup: ${(err as Error).message}`));
    }
    report.durationMs = Date.now() - started;
    await fs.promises.writeFile(path.join(dir, 'ops.json'), `${JSON.stringify(report.ops, null, 1)}\n`).catch(() => undefined);
    report.workerLogSummary = summarizeWorkerLog(workerLog);
    // Kept when something went wrong (or was asked for): the catalog, files and logs are the evidence.
    report.kept = options.keepState === true || !completed || report.problems.length > 0 || report.aborted;
    if (!report.kept) await fs.promises.rm(dir, { recursive: true, force: true });
  }
}
