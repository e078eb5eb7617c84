import { Context } from '@temporalio/activity';
import {
  isBusy,
  type Catalog,
  type LockHolder,
  type StepKey,
  type TogetherRequest,
  type TransitionRequest,
  type TruncateCommit,
} from '../catalog/catalog';
import type { TableState } from '../domain/states';
import { placeTable, type CreateParams, type ShardPlacement, type TableRecord } from '../domain/table';
import type { TableName } from '../domain/names';
import type { CatalogChange, EndOfTrash } from '../domain/steps';
import { lockFor, OPERATIONS } from '../domain/operations';
import { ApplicationFailure } from '@temporalio/common';
import { evictSignal } from '../domain/contracts';
import type { Backoff, LockWaitPolicy } from '../domain/backoff';
import { defaultSettings, trashPolicy, type SettingKey, type SettingRow, type SettingValue, type TrashPolicy } from '../domain/settings';
import type { Lease } from '../domain/leases';
import type { LeaseRequest } from '../catalog/catalog';
import type { FatalStorageError, StorageDriver } from '../storage/driver';
import { withFailureMapping } from './failures';
import { housekeepingActivities } from './housekeeping';
import { callChecks, ownerClosedOnServer, type CallScope, type LockAttempt } from './scope';
import { createStepsHere, type OperationRegistry, type StepParts, type TogetherChange } from './steps-here';
import { legacyV18Activities } from './legacy-v18';
import { createShardsHereActivity, type StorageActivities } from './storage';
import { endTrashTimer, startTrashExpiry, wakeTrashRuns, type TrashCommitted } from './trash-runs';

export type { CallScope, LockAttempt } from './scope';
export type { TrashCommitted } from './trash-runs';
export type { FirstChangeMade, FirstChangeFor } from './legacy-v18';
export type { OperationRegistry, StepParts } from './steps-here';
export { createStorageActivities, STORAGE_ACTIVITY_NAMES, type NodeSurvey, type ShardsHereAnswer, type StorageActivities } from './storage';

export interface ActivityDeps {
  catalog: Catalog;
  /** The operations' step lists, which the executor's local activity runs (workflows/operations.ts). */
  operations: OperationRegistry;
  /** The storage nodes new tables' shards are placed on. */
  nodes: readonly string[];
  /** Retention of a trash when the request names none. */
  defaultRetentionSeconds: number;
  /** The storage nodes served in this process, whose shards a step changes in its workflow task (none: `--storage remote`). */
  storage?: StorageDriver;
  /** How many attempts a transient storage fault gets before the step fails (default: see failures.ts). */
  storageRetryAttempts?: number;
  /** Called when storage can neither finish nor undo a change: the worker must stop. */
  onFatal: (err: FatalStorageError) => void;
  /** Whether the workflow that holds a lock has closed; defaults to asking the Temporal server. */
  isOwnerClosed?: (holder: LockHolder) => Promise<boolean>;
  /** The worker's clock: only for when a lock was taken. Table times come from workflow time. */
  now?: () => number;
  /** Wraps the parts the executor's steps are made of (tests: to record each part, fail it, or run it twice). */
  wrapStepParts?: (parts: StepParts) => StepParts;
}

/**
 * The activities of an orchestrating worker: locks, the catalog's compare-and-sets, the reconciler's catalog
 * survey, and a step's shard changes on the nodes this process serves (storage.ts's changeShardsHere). Every other
 * storage call runs on the worker of its node (storage.ts).
 */
