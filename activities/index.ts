import { ApplicationFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import type { Catalog, LockHolder, TransitionRequest } from '../catalog/catalog';
import type { TableState } from '../domain/states';
import { placeTable, type CreateParams, type TableRecord } from '../domain/table';
import type { TableName } from '../domain/names';
import { workflowIdFor } from '../domain/operations';
import { WorkflowNotFoundError } from '@temporalio/client';
import { endTimerSignal } from '../domain/contracts';
import type { FatalStorageError, StorageDriver } from '../storage/driver';
import { withFailureMapping } from './failures';
import { DEFAULT_ORPHAN_GRACE_SECONDS } from '../domain/limits';
import { housekeepingActivities } from './housekeeping';
import { callChecks, ownerClosedOnServer, type CallScope } from './scope';
import { createShardsHereActivity, type StorageActivities } from './storage';

export type { CallScope } from './scope';
export { createStorageActivities, STORAGE_ACTIVITY_NAMES, type NodeSurvey, type ShardsHereAnswer, type StorageActivities } from './storage';

export interface ActivityDeps {
  catalog: Catalog;
  /** The storage nodes new tables' shards are placed on. */
  nodes: readonly string[];
  /**
   * Storage served in this process, if any: an operation's shard changes on these nodes run here, in its workflow
   * task (changeShardsHere), and reconcile runs started before node surveys list it here.
   */
  storage?: StorageDriver;
  /** Retention of a trash when the request names none. */
  defaultRetentionSeconds: number;
  /** Called when storage can neither finish nor undo a change: the worker must stop. */
  onFatal: (err: FatalStorageError) => void;
  /** Whether the workflow that holds a lock has closed; defaults to asking the Temporal server. */
  isOwnerClosed?: (holder: LockHolder) => Promise<boolean>;
  /** How long a set no catalog row accounts for is left alone before the reconciler collects it. */
  orphanGraceSeconds?: number;
  /** How many attempts a transient storage fault gets before the step fails (default: see failures.ts). */
  storageRetryAttempts?: number;
  /** The worker's clock: only for when a lock was taken. Table times come from workflow time. */
  now?: () => number;
}

/**
 * The activities of an orchestrating worker: locks, the catalog's compare-and-sets, the reconciler's catalog
 * survey, and the shard changes of the nodes this process serves itself (changeShardsHere). Every other storage
 * call runs on the worker of its node (storage.ts).
 */
export function createActivities(deps: ActivityDeps) {
  const { catalog } = deps;
  const clock = deps.now ?? Date.now;
  const isOwnerClosed = deps.isOwnerClosed ?? ownerClosedOnServer;
  const checks = callChecks(catalog);
  const { inScope, stepOf } = checks;

  /** One attempt at a lock; a lock left by a closed workflow is taken over. */
  const attemptLock = async (input: CallScope & { lock: string }): Promise<LockAttempt> => {
    const owner = inScope(input);
    const result = await catalog.acquireLock(input.lock, owner, clock(), isOwnerClosed, stepOf(owner, input));
    if (!result.acquired) return { acquired: false, holder: result.holder.workflowId };
    if (result.tookOverFrom) {
      Context.current().log.warn('took over a lock left by a closed workflow', { lock: input.lock, from: result.tookOverFrom.workflowId });
    }
    return { acquired: true };
  };

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

  const activities = {
    /**
     * FATE's isReady as runs started before workflows waited in their own code still call it: a retryable
     * LockBusy while another running workflow holds the lock, so that the activity's retries are the wait.
     */
    async acquireLock(input: CallScope & { lock: string }): Promise<void> {
      const attempt = await attemptLock(input);
      if (!attempt.acquired) throw ApplicationFailure.retryable(`${input.lock} is held by ${attempt.holder}`, 'LockBusy');
    },

    /**
     * FATE's isReady: one attempt at a lock, for a workflow that waits in its own code (timers, not activity
     * retries, so the wait is bounded in history). Busy is an answer, naming the holder.
     */
    tryLock: (input: CallScope & { lock: string }): Promise<LockAttempt> => attemptLock(input),

    /** Releases every lock the calling run holds. */
    async releaseLock(input: CallScope = {}): Promise<void> {
      await catalog.releaseLocks(inScope(input));
    },

    /**
     * With `busyIsAnswer`, a table lock held by another running operation comes back as `busy` for the workflow
     * to wait on; without it (runs started before workflows waited in their own code) it is a retryable LockBusy.
     */
    async prepareCreate(input: CallScope & TableName & { params: CreateParams; lock: string; now: number; busyIsAnswer?: boolean }) {
      const owner = inScope(input);
      const result = await catalog.prepareCreate(
        {
          namespace: input.namespace,
          name: input.name,
          params: input.params,
          owner,
          nameLock: input.lock,
          place: (id, params) => placeTable(id, params, deps.nodes),
          now: input.now,
          step: stepOf(owner, input),
        },
        isOwnerClosed,
      );
      if (result.outcome === 'busy' && !input.busyIsAnswer) {
        throw ApplicationFailure.retryable(`${result.holder.resource} is held by ${result.holder.workflowId}`, 'LockBusy');
      }
      return result;
    },

    /**
     * Tells the trash run of the trash that happened at `droppedAt` that its timer has nothing left to do (the
     * table was recalled or purged by hand). A run that has ended already needs no telling. Sent from a local
     * activity, in the workflow task of the operation's last step, rather than as the workflow's own signal
     * command, whose delivery the operation would wait for in one more workflow task.
     */
    async endTrashTimer(input: CallScope & { tableId: number; reason: 'restored' | 'purged'; droppedAt: number }): Promise<boolean> {
      inScope(input);
      try {
        await Context.current()
          .client.workflow.getHandle(workflowIdFor.trash(input.tableId, input.catalogId))
          .signal(endTimerSignal, input.reason, input.droppedAt);
        return true;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return false;
        throw err;
      }
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
      },
    ): Promise<TableRecord> {
      const { tableId, from, to, now, rename, expectName } = input;
      return change(input, { tableId, from, to, now, rename, expectName });
    },

    /** TRASHING -> TRASHED, stamping the drop time and the expiry that the trash timer will wait for. */
    commitTrash: (
      input: CallScope & { tableId: number; now: number; retentionSeconds?: number; releaseLocks?: boolean },
    ): Promise<TableRecord> =>
      change(input, {
        tableId: input.tableId,
        from: ['TRASHING'],
        to: 'TRASHED',
        now: input.now,
        retentionSeconds: input.retentionSeconds ?? deps.defaultRetentionSeconds,
      }),
  };
  const housekeeping = housekeepingActivities({
    catalog,
    nodes: deps.nodes,
    storage: deps.storage,
    isOwnerClosed,
    checks,
    orphanGraceMs: (deps.orphanGraceSeconds ?? DEFAULT_ORPHAN_GRACE_SECONDS) * 1000,
  });
  const shardsHere = createShardsHereActivity({
    catalog,
    storage: deps.storage,
    onFatal: deps.onFatal,
    storageRetryAttempts: deps.storageRetryAttempts,
  });
  return { ...withFailureMapping({ ...activities, ...housekeeping }, { onFatal: deps.onFatal }), ...shardsHere };
}

export type OrchestrationActivities = ReturnType<typeof createActivities>;

/** Every activity a workflow can call, wherever it runs. */
export type Activities = OrchestrationActivities & StorageActivities;

/** One try at a lock: taken, or held by another running workflow (its id). */
export type LockAttempt = { acquired: true } | { acquired: false; holder: string };
