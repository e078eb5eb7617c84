import { setTimeout as sleep } from 'node:timers/promises';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import { Client as PgClient } from 'pg';
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
 * How many ids in a row may have no table inside the range of those in use: a truncate (issue 43) takes the id of its
 * entry when it begins, and one taken back (refused by a shard, TableBusy) leaves that id unused for good. One hole per
 * truncate taken back: as many in a row as truncates taken back with no other id handed out between.
 */
export const ID_HOLES_IN_A_ROW = 50;

/**
 * Every table in the catalog. `listTables` leaves tombstones out, so the rows are read by id: ids come from
 * one counter and are never reused or deleted, so they form one range (with the holes of truncates taken back); it is
 * walked out from the ids already known in both directions until ID_HOLES_IN_A_ROW ids in a row are missing.
 */
export async function allTables(catalog: Catalog, knownIds: Iterable<number>): Promise<TableRecord[]> {
  const seeds = new Set<number>(knownIds);
  for (const table of await catalog.listTables({ includeTrashed: true })) seeds.add(table.id);
  const found = new Map<number, TableRecord>();
  const missing = new Set<number>();
  const walk = async (from: number, step: 1 | -1) => {
    for (let id = from, holes = 0; id >= 1 && holes < ID_HOLES_IN_A_ROW; id += step) {
      if (found.has(id)) {
        holes = 0;
        continue;
      }
      const table = missing.has(id) ? undefined : await catalog.getTable(id);
      if (!table) {
        missing.add(id);
        holes++;
        continue;
      }
      holes = 0;
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

/** A request of the SQL door as a node's record holds it (tablefate.sql_requests), with how often its answer was written. */
export interface DoorRequest {
  node: string;
  id: number;
  op: string;
  args: unknown;
  state: string;
  requestUuid: string;
  requester: string;
  applicationName: string | null;
  requestedAt: Date;
  plan: unknown;
  catalogId: string | null;
  claimedBy: string | null;
  pickedAt: Date | null;
  workflowId: string | null;
  answer: { id?: number; state?: string } | null;
  errorType: string | null;
  sqlstate: string | null;
  message: string | null;
  answeredAt: Date | null;
  /** How many times the run's trigger saw it turn 'answered' (chaos_door.answers). */
  answersWritten: number;
}

/** Every request of the SQL door on a node, oldest first. */
export async function readDoorRequests(node: string, url: string, countSchema: string): Promise<DoorRequest[]> {
  const client = new PgClient({ connectionString: url, application_name: 'chaos checker' });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const { rows } = await client.query<Omit<DoorRequest, 'node'>>(
      `SELECT r.id::int AS id, r.op, r.args, r.state, r.request_uuid::text AS "requestUuid", r.requester_name AS requester,
              r.application_name AS "applicationName", r.requested_at AS "requestedAt", r.plan, r.catalog_id AS "catalogId",
              r.claimed_by AS "claimedBy", r.picked_at AS "pickedAt", r.workflow_id AS "workflowId", r.answer,
              r.error_type AS "errorType", r.sqlstate, r.message, r.answered_at AS "answeredAt",
              (SELECT count(*)::int FROM ${countSchema}.answers a WHERE a.id = r.id) AS "answersWritten"
         FROM tablefate.sql_requests r ORDER BY r.id`,
    );
    return rows.map((row) => ({ node, ...row }));
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The runs of one workflow id the server's visibility lists (running or closed): a request's own run has one, never two. */
export async function runsOf(temporal: Client, workflowId: string): Promise<Array<{ runId: string; status: string }>> {
  const runs: Array<{ runId: string; status: string }> = [];
  for await (const wf of temporal.workflow.list({ query: `WorkflowId = '${workflowId.replace(/'/g, "\\'")}'` })) {
    runs.push({ runId: wf.runId, status: wf.status.name });
  }
  return runs;
}

/** A kind of lock wait seen on the nodes: who waited, doing what, for whom doing what. */
export interface LockWait {
  waiter: string;
  blocker: string;
  /** How many looks saw it (one look every `everyMs`), and the longest wait seen, in seconds. */
  seen: number;
  longestS: number;
}

/**
 * Looks every `everyMs` at the sessions of the node databases that have waited more than `minS` for a lock, and writes
 * down who they waited for (pg_blocking_pids): what a stall of the product, or of a caller, came from.
 */
export class LockWaitWatch {
  private readonly waits = new Map<string, LockWait>();
  private stopped = false;
  private running: Promise<void> | undefined;

  constructor(
    private readonly serverUrl: string,
    private readonly databases: readonly string[],
    private readonly everyMs = 2000,
    private readonly minS = 5,
  ) {}

  start(): void {
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  /** The waits seen, the most often seen first. */
  seen(): LockWait[] {
    return [...this.waits.values()].sort((a, b) => b.seen - a.seen);
  }

  private async loop(): Promise<void> {
    let client: PgClient | undefined;
    while (!this.stopped) {
      try {
        if (!client) {
          const opened = new PgClient({ connectionString: this.serverUrl, application_name: 'chaos lock watch' });
          opened.on('error', () => (client = undefined));
          await opened.connect();
          client = opened;
        }
        const { rows } = await client.query<{ waiter: string; blocker: string; waited: number }>(
          `SELECT w.datname || ' ' || w.application_name || ': ' || left(regexp_replace(w.query, '\\s+', ' ', 'g'), 90) AS waiter,
                  b.application_name || ' (' || coalesce(b.state, '?') || '): ' || left(regexp_replace(b.query, '\\s+', ' ', 'g'), 90) AS blocker,
                  extract(epoch FROM now() - w.query_start)::float8 AS waited
             FROM pg_stat_activity w
             CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS blocking(pid)
             JOIN pg_stat_activity b ON b.pid = blocking.pid
            WHERE w.datname = ANY($1) AND w.wait_event_type = 'Lock' AND now() - w.query_start > make_interval(secs => $2)`,
          [this.databases, this.minS],
        );
        for (const { waiter, blocker, waited } of rows) {
          const key = `${waiter}\n${blocker}`;
          const wait = this.waits.get(key) ?? { waiter, blocker, seen: 0, longestS: 0 };
          wait.seen++;
          wait.longestS = Math.max(wait.longestS, waited);
          this.waits.set(key, wait);
        }
      } catch {
        await client?.end().catch(() => undefined);
        client = undefined;
      }
      await sleep(this.everyMs);
    }
    await client?.end().catch(() => undefined);
  }
}