export function createActivities(deps: ActivityDeps) {
  const { catalog } = deps;
  const clock = deps.now ?? Date.now;
  const isOwnerClosed = deps.isOwnerClosed ?? ownerClosedOnServer;
  const checks = callChecks(catalog);
  const { inScope, stepOf } = checks;

  /** A state change in the calling run's name; with `releaseLocks`, the run's locks go once it is recorded. */
  const change = async (
    input: CallScope & { releaseLocks?: boolean },
    request: Omit<TransitionRequest, 'owner' | 'step'>,
  ): Promise<TableRecord> => {
    const owner = inScope(input);
    const table = await catalog.transition({ ...request, owner, step: stepOf(owner, input) });
    if (input.releaseLocks) await catalog.releaseLocks(owner);
    return table;
  };

  /** A truncate's commit (Catalog.commitTruncate): the trash entry its rows went to, as committed. */
  const truncateCommitted = async (
    input: CallScope & { releaseLocks?: boolean },
    request: Omit<TruncateCommit, 'owner' | 'step'>,
  ): Promise<TableRecord> => {
    const owner = inScope(input);
    const entry = await catalog.commitTruncate({ ...request, owner, step: stepOf(owner, input) });
    if (input.releaseLocks) await catalog.releaseLocks(owner);
    return entry;
  };

  const activities = {
    /**
     * FATE's isReady: one attempt at a lock, for a workflow that waits in its own code (timers, not activity
     * retries, so the wait is bounded in history). Busy is an answer, naming the holder; a lock left by a closed
     * workflow is taken over.
     */
    async tryLock(input: CallScope & { lock: string; readTable?: number; now?: number }): Promise<LockAttempt> {
      const owner = inScope(input);
      const step = stepOf(owner, input);
      const result = await catalog.acquireLock(input.lock, owner, clock(), isOwnerClosed, step);
      // (The workflows' answer, which v18's code reads too: the holder by its workflow id.)
      if (isBusy(result)) return { acquired: false, holder: result.holder.workflowId };
      if (result.tookOverFrom) {
        Context.current().log.warn('took over a lock left by a closed workflow', {
          lock: input.lock,
          from: result.tookOverFrom.workflowId,
        });
      }
      if (input.readTable === undefined) return { acquired: true };
      // The operation's first look at its table, under the lock just taken, with the workflow time it was taken at:
      // journaled together, so that a lost workflow task's repeat decides on what the first attempt saw, then (a
      // recall checked before the expiry and repeated after it must not be refused once it has begun).
      const key = step && { ...step, step: `${step.step}/table` };
      const seen = key && (await catalog.stepOutcome(key));
      if (seen && 'value' in seen) return seen.value as LockAttempt;
      const answer: LockAttempt = { acquired: true, table: (await catalog.getTable(input.readTable)) ?? null, readAt: input.now };
      if (key) await catalog.recordStep(key, { value: answer });
      return answer;
    },

    /** Releases every lock the calling run holds. */
    async releaseLock(input: CallScope = {}): Promise<void> {
      await catalog.releaseLocks(inScope(input));
    },

    /** A table lock held by another running operation comes back as `busy`, for the workflow to wait on in its own code. */
    async prepareCreate(input: CallScope & TableName & { params: CreateParams; lock: string; takeLock?: boolean; now: number }) {
      const owner = inScope(input);
      return catalog.prepareCreate(
        {
          namespace: input.namespace,
          name: input.name,
          params: input.params,
          owner,
          nameLock: input.lock,
          takeNameLock: input.takeLock,
          place: (id, params) => placeTable(id, params, deps.nodes),
          now: input.now,
          step: stepOf(owner, input),
        },
        isOwnerClosed,
      );
    },

    /** Tells the expiry of a trash that it has nothing left to do (activities/trash-runs.ts). */
    async endTrashTimer(input: CallScope & EndOfTrash & { tableId: number }): Promise<boolean> {
      inScope(input);
      return endTrashTimer(input.tableId, input, input.catalogId);
    },

    async getTable(input: CallScope & { tableId: number }): Promise<TableRecord | null> {
      const owner = inScope(input);
      return (await catalog.getTable(input.tableId, stepOf(owner, input))) ?? null;
    },

    async transition(
      input: CallScope & {
        tableId: number;
        from: TableState[];
        to: TableState;
        now: number;
        rename?: TableName;
        expectName?: TableName;
        /** The operation's last change: release the run's locks too, once it is recorded. */
        releaseLocks?: boolean;
        /** Then tell the table's trash run that its timer has nothing left to do (as v18's recalls and purges ask). */
        endTrashTimer?: EndOfTrash;
      },
    ): Promise<TableRecord> {
      const { tableId, from, to, now, rename, expectName } = input;
      const table = await change(input, { tableId, from, to, now, rename, expectName });
      if (input.endTrashTimer && !(await endTrashTimer(tableId, input.endTrashTimer, input.catalogId))) {
        Context.current().log.info('no trash timer to end', { tableId });
      }
      return table;
    },

    /**
     * TRASHING -> TRASHED, stamping the drop time, who dropped it (`droppedBy`: absent, null) and the expiry that the
     * trash timer will wait for: the retention asked, else the one in force in the table's namespace
     * (trash.retentionSeconds, else the worker's default). Answers
     * the trash's policy with the table (is the trash on, is there a space cap), read under the call's step key so that
     * a repeated call answers the same policy as the first did. `startExpiry`: then the trash's expiry run is started
     * (trash-runs.ts; not journaled: a start made again finds the run it started).
     */
    async commitTrash(
      input: CallScope & {
        tableId: number;
        now: number;
        retentionSeconds?: number;
        droppedBy?: string;
        family?: string[];
        droppedWith?: number[];
        truncateInto?: number;
        releaseLocks?: boolean;
        startExpiry?: { lockWait?: LockWaitPolicy; expiryRetry?: Backoff };
      },
    ): Promise<TrashCommitted> {
      const owner = inScope(input);
      const step = stepOf(owner, input);
      const { policy, request } = await committing(input, step);
      const committed =
        input.truncateInto === undefined
          ? await change(input, request)
          : await truncateCommitted(input, { ...request, retentionSeconds: request.retentionSeconds!, into: input.truncateInto });
      const trashed = { ...committed, policy };
      if (input.startExpiry) await startExpiryOf(catalog, trashed, { ...input.startExpiry, catalogId: input.catalogId });
      return trashed;
    },

    /**
     * The change of a step that cannot be taken back (a drop's commit, a recall's), on every table of an operation over
     * several, in one catalog transaction: made on all, or on none. Each table's is journaled under its own `step`; then,
     * for a drop, each trash's expiry run is started.
     */
    async changeTogether(input: CallScope & { now: number; changes: TogetherChange[] }): Promise<TableRecord[]> {
      const owner = inScope(input);
      const asked = await Promise.all(
        input.changes.map(
          async ({
            step,
            tableId,
            change,
          }): Promise<{
            key?: StepKey;
            request: TogetherRequest;
            policy?: TrashPolicy;
            startExpiry?: CommitTrashChange['startExpiry'];
          }> => {
            const key = stepOf(owner, { ...input, step });
            const journal = { owner, ...(key ? { step: key } : {}) };
            if (change.kind === 'transition') {
              const { kind: _kind, ...move } = change;
              return { key, request: { transition: { ...move, tableId, now: input.now, ...journal } } };
            }
            const { kind: _kind, ...commit } = change;
            const { policy, request } = await committing({ ...commit, tableId, now: input.now }, key);
            const asked: TogetherRequest =
              commit.truncateInto === undefined
                ? { transition: { ...request, ...journal } }
                : { commitTruncate: { ...request, retentionSeconds: request.retentionSeconds!, into: commit.truncateInto, ...journal } };
            return { key, startExpiry: commit.startExpiry, policy, request: asked };
          },
        ),
      );
      const tables = await catalog.changeTogether(asked.map(({ request }) => request));
      const answers = tables.map((table, i) => {
        const { policy } = asked[i]!;
        return policy ? { ...table, policy } : table;
      });
      await Promise.all(
        answers.flatMap((table, i) => {
          const { startExpiry } = asked[i]!;
          return startExpiry ? [startExpiryOf(catalog, table, { ...startExpiry, catalogId: input.catalogId })] : [];
        }),
      );
      return answers;
    },

    /**
     * A drop's first change: READY to DRAINING while leases are live, else straight to TRASHING; a truncate's: READY to
     * TRUNCATING (Catalog.startDrain).
     */
    async startDrain(
      input: CallScope & {
        tableId: number;
        now: number;
        expectName?: TableName;
        takeLock?: boolean;
        droppedWith?: number[];
        truncate?: boolean;
      },
    ): Promise<{ table: TableRecord; leases: Lease[] } | { busy: string }> {
      const owner = inScope(input);
      const result = await catalog.startDrain(
        {
          tableId: input.tableId,
          owner,
          now: input.now,
          expectName: input.expectName,
          takeLock: input.takeLock,
          ...(input.droppedWith ? { droppedWith: input.droppedWith } : {}),
          ...(input.truncate ? { truncate: true } : {}),
          step: stepOf(owner, input),
        },
        isOwnerClosed,
      );
      return 'outcome' in result ? { busy: result.holder.workflowId } : result;
    },

    /** The leases on a table still live at `now` (workflow time), soonest to expire first. */
    async liveLeases(input: CallScope & { tableId: number; now: number }): Promise<Lease[]> {
      const owner = inScope(input);
      return catalog.listLeases({ tableId: input.tableId, now: input.now }, stepOf(owner, input));
    },

    /** Places or releases a legal hold, under the table's lock; with `releaseLocks`, the run's locks go with it. */
    async changeHold(
      input: CallScope & {
        tableId: number;
        hold: { reason: string | null; since: number } | null;
        expectName?: TableName;
        releaseLocks?: boolean;
      },
    ): Promise<TableRecord> {
      const owner = inScope(input);
      const table = await catalog.changeHold({
        tableId: input.tableId,
        hold: input.hold,
        expectName: input.expectName,
        owner,
        step: stepOf(owner, input),
      });
      if (input.releaseLocks) await catalog.releaseLocks(owner);
      return table;
    },

    /** The trash run moves its own expiry (a new retention). */
    async changeExpiry(input: CallScope & { tableId: number; droppedAt: number; expireAt: number }): Promise<TableRecord> {
      const owner = inScope(input);
      return catalog.changeExpiry({
        tableId: input.tableId,
        droppedAt: input.droppedAt,
        expireAt: input.expireAt,
        owner,
        step: stepOf(owner, input),
      });
    },

    /** A lease taken, renewed or released (Catalog.changeLease). */
    async changeLease(input: CallScope & { request: DistributiveOmit<LeaseRequest, 'step'> }): Promise<Lease> {
      const owner = inScope(input);
      return catalog.changeLease({ ...input.request, step: stepOf(owner, input) });
    },

    /** A runtime setting set or unset; answers every setting stored after it. */
    async changeSetting(
      input: CallScope & { key: SettingKey; namespace: string | null; value?: SettingValue; now: number },
    ): Promise<SettingRow[]> {
      const owner = inScope(input);
      return catalog.changeSetting({
        key: input.key,
        namespace: input.namespace,
        value: input.value,
        now: input.now,
        step: stepOf(owner, input),
      });
    },

    /**
     * What the trash's space cap needs, a page at a time (a whole trash would pass the payload limit of a local
     * activity's result): the settings, and the TRASHED tables among those with ids above `afterId` (PAGE of them
     * looked at), with where their shards are. `lastId` null: that was the last page.
     */
    async trashPage(input: CallScope & { afterId: number }): Promise<TrashPage> {
      inScope(input);
      const settings = await catalog.listSettings();
      const page = await catalog.listTables({ includeTrashed: true, afterId: input.afterId, limit: TRASH_PAGE });
      const tables = page
        .filter((t) => t.state === 'TRASHED')
        .map((t) => ({
          id: t.id,
          namespace: t.namespace,
          name: t.name,
          droppedAt: t.droppedAt!,
          held: t.hold !== null,
          placement: t.placement,
        }));
      return { settings, tables, lastId: page.length < TRASH_PAGE ? null : page.at(-1)!.id };
    },

    /**
     * Tells the runs waiting on table `tableId` to read it again (a lease or a hold released), if the table is in one of
     * `states` (any, when absent). A run that is not there needs no telling: false.
     */
    async wakeTrash(input: CallScope & { tableId: number; states?: TableState[] }): Promise<boolean> {
      inScope(input);
      const table = await catalog.getTable(input.tableId);
      if (!table || (input.states && !input.states.includes(table.state))) return false;
      const lock = lockFor.table(table.id);
      const drains = table.state === 'DRAINING' || table.state === 'TRUNCATING';
      const drainer = drains ? (await catalog.listLocks()).find((held) => held.resource === lock) : undefined;
      return wakeTrashRuns(table, input.catalogId, drainer?.workflowId);
    },

    /** Starts the trash's space cap (evictTrash), or wakes it if it runs: it looks at the trash again once it can. */
    async requestEviction(input: CallScope): Promise<void> {
      inScope(input);
      const record = OPERATIONS.evict;
      await Context.current().client.workflow.signalWithStart(record.workflowType, {
        workflowId: record.workflowId(undefined, input.catalogId),
        taskQueue: Context.current().info.taskQueue,
        args: [{ catalogId: input.catalogId }],
        signal: evictSignal,
        signalArgs: [],
        staticSummary: 'trash space cap: purge the oldest trashed tables (not held) until the trash fits trash.maxBytes',
      });
    },
  };

  /** The trash policy in force for a table's namespace, from the settings read under `step`. */
  const policyWhere = async (namespace: string, step?: StepKey): Promise<TrashPolicy> =>
    trashPolicy(await catalog.listSettings(step), namespace, defaultSettings(deps.defaultRetentionSeconds));
  const policyOf = async (tableId: number, step: StepKey | undefined): Promise<TrashPolicy> =>
    policyWhere((await catalog.getTable(tableId))?.namespace ?? '', step);
  /**
   * A drop's commit as the catalog makes it: TRASHING to TRASHED with the retention asked, else the one in force where
   * the table is (its policy read under the call's `step`, so that a repeated call answers the same policy).
   */
  const committing = async (
    input: Omit<CommitTrashChange, 'kind'> & { now: number },
    step: StepKey | undefined,
  ): Promise<{ policy: TrashPolicy; request: Omit<TransitionRequest, 'owner' | 'step'> }> => {
    const policy = await policyOf(input.tableId, step && { ...step, step: `${step.step}/settings` });
    const request = {
      tableId: input.tableId,
      from: ['TRASHING' as const],
      to: 'TRASHED' as const,
      now: input.now,
      retentionSeconds: input.retentionSeconds ?? policy.retentionSeconds,
      droppedBy: input.droppedBy,
      family: input.family,
      droppedWith: input.droppedWith,
      ...(input.restamp ? { restamp: true as const } : {}),
    };
    return { policy, request };
  };
  const housekeeping = housekeepingActivities({
    catalog,
    nodes: deps.nodes,
    isOwnerClosed,
    checks,
  });
  const shardsHere = createShardsHereActivity({
    catalog,
    storage: deps.storage,
    onFatal: deps.onFatal,
    storageRetryAttempts: deps.storageRetryAttempts,
  });
  const catalogCalls = withFailureMapping({ ...activities, ...housekeeping }, { onFatal: deps.onFatal });
  const parts: StepParts = {
    ...catalogCalls,
    changeShardsHere: (input) => shardsHere.changeShardsHere(input),
    releaseLocks: (input) => catalogCalls.releaseLock(input),
  };
  const { runStepsHere } = createStepsHere({
    operations: deps.operations,
    served: deps.storage?.nodes ?? [],
    // (The policy where the table lives says whether a space cap's run is to look at the trash once the table is in it.)
    beginTrash: async (table, { droppedAt, lockWait, expiryRetry }, catalogId) =>
      startExpiryOf(catalog, { ...table, droppedAt, policy: await policyWhere(table.namespace) }, { lockWait, expiryRetry, catalogId }),
    endTrash: endTrashTimer,
    parts: deps.wrapStepParts ? deps.wrapStepParts(parts) : parts,
  });
  return {
    ...catalogCalls,
    ...shardsHere,
    ...legacyV18Activities({ catalogCalls, shardsHere }),
    runStepsHere,
  };
}

