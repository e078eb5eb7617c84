import { Context } from '@temporalio/activity';
import { defaultPayloadConverter } from '@temporalio/common';
import type { Catalog, IsOwnerClosed, LockOwner } from '../catalog/catalog';
import { diagnose, judgeSet, type Finding, type LockFact, type SetOnDisk } from '../domain/health';
import { workflowIdFor, type TrashInput } from '../domain/operations';
import type { TableRecord } from '../domain/table';
import type { ShardRef, StorageDriver, Watch } from '../storage/driver';
import { SHARD_EXTENSIONS } from '../storage/shard-files';

/** The most findings one survey returns (a result stays far below the server's payload limit); the rest are counted. */
const MAX_FINDINGS = 2000;

/** What the survey found, and what it could not look at. */
export interface Survey {
  findings: Finding[];
  /** Findings beyond MAX_FINDINGS, not listed: a later pass lists them once the first ones are repaired. */
  omitted: number;
  /** Nodes whose sets were not listed (quarantined): their orphans wait until they are back. */
  skippedNodes: string[];
  /** For a stuck trash: the retention its stopped run asked for, so that resuming it keeps the promise. */
  retentionOf: Record<number, number>;
}

export interface HousekeepingDeps {
  catalog: Catalog;
  storage: StorageDriver;
  isOwnerClosed: IsOwnerClosed;
  /** How long a set no row accounts for is left alone before it is collected (the worker's setting). */
  orphanGraceMs: number;
  /** Refuses an operation of another catalog; returns the calling run. */
  inScope: (scope: { catalogId?: string }) => LockOwner;
  /** Runs a storage change only while the calling run holds the table's lock (see activities/index.ts). */
  fenced: (scope: { catalogId?: string }, shard: ShardRef, change: (watch: Watch) => Promise<void>) => Promise<void>;
}

/**
 * The reconciler's activities: a survey of everything that can be left without the run that should finish it
 * (read-only, so the doctor runs it too), and the two repairs that are not operations of their own.
 */
export function housekeepingActivities(deps: HousekeepingDeps) {
  const { catalog, storage } = deps;

  /** The sets on disk, as the health rules see them. File ages are by the wall clock, as the files' are. */
  const setsOnDisk = async (): Promise<{ sets: SetOnDisk[]; skippedNodes: string[] }> => {
    const listing = await storage.listSets();
    return {
      sets: listing.sets.map(({ tableId, shard, node, area, files, changedAt }) => ({
        tableId,
        shard,
        node,
        area,
        whole: files === SHARD_EXTENSIONS.length,
        changedAt,
      })),
      skippedNodes: listing.skippedNodes,
    };
  };

  /** The rows the survey needs: every row but tombstones, plus the row (maybe a tombstone) of any id on disk. */
  const tablesFor = async (sets: readonly SetOnDisk[]): Promise<TableRecord[]> => {
    const tables = await catalog.listTables({ includeTrashed: true });
    const known = new Set(tables.map((t) => t.id));
    for (const id of new Set(sets.map((s) => s.tableId))) {
      if (known.has(id)) continue;
      const row = await catalog.getTable(id);
      if (row) tables.push(row);
    }
    return tables;
  };

  return {
    /** Everything the reconciler would do now; changes nothing. */
    async surveyHealth(input: { catalogId?: string }): Promise<Survey> {
      deps.inScope(input);
      const context = Context.current();
      const { sets, skippedNodes } = await setsOnDisk();
      const [tables, locks, trashTimers] = await Promise.all([
        tablesFor(sets),
        catalog.listLocks(),
        runningTrashTimers(context.info.taskQueue, catalog.id),
      ]);
      const lockFacts: LockFact[] = await Promise.all(
        locks.map(async (l) => ({ ...l, ownerClosed: await deps.isOwnerClosed(l) })),
      );
      const findings = diagnose({ tables, locks: lockFacts, trashTimers, sets, now: Date.now(), orphanGraceMs: deps.orphanGraceMs });
      const retentionOf: Record<number, number> = {};
      for (const f of findings.slice(0, MAX_FINDINGS)) {
        if (f.kind !== 'stuck' || f.resume !== 'trash') continue;
        const asked = await askedRetention(workflowIdFor.trash(f.table.id, catalog.id));
        if (asked !== undefined) retentionOf[f.table.id] = asked;
      }
      return { findings: findings.slice(0, MAX_FINDINGS), omitted: Math.max(0, findings.length - MAX_FINDINGS), skippedNodes, retentionOf };
    },

    /** Releases the locks of a run that has closed; a run found still running keeps them. */
    async releaseStaleLocks(input: { catalogId?: string; holder: { workflowId: string; runId: string; resource: string; since: number } }) {
      deps.inScope(input);
      if (!(await deps.isOwnerClosed(input.holder))) return false;
      await catalog.releaseLocks(input.holder);
      return true;
    },

    /**
     * Collects one orphan set, under the lock of the table it names (the calling run holds it): looks again,
     * and moves the set to garbage and deletes it only if it is still an orphan whose grace is over.
     */
    async collectOrphan(input: { catalogId?: string; set: SetOnDisk }): Promise<'collected' | 'kept'> {
      const { set } = input;
      const shard: ShardRef = { tableId: set.tableId, shard: set.shard, node: set.node };
      let outcome: 'collected' | 'kept' = 'kept';
      await deps.fenced(input, shard, async (watch) => {
        const { sets } = await setsOnDisk();
        const now = sets.find((s) => s.tableId === set.tableId && s.shard === set.shard && s.node === set.node && s.area === set.area);
        if (!now || now.changedAt + deps.orphanGraceMs > Date.now()) return;
        if (judgeSet(now, await catalog.getTable(set.tableId), sets)?.kind !== 'orphan') return;
        await storage.discardSet(shard, set.area, watch);
        outcome = 'collected';
      });
      return outcome;
    },
  };
}

/**
 * The tables of this catalog whose trash run is waiting on the expiry, from the server's visibility store
 * (runs started before catalogs had identities carry the bare id). A run that started a moment ago may not show
 * yet: re-arming it then finds its id taken and does nothing.
 */
async function runningTrashTimers(taskQueue: string, catalogId: string): Promise<Set<number>> {
  const running = new Set<number>();
  const query = `WorkflowType = 'trashTable' AND ExecutionStatus = 'Running' AND TaskQueue = '${taskQueue}'`;
  for await (const run of Context.current().client.workflow.list({ query })) {
    const match = /^trash:([0-9]+)(?:@(.+))?$/.exec(run.workflowId);
    if (match && (match[2] === undefined || match[2] === catalogId)) running.add(Number(match[1]));
  }
  return running;
}

/** The retention the last trash run of a table asked for, read from its start event; none if it asked none. */
async function askedRetention(workflowId: string): Promise<number | undefined> {
  try {
    const history = await Context.current().client.workflow.getHandle(workflowId).fetchHistory();
    const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
    if (!payload) return undefined;
    return defaultPayloadConverter.fromPayload<TrashInput>(payload).retentionSeconds;
  } catch {
    return undefined;
  }
}
