import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Context } from '@temporalio/activity';
import { Client, WorkflowNotFoundError, type WorkflowClientInterceptor } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { msToTs } from '@temporalio/common/lib/time';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import type { Activities, CallScope, StepParts } from '../../activities';
import { SqliteCatalog } from '../../catalog/sqlite';
import { TableFateClient } from '../../client/client';
import type { TrashTimerState } from '../../domain/contracts';
import { catalogPath } from '../../domain/deployment';
import { formatTableName, type TableName } from '../../domain/names';
import { lockFor, workflowIdFor } from '../../domain/operations';
import { SEARCH_ATTRIBUTES } from '../../domain/search-attributes';
import type { StepsAnswer, StepsCall } from '../../domain/steps';
import type { TableRecord } from '../../domain/table';
import { EMBEDDED_DYNAMIC_CONFIG, ONE_PARTITION } from '../../servers/dev-server';
import { findTemporalCli } from '../../servers/go-tools';
import { LocalFileStorage, shardPaths, type ShardRef, type StorageDriver } from '../../storage';
import { createLogger } from '../../worker/logger';
import { createTableFateWorker, type TableFateWorker } from '../../worker/worker';
import { filesUnder } from '../support/temp-root';
import { ENGINE_BUNDLE_ENV } from './global-setup';
import { LOSE_TASK } from './lost-task-mark';

