import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import type { Catalog } from '../../catalog/catalog';
import type { TableRecord } from '../../domain/table';
import { checkAnswers, describeOp } from './answers';
import type { Convergence } from './convergence';
import type { WorkerExit } from './monkey';
import {
  isTrashTimer,
  readDoorRequests,
  runningTrashWorkflows,
  runsOf,
  takeSnapshot,
  TRANSITIONAL_STATES,
  type DoorRequest,
} from './observe';
import type { Problem } from './problems';
import { idsMentioned, type OpRecord } from './ops';
import { checkPolicyAnswers, type FinalRelease } from './policies';
import type { NodeDatabase } from './rows';
import { DOOR_COUNT_SCHEMA } from './sql-caller';
import { checkTruncateAnswers } from './truncate-answers';

/**
 * Every invariant, checked after the run came to rest (or gave up waiting). All of them are checked, and
 * every violation is collected: one broken rule often explains another, and the lead wants to see them all.
 */

/** What the storage checks of a driver found (files.ts for files, tables.ts for postgres). */
export interface StorageFindings {
  problems: Problem[];
  notes: string[];
  /** One line for the report: what was compared (checksums, rows). */
  summary: string;
}

export interface World {
  catalog: Catalog;
  temporal: Client;
  /**
   * The storage checks of the run's driver, given every table of the catalog at rest. Run last: the postgres
   * checks recall the trashed tables, which changes the catalog the other checks read.
   */
  checkStorage: (tables: readonly TableRecord[]) => Promise<StorageFindings>;
  /** `--caller sql`: the storage nodes, reached as the worker's role, whose SQL door's requests are checked. */
  doorNodes?: readonly NodeDatabase[];
}

export interface Evidence {
  ops: readonly OpRecord[];
  convergence: Convergence;
  workerExits: readonly WorkerExit[];
  /** The user's own tables hold some of the scenario's names (postgres driver): a create may find its name taken. */
  userTables?: boolean;
  /**
   * The run's storage driver (files when absent): with postgres or mariadb a drop may be TableBusy for sessions, not
   * leases, and HasDependents for what the user made on the table (views, keys, ...).
   */
  driver?: 'files' | 'postgres' | 'mariadb';
  /** The releases of every hold the run made before the last wait for rest: from then on no table is held. */
  finalReleases?: readonly FinalRelease[];
}

export interface Findings {
  problems: Problem[];
  notes: string[];
  tables: number;
  storageSummary: string;
  door?: DoorSummary;
}

/** What the end of a `--caller sql` run found of the SQL door's requests on the nodes. */
export interface DoorSummary {
  requests: number;
  answered: number;
  /** Answered with a table: after a run of their own, or at their plan (the answer was there without a run). */
  answeredOk: number;
  answeredAtPlan: number;
  /** Answered with tablefate's refusal or failure, by type. */
  answeredWithError: Record<string, number>;
  /** Requests whose workflow id was looked up in the server's visibility. */
  runsChecked: number;
  /** From each answered request's commit to its answer, in seconds: the median, the 90th percentile, the longest. */
  answerSeconds: { median: number; p90: number; max: number } | null;
}

/** A trash whose expiry passed this long ago must be purged by now (the timer has had time to fire). */
const EXPIRY_GRACE_MS = 2000;
/** The worker's exit code for a fatal storage error (files in an unknown state). */
const EX_SOFTWARE = 70;

const iso = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString());

/** Tables whose count of running trash workflows is not 1, asked again after a pause (visibility can lag). */
async function tablesWithoutOneTimer(temporal: Client, candidates: readonly number[]): Promise<Map<number, number>> {
  const wrong = new Map<number, number>();
  if (candidates.length === 0) return wrong;
  await sleep(3000);
  for (const id of candidates) {
    const count = (await runningTrashWorkflows(temporal, id)).length;
    if (count !== 1) wrong.set(id, count);
  }
  return wrong;
}

