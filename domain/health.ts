import { TABLE_OPERATIONS, type TableOp } from './operations';
import type { TableState } from './states';
import type { TableName } from './names';
import type { CreateParams, TableRecord } from './table';

/**
 * What the reconciler looks for, and `tablefate doctor` reports: the ways a table can be left without the run
 * that should finish it. Pure: the survey gathers the facts (catalog rows, locks, running trash timers, the
 * sets on disk), and this file alone decides what they mean, so that the doctor and the reconciler can never
 * disagree.
 */

/** A shard's set of files as storage found it (one node, one area). */
export interface SetOnDisk {
  tableId: number;
  shard: number;
  node: string;
  area: 'live' | 'trash' | 'garbage';
  /** Whether every file of the set is there (a set half moved is split across areas). */
  whole: boolean;
  /** When a file of the set last changed (moved, written): ms since the epoch, by the node's clock. */
  changedAt: number;
}

/** A lock row, and whether the workflow run holding it has closed. */
export interface LockFact {
  resource: string;
  workflowId: string;
  runId: string;
  since: number;
  ownerClosed: boolean;
}

export interface HealthFacts {
  /** Every row that is not a purged tombstone, plus the rows of any table a set on disk names. */
  tables: readonly TableRecord[];
  locks: readonly LockFact[];
  /** Tables with a trash run waiting on their expiry. */
  trashTimers: ReadonlySet<number>;
  sets: readonly SetOnDisk[];
  /** ms since the epoch, by the same clock as `changedAt`. */
  now: number;
  /** How long a set must have been left alone before it may be collected. */
  orphanGraceMs: number;
}

export type Finding =
  /** A TRASHED table with no trash run waiting on its expiry: re-arm it (it purges at once if expired). */
  | { kind: 'missing-timer'; table: TableKey; droppedAt: number; expireAt: number; expired: boolean }
  /** A table in a transitional state that no running operation holds: run the same operation again. */
  | { kind: 'stuck'; table: TableKey; state: TableState; resume: TableOp }
  /** A lock whose holder has closed (terminated, timed out): release it. */
  | { kind: 'stale-lock'; resource: string; workflowId: string; runId: string; since: number }
  /** A set no catalog row accounts for, or a second copy in the wrong area: collect it once the grace is over. */
  | { kind: 'orphan'; set: SetOnDisk; why: string; collectableAt: number; collectable: boolean }
  /** A set in the wrong area with no copy where it belongs: its table's data. Reported, never collected. */
  | { kind: 'misplaced'; set: SetOnDisk; why: string };

export type FindingKind = Finding['kind'];

/** What starting an operation on a table needs to know of it. */
export interface TableKey extends TableName {
  id: number;
  shards: number;
  /** What its create asked for, so that a create resumed asks the same (absent in findings made before it was kept). */
  params?: CreateParams;
}

/** What the reconcile workflow is asked to do: repair, or only report what it would repair (the doctor). */
export interface ReconcileInput {
  catalogId?: string;
  mode: 'repair' | 'report';
}

/** What one reconcile run found and did, in its workflow result (and the doctor's report). */
export interface ReconcileReport {
  findings: Finding[];
  /** Findings not listed (a survey lists a bounded number). */
  omitted: number;
  /** Nodes not looked at: quarantined, or their worker did not answer. */
  skippedNodes: string[];
  /** One per finding acted on, in order: what was done, or why not. */
  actions: Array<{ finding: string; outcome: string }>;
  /** Findings left for the next pass (a pass makes at most a bounded number of repairs). */
  deferred: number;
}

/** The operation that finishes a table left in each transitional state (it resumes from that state), from the records. */
export const RESUMED_BY: Partial<Record<TableState, TableOp>> = Object.fromEntries(
  Object.values(TABLE_OPERATIONS).flatMap((op) => (op.resume ? op.resume.from.map((state) => [state, op.name]) : [])),
);

/** Where a table's sets belong in a settled state; null: nowhere (no set should exist). */
const HOME_AREA: Partial<Record<TableState, SetOnDisk['area'] | null>> = {
  READY: 'live',
  TRASHED: 'trash',
  CREATE_FAILED: null,
  PURGED: null,
};

/** Every finding in the facts, in a stable order: locks, tables by id, then sets. */
export function diagnose(facts: HealthFacts): Finding[] {
  return [...diagnoseTables(facts), ...diagnoseSets(facts)];
}

/** Whether a running workflow holds a table's lock: nothing about such a table is a finding. */
function busyTables(locks: readonly LockFact[]): (tableId: number) => boolean {
  const heldByRunning = new Set(locks.filter((l) => !l.ownerClosed).map((l) => l.resource));
  return (tableId) => heldByRunning.has(`table:${tableId}`);
}

