import { Context } from '@temporalio/activity';
import { defaultPayloadConverter } from '@temporalio/common';
import type { Catalog, IsOwnerClosed } from '../catalog/catalog';
import { diagnoseTables, type Finding, type LockFact, type RecordedShardTables, type SetOnDisk } from '../domain/health';
import { OPERATIONS } from '../domain/operations';
import { type TrashInput } from '../domain/operation-inputs';
import { dropsOfTableQuery, trashTimersQuery } from '../domain/operation-runs';
import type { TableRecord } from '../domain/table';
import type { SetListing } from '../storage/driver';
import { SHARD_EXTENSIONS } from '../storage/shard-files';
import type { CallChecks, CallScope } from './scope';
import { heartbeating } from './heartbeat';

/** The most findings one survey returns (a result stays far below the server's payload limit); the rest are counted. */
export const MAX_FINDINGS = 2000;

/** What the catalog survey found, and what it could not look at. */
export interface Survey {
  findings: Finding[];
  /** Findings beyond MAX_FINDINGS, not listed: a later pass lists them once the first ones are repaired. */
  omitted: number;
  /**
   * Nodes whose sets were not listed (quarantined): their orphans wait until they are back. None from the catalog's
   * survey: the reconciler adds each node whose own survey was skipped.
   */
  skippedNodes: string[];
  /** For a stuck trash: the retention its stopped run asked for, so that resuming it keeps the promise. */
  retentionOf: Record<number, number>;
  /**
   * For a stuck trash: who started its stopped run (its input's droppedBy, else its startedBy), so that the resumed
   * drop records them as the table's dropper. Absent in surveys made before it was kept.
   */
  droppedByOf?: Record<number, string>;
  /** For a stuck trash whose stopped run asked for `cascade`: so that the resumed drop takes the same family. */
  cascadeOf?: Record<number, true>;
  /** The storage nodes shards are placed on, whose sets each node's own survey lists (surveyNode). */
  nodes: string[];
}

export interface HousekeepingDeps {
  catalog: Catalog;
  /** The storage nodes shards are placed on. */
  nodes: readonly string[];
  isOwnerClosed: IsOwnerClosed;
  checks: CallChecks;
}

/** The sets a listing found, as the health rules see them. File ages are by the wall clock, as the files' are. */
export function setsOnDisk(listing: SetListing): SetOnDisk[] {
  return listing.sets.map(({ tableId, shard, node, area, files, changedAt }) => ({
    tableId,
    shard,
    node,
    area,
    whole: files === SHARD_EXTENSIONS.length,
    changedAt,
  }));
}

/**
 * What the records of a listing's nodes say (`nodes`: those it was asked for), for the health rules; none from a driver
 * that keeps no record. `listedAt`: when the listing began.
 */
export function recordedOf(listing: SetListing, nodes: readonly string[], listedAt: number): RecordedShardTables | undefined {
  if (!listing.shardTables) return undefined;
  return { nodes: nodes.filter((n) => !listing.skippedNodes.includes(n)), listedAt, tables: listing.shardTables };
}

/** The rows a survey needs: every row but tombstones, plus the row (maybe a tombstone) of any id on disk or in a node's record. */
export async function tablesFor(catalog: Catalog, sets: readonly SetOnDisk[], recorded?: RecordedShardTables): Promise<TableRecord[]> {
  const tables = await catalog.listTables({ includeTrashed: true });
  const known = new Set(tables.map((t) => t.id));
  for (const id of new Set([...sets, ...(recorded?.tables ?? [])].map((s) => s.tableId))) {
    if (known.has(id)) continue;
    const row = await catalog.getTable(id);
    if (row) tables.push(row);
  }
  return tables;
}

/** Every lock, and whether the run holding it has closed. */
export async function lockFacts(catalog: Catalog, isOwnerClosed: IsOwnerClosed): Promise<LockFact[]> {
  const locks = await catalog.listLocks();
  return Promise.all(locks.map(async (l) => ({ ...l, ownerClosed: await isOwnerClosed(l) })));
}

/** At most MAX_FINDINGS of `findings`, and how many were left off. */
export function bounded(findings: Finding[]): { findings: Finding[]; omitted: number } {
  return { findings: findings.slice(0, MAX_FINDINGS), omitted: Math.max(0, findings.length - MAX_FINDINGS) };
}

/**
 * The reconciler's activities on the catalog: a survey of everything that can be left without the run that
 * should finish it (read-only, so the doctor runs it too), and the release of stale locks. The sets on disk are
 * surveyed by each node's own worker (storage.ts).
 */