export type OrchestrationActivities = ReturnType<typeof createActivities>;

/** Every activity a workflow can call, wherever it runs. */
export type Activities = OrchestrationActivities & StorageActivities;

/**
 * Starts the expiry run of the trash the table is in (trash-runs.ts): just committed, or entered by a move still going on.
 * Every failure of the start is one to try again (the local activity's retries), never the step's: a move taken back
 * leaves a run that finds its trash ended and closes.
 */
async function startExpiryOf(
  catalog: Catalog,
  table: TrashCommitted,
  more: { lockWait?: LockWaitPolicy; expiryRetry?: Backoff; catalogId?: string },
): Promise<void> {
  const { lockWait, expiryRetry, catalogId } = more;
  try {
    await startTrashExpiry({
      tableId: table.id,
      droppedAt: table.droppedAt!,
      ...(catalogId !== undefined ? { catalogId } : {}),
      ...(lockWait ? { lockWait } : {}),
      ...(expiryRetry ? { expiryRetry } : {}),
      // A space cap where it was dropped: the cap's run looks at the trash again once this table waits in it.
      ...(table.policy && table.policy.maxBytes !== null ? { requestEviction: true } : {}),
      table,
      taskQueue: Context.current().info.taskQueue,
      stillCurrent: async () => (await catalog.getTable(table.id))?.droppedAt === table.droppedAt,
    });
  } catch (err) {
    throw err instanceof ApplicationFailure && !err.nonRetryable
      ? err
      : new Error(`starting the expiry of table ${table.id}: ${String(err)}`);
  }
}

/** Tables the space cap reads in one call. */
const TRASH_PAGE = 500;

/** A page of the trash, for its space cap. */
export interface TrashPage {
  settings: SettingRow[];
  tables: Array<{ id: number; namespace: string; name: string; droppedAt: number; held: boolean; placement: ShardPlacement[] }>;
  lastId: number | null;
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

type CommitTrashChange = Extract<CatalogChange, { kind: 'commitTrash' }>;