/** What the catalog alone shows (a survey with no storage node's listing): stale locks, then tables by id. */
export function diagnoseTables(facts: Omit<HealthFacts, 'sets' | 'orphanGraceMs'>): Finding[] {
  const findings: Finding[] = [];
  const busy = busyTables(facts.locks);
  for (const lock of facts.locks) {
    if (lock.ownerClosed) {
      findings.push({ kind: 'stale-lock', resource: lock.resource, workflowId: lock.workflowId, runId: lock.runId, since: lock.since });
    }
  }
  const byId = new Map(facts.tables.map((t) => [t.id, t]));
  for (const table of [...byId.values()].sort((a, b) => a.id - b.id)) {
    if (busy(table.id)) continue;
    const resume = RESUMED_BY[table.state];
    const key: TableKey = { id: table.id, namespace: table.namespace, name: table.name, shards: table.params.shards, params: table.params };
    if (resume) findings.push({ kind: 'stuck', table: key, state: table.state, resume });
    if (table.state === 'TRASHED' && !facts.trashTimers.has(table.id)) {
      findings.push({
        kind: 'missing-timer',
        table: key,
        droppedAt: table.droppedAt!,
        expireAt: table.expireAt!,
        expired: table.expireAt! <= facts.now,
      });
    }
  }
  return findings;
}

/**
 * What the sets on disk show, set by set in the order given. Every copy of a shard is on the node its
 * placement names, so one node's sets (and the rows they name) are enough to judge that node's.
 */
export function diagnoseSets(facts: Omit<HealthFacts, 'trashTimers'>): Finding[] {
  const findings: Finding[] = [];
  const busy = busyTables(facts.locks);
  const byId = new Map(facts.tables.map((t) => [t.id, t]));
  for (const set of facts.sets) {
    if (busy(set.tableId)) continue;
    const verdict = judgeSet(set, byId.get(set.tableId), facts.sets);
    if (!verdict) continue;
    if (verdict.kind === 'misplaced') {
      findings.push({ kind: 'misplaced', set, why: verdict.why });
    } else {
      const collectableAt = set.changedAt + facts.orphanGraceMs;
      findings.push({ kind: 'orphan', set, why: verdict.why, collectableAt, collectable: collectableAt <= facts.now });
    }
  }
  return findings;
}

/** Whether a set belongs where it is; if not, whether it is a spare copy (orphan) or the table's data (misplaced). */
export function judgeSet(
  set: SetOnDisk,
  table: TableRecord | undefined,
  allSets: readonly SetOnDisk[],
): { kind: 'orphan' | 'misplaced'; why: string } | undefined {
  if (!table) return { kind: 'orphan', why: `no table ${set.tableId} in the catalog` };
  const placed = table.placement.some((p) => p.shard === set.shard && p.node === set.node);
  if (!placed) return { kind: 'orphan', why: `table ${table.id} places no shard ${set.shard} on ${set.node}` };
  // A table in transition has its sets in either area, by design; the operation (or its resumption) settles them.
  if (!(table.state in HOME_AREA)) return undefined;
  const home = HOME_AREA[table.state]!;
  if (home === null) return { kind: 'orphan', why: `table ${table.id} is ${table.state} and keeps no files` };
  if (set.area === home) return undefined;
  // Only a whole copy where the set belongs makes this one a spare: a set split across areas is the table's data.
  const homeCopy = allSets.some(
    (s) => s.tableId === set.tableId && s.shard === set.shard && s.node === set.node && s.area === home && s.whole,
  );
  return homeCopy
    ? { kind: 'orphan', why: `table ${table.id} is ${table.state}: a spare copy in ${set.area}, beside the one in ${home}` }
    : { kind: 'misplaced', why: `table ${table.id} is ${table.state} but this shard is in ${set.area}, not ${home}` };
}

/** One line per finding, for logs and the doctor's text output. */
export function describeFinding(f: Finding): string {
  switch (f.kind) {
    case 'missing-timer':
      return `table ${f.table.id} is TRASHED with no trash timer: re-arm it (${f.expired ? 'expired: purge now' : `expires ${new Date(f.expireAt).toISOString()}`})`;
    case 'stuck':
      return `table ${f.table.id} is ${f.state} and no operation holds it: run ${f.resume} again`;
    case 'stale-lock':
      return `lock ${f.resource} is held by ${f.workflowId}, which has closed: release it`;
    case 'orphan':
      return `${setLabel(f.set)}: ${f.why}: collect it${f.collectable ? '' : ` after ${new Date(f.collectableAt).toISOString()}`}`;
    case 'misplaced':
      return `${setLabel(f.set)}: ${f.why}: left for an operator`;
  }
}

function setLabel(set: SetOnDisk): string {
  return `shard t${set.tableId}-s${set.shard} in ${set.area} on ${set.node}`;
}