export async function checkInvariants(world: World, evidence: Evidence): Promise<Findings> {
  const problems: Problem[] = [];
  const notes: string[] = [];
  const { convergence } = evidence;

  if (!convergence.converged) {
    problems.push({
      invariant: 'convergence',
      detail: `not at rest after ${(convergence.waitedMs / 1000).toFixed(0)} s: ${convergence.unsettled.length} thing(s) stuck (detailed below)`,
    });
    for (const line of convergence.diagnosis) problems.push({ invariant: 'stuck', detail: line });
  }

  const snapshot = await takeSnapshot(world.catalog, world.temporal, idsMentioned(evidence.ops));
  const byId = new Map(snapshot.tables.map((t) => [t.id, t]));

  for (const lock of snapshot.locks) {
    problems.push({
      invariant: 'locks',
      detail: `lock ${lock.resource} held by ${lock.workflowId} (run ${lock.runId}) since ${iso(lock.since)}`,
    });
  }
  // The run released every hold before this last wait for rest (policies.ts): no table is held now, and a table
  // whose hold was released (by a client, or by the run) is purged once its expiry passed, as any other.
  const finalReleases = evidence.finalReleases ?? [];
  for (const release of finalReleases) {
    if (release.outcome.kind !== 'ok') {
      problems.push({
        invariant: 'holds',
        detail:
          `the run's release of table ${release.tableId}'s hold (${release.state}) at ${iso(release.at)} answered ` +
          (release.outcome.kind === 'rejected' || release.outcome.kind === 'failed'
            ? `${release.outcome.type}: ${release.outcome.message}`
            : `nothing: ${release.outcome.kind === 'unknown' ? release.outcome.reason : ''}`),
      });
    }
  }
  const releasedAt = (id: number): number | undefined => {
    const times = [
      ...finalReleases.filter((r) => r.tableId === id && r.outcome.kind === 'ok').map((r) => r.at),
      ...evidence.ops
        .filter((op) => op.request.kind === 'release' && op.request.tableId === id && op.outcome.kind === 'ok')
        .map((op) => op.endedAt),
    ];
    return times.length === 0 ? undefined : Math.max(...times);
  };
  for (const t of snapshot.tables) {
    const label = `table ${t.id} (${t.namespace}.${t.name})`;
    if (TRANSITIONAL_STATES.includes(t.state)) {
      problems.push({ invariant: 'states', detail: `${label} is ${t.state} since ${iso(t.updatedAt)}` });
    }
    if (t.hold !== null) {
      problems.push({
        invariant: 'holds',
        detail: `${label} (${t.state}) is still held (${JSON.stringify(t.hold)}) after the run released every hold`,
      });
    }
    if (t.state === 'TRASHED' && t.expireAt !== null && t.expireAt < snapshot.at - EXPIRY_GRACE_MS) {
      const released = releasedAt(t.id);
      if (t.hold === null && released !== undefined) {
        problems.push({
          invariant: 'holds',
          detail: `${label} expired at ${iso(t.expireAt)}, its hold was released at ${iso(released)}, and it is still TRASHED`,
        });
      } else {
        problems.push({ invariant: 'expiry', detail: `${label} expired at ${iso(t.expireAt)} and is still TRASHED` });
      }
    }
  }
  // Every table in the trash has its timer running, exactly one (the list can lag: doubtful ones are asked again).
  const trashed = snapshot.tables.filter((t) => t.state === 'TRASHED');
  const doubtful = trashed.filter((t) => snapshot.running.filter((wf) => isTrashTimer(wf) && wf.tableId === t.id).length !== 1);
  const wrongTimers = await tablesWithoutOneTimer(
    world.temporal,
    doubtful.map((t) => t.id),
  );
  for (const t of trashed) {
    const timers = wrongTimers.get(t.id);
    if (timers === undefined) continue;
    problems.push({
      invariant: 'workflows',
      detail: `table ${t.id} (${t.namespace}.${t.name}) is TRASHED (expires ${iso(t.expireAt)}) with ${timers} running trash workflows, not 1`,
    });
  }
  for (const wf of snapshot.running) {
    const table = wf.tableId === undefined ? undefined : byId.get(wf.tableId);
    if (isTrashTimer(wf) && table?.state === 'TRASHED') continue;
    problems.push({
      invariant: 'workflows',
      detail: isTrashTimer(wf)
        ? `trash workflow ${wf.workflowId} still runs, but table ${String(wf.tableId)} is ${table?.state ?? 'not in the catalog'}`
        : `workflow ${wf.workflowId} (${wf.type}, table ${String(wf.tableId)}) still runs at rest, since ${wf.startTime.toISOString()}`,
    });
  }

  const answers = checkAnswers(evidence.ops, byId, { userTables: evidence.userTables, families: (evidence.driver ?? 'files') !== 'files' });
  problems.push(...answers.problems);
  notes.push(...answers.notes);
  const policies = checkPolicyAnswers(evidence.ops, byId, { driver: evidence.driver ?? 'files' });
  problems.push(...policies.problems);
  notes.push(...policies.notes);
  problems.push(...checkTruncateAnswers(evidence.ops, byId).problems);

  for (const exit of evidence.workerExits) {
    if (exit.code === EX_SOFTWARE) {
      problems.push({
        invariant: 'worker',
        detail: `a worker stopped on a fatal storage error (exit ${EX_SOFTWARE}): files in an unknown state`,
      });
    } else if (!exit.serverTrouble) {
      notes.push(`a worker exited on its own (code ${String(exit.code)}, signal ${String(exit.signal)}) while the server was fine`);
    }
  }
  let door: DoorSummary | undefined;
  if (world.doorNodes) {
    const found = await checkDoorRequests(world.temporal, world.doorNodes, evidence.ops);
    problems.push(...found.problems);
    door = found.summary;
  }
  const storage = await world.checkStorage(snapshot.tables);
  problems.push(...storage.problems);
  notes.push(...storage.notes);
  return { problems, notes, tables: snapshot.tables.length, storageSummary: storage.summary, ...(door ? { door } : {}) };
}

