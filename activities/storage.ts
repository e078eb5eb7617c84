import type { Catalog, IsOwnerClosed } from '../catalog/catalog';
import { diagnoseSets, judgeSet, truncatingInto, type Finding, type SetOnDisk } from '../domain/health';
import type { ChangeNotes, FatalStorageError, ReferencingTable, ShardChange, ShardRef, StorageDriver, Watch } from '../storage/driver';
import { entryFor, truncatedTables } from '../domain/contracts';
import { ApplicationFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import { toActivityFailure, withFailureMapping, type FailureMappingOptions } from './failures';
import { STORAGE_STOPPED_HERE } from '../domain/operations';
import { classifyStorageError, messageOf } from '../storage/errors';
import { bounded, lockFacts, recordedOf, setsOnDisk, tablesFor } from './housekeeping';
import { callChecks, ownerClosedOnServer, type CallChecks, type CallScope } from './scope';
import { heartbeating } from './heartbeat';
import { DEFAULT_ORPHAN_GRACE_SECONDS } from '../domain/limits';
import { settleAll } from '../domain/settle';

export interface StorageActivityDeps {
  catalog: Catalog;
  /** The bytes of the nodes this worker serves (one node for a storage-node worker, every node in-process). */
  storage: StorageDriver;
  /** Called when storage can neither finish nor undo a change: the worker must stop. */
  onFatal: (err: FatalStorageError) => void;
  /** Whether the workflow that holds a lock has closed; defaults to asking the Temporal server. */
  isOwnerClosed?: IsOwnerClosed;
  /** How many attempts a transient storage fault gets before the step fails (default: see failures.ts). */
  storageRetryAttempts?: number;
  /** How long a set no catalog row accounts for is left alone before the reconciler collects it. */
  orphanGraceSeconds?: number;
}

/** One node's survey of its own sets: what they show, or that the node was not looked at (quarantined). */
export type NodeSurvey = { skipped: true } | { skipped: false; findings: Finding[]; omitted: number };

/**
 * The activities that touch a storage node's bytes. They run on the worker that owns the node (its own task
 * queue, see domain/operations.ts's storageQueue) and nowhere else, and each change is fenced: it happens only
 * while the calling operation still holds the table's lock in the catalog.
 */
export function createStorageActivities(deps: StorageActivityDeps) {
  const { catalog, storage } = deps;
  const { inScope, fenced } = callChecks(catalog);
  const isOwnerClosed = deps.isOwnerClosed ?? ownerClosedOnServer;
  const orphanGraceMs = (deps.orphanGraceSeconds ?? DEFAULT_ORPHAN_GRACE_SECONDS) * 1000;

  /** The node's sets as the health rules see them, or null when the node is quarantined. */
  const setsOf = async (node: string): Promise<SetOnDisk[] | null> => {
    const listing = await storage.listSets([node]);
    return listing.skippedNodes.includes(node) ? null : setsOnDisk(listing);
  };

  /** The reconciler's look at one node's sets against the catalog (surveyNode). */
  const surveyOwnSets = async (node: string): Promise<NodeSurvey> => {
    const listedAt = Date.now();
    const listing = await storage.listSets([node]);
    if (listing.skippedNodes.includes(node)) return { skipped: true };
    const sets = setsOnDisk(listing);
    // The node's record of its shard tables (PostgreSQL), whose differences the doctor reports: changed outside tablefate.
    const recorded = recordedOf(listing, [node], listedAt);
    const [tables, locks] = await Promise.all([tablesFor(catalog, sets, recorded), lockFacts(catalog, isOwnerClosed)]);
    return { skipped: false, ...bounded(diagnoseSets({ tables, locks, sets, recorded, now: Date.now(), orphanGraceMs })) };
  };

  const activities = {
    /**
     * One step's change on every shard of a table that this node holds, all at once, fenced like every change. It
     * heartbeats file by file; once cancelled it stops before its next file, the set it was renaming put back, and
     * answers cancelled only then (the workflow waits for that before it undoes anything). Made again (a retry, or
     * a worker lost mid-way), it finishes what is left: each shard's change is idempotent.
     */
    async changeShardsOnNode(input: CallScope & { change: ShardChange; shards: ShardRef[] }): Promise<{ notes: ChangeNotes }> {
      return { notes: await changeEvery(fenced, storage, input, input.shards, input.change) };
    },

    /** The bytes of each of these shards of this node, in order (`describe`, `ls`): a read, so no lock is needed. */
    async measureShards(input: CallScope & { shards: ShardRef[] }): Promise<number[]> {
      inScope(input);
      return storage.sizesOf(input.shards);
    },

    /**
     * A drop's dry run on this node (`drop --dry-run`, workflows/plan-drop.ts): what a move of each of these live shards
     * into the trash, with `cascade` or without, would take along or detach, in words, a list per shard in order (none
     * from a driver whose tables nothing depends on: files); or the refusal the first shard to meet one would meet
     * (HasDependents, ShardMissing). A read: no lock, no journal, nothing changed.
     */
    async dependentsOfShards(input: CallScope & { shards: ShardRef[]; cascade?: boolean }): Promise<ChangeNotes[]> {
      inScope(input);
      const dependentsOf = storage.dependentsOf?.bind(storage);
      if (!dependentsOf || input.shards.length === 0) return input.shards.map(() => []);
      // The table as the catalog has it now: the driver names its notes after it, as a move's (see `fenced`).
      const table = await catalog.getTable(input.shards[0]!.tableId);
      const described = input.shards.map((s) =>
        table ? { ...s, table: { namespace: table.namespace, name: table.name, shards: table.placement.length, params: table.params } } : s,
      );
      return settleAll(described, (shard) => dependentsOf(shard, input.cascade ? { cascade: true } : {}));
    },

    /**
     * A cascade truncate's family on this node: the tables whose foreign keys reference the shards' tables, and theirs in
     * turn, each with the tablefate table it is a shard of, if any (none from a driver whose tables no key references:
     * files). A read: no lock, no journal, nothing changed.
     */
    async referencingTables(input: CallScope & { shards: ShardRef[] }): Promise<ReferencingTable[]> {
      inScope(input);
      return (await storage.referencingTables?.(input.shards)) ?? [];
    },

    /** The reconciler's look at one node's sets against the catalog (read-only, so the doctor runs it too). */
    surveyNode(input: CallScope & { node: string }): Promise<NodeSurvey> {
      inScope(input);
      return heartbeating(() => surveyOwnSets(input.node));
    },

    /**
     * Collects one orphan set, under the lock of the table it names (the calling run holds it): looks again,
     * and moves the set to garbage and deletes it only if it is still an orphan whose grace is over.
     */
    async collectOrphan(input: CallScope & { set: SetOnDisk }): Promise<'collected' | 'kept'> {
      const { set } = input;
      const shard: ShardRef = { tableId: set.tableId, shard: set.shard, node: set.node };
      let outcome: 'collected' | 'kept' = 'kept';
      await fenced(input, [shard], async (watch) => {
        const sets = (await setsOf(set.node)) ?? [];
        const now = sets.find((s) => s.tableId === set.tableId && s.shard === set.shard && s.area === set.area);
        if (!now || now.changedAt + orphanGraceMs > Date.now()) return;
        const table =
          (await catalog.getTable(set.tableId)) ?? truncatingInto(await catalog.listTables({ includeTrashed: false })).get(set.tableId);
        if (judgeSet(now, table, sets)?.kind !== 'orphan') return;
        await storage.discardSet(shard, set.area, watch);
        outcome = 'collected';
      });
      return outcome;
    },
  };
  return withFailureMapping(activities, { onFatal: deps.onFatal, storageRetryAttempts: deps.storageRetryAttempts });
}

export type StorageActivities = ReturnType<typeof createStorageActivities>;

/** What a step's change made in the workflow task left to the nodes' own queues. */
export interface ShardsHereAnswer {
  /** The nodes this worker does not serve, whose shards it left untouched. */
  elsewhere: string[];
  /** What the changes made here said beyond doing them (a recall's foreign keys it could not put back as they were). */
  notes: ChangeNotes;
  /** With `then`: whether the follow-up change was made too, on every shard changed here. */
  thenMade?: boolean;
}

export interface ShardsHereDeps extends FailureMappingOptions {
  catalog: Catalog;
  /** The nodes served in this process, if any (`--storage local`: every one). */
  storage?: StorageDriver;
}

/**
 * A step's change on every shard of a table, made by the orchestrating worker in the workflow task that asks for it (the
 * executor's call, activities/steps-here.ts; and v18's `changeShardsHere` local activity): the shards of the nodes this
 * worker serves itself are changed here, with no round trip through the server; the others are left to their nodes'
 * queues, which the answer names. The workflow awaits the call where a cancel cannot reach it (workflows/execute.ts), so
 * it is never abandoned while it still renames files.
 *
 * Fenced like every storage change, and journaled under the call's step once done: a workflow task lost after it
 * ran (its answer never reached the history) makes the same call again, maybe on another worker and after the
 * operation released its lock, and is answered the same without a file being touched. A change cut short (the
 * worker killed) has no journal entry: made again, it finishes what is left, each shard's change being idempotent;
 * and a shard's changes take turns in this process (storage/shard-turns.ts), so an attempt the SDK gave up on ends
 * before the next begins.
 */
export function createShardsHereActivity(deps: ShardsHereDeps) {
  const { catalog, storage } = deps;
  const { inScope, stepOf, fenced } = callChecks(catalog);
  const served = new Set(storage?.nodes ?? []);
  const activities = {
    /**
     * The bytes of each of these shards that this worker's nodes hold, in order, null for the others (`describe`,
     * `ls`, the space cap), and the nodes it does not serve, for their own workers to measure. A read: no lock, no
     * journal (a repeat measures again).
     */
    async measureShardsHere(input: CallScope & { shards: ShardRef[] }): Promise<{ sizes: Array<number | null>; elsewhere: string[] }> {
      inScope(input);
      const here = input.shards.filter((s) => served.has(s.node));
      const measured = here.length === 0 ? [] : await storage!.sizesOf(here);
      let next = 0;
      const sizes = input.shards.map((s) => (served.has(s.node) ? measured[next++]! : null));
      return { sizes, elsewhere: [...new Set(input.shards.filter((s) => !served.has(s.node)).map((s) => s.node))] };
    },

    /**
     * `then`: a follow-up change tried once the change is made on every shard here (a purge's deletes, once every shard
     * is marked garbage): its failure is not this call's, which answers `thenMade: false` and leaves it to the step
     * that makes it (with its own retries, past the point of no return).
     */
    async changeShardsHere(input: CallScope & { change: ShardChange; shards: ShardRef[]; then?: ShardChange }): Promise<ShardsHereAnswer> {
      const owner = inScope(input);
      const step = stepOf(owner, input);
      if (!step) throw new Error('changeShardsHere needs the step of the call, under which it is journaled');
      const made = await catalog.stepOutcome(step);
      if (made) {
        if ('value' in made) return made.value as ShardsHereAnswer;
        throw ApplicationFailure.nonRetryable(made.error.message, made.error.type);
      }
      const here = input.shards.filter((s) => served.has(s.node));
      const elsewhere = [...new Set(input.shards.filter((s) => !served.has(s.node)).map((s) => s.node))];
      // (Nothing done here needs no journal: the same call made again answers the same, or does the change here.)
      if (here.length === 0) return { elsewhere, notes: [] };
      let notes: ChangeNotes;
      try {
        notes = await changeEvery(fenced, storage!, input, here, input.change);
      } catch (err) {
        if (classifyStorageError(err) === 'fatal') {
          // This worker stops (as a node's worker would); the change is not over, so nothing is journaled, and the
          // workflow hands it to the nodes' queues, where it waits for a worker that serves them again.
          deps.onFatal(err as FatalStorageError);
          throw ApplicationFailure.create({ message: messageOf(err), type: STORAGE_STOPPED_HERE, nonRetryable: true, cause: err as Error });
        }
        // A failure for good is journaled like an answer: the step made again fails the same, and the operation
        // compensates as it did the first time instead of finding its lock gone.
        const failure = toActivityFailure(err, deps, Context.current().info.attempt);
        if (!(failure instanceof ApplicationFailure && failure.nonRetryable)) throw err;
        await catalog.recordStep(step, { error: { type: failure.type ?? 'Error', message: failure.message } });
        throw failure;
      }
      const answer: ShardsHereAnswer = { elsewhere, notes, ...(input.then ? { thenMade: await madeOnAll(input, here, input.then) } : {}) };
      await catalog.recordStep(step, { value: answer });
      return answer;
    },
  };
  /** Makes `change` on `shards`, answering whether it was made on all; a fatal storage error stops the worker. */
  const madeOnAll = async (scope: CallScope, shards: ShardRef[], change: ShardChange): Promise<boolean> => {
    try {
      await changeEvery(fenced, storage!, scope, shards, change);
      return true;
    } catch (err) {
      if (classifyStorageError(err) === 'fatal') deps.onFatal(err as FatalStorageError);
      Context.current().log.warn('the follow-up change was not made here; its own step makes it', {
        change: change.method,
        error: messageOf(err),
      });
      return false;
    }
  };
  return withFailureMapping(activities, deps);
}

/** Makes `change` on every one of `shards` at once, fenced (the calling run holds the table's lock); answers their notes. */
async function changeEvery(
  fenced: CallChecks['fenced'],
  storage: StorageDriver,
  scope: CallScope,
  shards: readonly ShardRef[],
  change: ShardChange,
): Promise<ChangeNotes> {
  const said = await fenced(scope, shards, (watch, described) => {
    if (change.method === 'moveShard' && change.together && storage.moveShards)
      return settleAll(byNode(described.map((shard) => movedAs(change, shard))), (held) =>
        storage.moveShards!(held, change.from, change.to, watch, moveOptions(change)),
      );
    if (change.method === 'truncateShard' && change.together && storage.truncateShards)
      return settleAll(byNode(described), (held) =>
        storage.truncateShards!(
          held.map((shard) => ({ shard, into: entryFor(change.into, shard.tableId) })),
          watch,
          { drainTimeoutMs: change.drainTimeoutMs },
        ),
      );
    return settleAll(described, (shard) => applyChange(storage, change, shard, watch));
  });
  return said.flat();
}

/** The shard as a move addresses it: under the live name it asks for (`liveAs`, a rename taken back), if it asks one. */
function movedAs(change: Extract<ShardChange, { method: 'moveShard' }>, shard: ShardRef): ShardRef {
  const { liveAs } = change;
  return liveAs && shard.table ? { ...shard, table: { ...shard.table, namespace: liveAs.namespace, name: liveAs.name } } : shard;
}

/** The shards of each node, together. */
function byNode(shards: readonly ShardRef[]): ShardRef[][] {
  const nodes = new Map<string, ShardRef[]>();
  for (const shard of shards) nodes.set(shard.node, [...(nodes.get(shard.node) ?? []), shard]);
  return [...nodes.values()];
}

const moveOptions = ({ drainTimeoutMs, cascade, namespace }: Extract<ShardChange, { method: 'moveShard' }>) => ({
  drainTimeoutMs,
  ...(cascade ? { cascade } : {}),
  ...(namespace !== undefined ? { namespace } : {}),
});

/** Makes one shard's change, answering what it said beyond doing it (a move's notes; nothing for the others). */
async function applyChange(storage: StorageDriver, change: ShardChange, shard: ShardRef, watch: Watch): Promise<ChangeNotes> {
  switch (change.method) {
    case 'moveShard':
      return (await storage.moveShard(movedAs(change, shard), change.from, change.to, watch, moveOptions(change))) ?? [];
    case 'truncateShard': {
      const into = entryFor(change.into, shard.tableId);
      return (await storage.truncateShard(shard, into, watch, { drainTimeoutMs: change.drainTimeoutMs })) ?? [];
    }
    case 'untruncateShard':
      await storage.untruncateShard(shard, entryFor(change.into, shard.tableId), watch);
      return [];
    case 'checkTruncateShard': {
      // (A driver with nothing a truncate could refuse before it starts has no check: files.)
      const others = truncatedTables(change.into).filter((id) => id !== shard.tableId);
      await storage.checkTruncate?.(shard, entryFor(change.into, shard.tableId), others);
      return [];
    }
    default:
      await storage[change.method](shard, watch);
      return [];
  }
}

/** The names of the storage activities: what a node's task queue serves. */
export const STORAGE_ACTIVITY_NAMES = [
  'changeShardsOnNode',
  'surveyNode',
  'collectOrphan',
  'measureShards',
  'dependentsOfShards',
  'referencingTables',
] as const satisfies ReadonlyArray<keyof StorageActivities>;
