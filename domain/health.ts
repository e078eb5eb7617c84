import { TABLE_OPERATIONS, type TableOp } from './operations';
import { type ReconcileInput, type TableKey } from './operation-inputs';
import type { TableState } from './states';
import { formatTableName, liveShardName } from './names';
import type { TableRecord } from './table';

// (Declared with the operations, which start from them: said here too for whoever reads the findings.)
export type { ReconcileInput, TableKey };

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

/**
 * A shard table as a driver that records what it placed (PostgreSQL: `tablefate.shards`, by oid) has it in its record,
 * and how what the node holds under that identity now differs from it.
 */
export interface RecordedShardTable {
  tableId: number;
  shard: number;
  node: string;
  /** The area it is in, when it is as tablefate left it (then it is among the sets too); null when it is not (see `differences`). */
  area: SetOnDisk['area'] | null;
  /** The schema and name tablefate last gave it (its record). */
  schema: string;
  table: string;
  /**
   * Each way it differs from its record, in words: dropped, renamed, moved to another schema, its identity now naming
   * something that is not a table, its owner changed, outside tablefate; and notes a move left (a foreign key a recall
   * could not validate). Empty when it is as tablefate left it.
   */
  differences: string[];
}

/** What the records of the nodes that keep them say (absent for a driver that keeps none: files). */
export interface RecordedShardTables {
  /** The nodes whose record was read: every shard table the catalog places there should be in `tables`. */
  nodes: readonly string[];
  /** When the listing began, by the node's clock: a table whose row changed since may have moved meanwhile. */
  listedAt: number;
  tables: readonly RecordedShardTable[];
}

