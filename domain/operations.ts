import { formatTableName, type TableName } from './names';
import type { SearchAttributePair } from '@temporalio/common';
import { SEARCH_ATTRIBUTES } from './search-attributes';
import type { TableState } from './states';
import { definitionOf, type ShardPlacement } from './table';
import {
  tablesOf,
  type AdoptTrashInput,
  type CatalogScoped,
  type ConfigureInput,
  type CreateInput,
  type HoldInput,
  type LeaseInput,
  type PurgeInput,
  type ReconcileInput,
  type RecallInPlaceInput,
  type RenameInput,
  type TableKey,
  type TrashExpiryInput,
  type TrashInput,
  type TruncateInput,
  type UndeleteInput,
} from './operation-inputs';

/** The operations on a table, by their records' names; also the value of the `TableOp` search attribute. */
export type TableOp = (typeof TABLE_OPERATION_RECORDS)[number]['name'];

/**
 * Workflow ids a person can read in the Temporal UI; one operation per table at a time. The catalog's identity
 * ends each one (`drop:42@1f0c9a2e`), so that two catalogs sharing a Temporal namespace never address each
 * other's workflows; runs started before catalogs had identities keep the bare form.
 */
function scoped(id: string, catalogId: string | undefined): string {
  return catalogId === undefined ? id : `${id}@${catalogId}`;
}

/**
 * The workflow id of a run that belongs to one request alone (`runKey`, e.g. the SQL door's `sql.node-0.17.9c1e07aa`):
 * the operation's own id with the key before its catalog (`drop:42~sql.node-0.17.9c1e07aa@1f0c9a2e`). Such a run joins
 * no other request's, and its id is never given a second run, so that however often the request is taken up it makes
 * one operation.
 */
export function requestRunId(workflowId: string, runKey: string): string {
  const at = workflowId.lastIndexOf('@');
  return at < 0 ? `${workflowId}~${runKey}` : `${workflowId.slice(0, at)}~${runKey}${workflowId.slice(at)}`;
}

/** Lock resources. A create locks the name it is making; everything else locks the table id. */
export const lockFor = {
  name: (table: TableName) => `name:${formatTableName(table)}`,
  table: (tableId: number) => `table:${tableId}`,
};

/** The table an operation's run is about, as far as the caller knows it: what its search attributes say. */
export interface OperationTarget {
  tableId?: number;
  namespace?: string;
  name?: string;
}

/** What the reconciler knows when it runs an operation again to finish a table left in a transitional state. */
export interface ResumeContext {
  catalogId?: string;
  /** The retention the lost run asked for, if it asked one (a trash's). */
  retentionSeconds?: number;
  /** Who started the lost run, if its input says (a trash's): the resumed drop records them as the table's dropper. */
  droppedBy?: string;
  /** Whether the lost run asked for `cascade` (a trash's): the resumed drop takes the same family. */
  cascade?: boolean;
}

/**
 * Everything one operation is, said once: the client, the command line, the reconciler, the doctor and the tests
 * read it instead of restating it. `Name` is its name, `Subject` what its workflow id is made of (a name for a create, a table id
 * for the others), `Input` its workflow's input.
 */
export interface OperationRecord<Name extends string, Subject, Input> {
  /** The operation's name; for a table operation also the value of the `TableOp` search attribute. */
  name: Name;
  /** The workflow that runs it (the function's name in workflows/). */
  workflowType: string;
  /** Its workflow id: one run per subject at a time. */
  workflowId(subject: Subject, catalogId?: string): string;
  /** The locks its workflow takes, in the order it takes them (lockFor's resources). */
  locks(input: Input): string[];
  /**
   * The transitional state a run of it leaves a table in if it stops half way, and how the reconciler runs it again
   * from there (the same operation a user would run, resuming). Absent: it leaves no table half way.
   */
  resume?: {
    /** The transitional states it leaves a table in. */
    from: readonly TableState[];
    subject: (table: TableKey) => Subject;
    input: (table: TableKey, context: ResumeContext) => Input;
  };
  /** How the client starts it on the task queue (the deployment's, TASK_QUEUE by default). */
  start: {
    /** USE_EXISTING: a second request joins the run going on; FAIL: it is refused while one runs. */
    workflowIdConflictPolicy: 'USE_EXISTING' | 'FAIL';
    /** A bound on the run's whole life, ms: only a read's, which nobody waits for longer. */
    workflowExecutionTimeout?: number;
  };
  /** The search attributes of its runs, so the UI answers "what happened to table 42" in one query. */
  searchAttributes: (table: OperationTarget) => SearchAttributePair[];
}