export function housekeepingActivities(deps: HousekeepingDeps) {
  const { catalog } = deps;

  return {
    /**
     * Everything the reconciler would do now about tables and locks; changes nothing. The sets are each node's own
     * survey (surveyNode): `sets` is accepted, and ignored, because the reconciler still says `false`.
     */
    surveyHealth(input: CallScope & { sets?: false }): Promise<Survey> {
      deps.checks.inScope(input);
      return heartbeating(() => surveyCatalog(deps));
    },

    /** Releases the locks of a run that has closed; a run found still running keeps them. */
    async releaseStaleLocks(input: CallScope & { holder: { workflowId: string; runId: string; resource: string; since: number } }) {
      deps.checks.inScope(input);
      if (!(await deps.isOwnerClosed(input.holder))) return false;
      await catalog.releaseLocks(input.holder);
      return true;
    },
  };
}

/** The catalog's part of a survey: the health rules over its tables and locks, with what resuming a stuck drop needs. */
async function surveyCatalog(deps: HousekeepingDeps): Promise<Survey> {
  const { catalog } = deps;
  const context = Context.current();
  const [tables, locks, trashTimers] = await Promise.all([
    tablesFor(catalog, []),
    lockFacts(catalog, deps.isOwnerClosed),
    runningTrashTimers(context.info.taskQueue, catalog.id),
  ]);
  const { findings, omitted } = bounded(diagnoseTables({ tables, locks, trashTimers, now: Date.now() }));
  const retentionOf: Record<number, number> = {};
  const droppedByOf: Record<number, string> = {};
  const cascadeOf: Record<number, true> = {};
  for (const f of findings) {
    if (f.kind !== 'stuck' || f.resume !== 'trash') continue;
    // (The table's latest drop, whatever its run's id; a drop a v19 client started ran as its table's trash run.)
    const latest = await latestDropOf(f.table.id, catalog.id);
    const asked =
      (latest === undefined ? undefined : await askedDrop(latest)) ??
      (await askedDrop(OPERATIONS.trash.workflowId(f.table.id, catalog.id))) ??
      (await askedDrop(OPERATIONS.expiry.workflowId(f.table.id, catalog.id)));
    if (asked?.retentionSeconds !== undefined) retentionOf[f.table.id] = asked.retentionSeconds;
    const droppedBy = asked?.droppedBy ?? asked?.startedBy;
    if (droppedBy !== undefined) droppedByOf[f.table.id] = droppedBy;
    if (asked?.cascade) cascadeOf[f.table.id] = true;
  }
  return { findings, omitted, skippedNodes: [], retentionOf, droppedByOf, cascadeOf, nodes: [...deps.nodes] };
}

/**
 * The tables of this catalog whose trash run is waiting on the expiry, from the server's visibility store
 * (runs started before catalogs had identities carry the bare id). A run that started a moment ago may not show
 * yet: re-arming it then finds its id taken and does nothing.
 */
async function runningTrashTimers(taskQueue: string, catalogId: string): Promise<Set<number>> {
  const running = new Set<number>();
  const query = trashTimersQuery(taskQueue);
  for await (const run of Context.current().client.workflow.list({ query })) {
    const match = /^trash:([0-9]+)(?:@(.+))?$/.exec(run.workflowId);
    if (match && (match[2] === undefined || match[2] === catalogId)) running.add(Number(match[1]));
  }
  return running;
}

/**
 * The workflow id of the latest drop run of table `tableId` in this catalog, by its search attributes: the SDK's at
 * `drop:<id>`, a SQL door request's at an id of its own, an adopt and drop's. Undefined when the server keeps none.
 */
async function latestDropOf(tableId: number, catalogId: string): Promise<string | undefined> {
  let latest: { workflowId: string; startTime: Date } | undefined;
  for await (const run of Context.current().client.workflow.list({ query: dropsOfTableQuery(tableId) })) {
    if (!run.workflowId.endsWith(`@${catalogId}`)) continue;
    if (!latest || run.startTime > latest.startTime) latest = run;
  }
  return latest?.workflowId;
}

/**
 * What the last trash run of a table was asked, read from its start event: its retention (none if it asked none), its
 * cascade, and who asked (its startedBy, or the droppedBy a resumed drop carries). Undefined when there is no such run to read.
 */
async function askedDrop(
  workflowId: string,
): Promise<Pick<TrashInput, 'retentionSeconds' | 'startedBy' | 'droppedBy' | 'cascade'> | undefined> {
  try {
    const history = await Context.current().client.workflow.getHandle(workflowId).fetchHistory();
    const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
    if (!payload) return undefined;
    const { retentionSeconds, startedBy, droppedBy, cascade } = defaultPayloadConverter.fromPayload<TrashInput>(payload);
    return { retentionSeconds, startedBy, droppedBy, cascade };
  } catch {
    return undefined;
  }
}
