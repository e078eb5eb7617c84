import { ApplicationFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Catalog, LockHolder, LockOwner, StepKey } from '../catalog/catalog';
import { LockLostError } from '../catalog/lock-lost';
import { lockFor } from '../domain/operations';
import type { TableState } from '../domain/states';
import { placeShards, type CreateParams, type TableRecord } from '../domain/table';
import type { TableName } from '../domain/names';
import type { ShardArea, ShardRef, StorageDriver, Watch } from '../storage/driver';
import { FatalStorageError } from '../storage/driver';
import { withFailureMapping } from './failures';
import { DEFAULT_ORPHAN_GRACE_SECONDS } from '../domain/limits';
import { housekeepingActivities } from './housekeeping';

export interface ActivityDeps {
  catalog: Catalog;
  storage: StorageDriver;
  /** Retention of a trash when the request names none. */
  defaultRetentionSeconds: number;
  /** Called when storage can neither finish nor undo a change: the worker must stop. */
  onFatal: (err: FatalStorageError) => void;
  /** Whether the workflow that holds a lock has closed; defaults to asking the Temporal server. */
  isOwnerClosed?: (holder: LockHolder) => Promise<boolean>;
  /** How many attempts a transient storage fault gets before the step fails (default: see failures.ts). */
  storageRetryAttempts?: number;
  /** How long a set no catalog row accounts for is left alone before the reconciler collects it. */
  orphanGraceSeconds?: number;
  /** The worker's clock: only for when a lock was taken. Table times come from workflow time. */
  now?: () => number;
}

/**
 * What the workflow adds to every call it makes: the catalog the operation belongs to, and for catalog calls
 * the call's place in the run (`step`), under which the catalog journals its outcome.
 */
export interface CallScope {
  catalogId?: string;
  step?: string;
}

/** The calling workflow: every lock and compare-and-set is done in its name. */
function callingWorkflow(): LockOwner {
  const execution = Context.current().info.workflowExecution;
  if (!execution) throw new Error('tablefate activities run only on behalf of a workflow');
  return { workflowId: execution.workflowId, runId: execution.runId };
}

async function ownerClosedOnServer(holder: LockHolder): Promise<boolean> {
  try {
    const description = await Context.current().client.workflow.getHandle(holder.workflowId, holder.runId).describe();
    return description.status.name !== 'RUNNING';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return true;
    throw err;
  }
}

export function createActivities(deps: ActivityDeps) {
  const { catalog, storage } = deps;
  const clock = deps.now ?? Date.now;
  const isOwnerClosed = deps.isOwnerClosed ?? ownerClosedOnServer;

  /**
   * Refuses an operation of another catalog (two catalogs whose workers share a task queue): acting on it here
   * would change a table of the same id that is not the one it means.
   */
  const inScope = (scope: CallScope): LockOwner => {
    if (scope.catalogId !== undefined && scope.catalogId !== catalog.id) {
      throw ApplicationFailure.nonRetryable(
        `this worker serves catalog ${catalog.id}, but the operation belongs to catalog ${scope.catalogId}: ` +
          `give the workers of each catalog their own Temporal namespace or task queue`,
        'WrongCatalog',
      );
    }
    return callingWorkflow();
  };
  const stepOf = (owner: LockOwner, scope: CallScope): StepKey | undefined =>
    scope.step === undefined ? undefined : { runId: owner.runId, step: scope.step };

  /**
   * The fence in front of every storage change: the calling operation must still hold the table's lock, or it
   * touches nothing. The change heartbeats file by file and stops (putting a half-renamed set back) once the
   * server has cancelled this attempt: its workflow closed, or a newer attempt superseded it.
   */
  const fenced = async (scope: CallScope, shard: ShardRef, change: (watch: Watch) => Promise<void>): Promise<void> => {
    const owner = inScope(scope);
    const context = Context.current();
    context.heartbeat();
    if (!(await catalog.holdsLock(lockFor.table(shard.tableId), owner))) {
      throw new LockLostError(
        `${owner.workflowId} no longer holds table ${shard.tableId}; shard ${shard.shard} on ${shard.node} left untouched`,
      );
    }
    await change({ signal: context.cancellationSignal, beat: () => context.heartbeat() });
  };

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
          place: (id, params) => placeShards(id, params.shards, storage.nodes),
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
      },
    ): Promise<TableRecord> {
      const owner = inScope(input);
      return catalog.transition({
        tableId: input.tableId,
        from: input.from,
        to: input.to,
        owner,
        now: input.now,
        rename: input.rename,
        expectName: input.expectName,
        step: stepOf(owner, input),
      });
    },

    /** TRASHING -> TRASHED, stamping the drop time and the expiry that the trash timer will wait for. */
    async commitTrash(input: CallScope & { tableId: number; now: number; retentionSeconds?: number }): Promise<TableRecord> {
      const owner = inScope(input);
      return catalog.transition({
        tableId: input.tableId,
        from: ['TRASHING'],
        to: 'TRASHED',
        owner,
        now: input.now,
        retentionSeconds: input.retentionSeconds ?? deps.defaultRetentionSeconds,
        step: stepOf(owner, input),
      });
    },

    async createShard(input: CallScope & { shard: ShardRef }): Promise<void> {
      await fenced(input, input.shard, (watch) => storage.createShard(input.shard, watch));
    },
    async dropShard(input: CallScope & { shard: ShardRef }): Promise<void> {
      await fenced(input, input.shard, (watch) => storage.dropShard(input.shard, watch));
    },
    async moveShard(input: CallScope & { shard: ShardRef; from: ShardArea; to: ShardArea }): Promise<void> {
      await fenced(input, input.shard, (watch) => storage.moveShard(input.shard, input.from, input.to, watch));
    },
    async markGarbage(input: CallScope & { shard: ShardRef }): Promise<void> {
      await fenced(input, input.shard, (watch) => storage.markGarbage(input.shard, watch));
    },
    async unmarkGarbage(input: CallScope & { shard: ShardRef }): Promise<void> {
      await fenced(input, input.shard, (watch) => storage.unmarkGarbage(input.shard, watch));
    },
    async deleteGarbage(input: CallScope & { shard: ShardRef }): Promise<void> {
      await fenced(input, input.shard, (watch) => storage.deleteGarbage(input.shard, watch));
    },
  };
  const housekeeping = housekeepingActivities({
    catalog,
    storage,
    isOwnerClosed,
    inScope,
    fenced,
    orphanGraceMs: (deps.orphanGraceSeconds ?? DEFAULT_ORPHAN_GRACE_SECONDS) * 1000,
  });
  return withFailureMapping({ ...activities, ...housekeeping }, { onFatal: deps.onFatal, storageRetryAttempts: deps.storageRetryAttempts });
}

export type Activities = ReturnType<typeof createActivities>;

/** One try at a lock: taken, or held by another running workflow (its id). */
export type LockAttempt = { acquired: true } | { acquired: false; holder: string };