/** A table operation's search attributes: the operation (`TableOp`) and what is known of its table. */
function tableAttributes(op: TableOp): (table: OperationTarget) => SearchAttributePair[] {
  return (table) => searchAttributesFor(op, table);
}

/** The tables a drop (or truncate) resumed takes: the table, and those of its drop of several as one, under the lowest id. */
function resumedTables(table: TableKey): Pick<TrashInput, 'tableId' | 'together'> {
  const [lead, ...others] = [table.id, ...(table.droppedWith ?? [])].sort((a, b) => a - b);
  return { tableId: lead!, ...(others.length > 0 ? { together: others.map((tableId) => ({ tableId })) } : {}) };
}

const byTableId = (table: TableKey) => table.id;

const create: OperationRecord<'create', TableName, CreateInput> = {
  name: 'create',
  workflowType: 'createTable',
  workflowId: (table, catalogId) => scoped(`create:${formatTableName(table)}`, catalogId),
  // (Its first step, the prepare record, also takes the table's own lock: see the catalog's prepareCreate.)
  locks: (input) => [lockFor.name(input)],
  resume: {
    from: ['CREATING'],
    subject: (table) => table,
    // With the definition it was asked for (columns, like, an adopted table): the same create, resumed.
    input: (table, { catalogId }) => ({
      namespace: table.namespace,
      name: table.name,
      shards: table.shards,
      ...(table.params ? definitionOf(table.params) : {}),
      catalogId,
    }),
  },
  start: { workflowIdConflictPolicy: 'USE_EXISTING' },
  searchAttributes: tableAttributes('create'),
};

/**
 * An adopt registers a PostgreSQL table that already exists as a READY tablefate table of one shard: a create whose
 * shard step records the table instead of making it (the same workflow, with `adopt` in its definition). Runs of its
 * own id, so that an adopt never joins a create of the same name; both take the name's lock, and the second is
 * TableExists. A table it leaves CREATING is resumed as create's record says, with its definition.
 */
const adopt: OperationRecord<'adopt', TableName, CreateInput> = {
  name: 'adopt',
  workflowType: create.workflowType,
  workflowId: (table, catalogId) => scoped(`adopt:${formatTableName(table)}`, catalogId),
  locks: (input) => create.locks(input),
  start: { workflowIdConflictPolicy: 'USE_EXISTING' },
  searchAttributes: tableAttributes('adopt'),
};

/**
 * A drop: its run ends when the table is TRASHED (or, the trash off, purged), and starts the trash's expiry (below) on
 * its way out.
 */
const trash: OperationRecord<'trash', number, TrashInput> = {
  name: 'trash',
  workflowType: 'trashTable',
  workflowId: (tableId, catalogId) => scoped(`drop:${tableId}`, catalogId),
  locks: (input) => tablesOf(input).map(lockFor.table),
  resume: {
    // DRAINING: the drop waits for the table's leases again (from a deadline of its own).
    from: ['DRAINING', 'TRASHING'],
    // A drop of several as one is resumed as one, under its lowest id: each of its tables found stuck starts (or finds) it.
    subject: (table) => Math.min(table.id, ...(table.droppedWith ?? [])),
    input: (table, { catalogId, retentionSeconds, droppedBy, cascade }) => ({
      ...resumedTables(table),
      catalogId,
      retentionSeconds,
      ...(droppedBy !== undefined ? { droppedBy } : {}),
      ...(cascade ? { cascade } : {}),
    }),
  },
  start: { workflowIdConflictPolicy: 'USE_EXISTING' },
  searchAttributes: tableAttributes('trash'),
};

