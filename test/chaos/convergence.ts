import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import type { Catalog } from '../../catalog/catalog';
import { describeWorkflow, isTrashTimer, takeSnapshot, TRANSITIONAL_STATES, type Snapshot } from './observe';

/**
 * After the chaos, the product must come to rest by itself: every operation finished or compensated, every
 * lock released, every short trash expired and purged, and no workflow running but the timers of the tables
 * still in the trash. This waits for that, bounded, and says what is stuck when it does not happen.
 */

export interface Convergence {
  converged: boolean;
  waitedMs: number;
  /** Why it was not at rest at the last look; empty when it converged. */
  unsettled: string[];
  /** When it did not converge: what the server says about each workflow involved. */
  diagnosis: string[];
  snapshot: Snapshot;
}

const iso = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString());
const MAX_DIAGNOSED = 12;

/**
 * What keeps the system from being at rest. A trash expiring before `horizon` counts: the wait must see it
 * purged, not stop just before its timer fires. With `heldAtRest`, a held table in the trash is at rest whatever its
 * expiry: its hold keeps it there (the look at the holds before the run releases them).
 */
export function unsettledReasons(s: Snapshot, horizon: number, opts: { heldAtRest?: boolean } = {}): string[] {
  const reasons: string[] = [];
  const state = new Map(s.tables.map((t) => [t.id, t]));
  for (const t of s.tables) {
    const label = `table ${t.id} (${t.namespace}.${t.name})`;
    if (TRANSITIONAL_STATES.includes(t.state)) reasons.push(`${label} is ${t.state} since ${iso(t.updatedAt)}`);
    if (t.state === 'TRASHED' && t.expireAt !== null && t.expireAt <= horizon && !(opts.heldAtRest === true && t.hold !== null)) {
      const late = s.at - t.expireAt;
      const when = late >= 0 ? `expired ${(late / 1000).toFixed(1)} s ago` : `expires in ${(-late / 1000).toFixed(1)} s`;
      reasons.push(`${label} is TRASHED and ${when}`);
    }
  }
  for (const lock of s.locks) {
    reasons.push(`lock ${lock.resource} held by ${lock.workflowId} (run ${lock.runId}) since ${iso(lock.since)}`);
  }
  for (const wf of s.running) {
    const table = wf.tableId === undefined ? undefined : state.get(wf.tableId);
    if (isTrashTimer(wf) && table?.state === 'TRASHED') continue;
    reasons.push(
      isTrashTimer(wf)
        ? `trash workflow ${wf.workflowId} still runs for table ${String(wf.tableId)}, which is ${table?.state ?? 'not in the catalog'}`
        : `workflow ${wf.workflowId} (${wf.type}) still runs, since ${wf.startTime.toISOString()}`,
    );
  }
  return reasons;
}

/** The workflows worth asking the server about when the system did not come to rest. */
function suspects(s: Snapshot, horizon: number, heldAtRest: boolean): Array<{ workflowId: string; runId?: string }> {
  const found = new Map<string, { workflowId: string; runId?: string }>();
  for (const lock of s.locks) found.set(lock.workflowId, { workflowId: lock.workflowId, runId: lock.runId });
  const expiring = (t: Snapshot['tables'][number]) =>
    t.state === 'TRASHED' && t.expireAt !== null && t.expireAt <= horizon && !(heldAtRest && t.hold !== null);
  const stuck = new Set(s.tables.filter((t) => TRANSITIONAL_STATES.includes(t.state) || expiring(t)).map((t) => t.id));
  const byId = new Map(s.tables.map((t) => [t.id, t]));
  for (const wf of s.running) {
    const table = wf.tableId === undefined ? undefined : byId.get(wf.tableId);
    const atRest = isTrashTimer(wf) && table?.state === 'TRASHED';
    if (!atRest || stuck.has(table.id)) found.set(wf.workflowId, { workflowId: wf.workflowId, runId: wf.runId });
  }
  return [...found.values()].slice(0, MAX_DIAGNOSED);
}

export async function waitForConvergence(opts: {
  catalog: Catalog;
  temporal: Client;
  knownIds: () => Iterable<number>;
  timeoutMs: number;
  signal: AbortSignal;
  log: (line: string) => void;
  /** What the run knows of a worker identity (`<pid>@<host>`): whether it killed it, and when. */
  workerFate: (identity: string) => string;
  /** A held table in the trash is at rest past its expiry (while the run's holds are still on). */
  heldAtRest?: boolean;
}): Promise<Convergence> {
  const heldAtRest = opts.heldAtRest === true;
  const started = Date.now();
  const horizon = started + opts.timeoutMs;
  let lastReport = 0;
  for (;;) {
    let snapshot: Snapshot | undefined;
    let reasons: string[];
    try {
      snapshot = await takeSnapshot(opts.catalog, opts.temporal, opts.knownIds());
      reasons = unsettledReasons(snapshot, horizon, { heldAtRest });
    } catch (err) {
      reasons = [`cannot look: ${(err as Error).message.split('\n')[0]}`];
    }
    const waitedMs = Date.now() - started;
    if (snapshot && reasons.length === 0) return { converged: true, waitedMs, unsettled: [], diagnosis: [], snapshot };
    if (waitedMs >= opts.timeoutMs || opts.signal.aborted) {
      snapshot ??= await takeSnapshot(opts.catalog, opts.temporal, opts.knownIds());
      const diagnosis: string[] = [];
      for (const wf of suspects(snapshot, horizon, heldAtRest)) {
        diagnosis.push(await describeWorkflow(opts.temporal, wf.workflowId, wf.runId, opts.workerFate));
      }
      return { converged: false, waitedMs, unsettled: reasons, diagnosis, snapshot };
    }
    if (Date.now() - lastReport > 15_000) {
      lastReport = Date.now();
      opts.log(`converging: ${reasons.length} thing(s) not at rest, e.g. ${reasons[0]}`);
    }
    await sleep(1000);
  }
}
