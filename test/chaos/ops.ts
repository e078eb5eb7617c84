import type { LeaseInfo } from '../../domain/leases';
import type { TableInfo, TableRecord } from '../../domain/table';

/*
 * What a chaos run asks and hears: each request a client makes (OpRequest), what it learned (Outcome), and the record
 * of the call (OpRecord) that the checks read afterwards.
 */

export type OpRequest =
  | { kind: 'create'; table: string; shards: number; columns?: string }
  /**
   * `drainTimeoutSeconds`: how long the drop waits for the table's leases (and, postgres, its sessions); 60 s when absent.
   * `cascade` (postgres): with the table's family (the views the run made on it go along, its keys on it are detached).
   */
  | {
      kind: 'trash';
      table: string;
      retentionSeconds: number;
      drainTimeoutSeconds?: number;
      cascade?: boolean;
      /** Dropped as one with `table` (issue 42): all into the trash or none, one droppedAt, each naming the others. */
      together?: string[];
      /**
       * A whole namespace dropped as one (issue 42 item 7, namespaces.ts): every live table of it, and (postgres) its
       * schema set aside; `table` is then the lowest-id live table of it when the call was drawn, and `cascade` is implied.
       */
      namespace?: string;
    }
  /** `alone`: a table dropped with others comes back alone (without it the others still in the trash from that drop come too). */
  /** `newNamespace`: into another namespace, each table under its own name (with the schema, postgres). */
  | { kind: 'undelete'; tableId: number; newName?: string; alone?: boolean; newNamespace?: string }
  /**
   * A truncate into the trash (issue 43): the table's rows become a trash entry of their own (a new id, answered), the
   * table stays live and empty. By its id, or (`table`) by the name a live table holds when the call is made.
   * `drainTimeoutSeconds`: as a drop's.
   */
  | ({ kind: 'truncate'; retentionSeconds: number; drainTimeoutSeconds?: number } & ({ tableId: number } | { table: string }))
  | { kind: 'purge'; tableId: number }
  | { kind: 'hold'; tableId: number; reason: string }
  | { kind: 'release'; tableId: number }
  /** `aim`: what the draw meant the new expiry to be (already past, a few seconds on, or past the run), for the report. */
  | { kind: 'retention'; tableId: number; retentionSeconds: number; aim: RetentionAim }
  | { kind: 'lease'; tableId: number; ttlSeconds: number; holder: string }
  /** `tableId`: the table the lease was taken on, as far as the run knows (for the report and the checks). */
  | { kind: 'renewLease'; leaseId: string; tableId: number }
  | { kind: 'releaseLease'; leaseId: string; tableId: number };

export type OpKind = OpRequest['kind'];

export type RetentionAim = 'past' | 'soon' | 'long';

/** The operations of the trash's policies (the rest is a table's life). */
export const POLICY_KINDS: readonly OpKind[] = ['hold', 'release', 'retention', 'lease', 'renewLease', 'releaseLease'];

export type Outcome =
  /** The call succeeded with this table. */
  | { kind: 'ok'; table: TableInfo }
  /** A lease call succeeded with this lease (taken, renewed or released). */
  | { kind: 'leased'; lease: LeaseInfo }
  /** A typed domain error (its class name). */
  | { kind: 'rejected'; type: string; message: string }
  /** The operation's workflow failed with a failure that is no domain error (LockLost, StorageFault, ...). */
  | { kind: 'failed'; type: string; message: string }
  /** No answer: timed out, or the server or the worker could not be reached. It may have happened or not. */
  | { kind: 'unknown'; reason: string };

export interface OpRecord {
  seq: number;
  client: number;
  request: OpRequest;
  /** The target as the catalog held it just before the call: by id, or the table holding the name. */
  before: TableRecord | undefined;
  startedAt: number;
  endedAt: number;
  outcome: Outcome;
  /** `--caller sql`: the call went through the SQL door (sql-caller.ts); absent when it went through the SDK. */
  door?: DoorCallRecord;
  /** A whole namespace's drop an SDK client made by the command line (`tablefate drop --namespace`). */
  cli?: true;
}

/** A call through the SQL door: on which node, the statement, and what it learned of its request. */
export interface DoorCallRecord {
  node: string;
  /** The CALL as a person would type it. */
  call: string;
  /** The request the call made, when it knows it (its row, tablefate's error's DETAIL, TF001's message). */
  requestId?: number;
  sqlstate?: string;
  /** The type tablefate's error named (its DETAIL), or the SDK's type for a refusal of the procedure itself. */
  errorType?: string;
  /** Refused by the procedure itself, before any request: nothing was asked. */
  refusedBeforeRequest?: boolean;
}

/** The table id a request names, when it names one by id. */
export function requestedId(request: OpRequest): number | undefined {
  return 'tableId' in request ? request.tableId : undefined;
}

/** The table name a request names, when it names one by name (a create, a drop, a truncate by name). */
export function requestedName(request: OpRequest): string | undefined {
  return request.kind === 'create' || request.kind === 'trash' || (request.kind === 'truncate' && 'table' in request)
    ? request.table
    : undefined;
}

/** Every table id the calls aimed at or were answered with. */
export function idsMentioned(ops: readonly OpRecord[]): number[] {
  const ids: number[] = [];
  for (const op of ops) {
    if (op.before) ids.push(op.before.id);
    if (op.outcome.kind === 'ok')
      ids.push(op.outcome.table.id, ...(op.outcome.table.truncatedFrom === undefined ? [] : [op.outcome.table.truncatedFrom]));
    if (op.outcome.kind === 'leased') ids.push(op.outcome.lease.tableId);
    const requested = requestedId(op.request);
    if (requested !== undefined) ids.push(requested);
  }
  return ids;
}