/**
 * A truncate into the trash: the table's rows to a trash entry of their own, the table live and empty. Its run ends when
 * the entry is TRASHED (or, the trash off, purged), and starts the entry's expiry as a drop does. The entry's id is chosen,
 * and locked, by its first change (TableRecord.truncateInto): a run resumed moves the rows to the same one.
 */
const truncate: OperationRecord<'truncate', number, TruncateInput> = {
  name: 'truncate',
  workflowType: 'truncateTable',
  workflowId: (tableId, catalogId) => scoped(`truncate:${tableId}`, catalogId),
  locks: (input) => [lockFor.table(input.tableId)],
  resume: {
    from: ['TRUNCATING'],
    // (A cascade's tables together, under the lowest id, as a drop of several.)
    subject: (table) => Math.min(table.id, ...(table.droppedWith ?? [])),
    input: (table, { catalogId, retentionSeconds, droppedBy }) => ({
      ...resumedTables(table),
      catalogId,
      retentionSeconds,
      ...(droppedBy !== undefined ? { droppedBy } : {}),
    }),
  },
  start: { workflowIdConflictPolicy: 'USE_EXISTING' },
  searchAttributes: tableAttributes('truncate'),
};

/**
 * An adopt and a drop in one run (workflows/adopt-trash.ts), for a table tablefate does not keep yet: the SQL door's drop
 * of such a table, and the SDK's with its node named. Runs of its own id; it takes the name's lock and the table's as a
 * create does. A table it leaves half way is resumed by the operation whose state it is in: CREATING as its adopt
 * (the table then stays live, kept), TRASHING as its drop.
 */
const adoptTrash: OperationRecord<'adoptTrash', TableName, AdoptTrashInput> = {
  name: 'adoptTrash',
  workflowType: 'adoptTrashTable',
  workflowId: (table, catalogId) => scoped(`adopt-drop:${formatTableName(table)}`, catalogId),
  locks: (input) => [lockFor.name(input)],
  start: { workflowIdConflictPolicy: 'USE_EXISTING' },
  searchAttributes: tableAttributes('adoptTrash'),
};

/**
 * A trashed table's expiry (workflows/trash-expiry.ts): one run per table at a time, at `trash:<tableId>`, which retention
 * changes, holds' releases, recalls and purges address. Not an operation of its own (no `TableOp`): `history` shows the
 * drop and what ended its trash.
 */
const expiry: OperationRecord<'expiry', number, TrashExpiryInput> = {
  name: 'expiry',
  workflowType: 'trashExpiry',
  workflowId: (tableId, catalogId) => scoped(`trash:${tableId}`, catalogId),
  locks: () => [],
  // (Its starters tell a run of this trash from one of an earlier trash still ending by its memo: see startTrashExpiry.)
  start: { workflowIdConflictPolicy: 'FAIL' },
  searchAttributes: (table) => searchAttributesFor('trash', table).filter((pair) => pair.key !== SEARCH_ATTRIBUTES.tableOp),
};

const undelete: OperationRecord<'undelete', number, UndeleteInput> = {
  name: 'undelete',
  workflowType: 'undeleteTable',
  workflowId: (tableId, catalogId) => scoped(`undelete:${tableId}`, catalogId),
  locks: (input) => tablesOf(input).map(lockFor.table),
  resume: { from: ['RESTORING'], subject: byTableId, input: (table, { catalogId }) => ({ tableId: table.id, catalogId }) },
  start: { workflowIdConflictPolicy: 'FAIL' },
  searchAttributes: tableAttributes('undelete'),
};

