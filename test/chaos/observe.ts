import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import type { Catalog, LockHolder } from '../../catalog/catalog';
import { RESUMED_BY } from '../../domain/health';
import type { TableState } from '../../domain/states';
import type { TableRecord } from '../../domain/table';

/**
 * What the run can see of the product from outside: the catalog's rows (tombstones included), its locks, and
 * the workflows the Temporal server says are running. Read-only.
 */

/** The states an operation leaves a table in while it runs: those the operations' records resume from. */
export const TRANSITIONAL_STATES = Object.keys(RESUMED_BY) as readonly TableState[];

// The search attributes every operation carries (README, "In the Temporal web UI"); declared here by name so
// the run depends on the documented contract, not on how the product defines them.
const TABLE_ID = defineSearchAttributeKey('TableId', SearchAttributeType.INT);
const TABLE_OP = defineSearchAttributeKey('TableOp', SearchAttributeType.KEYWORD);

export interface RunningWorkflow {
  workflowId: string;
  runId: string;
  type: string;
  tableId: number | undefined;
  op: string | undefined;
  startTime: Date;
}

export interface Snapshot {
  at: number;
  /** Every table the catalog holds, PURGED tombstones included, by id. */
  tables: TableRecord[];
  locks: LockHolder[];
  running: RunningWorkflow[];
}

/**
 * Every table in the catalog. `listTables` leaves tombstones out, so the rows are read by id: ids come from
 * one counter and are never reused or deleted, so they form one unbroken range; it is walked out from the ids
 * already known in both directions until an id is missing.
 */
export async function allTables(catalog: Catalog, knownIds: Iterable<number>): Promise<TableRecord[]> {
  const seeds = new Set<number>(knownIds);
  for (const table of await catalog.listTables({ includeTrashed: true })) seeds.add(table.id);
  const found = new Map<number, TableRecord>();
  const walk = async (from: number, step: 1 | -1) => {
    for (let id = from; id >= 1; id += step) {
      if (found.has(id)) continue;
      const table = await catalog.getTable(id);
      if (!table) return;
      found.set(id, table);
    }
  };
  for (const id of seeds) {
    if (found.has(id)) continue;
    const table = await catalog.getTable(id);
    if (!table) continue;
    found.set(id, table);
    await walk(id + 1, 1);
    await walk(id - 1, -1);
  }
  return [...found.values()].sort((a, b) => a.id - b.id);
}

/** Workflows the server lists as running (visibility can lag a moment behind the histories). */
export async function runningWorkflows(temporal: Client, query = `ExecutionStatus = 'Running'`): Promise<RunningWorkflow[]> {
  const running: RunningWorkflow[] = [];
  for await (const wf of temporal.workflow.list({ query })) {
    running.push({
      workflowId: wf.workflowId,
      runId: wf.runId,
      type: wf.type,
      tableId: wf.typedSearchAttributes.get(TABLE_ID),
      op: wf.typedSearchAttributes.get(TABLE_OP),
      startTime: wf.startTime,
    });
  }
  return running;
}

/**
 * The workflow type of a trash's expiry (README, "In the Temporal web UI"): the run that keeps a trashed table until it
 * expires, started by its drop, whose own run ends at TRASHED. It carries TableId but no TableOp.
 */
export const TRASH_EXPIRY_TYPE = 'trashExpiry';

/** Whether a running workflow is a trash's timer: the expiry run of a table in the trash. */
export const isTrashTimer = (wf: RunningWorkflow): boolean => wf.type === TRASH_EXPIRY_TYPE;

/** Running trash timers (expiry runs) of one table, asked of the server with the documented visibility query. */
export async function runningTrashWorkflows(temporal: Client, tableId: number): Promise<RunningWorkflow[]> {
  return runningWorkflows(temporal, `TableId = ${tableId} AND WorkflowType = '${TRASH_EXPIRY_TYPE}' AND ExecutionStatus = 'Running'`);
}

export async function takeSnapshot(catalog: Catalog, temporal: Client, knownIds: Iterable<number>): Promise<Snapshot> {
  return {
    at: Date.now(),
    tables: await allTables(catalog, knownIds),
    locks: await catalog.listLocks(),
    running: await runningWorkflows(temporal),
  };
}

/** temporal.api.enums.v1.PendingActivityState, by number (@temporalio/proto is not a direct dependency). */
const PENDING_ACTIVITY_STATES: Record<number, string> = {
  1: 'SCHEDULED',
  2: 'STARTED',
  3: 'CANCEL_REQUESTED',
  4: 'PAUSED',
  5: 'PAUSE_REQUESTED',
};

/** The attributes key of a history event names its type (`activityTaskFailedEventAttributes`, ...). */
function eventTypeOf(event: object): string {
  const key = Object.entries(event).find(([k, v]) => k.endsWith('EventAttributes') && v)?.[0];
  return key ? key.replace(/EventAttributes$/, '') : 'unknown';
}

/** Every failure message in an object tree (failures nest as `cause`). */
function failureMessages(value: unknown, into: string[], depth = 0): void {
  if (!value || typeof value !== 'object' || depth > 6) return;
  for (const [key, child] of Object.entries(value as Record<string, unknown>)) {
    if (key === 'failure' || key === 'lastFailure') {
      const message = (child as { message?: unknown } | null)?.message;
      if (typeof message === 'string' && message) into.push(message);
    }
    failureMessages(child, into, depth + 1);
  }
}

/**
 * Why a workflow is stuck, as far as the server can say: its status, pending activities with their attempt
 * and last failure, and the last events and failures of its history.
 */
export async function describeWorkflow(
  temporal: Client,
  workflowId: string,
  runId: string | undefined,
  workerFate: (identity: string) => string = () => '',
): Promise<string> {
  const handle = temporal.workflow.getHandle(workflowId, runId);
  try {
    const description = await handle.describe();
    const parts = [`${workflowId} (${description.type}) ${description.status.name}, ${description.historyLength} events`];
    for (const activity of description.raw.pendingActivities ?? []) {
      const state = PENDING_ACTIVITY_STATES[activity.state ?? 0] ?? String(activity.state);
      const started = activity.lastStartedTime?.seconds ? new Date(Number(activity.lastStartedTime.seconds) * 1000).toISOString() : null;
      parts.push(
        `pending activity ${activity.activityType?.name ?? '?'} ${state} attempt ${activity.attempt ?? '?'}` +
          (started
            ? ` since ${started} on worker ${activity.lastWorkerIdentity ?? '?'}${workerFate(activity.lastWorkerIdentity ?? '')}`
            : '') +
          (activity.lastFailure?.message ? `, last failure: ${activity.lastFailure.message}` : ''),
      );
    }
    const history = await handle.fetchHistory();
    const events = history.events ?? [];
    parts.push(`last events: ${events.slice(-4).map(eventTypeOf).join(', ')}`);
    const failures: string[] = [];
    for (const event of events) failureMessages(event, failures);
    const distinct = [...new Set(failures.slice(-20))].slice(-3);
    if (distinct.length > 0) parts.push(`failures in its history: ${distinct.map((m) => JSON.stringify(m)).join('; ')}`);
    return parts.join('; ');
  } catch (err) {
    return `${workflowId}: cannot describe (${(err as Error).message.split('\n')[0]})`;
  }
}
