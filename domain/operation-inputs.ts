import type { TableName } from './names';
import type { CreateParams } from './table';
import type { Backoff, LockWaitPolicy } from './backoff';
import type { SettingKey, SettingValue } from './settings';

/*
 * What each operation's workflow is started with: its input, as the client, the reconciler and any Temporal SDK caller
 * pass it (the published contract's schemas are made from these: contract/). Each operation's record, which says how
 * it is run (its workflow, id, locks, resumption), is in operations.ts.
 */

/** What starting an operation on a table needs to know of it. */
export interface TableKey extends TableName {
  id: number;
  shards: number;
  /** What its create asked for, so that a create resumed asks the same (absent in findings made before it was kept). */
  params?: CreateParams;
  /** The other tables of a drop of several as one that it is part of (TableRecord.droppedWith): resumed, they go together. */
  droppedWith?: number[];
}

/** What the reconcile workflow is asked to do: repair, or only report what it would repair (the doctor). */
export interface ReconcileInput {
  catalogId?: string;
  mode: 'repair' | 'report';
}

/**
 * What every operation's input carries: the identity of the catalog it belongs to, so that a worker serving
 * another catalog refuses it. Absent only in runs started before catalogs had identities.
 */
export interface CatalogScoped {
  catalogId?: string;
  /**
   * Who started the operation: the identity of the SDK client that started it (`user@host` by default), also in the
   * run's memo (STARTED_BY_MEMO), where `tablefate history` reads it. Absent in runs a workflow started (the
   * reconciler, the trash's expiry or space cap: see starterOf) and in runs started before it was recorded.
   */
  startedBy?: string;
}

/** What every operation's input carries besides its own arguments. */
export interface OperationScope extends CatalogScoped {
  /** How to wait for a busy table; DEFAULT_LOCK_WAIT when absent. */
  lockWait?: LockWaitPolicy;
}

export interface CreateInput extends TableName, OperationScope {
  shards: number;
  /** PostgreSQL driver: the table's columns, or the table whose structure it copies (CreateParams). */
  columns?: string;
  like?: string;
  /** PostgreSQL driver: register the table that already exists under this name on this node instead (an adopt). */
  adopt?: { node: string };
}

/**
 * The tables an operation over several addresses (a drop of several tables as one, their recall together): its table,
 * then those named with it.
 */
export function tablesOf(input: { tableId: number; together?: ReadonlyArray<{ tableId: number }> }): number[] {
  return [input.tableId, ...(input.together ?? []).map((other) => other.tableId)];
}

export interface TrashInput extends OperationScope {
  tableId: number;
  /** The name the client resolved to `tableId`: the trash refuses a table that no longer bears it. */
  expectedName?: TableName;
  /** Seconds to keep the data; the worker's configured default when absent. */
  retentionSeconds?: number;
  /** PostgreSQL driver: how long the move to the trash waits for other sessions to let go of the table. */
  drainTimeoutSeconds?: number;
  /**
   * PostgreSQL driver: the table goes with what depends on it (its views, moved along; live tables' keys, policies and
   * defaults on it, detached until its recall) rather than refused while anything does.
   */
  cascade?: boolean;
  /**
   * More tables dropped with this one as one operation (`drop a b c`), each with the name the client resolved to it: all
   * of them go to the trash, or none; each node moves its shards of them in one transaction.
   */
  together?: Array<{ tableId: number; expectedName?: TableName }>;
  /**
   * The drop is of this whole namespace (its tables are the drop's): PostgreSQL sets the schema aside with them, with
   * what else it holds, until their recall. (Not `namespace`: an adopt and drop's input is a table name, which has one.)
   */
  wholeNamespace?: string;
  /** How the expiry tries again when its purge fails; DEFAULT_EXPIRY_RETRY when absent (handed on to the expiry's run). */
  expiryRetry?: Backoff;
  /**
   * Who asked for the drop, when this run was started by another on their behalf: a drop the reconciler resumes carries
   * the `startedBy` of the run it resumes. The catalog records it as the table's droppedBy; absent, the run's startedBy.
   */
  droppedBy?: string;
}

/**
 * A truncate into the trash: the table's rows become a trash entry of their own (a new table id, under the table's name,
 * recallable, held, purged and expiring as a dropped table is), and the table stays live, empty, with its id, name and
 * definition. Drains as a drop does.
 */
export type TruncateInput = Pick<
  TrashInput,
  'tableId' | 'expectedName' | 'retentionSeconds' | 'drainTimeoutSeconds' | 'expiryRetry' | 'droppedBy' | keyof OperationScope
