import { ApplicationFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Catalog, LockHolder, LockOwner, StepKey } from '../catalog/catalog';
import { LockLostError } from '../catalog/lock-lost';
import { lockFor } from '../domain/operations';
import type { CallScope, ShardRef } from '../domain/contracts';
import type { Watch } from '../storage/driver';

import type { TableRecord } from '../domain/table';

// What the workflow adds to every call it makes (domain/contracts.ts).
export type { CallScope } from '../domain/contracts';

/** The calling workflow: every lock and compare-and-set is done in its name. */
function callingWorkflow(): LockOwner {
  const execution = Context.current().info.workflowExecution;
  if (!execution) throw new Error('tablefate activities run only on behalf of a workflow');
  return { workflowId: execution.workflowId, runId: execution.runId };
}

/** Whether the run holding a lock has closed, asked of the Temporal server. */
export async function ownerClosedOnServer(holder: LockHolder): Promise<boolean> {
  try {
    const description = await Context.current().client.workflow.getHandle(holder.workflowId, holder.runId).describe();
    return description.status.name !== 'RUNNING';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return true;
    throw err;
  }
}

/**
 * The checks every activity of a catalog's workers makes before it acts: the call belongs to this catalog
 * (`inScope`), and a storage change is made only while the calling run holds the table's lock (`fenced`).
 */
export function callChecks(catalog: Catalog) {
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
   * server has cancelled this attempt: its workflow closed, or a newer attempt superseded it. (A local activity
   * has no heartbeat: it lives and dies with the workflow task that runs it.)
   */
  const fenced = async <T = void>(
    scope: CallScope,
    shards: readonly ShardRef[],
    change: (watch: Watch, shards: ShardRef[]) => Promise<T>,
  ): Promise<T> => {
    const owner = inScope(scope);
    const context = Context.current();
    const beat = context.info.isLocal ? undefined : () => context.heartbeat();
    beat?.();
    // (Several tables' shards, when tables move together: the run holds each one's lock.)
    const tables = new Map<number, TableRecord | undefined>();
    for (const tableId of new Set(shards.map((s) => s.tableId))) {
      if (!(await catalog.holdsLock(lockFor.table(tableId), owner))) {
        const which = shards.map((s) => `${s.shard} on ${s.node}`).join(', ');
        throw new LockLostError(
          `${owner.workflowId} no longer holds table ${tableId}; shard${shards.length === 1 ? '' : 's'} ${which} left untouched`,
        );
      }
      // The table as the catalog has it now, under the lock: a driver that names its shards after the table (PostgreSQL)
      // reads the name from here (an undelete's move back is under the name it has just claimed).
      tables.set(tableId, await catalog.getTable(tableId));
    }
    const described = shards.map((s) => {
      const table = tables.get(s.tableId);
      if (!table) return s;
      return { ...s, table: { namespace: table.namespace, name: table.name, shards: table.placement.length, params: table.params } };
    });
    return change({ signal: context.cancellationSignal, beat }, described);
  };

  return { inScope, stepOf, fenced };
}

export type CallChecks = ReturnType<typeof callChecks>;

/**
 * One try at a lock: taken (with the table asked for, as read under it: null if there is none, and the workflow time
 * of the first attempt that read it), or held by another running workflow (its id).
 */
export type LockAttempt = { acquired: true; table?: TableRecord | null; readAt?: number } | { acquired: false; holder: string };
