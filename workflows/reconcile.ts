import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { log, proxyActivities, startChild, workflowInfo } from '@temporalio/workflow';
import { describeFinding, type Finding, type ReconcileInput, type ReconcileReport } from '../domain/health';
import { lockFor, OPERATIONS, resumption, storageQueue, TABLE_OPERATIONS } from '../domain/operations';
import type { Activities, NodeSurvey } from '../activities';
import type { Survey } from '../activities/housekeeping';
import { catalogCalls, type CatalogCalls } from './catalog-calls';
import { DROPPED_AT_MEMO } from '../domain/operation-runs';
import { takes } from './patches';
import type { trashExpiry } from './trash-expiry';

const SURVEY_RETRY = { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s', maximumAttempts: 5 } as const;

/**
 * A survey takes about a second even over 100,000 rows; one that runs this long is given up and tried again, rather
 * than hold the pass, and with it every later pass (the schedule skips while one runs), for longer.
 */
const SURVEY_TIMEOUT = '1 minute';

/**
 * A survey beats every second while it runs (activities/heartbeat.ts): one lost with its worker is tried again after
 * this long, not at the end of SURVEY_TIMEOUT, so that a pass outlives a worker's death by seconds.
 */
const SURVEY_HEARTBEAT = '10 seconds';

/** The survey reads the whole catalog: an ordinary activity, retried a few times. */
const housekeeping = proxyActivities<Pick<Activities, 'surveyHealth' | 'releaseStaleLocks'>>({
  startToCloseTimeout: SURVEY_TIMEOUT,
  heartbeatTimeout: SURVEY_HEARTBEAT,
  retry: SURVEY_RETRY,
});

/**
 * Each node's sets are listed by the node's own worker. A node whose worker does not pick the survey up within
 * 20 s (a live one takes milliseconds) is reported as not looked at, rather than holding the whole pass (and
 * the doctor, which waits 60 s) until it is back.
 */
function nodeSurvey(node: string) {
  return proxyActivities<Pick<Activities, 'surveyNode'>>({
    taskQueue: storageQueue(workflowInfo().taskQueue, node),
    scheduleToStartTimeout: '20 seconds',
    startToCloseTimeout: SURVEY_TIMEOUT,
    heartbeatTimeout: SURVEY_HEARTBEAT,
    retry: SURVEY_RETRY,
  }).surveyNode;
}

/** An orphan set is collected by the worker of the node that holds it, which heartbeats while it deletes. */
function orphanCollector(node: string) {
  return proxyActivities<Pick<Activities, 'collectOrphan'>>({
    taskQueue: storageQueue(workflowInfo().taskQueue, node),
    startToCloseTimeout: '5 minutes',
    heartbeatTimeout: '20s',
    retry: { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '10s' },
  }).collectOrphan;
}

/** The catalog's survey, then every node's survey of its own sets, at once; findings in the catalog's order, then by node. */
async function survey(catalogId: string | undefined): Promise<Survey> {
  const tables = await housekeeping.surveyHealth({ catalogId, sets: false });
  const nodes = await Promise.all(
    tables.nodes.map((node) =>
      nodeSurvey(node)({ catalogId, node }).catch((err: unknown): NodeSurvey => {
        log.warn('a storage node was not surveyed', { node, error: String(err) });
        return { skipped: true };
      }),
    ),
  );
  const result: Survey = { ...tables, findings: [...tables.findings] };
  nodes.forEach((answer, i) => {
    if (answer.skipped) {
      result.skippedNodes.push(tables.nodes[i]!);
      return;
    }
    result.findings.push(...answer.findings);
    result.omitted += answer.omitted;
  });
  return result;
}

/** At most this many repairs per pass (a few events each): a pass's history stays far below the server's limits. */
const REPAIRS_PER_PASS = 200;

/**
 * The reconciler, run by the `tablefate-reconcile` schedule: finds every table left without the run that should
 * finish it (domain/health.ts says what counts) and hands it back to the operation that does, the same one a
 * user would run. It never changes a table itself, and never touches a table a running operation holds: a
 * re-armed timer or a resumed operation takes the table's lock like any other. In `report` mode (the doctor) it
 * only says what it would do.
 */
export async function reconcileTables(input: ReconcileInput): Promise<ReconcileReport> {
  const found = await survey(input.catalogId);
  const report: ReconcileReport = {
    findings: found.findings,
    omitted: found.omitted,
    skippedNodes: found.skippedNodes,
    actions: [],
    deferred: 0,
  };
  if (input.mode === 'report') return report;

  const calls = catalogCalls(input.catalogId);
  // Stale locks first: a stuck table's operation can then take its lock at once.
  const ordered = [...found.findings].sort((a, b) => Number(b.kind === 'stale-lock') - Number(a.kind === 'stale-lock'));
  // The runs this pass has started: the tables of a drop of several as one are each found stuck, and resumed by one run.
  const resumed = new Set<string>();
  for (const finding of ordered) {
    // A pass's history stays small however much there is to do: the rest waits for the next pass.
    if (report.actions.length >= REPAIRS_PER_PASS) {
      report.deferred++;
      continue;
    }
    // One repair that fails (a node down, say) must not keep the others from running; the next pass retries it.
    const outcome = await repair(finding, calls, input, found, resumed).catch((err: unknown) => `failed: ${String(err)}`);
    if (outcome === undefined) continue;
    const line = describeFinding(finding);
    log.info('reconciled', { finding: line, outcome });
    report.actions.push({ finding: line, outcome });
  }
  return report;
}

async function repair(
  finding: Finding,
  calls: CatalogCalls,
  input: ReconcileInput,
  { retentionOf, droppedByOf, cascadeOf }: Pick<Survey, 'retentionOf' | 'droppedByOf' | 'cascadeOf'>,
  resumed: Set<string>,
): Promise<string | undefined> {
  const { catalogId } = input;
  switch (finding.kind) {
    case 'stale-lock': {
      const holder = { workflowId: finding.workflowId, runId: finding.runId, resource: finding.resource, since: finding.since };
      return (await housekeeping.releaseStaleLocks({ catalogId, holder })) ? 'released' : 'kept: its holder is running again';
    }
    case 'missing-timer': {
      const { table } = finding;
      const expiry = OPERATIONS.expiry;
      const workflowId = expiry.workflowId(table.id, catalogId);
      if (!takes('dropEndsAtTrashed')) return start(OPERATIONS.trash.name, table, () => rearmV19(workflowId, finding, catalogId));
      return start(expiry.name, table, () =>
        startChild<typeof trashExpiry>(expiry.workflowType, {
          workflowId,
          args: [{ tableId: table.id, catalogId, droppedAt: finding.droppedAt }],
          memo: { [DROPPED_AT_MEMO]: finding.droppedAt },
          typedSearchAttributes: expiry.searchAttributes({ tableId: table.id, namespace: table.namespace, name: table.name }),
          parentClosePolicy: 'ABANDON',
        }),
      );
    }
    case 'stuck': {
      // The operation that left the table half way, run again as its record says: it resumes from that state.
      const { table } = finding;
      const op = TABLE_OPERATIONS[finding.resume];
      // (A survey recorded before droppedByOf was kept has none: the drop's dropper then stays unknown.)
      const again = resumption(op, table, {
        catalogId,
        retentionSeconds: retentionOf[table.id],
        droppedBy: droppedByOf?.[table.id],
        cascade: cascadeOf?.[table.id],
      });
      if (!again) return undefined;
      if (resumed.has(again.workflowId)) return `resumed with the other tables of its drop (${again.workflowId})`;
      resumed.add(again.workflowId);
      // (A pass started on v19 resumes a drop as v19 did: in the table's trash run, which its request id routes to v19's code.)
      const v19 = op.name === OPERATIONS.trash.name && !takes('dropEndsAtTrashed');
      return start(op.name, table, () =>
        startChild(again.workflowType, {
          typedSearchAttributes: op.searchAttributes({ tableId: table.id, namespace: table.namespace, name: table.name }),
          parentClosePolicy: 'ABANDON',
          workflowId: v19 ? OPERATIONS.expiry.workflowId(table.id, catalogId) : again.workflowId,
          args: [v19 ? { ...(again.input as object), requestId: `reconcile:${workflowInfo().runId}` } : again.input],
        }),
      );
    }
    case 'orphan': {
      if (!finding.collectable) return undefined;
      const lock = await calls.tryLock(lockFor.table(finding.set.tableId));
      if (!lock.acquired) return `skipped: ${lock.holder} holds the table`;
      try {
        const done = await orphanCollector(finding.set.node)({ catalogId, set: finding.set });
        return done === 'collected' ? 'collected' : 'kept: no longer an orphan on a second look';
      } finally {
        await calls.releaseLocks();
      }
    }
    case 'misplaced':
      return 'left for an operator';
    case 'outside-change':
      // A table dropped, renamed or moved by hand is an operator's to look at: the reconciler never touches it, and
      // counts no action (no repair budget spent, nothing started: the commands of a pass are what they were).
      return undefined;
  }
}

/** The re-arm a pass started on v19 makes: a trash run at the expiry's id, routed to v19's code (workflows/index.ts). */
function rearmV19(workflowId: string, finding: Extract<Finding, { kind: 'missing-timer' }>, catalogId: string | undefined) {
  const { table, droppedAt } = finding;
  return startChild('trashTable', {
    workflowId,
    args: [{ tableId: table.id, catalogId, requestId: `reconcile:${workflowInfo().runId}`, rearm: { droppedAt } }],
    typedSearchAttributes: OPERATIONS.trash.searchAttributes({ tableId: table.id, namespace: table.namespace, name: table.name }),
    parentClosePolicy: 'ABANDON',
  });
}

/** Starts the operation that finishes a table; one already running under that id is finishing it. */
async function start(op: string, table: { id: number }, startIt: () => Promise<unknown>): Promise<string> {
  try {
    await startIt();
    return `started ${op} of table ${table.id}`;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return `${op} of table ${table.id} already running`;
    throw err;
  }
}
