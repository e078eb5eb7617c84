import { ApplicationFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Catalog, LockGuard, LockHolder, LockOwner } from '../catalog/catalog';
import type { TableState } from '../domain/states';
import { placeShards, type CreateParams, type TableRecord } from '../domain/table';
import type { TableName } from '../domain/names';
import type { ShardArea, ShardRef, StorageDriver } from '../storage/driver';
import { FatalStorageError } from '../storage/driver';
import { withFailureMapping } from './failures';

export interface ActivityDeps {
  catalog: Catalog;
  storage: StorageDriver;
  /** Retention of a trash when the request names none. */
  defaultRetentionSeconds: number;
  /** Called when storage can neither finish nor undo a change: the worker must stop. */
  onFatal: (err: FatalStorageError) => void;
  /** Whether the workflow that holds a lock has closed; defaults to asking the Temporal server. */
  isOwnerClosed?: (holder: LockHolder) => Promise<boolean>;
  now?: () => number;
}

/** The calling workflow: every lock and compare-and-set is done in its name. */
function callingWorkflow(): LockOwner {
  const execution = Context.current().info.workflowExecution;
  if (!execution) throw new Error('tablefate activities run only on behalf of a workflow');
  return { workflowId: execution.workflowId, runId: execution.runId };
}

const guardOf = (lock: string): LockGuard => ({ resource: lock, owner: callingWorkflow() });

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
  const now = deps.now ?? Date.now;
  const isOwnerClosed = deps.isOwnerClosed ?? ownerClosedOnServer;

  const activities = {
    /**
     * FATE's isReady: fails with a retryable LockBusy while another running workflow holds the lock, so
     * Temporal's retry policy is the wait-with-backoff. A lock left by a closed workflow is taken over.
     */
    async acquireLock(lock: string): Promise<void> {
      const result = await catalog.acquireLock(lock, callingWorkflow(), now(), isOwnerClosed);
      if (!result.acquired) {
        throw ApplicationFailure.retryable(`${lock} is held by ${result.holder.workflowId}`, 'LockBusy');
      }
      if (result.tookOverFrom) {
        Context.current().log.warn('took over a lock left by a closed workflow', {
          lock,
          from: result.tookOverFrom.workflowId,
        });
      }
    },

    async releaseLock(lock: string): Promise<void> {
      await catalog.releaseLock(lock, callingWorkflow());
    },

    async prepareCreate(input: TableName & { params: CreateParams; lock: string }) {
      return catalog.prepareCreate({
        namespace: input.namespace,
        name: input.name,
        params: input.params,
        guard: guardOf(input.lock),
        place: (id, params) => placeShards(id, params.shards, storage.nodes),
        now: now(),
      });
    },

    async getTable(tableId: number): Promise<TableRecord | null> {
      return (await catalog.getTable(tableId)) ?? null;
    },

    async transition(input: {
      tableId: number;
      from: TableState[];
      to: TableState;
      lock: string;
      rename?: TableName;
    }): Promise<TableRecord> {
      const at = now();
      return catalog.transition({
        tableId: input.tableId,
        from: input.from,
        to: input.to,
        guard: guardOf(input.lock),
        now: at,
        set: {
          ...input.rename,
          ...(input.to === 'PURGED' ? { purgedAt: at } : {}),
          // A table back from the trash has no drop or expiry any more.
          ...(input.to === 'READY' ? { droppedAt: null, expireAt: null } : {}),
        },
      });
    },

    /** TRASHING -> TRASHED, stamping the drop time and the expiry that the trash timer will wait for. */
    async commitTrash(input: { tableId: number; lock: string; retentionSeconds?: number }): Promise<TableRecord> {
      const droppedAt = now();
      const retention = input.retentionSeconds ?? deps.defaultRetentionSeconds;
      return catalog.transition({
        tableId: input.tableId,
        from: ['TRASHING'],
        to: 'TRASHED',
        guard: guardOf(input.lock),
        now: droppedAt,
        set: { droppedAt, expireAt: droppedAt + retention * 1000 },
      });
    },

    async createShard(shard: ShardRef): Promise<void> {
      await storage.createShard(shard);
    },
    async dropShard(shard: ShardRef): Promise<void> {
      await storage.dropShard(shard);
    },
    async moveShard(input: { shard: ShardRef; from: ShardArea; to: ShardArea }): Promise<void> {
      await storage.moveShard(input.shard, input.from, input.to);
    },
    async markGarbage(shard: ShardRef): Promise<void> {
      await storage.markGarbage(shard);
    },
    async unmarkGarbage(shard: ShardRef): Promise<void> {
      await storage.unmarkGarbage(shard);
    },
    async deleteGarbage(shard: ShardRef): Promise<void> {
      await storage.deleteGarbage(shard);
    },
  };
  return withFailureMapping(activities, deps.onFatal);
}

export type Activities = ReturnType<typeof createActivities>;