> & {
  /**
   * As `TRUNCATE ... CASCADE`: the tables whose foreign keys reference it, and theirs in turn (found on the nodes when the
   * run starts, each one tablefate's, or the truncate is refused naming the one that is not), are truncated with it.
   */
  cascade?: true;
  /**
   * The other tables truncated with it as one (a cascade's, as found; a truncate resumed, as its tables record them):
   * each one's rows an entry of its own, all of them or none; each node moves its shards of them in one transaction.
   */
  together?: Array<{ tableId: number }>;
};

/** How a truncate's answer begins its note of the other tables a cascade truncated with it. */
export const TRUNCATED_WITH_IT = 'truncated with it, each into an entry of its own: ';

/**
 * A truncate's entry recalled into its table's place: under the name's lock, the table (with the rows written to it
 * since) dropped into the trash, then the entry recalled under the name, as two runs of their own; the drop taken back
 * (the table recalled) if the recall is refused.
 */
export interface RecallInPlaceInput extends OperationScope {
  /** The trash entry a truncate made. */
  entryId: number;
  /** The table it was truncated from, live under `name`. */
  tableId: number;
  name: TableName;
  /** The table's drop: how long the trash keeps it (the retention in force where it lives when absent), its drain. */
  retentionSeconds?: number;
  drainTimeoutSeconds?: number;
  expiryRetry?: Backoff;
}

/**
 * PostgreSQL driver: a table tablefate does not keep yet, adopted and dropped into the trash in one operation: the
 * adopt's record and refusals, then the drop's move, drain and retention. Nothing of the table changes before the move.
 */
export interface AdoptTrashInput extends TableName, OperationScope {
  adopt: { node: string };
  retentionSeconds?: number;
  drainTimeoutSeconds?: number;
  cascade?: boolean;
  expiryRetry?: Backoff;
}

/**
 * A trashed table's expiry: the run that waits for it, at `trash:<tableId>`, started when the drop commits (or by the
 * reconciler, for a trash whose run is gone). It waits out the trash made at `droppedAt`, and only that one.
 */
export interface TrashExpiryInput extends OperationScope {
  tableId: number;
  droppedAt: number;
  /** How the expiry tries again when its purge fails; DEFAULT_EXPIRY_RETRY when absent. */
  expiryRetry?: Backoff;
  /** The trash where the table was dropped has a space cap: the cap's run looks at the trash again once this one waits. */
  requestEviction?: true;
}

export interface UndeleteInput extends OperationScope {
  tableId: number;
  /** The trashed name the client resolved to `tableId`, when it was given a name. */
  expectedName?: TableName;
  /** Restore under this name instead of the one the table had. */
  newName?: TableName;
  /**
   * The tables dropped with it as one that come back with it (those of its `droppedWith` still in the trash from that
   * drop), each with the trashed name the client resolved to it.
   */
  together?: Array<{ tableId: number; expectedName?: TableName; newName?: TableName }>;
}

export interface PurgeInput extends OperationScope {
  tableId: number;
  /**
   * `manual`: purge a trashed table now (a held one is OnHold). `expiry`: the trash timer fired for the trash that
   * happened at `droppedAt`; if the table has been restored (or trashed again since), is held, or its expiry was moved
   * later meanwhile, there is nothing to do yet. `policy`: the trash's settings purge the table of the trash at
   * `droppedAt` before its expiry (the trash is disabled, or over its space cap), unless it is held.
   */
  trigger: 'manual' | 'expiry' | 'policy';
  droppedAt?: number;
  /** Made by the trash's own expiry run (at its expiry), which needs no telling that it ended. */
  fromTrashRun?: true;
}

export interface RenameInput extends OperationScope {
  tableId: number;
  /** The name the client resolved to `tableId`, when it was given a name: a table renamed since is refused. */
  expectedName?: TableName;
  newName: TableName;
  /** PostgreSQL driver: how long the rename waits for other sessions to let go of the table. */
  drainTimeoutSeconds?: number;
}

/** A legal hold placed on a table (`hold`), or released (`hold` null). */
export interface HoldInput extends OperationScope {
  tableId: number;
  /** The name the client resolved to `tableId`, when it was given a name. */
  expectedName?: TableName;
  hold: { reason: string | null } | null;
}

/** A lease taken on a READY table, renewed, or released (domain/leases.ts). */
export type LeaseInput = CatalogScoped &
  (
    | { action: 'acquire'; leaseId: string; tableId: number; holder: string; ttlSeconds: number }
    | { action: 'renew'; leaseId: string; ttlSeconds?: number }
    | { action: 'release'; leaseId: string }
  );

/** A runtime setting set (`value`) or unset (no `value`), globally (`namespace` null) or for a namespace. */
export interface ConfigureInput extends CatalogScoped {
  key: SettingKey;
  namespace: string | null;
  value?: SettingValue;
}