/** How long the end of the run waits for the door's requests to be answered once everything else is at rest. */
const DOOR_ANSWERS_WAIT_MS = 30_000;

/**
 * The SQL door's requests at rest (`--caller sql`): every request on every node answered, each answer written once (the
 * run's trigger counted each turn to 'answered'), each request that ran answered by a run of its own (but a retention
 * change, an update of the table's expiry run): its workflow id is the operation's with `~sql.<node>.<request id>.<uuid8>`
 * before the catalog, and the server lists exactly one run of it when it was answered with a table (never two, whatever
 * the answer); and each call that named its request was answered what the request holds.
 */
export async function checkDoorRequests(
  temporal: Client,
  nodes: readonly NodeDatabase[],
  ops: readonly OpRecord[],
): Promise<{ problems: Problem[]; summary: DoorSummary }> {
  const problems: Problem[] = [];
  const problem = (detail: string) => problems.push({ invariant: 'door', detail });
  const readAll = async () => (await Promise.all(nodes.map((n) => readDoorRequests(n.node, n.url, DOOR_COUNT_SCHEMA)))).flat();
  const until = Date.now() + DOOR_ANSWERS_WAIT_MS;
  let requests = await readAll();
  while (requests.some((r) => r.state !== 'answered') && Date.now() < until) {
    await sleep(1000);
    requests = await readAll();
  }
  const summary: DoorSummary = {
    requests: requests.length,
    answered: 0,
    answeredOk: 0,
    answeredAtPlan: 0,
    answeredWithError: {},
    runsChecked: 0,
    answerSeconds: null,
  };
  const waits = requests
    .filter((r) => r.answeredAt !== null)
    .map((r) => (r.answeredAt!.getTime() - r.requestedAt.getTime()) / 1000)
    .sort((a, b) => a - b);
  if (waits.length > 0) {
    const at = (q: number) => waits[Math.min(waits.length - 1, Math.floor(q * waits.length))]!;
    summary.answerSeconds = { median: at(0.5), p90: at(0.9), max: waits[waits.length - 1]! };
  }
  const labelOf = (r: DoorRequest) => `${r.node} request ${r.id} (${r.op} ${JSON.stringify(r.args)}, ${r.applicationName ?? '-'})`;
  const doubtful: Array<{ request: DoorRequest; runs: number }> = [];
  for (const r of requests) {
    const label = labelOf(r);
    if (r.state !== 'answered') {
      problem(
        `${label} is still ${r.state} ${DOOR_ANSWERS_WAIT_MS / 1000} s after the run came to rest: asked at ${iso(r.requestedAt.getTime())}, ` +
          `planned by ${r.claimedBy ?? '-'} at ${iso(r.pickedAt?.getTime() ?? null)}, run ${r.workflowId ?? 'none recorded'}`,
      );
      if (r.answersWritten > 0) problem(`${label} is ${r.state}, but its answer was written ${r.answersWritten} time(s)`);
      continue;
    }
    summary.answered++;
    if (r.answersWritten !== 1) {
      problem(`${label} was answered ${r.answersWritten} times (${DOOR_COUNT_SCHEMA}.answers), not once: now ${describeAnswer(r)}`);
    }
    if (r.sqlstate === null) {
      summary.answeredOk++;
      if (r.answer === null) problem(`${label} is answered with neither a table nor an error`);
      if (r.plan === null) summary.answeredAtPlan++;
    } else {
      const type = r.errorType ?? '?';
      summary.answeredWithError[type] = (summary.answeredWithError[type] ?? 0) + 1;
    }
    const ownKey = `~sql.${r.node}.${r.id}.${r.requestUuid.slice(0, 8)}@`;
    if (r.workflowId === null) {
      // (A retention change starts no run: it is an update of the table's expiry run, whose id is the table's own.)
      if (r.sqlstate === null && r.plan !== null && r.op !== 'retention') {
        problem(`${label} was planned and answered ${describeAnswer(r)}, but no run is recorded`);
      }
      continue;
    }
    if (!r.workflowId.includes(ownKey)) problem(`${label}'s run ${r.workflowId} is not a run of its own (${ownKey})`);
    summary.runsChecked++;
    const runs = (await runsOf(temporal, r.workflowId)).length;
    if (runs > 1 || (r.sqlstate === null && r.plan !== null && runs !== 1)) doubtful.push({ request: r, runs });
  }
  // (Visibility can lag a moment behind the histories: asked again after a pause.)
  if (doubtful.length > 0) await sleep(3000);
  for (const { request: r } of doubtful) {
    const runs = await runsOf(temporal, r.workflowId!);
    if (runs.length > 1 || (r.sqlstate === null && r.plan !== null && runs.length !== 1)) {
      problem(
        `${labelOf(r)}, answered ${describeAnswer(r)}, has ${runs.length} runs of ${r.workflowId}, not ${r.sqlstate === null ? '1' : 'at most 1'}` +
          (runs.length > 0 ? `: ${runs.map((run) => `${run.runId} ${run.status}`).join(', ')}` : ''),
      );
    }
  }
  // Each call that named its request was answered what the request holds.
  const byKey = new Map(requests.map((r) => [`${r.node}/${r.id}`, r]));
  for (const op of ops) {
    const door = op.door;
    if (door?.requestId === undefined) continue;
    const r = byKey.get(`${door.node}/${door.requestId}`);
    if (!r) {
      problem(`${describeOp(op)} through ${door.node}'s door named request ${door.requestId}, which the node does not have`);
      continue;
    }
    const { outcome } = op;
    if (outcome.kind === 'ok' && (r.sqlstate !== null || r.answer?.id !== outcome.table.id || r.answer?.state !== outcome.table.state)) {
      problem(
        `${describeOp(op)} was answered table ${outcome.table.id} ${outcome.table.state}, but ${labelOf(r)} holds ${describeAnswer(r)}`,
      );
    }
    if (outcome.kind === 'rejected' && door.errorType !== undefined && !door.refusedBeforeRequest && r.errorType !== door.errorType) {
      problem(`${describeOp(op)} was answered ${door.errorType}, but ${labelOf(r)} holds ${describeAnswer(r)}`);
    }
  }
  return { problems, summary };
}

function describeAnswer(r: DoorRequest): string {
  if (r.state !== 'answered') return r.state;
  return r.sqlstate === null
    ? `table ${String(r.answer?.id)} ${String(r.answer?.state)}`
    : `${r.errorType ?? '?'} (${r.sqlstate}): ${r.message ?? ''}`;
}
