import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import type { Catalog } from '../../catalog/catalog';
import type { TableRecord } from '../../domain/table';
import { checkAnswers } from './answers';
import type { Convergence } from './convergence';
import type { WorkerExit } from './monkey';
import { isTrashTimer, runningTrashWorkflows, takeSnapshot, TRANSITIONAL_STATES } from './observe';
import type { Problem } from './problems';
import { idsMentioned, type OpRecord } from './scenario';
import { checkPolicyAnswers, type FinalRelease } from './policies';

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
}

export interface Evidence {
  ops: readonly OpRecord[];
  convergence: Convergence;
  workerExits: readonly WorkerExit[];
  /** The user's own tables hold some of the scenario's names (postgres driver): a create may find its name taken. */
  userTables?: boolean;
  /** The run's storage driver (files when absent): with postgres a drop may be TableBusy for sessions, not leases. */
  driver?: 'files' | 'postgres';
  /** The releases of every hold the run made before the last wait for rest: from then on no table is held. */
  finalReleases?: readonly FinalRelease[];
}

export interface Findings {
  problems: Problem[];
  notes: string[];
  tables: number;
  storageSummary: string;
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

  const answers = checkAnswers(evidence.ops, byId, { userTables: evidence.userTables });
  problems.push(...answers.problems);
  notes.push(...answers.notes);
  const policies = checkPolicyAnswers(evidence.ops, byId, { driver: evidence.driver ?? 'files' });
  problems.push(...policies.problems);
  notes.push(...policies.notes);

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
  const storage = await world.checkStorage(snapshot.tables);
  problems.push(...storage.problems);
  notes.push(...storage.notes);
  return { problems, notes, tables: snapshot.tables.length, storageSummary: storage.summary };
}
