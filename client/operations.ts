import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from '../domain/search-attributes';
import { TABLE_OPERATIONS } from '../domain/operations';
import { STARTED_BY_MEMO, starterOf, type OperationInfo, type OperationStatus } from '../domain/operation-runs';
import { currentDetails, DETAILS_DEADLINE_MS } from './details';

/**
 * The table operations' runs as Temporal's visibility lists them (`tablefate ops`, `history`, `cancel`): every run
 * carries its operation (`TableOp`) and what it knows of its table (`TableId`, `TableNamespace`, `TableName`) as search
 * attributes, and who started it in its memo (`startedBy`).
 */

/** How many runs one page of the listing asks for. */
const PAGE_SIZE = 200;
/** How many running runs are asked their current details at once, and how long all of them may take together. */
const DETAILS_AT_ONCE = 8;
const DETAILS_BUDGET_MS = 4_000;

/** The visibility query of the table operations' runs: a TableOp of theirs, of one table, only the running ones. */
export function operationsQuery(filter: { tableId?: number; running?: boolean }): string {
  const ops = Object.keys(TABLE_OPERATIONS)
    .map((op) => `'${op}'`)
    .join(', ');
  const clauses = [`${SEARCH_ATTRIBUTES.tableOp.name} IN (${ops})`];
  if (filter.tableId !== undefined) clauses.push(`${SEARCH_ATTRIBUTES.tableId.name} = ${filter.tableId}`);
  if (filter.running) clauses.push(`ExecutionStatus = 'Running'`);
  return clauses.join(' AND ');
}

/** Whether a workflow id is of this catalog's runs: every id ends in `@<catalogId>` (see `scoped` in domain/operations.ts). */
export const ofCatalog = (workflowId: string, catalogId: string): boolean => workflowId.endsWith(`@${catalogId}`);

/** Newest start first; runs started in the same millisecond by workflow id, then run id, so that the order is stable. */
function newestFirst(a: WorkflowExecutionInfo, b: WorkflowExecutionInfo): number {
  return b.startTime.getTime() - a.startTime.getTime() || a.workflowId.localeCompare(b.workflowId) || a.runId.localeCompare(b.runId);
}

/**
 * The runs `query` finds of catalog `catalogId`, newest start first, at most `limit` (all without it). Their workflow ids
 * end in `@<catalogId>`, and a visibility query cannot ask for an end: the listing is filtered here.
 *
 * Visibility lists the running runs first, then the closed ones by close time, latest first. A run closes after it
 * starts, so once `limit` runs are in hand and the close times listed fall below the start of the limit-th newest, no
 * run further down can be among the newest: the listing stops there. A server that lists in another order (seen as a
 * running run after a closed one, or a close time going up) is read to the end.
 */
export async function listRuns(client: Client, catalogId: string, query: string, limit?: number): Promise<WorkflowExecutionInfo[]> {
  const found: WorkflowExecutionInfo[] = [];
  /** The start times of the runs found, newest first, at most `limit` of them. */
  const starts: number[] = [];
  let ordered = true;
  let lastClose = Infinity;
  // (A page a little past the limit: where one catalog is all the namespace holds, the listing stops within it, and the
  // runs past it are neither sent nor decoded.)
  const pageSize = limit === undefined ? PAGE_SIZE : Math.min(PAGE_SIZE, limit + 1);
  for await (const run of client.workflow.list({ query, pageSize })) {
    const closedAt = run.closeTime?.getTime();
    if (closedAt === undefined) {
      if (lastClose !== Infinity) ordered = false;
    } else {
      if (closedAt > lastClose) ordered = false;
      lastClose = closedAt;
    }
    if (ofCatalog(run.workflowId, catalogId)) {
      found.push(run);
      if (limit !== undefined) {
        const start = run.startTime.getTime();
        const at = starts.findIndex((s) => s < start);
        starts.splice(at === -1 ? starts.length : at, 0, start);
        if (starts.length > limit) starts.pop();
      }
    }
    if (limit !== undefined && ordered && closedAt !== undefined && starts.length === limit && closedAt < starts[limit - 1]!) break;
  }
  found.sort(newestFirst);
  return limit === undefined ? found : found.slice(0, limit);
}

/**
 * Who started a run: its memo's `startedBy` (every run an SDK client starts; a run continued as new keeps its memo), else
 * the workflow that started it as a child (the reconciler, a trash's expiry, the space cap), else `unknown`.
 */
export function startedByOf(run: Pick<WorkflowExecutionInfo, 'memo' | 'parentExecution'>): string {
  const memo = run.memo?.[STARTED_BY_MEMO];
  if (typeof memo === 'string' && memo !== '') return memo;
  return starterOf(run.parentExecution?.workflowId ?? undefined);
}

/** What a run's listing and its description both say of it. */
export type RunInfo = Pick<
  WorkflowExecutionInfo,
  'workflowId' | 'runId' | 'typedSearchAttributes' | 'status' | 'startTime' | 'closeTime' | 'memo' | 'parentExecution'
>;

/** A run as `ops` and `history` show it; `currentStep` is asked apart (a running run's, of a worker). */
export function toOperationInfo(run: RunInfo, currentStep: string | null = null): OperationInfo {
  const attributes = run.typedSearchAttributes;
  const namespace = attributes.get(SEARCH_ATTRIBUTES.tableNamespace);
  const name = attributes.get(SEARCH_ATTRIBUTES.tableName);
  return {
    workflowId: run.workflowId,
    runId: run.runId,
    operation: attributes.get(SEARCH_ATTRIBUTES.tableOp) ?? 'unknown',
    tableId: attributes.get(SEARCH_ATTRIBUTES.tableId) ?? null,
    table: namespace !== undefined && name !== undefined ? `${namespace}.${name}` : null,
    status: run.status.name as OperationStatus,
    startedAt: run.startTime.toISOString(),
    closedAt: run.closeTime?.toISOString() ?? null,
    startedBy: startedByOf(run),
    currentStep,
  };
}

/**
 * The runs as OperationInfo, each running one with its current details, asked of a worker DETAILS_AT_ONCE at a time
 * within DETAILS_BUDGET_MS in all (`hasWorker` false: none is asked, as no worker would answer).
 */
export async function withCurrentSteps(client: Client, runs: WorkflowExecutionInfo[], hasWorker: boolean): Promise<OperationInfo[]> {
  const steps = new Map<string, string | null>();
  if (hasWorker) {
    const running = runs.filter((run) => run.status.name === 'RUNNING');
    const budgetEnd = Date.now() + DETAILS_BUDGET_MS;
    const next = async (): Promise<void> => {
      for (let run = running.shift(); run; run = running.shift()) {
        const deadline = Math.min(DETAILS_DEADLINE_MS, budgetEnd - Date.now());
        steps.set(run.runId, await currentDetails(client, run.workflowId, run.runId, deadline));
      }
    };
    await Promise.all(Array.from({ length: Math.min(DETAILS_AT_ONCE, running.length) }, next));
  }
  return runs.map((run) => toOperationInfo(run, steps.get(run.runId) ?? null));
}