/**
 * A truncate's entry recalled into its table's place (workflows/recall-in-place.ts): a drop of the table and a recall of
 * the entry under its name, each a run of its own (`drop:<id>`, `undelete:<id>`), while this run holds the name's lock,
 * so that no create or rename takes the name between them.
 */
const recallInPlace: OperationRecord<'recallInPlace', number, RecallInPlaceInput> = {
  name: 'recallInPlace',
  workflowType: 'recallInPlace',
  workflowId: (entryId, catalogId) => scoped(`recall-in-place:${entryId}`, catalogId),
  locks: (input) => [lockFor.name(input.name)],
  start: { workflowIdConflictPolicy: 'FAIL' },
  searchAttributes: tableAttributes('recallInPlace'),
};

const purge: OperationRecord<'purge', number, PurgeInput> = {
  name: 'purge',
  workflowType: 'purgeTable',
  workflowId: (tableId, catalogId) => scoped(`purge:${tableId}`, catalogId),
  locks: (input) => [lockFor.table(input.tableId)],
  resume: {
    from: ['PURGING'],
    subject: byTableId,
    input: (table, { catalogId }) => ({ tableId: table.id, catalogId, trigger: 'manual' }),
  },
  start: { workflowIdConflictPolicy: 'USE_EXISTING' },
  searchAttributes: tableAttributes('purge'),
};

const rename: OperationRecord<'rename', number, RenameInput> = {
  name: 'rename',
  workflowType: 'renameTable',
  workflowId: (tableId, catalogId) => scoped(`rename:${tableId}`, catalogId),
  // The new name's lock too: a create of that name waits for the rename instead of racing it.
  locks: (input) => [lockFor.table(input.tableId), lockFor.name(input.newName)],
  // One compare-and-set (READY to READY under the new name): no table is ever left half renamed.
  // FAIL: a second rename of the table while one runs must not be handed the first one's answer.
  start: { workflowIdConflictPolicy: 'FAIL' },
  searchAttributes: tableAttributes('rename'),
};

/**
 * A legal hold: one catalog change under the table's lock (nothing to undo). Held, a table is never purged: not by its
 * expiry, not by the trash's space cap, not by a purge by hand (OnHold). Release wakes the table's trash run, whose
 * expiry may have passed meanwhile.
 */
const hold: OperationRecord<'hold', number, HoldInput> = {
  name: 'hold',
  workflowType: 'holdTable',
  workflowId: (tableId, catalogId) => scoped(`hold:${tableId}`, catalogId),
  locks: (input) => [lockFor.table(input.tableId)],
  start: { workflowIdConflictPolicy: 'FAIL' },
  searchAttributes: tableAttributes('hold'),
};

const release: OperationRecord<'release', number, HoldInput> = {
  name: 'release',
  workflowType: hold.workflowType,
  workflowId: (tableId, catalogId) => scoped(`release:${tableId}`, catalogId),
  locks: (input) => hold.locks(input),
  start: { workflowIdConflictPolicy: 'FAIL' },
  searchAttributes: tableAttributes('release'),
};

/**
 * A lease: one catalog change, atomic with the table's state (a lease is taken only while the table is READY, and a
 * drop's move to DRAINING is ordered with it by the table's row), so it takes no operation lock: a lease never waits
 * for a drop, and a drop waits for leases in its own code. Its subject is `<leaseId>:<action>` (a renewal adds its own
 * request id): one run per request.
 */
const lease: OperationRecord<'lease', string, LeaseInput> = {
  name: 'lease',
  workflowType: 'leaseTable',
  workflowId: (subject, catalogId) => scoped(`lease:${subject}`, catalogId),
  locks: () => [],
  start: { workflowIdConflictPolicy: 'FAIL' },
  searchAttributes: tableAttributes('lease'),
};