export interface HealthFacts {
  /** Every row that is not a purged tombstone, plus the rows of any table a set on disk names. */
  tables: readonly TableRecord[];
  locks: readonly LockFact[];
  /** Tables with a trash run waiting on their expiry. */
  trashTimers: ReadonlySet<number>;
  sets: readonly SetOnDisk[];
  /** The records of the shard tables, on the nodes whose driver keeps them (PostgreSQL). */
  recorded?: RecordedShardTables;
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
  | { kind: 'misplaced'; set: SetOnDisk; why: string }
  /**
   * A shard table that is not as tablefate left it (dropped, renamed, moved, its owner changed by hand), or not where
   * the catalog says: each difference in words. `table` is the catalog's key when it knows the table, its id alone
   * otherwise. Reported, never acted on: the reconciler does not touch such a table.
   */
  | { kind: 'outside-change'; table: TableKey | { id: number }; shard: number; node: string; differences: string[] };

export type FindingKind = Finding['kind'];

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

/** The settled states whose every shard a node's record holds (a failed create's and a purged table's hold none). */
const RECORDED_STATES: ReadonlySet<TableState> = new Set<TableState>(['READY', 'TRASHED']);

/** How far the clocks of the catalog's writers and a storage node may disagree (see diagnoseRecorded). */
const CLOCK_MARGIN_MS = 1_000;

/** Every finding in the facts, in a stable order: locks, tables by id, then sets, then shard tables changed. */
export function diagnose(facts: HealthFacts): Finding[] {
  return [...diagnoseTables(facts), ...diagnoseSets(facts)];
}

/** Whether a running workflow holds a table's lock: nothing about such a table is a finding. */
function busyTables(locks: readonly LockFact[]): (tableId: number) => boolean {
  const heldByRunning = new Set(locks.filter((l) => !l.ownerClosed).map((l) => l.resource));
  return (tableId) => heldByRunning.has(`table:${tableId}`);
}

/** What a survey names a table by: the operation that finishes it needs no more. */
function keyOf(table: TableRecord): TableKey {
  return {
    id: table.id,
    namespace: table.namespace,
    name: table.name,
    shards: table.params.shards,
    params: table.params,
    ...(table.droppedWith && table.droppedWith.length > 0 ? { droppedWith: table.droppedWith } : {}),
  };
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
    const key = keyOf(table);
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
 * What the sets on disk show, set by set in the order given, then what the nodes' records of their shard tables
 * show (diagnoseRecorded). Every copy of a shard is on the node its placement names, so one node's sets (and the
 * rows they name) are enough to judge that node's.
 */
export function diagnoseSets(facts: Omit<HealthFacts, 'trashTimers'>): Finding[] {
  const findings: Finding[] = [];
  const busy = busyTables(facts.locks);
  const byId = new Map(facts.tables.map((t) => [t.id, t]));
  const truncating = truncatingInto(facts.tables);
  for (const set of facts.sets) {
    if (busy(set.tableId)) continue;
    const verdict = judgeSet(set, byId.get(set.tableId) ?? truncating.get(set.tableId), facts.sets);
    if (!verdict) continue;
    if (verdict.kind === 'misplaced') {
      findings.push({ kind: 'misplaced', set, why: verdict.why });
    } else {
      const collectableAt = set.changedAt + facts.orphanGraceMs;
      findings.push({ kind: 'orphan', set, why: verdict.why, collectableAt, collectable: collectableAt <= facts.now });
    }
  }
  return [...findings, ...diagnoseRecorded(facts)];
}

/**
 * What the records of the shard tables show (`recorded`), record by record in the order given, then the shards the
 * catalog places on a node whose record lacks them, by table id and shard:
 *
 * - every difference the driver found between a record and what its node holds under that identity (dropped, renamed,
 *   moved, another kind or owner), whatever the catalog says, a table an operation holds included: these are facts of
 *   the node, each one read in one look, never a move half seen;
 * - for a table the catalog has READY whose shard is live as recorded, a name other than the catalog's;
 * - for a table the catalog has READY or TRASHED, a shard its placement puts on a node whose record has none.
 *
 * The last two compare the catalog with the record, so they skip a table an operation holds, or whose row changed since
 * the listing began (an operation that ended meanwhile: the next pass looks again). A set outside its area, or of no
 * table, is the sets' business (misplaced, orphan), not repeated here.
 */
export function diagnoseRecorded(facts: Pick<HealthFacts, 'tables' | 'locks' | 'recorded'>): Finding[] {
  const recorded = facts.recorded;
  if (!recorded) return [];
  const busy = busyTables(facts.locks);
  const byId = new Map(facts.tables.map((t) => [t.id, t]));
  // Whether the catalog's row is settled and old enough to compare with a record listed at `listedAt`.
  const comparable = (table: TableRecord | undefined): table is TableRecord =>
    table !== undefined && RECORDED_STATES.has(table.state) && !busy(table.id) && table.updatedAt < recorded.listedAt - CLOCK_MARGIN_MS;
  const findings: Finding[] = [];
  const seen = new Set<string>();
  for (const r of recorded.tables) {
    seen.add(`${r.node}/${r.tableId}/${r.shard}`);
    const table = byId.get(r.tableId);
    const differences = [...r.differences];
    if (comparable(table) && table.state === 'READY' && r.area === 'live' && placedOn(table, r.shard, r.node)) {
      const live = liveShardName({ namespace: table.namespace, name: table.name, shards: table.params.shards }, r.shard);
      if (live.schema !== r.schema || live.table !== r.table)
        differences.push(
          `the catalog names it ${live.schema}.${live.table}, but tablefate's record on ${r.node} has it as ${r.schema}.${r.table}`,
        );
    }
    if (differences.length > 0)
      findings.push({ kind: 'outside-change', table: table ? keyOf(table) : { id: r.tableId }, shard: r.shard, node: r.node, differences });
  }
  const audited = new Set(recorded.nodes);
  for (const table of [...byId.values()].sort((a, b) => a.id - b.id)) {
    if (!comparable(table)) continue;
    for (const { shard, node } of [...table.placement].sort((a, b) => a.shard - b.shard)) {
      if (!audited.has(node) || seen.has(`${node}/${table.id}/${shard}`)) continue;
      findings.push({
        kind: 'outside-change',
        table: keyOf(table),
        shard,
        node,
        differences: [
          `the catalog has it ${table.state} with this shard on ${node}, but ${node} keeps no record of it: it was never placed there, or its record was deleted outside tablefate`,
        ],
      });
    }
  }
  return findings;
}

function placedOn(table: TableRecord, shard: number, node: string): boolean {
  return table.placement.some((p) => p.shard === shard && p.node === node);
}

/**
 * The tables truncating, by the id of the trash entry each moves its rows into: that entry has no row of its own before
 * the truncate commits, and its sets are the truncating table's until then.
 */
export function truncatingInto(tables: readonly TableRecord[]): Map<number, TableRecord> {
  return new Map(tables.flatMap((t) => (t.state === 'TRUNCATING' && t.truncateInto !== undefined ? [[t.truncateInto, t]] : [])));
}

/**
 * Whether a set belongs where it is; if not, whether it is a spare copy (orphan) or the table's data (misplaced). `table`:
 * the set's table, or, for a truncate's trash entry not committed yet, the table truncating into it (in transition).
 */
export function judgeSet(
  set: SetOnDisk,
  table: TableRecord | undefined,
  allSets: readonly SetOnDisk[],
): { kind: 'orphan' | 'misplaced'; why: string } | undefined {
  if (!table) return { kind: 'orphan', why: `no table ${set.tableId} in the catalog` };
  // (A truncating table's entry has its placement.)
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
    case 'outside-change':
      return `${shardTableLabel(f)}: ${f.differences.join('; ')}: left for an operator`;
  }
}

/** The doctor's lines of a finding: one per difference for a shard table changed outside tablefate, else describeFinding's. */
export function describeFindingLines(f: Finding): string[] {
  if (f.kind !== 'outside-change') return [describeFinding(f)];
  return f.differences.map((d) => `${shardTableLabel(f)}: ${d}`);
}

function shardTableLabel(f: Extract<Finding, { kind: 'outside-change' }>): string {
  const name = 'namespace' in f.table ? formatTableName(f.table) : 'not in the catalog';
  return `table ${f.table.id} (${name}) shard ${f.shard} on ${f.node}`;
}

function setLabel(set: SetOnDisk): string {
  return `shard t${set.tableId}-s${set.shard} in ${set.area} on ${set.node}`;
}