// Failures are what these tests provoke (and the SDK's core warns of each workflow task they lose): only errors are
// worth showing.
Runtime.install({ logger: new DefaultLogger('ERROR'), telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' } } } });

/** What the engine does to one run of an operation, at one of its parts or calls. */
export type Disturbance =
  /** Nothing: the run as it goes undisturbed. */
  | { kind: 'none' }
  /** The run's `at`-th part (counted from 0, each part once however often it is made) fails for good. */
  | { kind: 'fail'; at: number }
  /** A cancel of the run is requested at its `at`-th part, which goes on once the workflow has taken the request. */
  | { kind: 'cancel'; at: number }
  /** The workflow task that receives the answer of the run's `afterCall`-th call (from 0) is lost, the first time. */
  | { kind: 'loseTask'; afterCall: number }
  /** Every call of the executor, and every part of each, is made twice (Accumulo's FlakyFate): the second answers. */
  | { kind: 'twice' };

/** One part of a step as the executor made it (activities/steps-here.ts's StepParts), in a run. */
export interface PartMade {
  /** The call's key in the run (`3:purge`); '' for the release of the run's locks, which no step key names. */
  call: string;
  /** `lock`, `<step>.change`, `<step>.shards`, `<step>.leases`, `<step>.undo-shards`, `<step>.undo`, or `release`. */
  part: string;
  /** The same part made again (a repeated call): the catalog's journal answers it. */
  repeat: boolean;
  /** What the engine did to it. */
  injected?: 'failure' | 'cancel';
}

/** The part's key in its run, as the catalog journals it. */
export const keyOf = (made: Pick<PartMade, 'call' | 'part'>): string => `${made.call}/${made.part}`;

/** A change the storage driver made on one shard: `moveShard trash>live s2`. */
export interface DriverChange {
  tableId: number;
  change: string;
}

const SHARD_CHANGES = new Set([
  'createShard',
  'dropShard',
  'moveShard',
  'truncateShard',
  'untruncateShard',
  'markGarbage',
  'unmarkGarbage',
  'deleteGarbage',
  'discardSet',
]);

/** Where the trash run of a table is: waiting out its expiry, ended (or never started) otherwise, or ended how. */
export type TrashRunLook = 'waiting' | 'ended' | NonNullable<TrashTimerState['ended']>;

/**
 * How long a workflow task lasts for a run the engine cancels: the SDK hands a task on at 80 % of it, inside a call,
 * and the next task brings the cancel request. (1 s, then 2 s, made the tasks of a loaded machine time out now and then:
 * a CI run at the start of `npm test`, beside the type check and the lint.)
 */
const CANCELLED_RUN_TASK_MS = 3000;

const PROJECT_STATE_DIR = path.resolve(__dirname, '../../.tablefate');

/**
 * One test file's world, real but for the server's size: a Temporal dev server of its own (the SDK's test environment,
 * on the Temporal CLI this project builds), a worker in this process running today's workflows with their real
 * activities, a SQLite catalog and three storage nodes on files in a temp dir. Every part of every step the executor
 * makes goes through the engine (the worker's `wrapStepParts`), which records it and, for the run it is told to
 * disturb (`disturb`), fails it, cancels the run there, or makes it twice; every call of the executor goes through it
 * too (`wrapActivities`), which can have the workflow task that receives its answer lost (./lose-task.ts). Every shard
 * change the storage driver makes is recorded.
 */
export class Engine {
  readonly client: TableFateClient;
  /** Fatal storage errors the worker stopped for (none, in a sound run). */
  readonly fatalErrors: Error[] = [];
  private readonly parts = new Map<string, PartMade[]>();
  private readonly calls = new Map<string, StepsCall[]>();
  private readonly disturbances = new Map<string, Disturbance>();
  private readonly driverChanges: DriverChange[] = [];
  private readonly driver: StorageDriver;
  private readonly temporal: Client;
  private worker: { group: TableFateWorker; running: Promise<void> } | undefined;

  private constructor(
    private readonly env: TestWorkflowEnvironment,
    readonly catalog: SqliteCatalog,
    readonly storage: LocalFileStorage,
    private readonly home: string,
    readonly taskQueue: string,
  ) {
    this.driver = recording(storage, this.driverChanges);
    this.temporal = new Client({
      connection: env.connection,
      namespace: env.namespace ?? 'default',
      interceptors: { workflow: [this.shortTasksOfCancelledRuns()] },
    });
    this.client = new TableFateClient({ client: this.temporal, catalog, taskQueue, storageDriver: 'files' });
  }

  /** Starts the server (and reads the run's workflow bundle meanwhile), opens the catalog and the storage, and runs the worker. */
  static async start(): Promise<Engine> {
    const cli = await findTemporalCli({ stateDir: PROJECT_STATE_DIR });
    // The embedded server's settings (servers/dev-server.ts): tasks dispatched at once, one partition per task queue.
    const dynamicConfig = { ...ONE_PARTITION, ...EMBEDDED_DYNAMIC_CONFIG };
    const [env, bundle, home] = await Promise.all([
      TestWorkflowEnvironment.createLocal({
        server: {
          executable: { type: 'existing-path', path: cli },
          searchAttributes: Object.values(SEARCH_ATTRIBUTES),
          log: { format: 'pretty', level: 'error' },
          extraArgs: Object.entries(dynamicConfig).flatMap(([key, value]) => ['--dynamic-config-value', `${key}=${JSON.stringify(value)}`]),
        },
      }),
      engineBundle(),
      fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-engine-')),
    ]);
    const catalog = new SqliteCatalog(catalogPath(home));
    const storage = new LocalFileStorage({ root: path.join(home, 'storage') });
    const engine = new Engine(env, catalog, storage, home, 'tablefate-engine');
    const group = await createTableFateWorker({
      connection: env.nativeConnection,
      namespace: env.namespace ?? 'default',
      catalog,
      storage: engine.driver,
      defaultRetentionSeconds: 7 * 24 * 3600,
      logger: createLogger('error'),
      taskQueue: engine.taskQueue,
      workflowBundle: bundle,
      onFatal: (err) => engine.fatalErrors.push(err),
      wrapActivities: (activities) => engine.throughCalls(activities),
      wrapStepParts: (parts) => engine.throughParts(parts),
      storageDriver: 'files',
    });
    const running = group.run();
    engine.worker = { group, running };
    await group.untilPolling(running);
    return engine;
  }

  async close(): Promise<void> {
    if (this.worker) {
      this.worker.group.shutdown();
      await this.worker.running;
    }
    await this.env.teardown();
    await this.catalog.close();
    await fs.promises.rm(this.home, { recursive: true, force: true });
  }

  /** What the engine does to the run of `workflowId` (started after this). */
  disturb(workflowId: string, disturbance: Disturbance): void {
    this.disturbances.set(workflowId, disturbance);
  }

  /** The parts the runs of `workflowId` made, in order (a part made again is there again, marked `repeat`). */
  partsOf(workflowId: string): PartMade[] {
    return [...(this.parts.get(workflowId) ?? [])];
  }

  /** The executor's calls (runStepsHere) the runs of `workflowId` made, in order, as they were asked. */
  callsOf(workflowId: string): StepsCall[] {
    return [...(this.calls.get(workflowId) ?? [])];
  }

  /** The shard changes the storage driver has made on table `tableId`, in order. */
  driverChangesOf(tableId: number): string[] {
    return this.driverChanges.filter((made) => made.tableId === tableId).map((made) => made.change);
  }

  /** Every file of table `tableId` under the storage root, relative to it, sorted. */
  async filesOf(tableId: number): Promise<string[]> {
    const all = await filesUnder(this.storage.root).catch(() => []);
    return all.filter((file) => path.basename(file).startsWith(`t${tableId}-`));
  }

  /** The files a table's shards are made of when every set is whole in `area` (none: nowhere). */
  filesIn(table: TableRecord, area: 'live' | 'trash' | 'garbage' | null): string[] {
    if (area === null) return [];
    const refs: ShardRef[] = table.placement.map((p) => ({ tableId: table.id, shard: p.shard, node: p.node }));
    return refs
      .flatMap((ref) => shardPaths(this.storage.root, ref, area))
      .map((file) => path.relative(this.storage.root, file))
      .sort();
  }

  /** The trash entries a truncate of table `tableId` made of its rows. */
  async truncatesOf(tableId: number): Promise<TableRecord[]> {
    return (await this.catalog.listTables({ includeTrashed: true })).filter((table) => table.truncatedFrom === tableId);
  }

  /** The locks held on a table or on any of `names`, by anyone. */
  async locksOn(tableId: number | undefined, names: TableName[]): Promise<string[]> {
    const resources = new Set([...(tableId === undefined ? [] : [lockFor.table(tableId)]), ...names.map(lockFor.name)]);
    return (await this.catalog.listLocks()).filter((lock) => resources.has(lock.resource)).map((l) => `${l.resource} by ${l.workflowId}`);
  }

  /**
   * Where the trash run of table `tableId` is: the run of its trash's expiry (`trash:<id>`, which its drop starts when it
   * commits). A run that is ending (its trash ended) is given a few seconds.
   */
  async trashRunOf(tableId: number, expected?: TrashRunLook): Promise<TrashRunLook> {
    const handle = this.temporal.workflow.getHandle(workflowIdFor.expiry(tableId, this.catalog.id));
    const deadline = Date.now() + 10_000;
    for (;;) {
      let look: TrashRunLook;
      try {
        const { status } = await handle.describe();
        if (status.name === 'RUNNING') look = 'waiting';
        else if (status.name === 'COMPLETED') look = ((await handle.result()) as TrashTimerState).ended ?? 'ended';
        else look = 'ended';
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
        look = 'ended';
      }
      if (expected === undefined || look === expected || look !== 'waiting' || Date.now() > deadline) return look;
      await sleep(100);
    }
  }

  /** The workflow id of a table operation's run, in this catalog. */
  workflowIdOf(op: 'create', table: TableName): string;
  workflowIdOf(op: 'trash' | 'undelete' | 'purge' | 'rename' | 'hold' | 'truncate', tableId: number): string;
  workflowIdOf(op: 'create' | 'trash' | 'undelete' | 'purge' | 'rename' | 'hold' | 'truncate', subject: TableName | number): string {
    if (op === 'create') return workflowIdFor.create(subject as TableName, this.catalog.id);
    return workflowIdFor[op](subject as number, this.catalog.id);
  }

  /** The parts the worker is given, each made through the engine. */
  private throughParts(parts: StepParts): StepParts {
    const wrapped: Record<string, unknown> = {};
    for (const [method, make] of Object.entries(parts) as Array<[keyof StepParts, (input: CallScope) => Promise<unknown>]>) {
      wrapped[method] = (input: CallScope) => this.makePart(method, input, () => make(input));
    }
    return wrapped as unknown as StepParts;
  }

  private async makePart(method: keyof StepParts, input: CallScope, make: () => Promise<unknown>): Promise<unknown> {
    const workflowId = runningWorkflow();
    const made = partOf(method, input);
    const log = listOf(this.parts, workflowId);
    const distinct = [...new Set(log.map(keyOf))];
    const index = distinct.includes(keyOf(made)) ? distinct.indexOf(keyOf(made)) : distinct.length;
    const entry: PartMade = { ...made, repeat: index < distinct.length };
    log.push(entry);
    const disturbance = this.disturbances.get(workflowId) ?? { kind: 'none' };
    switch (disturbance.kind) {
      case 'fail':
        if (index !== disturbance.at) break;
        entry.injected = 'failure';
        throw ApplicationFailure.nonRetryable(`the engine fails ${keyOf(made)} of ${workflowId}`, 'InjectedFailure');
      case 'cancel':
        if (index !== disturbance.at || entry.repeat) break;
        entry.injected = 'cancel';
        await this.cancelTaken(workflowId);
        break;
      case 'twice':
        await make();
        break;
    }
    return make();
  }

  /** The activities the worker is given: the executor's calls through the engine. */
  private throughCalls(activities: Activities): Activities {
    const runStepsHere = async (call: StepsCall): Promise<StepsAnswer> => {
      const workflowId = runningWorkflow();
      const log = listOf(this.calls, workflowId);
      const distinct = [...new Set(log.map((c) => c.call))];
      const first = !distinct.includes(call.call);
      log.push(structuredClone(call));
      const disturbance = this.disturbances.get(workflowId) ?? { kind: 'none' };
      if (disturbance.kind === 'twice') await activities.runStepsHere(call);
      const answer = await activities.runStepsHere(call);
      if (disturbance.kind === 'loseTask' && first && distinct.length === disturbance.afterCall) {
        return { ...answer, [LOSE_TASK]: true } as StepsAnswer;
      }
      return answer;
    };
    return { ...activities, runStepsHere };
  }

  /**
   * Requests a cancel of the run, and waits until a workflow task that carries the request has started: the worker has
   * it, and hands the request to the workflow before the answer of the call under way (or with it: the cancel is taken
   * before the run goes on either way). The part asking waits meanwhile, so the request is taken inside the call under
   * way (the SDK hands the task on while a local activity runs: CANCELLED_RUN_TASK_MS), and the run acts on it as soon as
   * the call ends.
   */
  private async cancelTaken(workflowId: string): Promise<void> {
    const handle = this.temporal.workflow.getHandle(workflowId);
    await handle.cancel();
    const deadline = Date.now() + 30_000;
    for (;;) {
      const events = (await handle.fetchHistory()).events ?? [];
      const requested = events.findIndex((event) => event.workflowExecutionCancelRequestedEventAttributes);
      if (requested >= 0 && events.slice(requested).some((event) => event.workflowTaskStartedEventAttributes)) return;
      if (Date.now() > deadline) throw new Error(`the workflow of ${workflowId} did not take its cancel request within 30 s`);
      await sleep(50);
    }
  }

  /** A run the engine cancels has short workflow tasks, so that the SDK hands its task on (with the cancel) within a call. */
  private shortTasksOfCancelledRuns(): WorkflowClientInterceptor {
    const timeout = (workflowId: string) =>
      this.disturbances.get(workflowId)?.kind === 'cancel' ? { workflowTaskTimeout: msToTs(CANCELLED_RUN_TASK_MS) } : {};
    return {
      startWithDetails: (input, next) => next({ ...input, options: { ...input.options, ...timeout(input.options.workflowId) } }),
      signalWithStart: (input, next) => next({ ...input, options: { ...input.options, ...timeout(input.options.workflowId) } }),
      startUpdateWithStart: (input, next) =>
        next({
          ...input,
          workflowStartOptions: { ...input.workflowStartOptions, ...timeout(input.workflowStartOptions.workflowId) },
        }),
    };
  }
}

/** The workflows as the engine's worker runs them: the bundle ./global-setup.ts made for the run. */
async function engineBundle(): Promise<{ code: string }> {
  const file = process.env[ENGINE_BUNDLE_ENV];
  if (!file) throw new Error(`${ENGINE_BUNDLE_ENV} is not set: the engine project's global setup (./global-setup.ts) did not run`);
  return { code: await fs.promises.readFile(file, 'utf8') };
}

/** The table's name as a person types it. */
export const textOf = (table: TableName): string => formatTableName(table);

const runningWorkflow = (): string => Context.current().info.workflowExecution!.workflowId;

function listOf<T>(map: Map<string, T[]>, key: string): T[] {
  let list = map.get(key);
  if (!list) map.set(key, (list = []));
  return list;
}

/** Which part of which call: the journal key's halves (`3:purge/1.shards`), or the release, which has none. */
function partOf(method: keyof StepParts, input: CallScope): Pick<PartMade, 'call' | 'part'> {
  if (input.step === undefined) return { call: '', part: method === 'releaseLocks' ? 'release' : method };
  const slash = input.step.indexOf('/');
  return { call: input.step.slice(0, slash), part: input.step.slice(slash + 1) };
}

/** The driver, each shard change it makes recorded. */
function recording(driver: LocalFileStorage, log: DriverChange[]): StorageDriver {
  return new Proxy(driver, {
    get(target, name, receiver) {
      const value: unknown = Reflect.get(target, name, receiver);
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => unknown;
      if (typeof name !== 'string' || !SHARD_CHANGES.has(name)) return method.bind(target);
      return (ref: ShardRef, ...rest: unknown[]) => {
        const move = name === 'moveShard' ? ` ${String(rest[0])}>${String(rest[1])}` : '';
        log.push({ tableId: ref.tableId, change: `${name}${move} s${ref.shard}` });
        return method.apply(target, [ref, ...rest]);
      };
    },
  });
}