/** A runtime setting changed (`tablefate config set|unset`): one run per request; a new space cap evicts at once. */
const configure: OperationRecord<'configure', string, ConfigureInput> = {
  name: 'configure',
  workflowType: 'configureTrash',
  workflowId: (requestId, catalogId) => `config@${catalogId}-${requestId}`,
  locks: () => [],
  start: { workflowIdConflictPolicy: 'FAIL' },
  searchAttributes: () => [],
};

/**
 * The trash's space cap (trash.maxBytes): purges the oldest trashed tables that are not held until each cap holds.
 * One run per catalog, started (or woken, if it runs) by a signal when a drop commits or a cap is set; it purges
 * through `purge:<id>` runs, one at a time, under each table's lock.
 */
const evict: OperationRecord<'evict', void, EvictInput> = {
  name: 'evict',
  workflowType: 'evictTrash',
  workflowId: (_subject, catalogId) => scoped('evict', catalogId),
  locks: () => [],
  start: { workflowIdConflictPolicy: 'USE_EXISTING' },
  searchAttributes: () => [],
};

export type EvictInput = CatalogScoped;

/** The tables whose sizes `describe` and `ls` ask of the nodes: each one's id and where its shards are. */
export interface MeasureInput extends CatalogScoped {
  tables: Array<{ id: number; placement: ShardPlacement[] }>;
}

/** A table's bytes on its nodes (all its shards), or null when a node holding one did not answer. */
export interface TableSize {
  id: number;
  bytes: number | null;
}

/** How long `describe` and `ls` wait for the nodes' sizes before they answer without them (a node down takes 5 s). */
export const MEASURE_TIMEOUT_MS = 15_000;

const measure: OperationRecord<'measure', string, MeasureInput> = {
  name: 'measure',
  workflowType: 'measureTables',
  // One run per request (its id a fresh uuid): a read, which nothing else waits for or joins.
  workflowId: (requestId, catalogId) => `measure@${catalogId}-${requestId}`,
  locks: () => [],
  // As long as a caller waits for it: a run no worker took by then ends, as nobody reads its answer.
  start: { workflowIdConflictPolicy: 'FAIL', workflowExecutionTimeout: MEASURE_TIMEOUT_MS },
  searchAttributes: () => [],
};

/**
 * A drop's dry run (`drop --dry-run`, SDK `trash({ dryRun: true })`): the live table's shards, each asked of its node
 * what a drop with the same `cascade` would take along, detach, or be refused for.
 */
export interface PlanDropInput extends CatalogScoped {
  tableId: number;
  placement: ShardPlacement[];
  cascade?: boolean;
}

/** How long a dry run waits for the nodes' answers (within a contract call's plan, which has 30 s). */
export const PLAN_DROP_TIMEOUT_MS = 20_000;

/** A drop's dry run: one run per request (its id a fresh uuid), a read like `measure`: no lock, no step, nothing changed. */
export const PLAN_DROP: OperationRecord<'planDrop', string, PlanDropInput> = {
  name: 'planDrop',
  workflowType: 'planDrop',
  workflowId: (requestId, catalogId) => `plan-drop@${catalogId}-${requestId}`,
  locks: () => [],
  // As long as its caller waits for it: a run no worker took by then ends, as nobody reads its answer.
  start: { workflowIdConflictPolicy: 'FAIL', workflowExecutionTimeout: PLAN_DROP_TIMEOUT_MS },
  searchAttributes: () => [],
};

/** Which reconcile run: the schedule's pass (repairs), or a doctor's (reports only, one per request). */
export type ReconcileRun = { mode: 'repair' } | { mode: 'report'; requestId: string };

const reconcile: OperationRecord<'reconcile', ReconcileRun, ReconcileInput> = {
  name: 'reconcile',
  workflowType: 'reconcileTables',
  // The schedule's passes share one id (the schedule skips a pass while one runs); each doctor has its own.
  workflowId: (run, catalogId) => (run.mode === 'repair' ? scoped('reconcile', catalogId) : `doctor@${catalogId}-${run.requestId}`),
  // A pass takes a table's lock only to collect an orphan set of it, one at a time.
  locks: () => [],
  // (The schedule's action has no conflict policy: it skips a pass while one runs. A doctor's id is its own.)
  start: { workflowIdConflictPolicy: 'FAIL' },
  // Not a table operation: its runs carry no table's attributes.
  searchAttributes: () => [],
};

/** The records of the operations on a table: each is named once, by its record's `name`. */
const TABLE_OPERATION_RECORDS = [
  create,
  adopt,
  trash,
  adoptTrash,
  truncate,
  undelete,
  recallInPlace,
  purge,
  rename,
  hold,
  release,
  lease,
] as const;

type ByName<Records extends ReadonlyArray<{ name: string }>> = { [R in Records[number] as R['name']]: R };
const byName = <Records extends ReadonlyArray<{ name: string }>>(records: Records): ByName<Records> =>
  Object.fromEntries(records.map((r) => [r.name, r])) as ByName<Records>;

/** The operations on a table, by name (their TableOp). */
export const TABLE_OPERATIONS = byName(TABLE_OPERATION_RECORDS);

/** Every operation, the reconciler's pass and the measure of sizes included. */
export const OPERATIONS = { ...TABLE_OPERATIONS, expiry, reconcile, measure, planDrop: PLAN_DROP, configure, evict } as const;

/** The workflow ids of the table operations, read from their records (the form tests and tools address runs by). */
export const workflowIdFor = {
  ...(Object.fromEntries(TABLE_OPERATION_RECORDS.map((r) => [r.name, r.workflowId.bind(r)])) as {
    [Op in TableOp]: (typeof TABLE_OPERATIONS)[Op]['workflowId'];
  }),
  expiry: expiry.workflowId.bind(expiry),
  evict: (catalogId?: string) => evict.workflowId(undefined, catalogId),
};

/** The search attributes of one operation's run, so the UI answers "what happened to table 42" in one query. */
export function searchAttributesFor(op: TableOp, table: OperationTarget): SearchAttributePair[] {
  const pairs: SearchAttributePair[] = [{ key: SEARCH_ATTRIBUTES.tableOp, value: op }];
  if (table.tableId !== undefined) pairs.push({ key: SEARCH_ATTRIBUTES.tableId, value: table.tableId });
  if (table.namespace !== undefined) pairs.push({ key: SEARCH_ATTRIBUTES.tableNamespace, value: table.namespace });
  if (table.name !== undefined) pairs.push({ key: SEARCH_ATTRIBUTES.tableName, value: table.name });
  return pairs;
}

/**
 * The task queue of one storage node's worker, beside the deployment's queue `taskQueue` (so `tablefate` gives
 * `tablefate-storage-node-1`): shard work goes only to the worker that owns the node its placement names.
 */
export function storageQueue(taskQueue: string, node: string): string {
  return `${taskQueue}-storage-${node}`;
}

/** Any operation's record, read where only what is common to them all matters (the reconciler, the tests). */
export type AnyOperation = OperationRecord<string, unknown, unknown>;

/** How the reconciler runs `op` again for `table`, left in `op.resume.from`; undefined if `op` leaves no table half way. */
export function resumption(
  op: AnyOperation,
  table: TableKey,
  context: ResumeContext,
): { workflowType: string; workflowId: string; input: unknown } | undefined {
  if (!op.resume) return undefined;
  return {
    workflowType: op.workflowType,
    workflowId: op.workflowId(op.resume.subject(table), context.catalogId),
    input: op.resume.input(table, context),
  };
}

/**
 * The failure of a shard change made in the workflow task when the storage of the worker making it failed fatally
 * (a set left half renamed): that worker is stopping, and the workflow hands the change to the nodes' queues,
 * where it waits for a worker that serves the node again (once an operator has cleared its quarantine).
 */
export const STORAGE_STOPPED_HERE = 'StorageStoppedHere';
