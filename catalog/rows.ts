import { TableExistsError, WrongStateError, domainError, isDomainErrorType } from '../domain/errors';
import { formatTableName } from '../domain/names';
import { canTransition, columnsOnEntering, type StateColumns } from '../domain/states';
import type { TableState } from '../domain/states';
import { sameCreateParams, type TableRecord } from '../domain/table';
import type { LockHolder, LockOwner, PrepareCreateRequest, TransitionRequest } from './catalog';

/** What both catalog stores share: the shape of their rows and of a journaled outcome, and how to read them. */

/** A SQL list of state names (`'READY', 'TRASHED'`), for indexes and filters over fixed states. */
export const sqlList = (states: readonly string[]) => states.map((s) => `'${s}'`).join(', ');

/** A journaled outcome: what the call returned, or the error it failed with for good (a domain error, a storage fault). */
export type Outcome<T> = { value: T } | { error: { type: string; message: string } };

/** A row of `tables`; params and placement are JSON, as text (SQLite) or already parsed (PostgreSQL's json). */
export interface TableRow {
  id: number;
  namespace: string;
  name: string;
  state: TableState;
  params: string | TableRecord['params'];
  placement: string | TableRecord['placement'];
  created_at: number;
  dropped_at: number | null;
  expire_at: number | null;
  purged_at: number | null;
  updated_at: number;
}

export interface LockRow {
  resource: string;
  owner_workflow_id: string;
  owner_run_id: string;
  since: number;
}

const json = <T>(value: string | T): T => (typeof value === 'string' ? (JSON.parse(value) as T) : value);

export function toRecord(row: TableRow): TableRecord {
  return {
    id: row.id,
    namespace: row.namespace,
    name: row.name,
    state: row.state,
    params: json(row.params),
    placement: json(row.placement),
    createdAt: row.created_at,
    droppedAt: row.dropped_at,
    expireAt: row.expire_at,
    purgedAt: row.purged_at,
    updatedAt: row.updated_at,
  };
}

export function toHolder(row: LockRow): LockHolder {
  return { resource: row.resource, workflowId: row.owner_workflow_id, runId: row.owner_run_id, since: row.since };
}

export const sameOwner = (a: LockOwner, b: LockOwner) => a.workflowId === b.workflowId && a.runId === b.runId;

/** The journaled value, or the journaled domain error thrown again. */
export function unwrap<T>(outcome: Outcome<T>): T {
  if ('value' in outcome) return outcome.value;
  if (isDomainErrorType(outcome.error.type)) throw domainError(outcome.error.type, outcome.error.message);
  throw new Error(outcome.error.message);
}

/** The holder of a lock an attempt found busy, if it did. */
export function busyHolder(outcome: Outcome<object>): LockHolder | undefined {
  if (!('value' in outcome)) return undefined;
  const result = outcome.value;
  if ('outcome' in result && result.outcome === 'busy' && 'holder' in result) return result.holder as LockHolder;
  if ('acquired' in result && result.acquired === false && 'holder' in result) return result.holder as LockHolder;
  return undefined;
}

/** What a transition asks of a table's row, decided before any write: nothing (already made), or these columns. */
export type TransitionPlan =
  { made: true; table: TableRecord } | { made: false; name: { namespace: string; name: string }; columns: Required<StateColumns> };

/**
 * The checks every store makes before a state change, on the row as it is under the lock (the caller has checked
 * the lock): the name the caller expects, a move an earlier attempt already made (a success, if it is the same
 * move under the same name), and the transition table. Throws WrongState; returns what to write otherwise.
 */
export function planTransition(current: TableRecord, req: TransitionRequest): TransitionPlan {
  if (req.expectName && (req.expectName.namespace !== current.namespace || req.expectName.name !== current.name)) {
    throw new WrongStateError(
      `table ${req.tableId} is named ${formatTableName(current)}, not ${formatTableName(req.expectName)}: ` +
        `the name was resolved from a catalog that has changed since; nothing was done`,
    );
  }
  const wanted = { namespace: req.rename?.namespace ?? current.namespace, name: req.rename?.name ?? current.name };
  // Already made: an earlier run of this operation that stopped half way, which this one resumes. It must be the
  // same move, under the same name.
  const sameName = wanted.namespace === current.namespace && wanted.name === current.name;
  // A move within a state (READY to READY: a rename) is made unless the table already bears the name.
  const withinState = current.state === req.to && req.from.includes(current.state) && canTransition(current.state, req.to);
  if (current.state === req.to && (sameName || !withinState)) {
    if (sameName) return { made: true, table: current };
    throw new WrongStateError(
      `table ${req.tableId} is already ${current.state} as ${formatTableName(current)}, not ${formatTableName(wanted)}`,
    );
  }
  if (!req.from.includes(current.state) || !canTransition(current.state, req.to)) {
    throw new WrongStateError(`table ${req.tableId} is ${current.state}; expected ${req.from.join(' or ')} to move it to ${req.to}`);
  }
  const set = columnsOnEntering(current.state, req.to, req.now, { retentionSeconds: req.retentionSeconds });
  const columns = {
    droppedAt: set.droppedAt !== undefined ? set.droppedAt : current.droppedAt,
    expireAt: set.expireAt !== undefined ? set.expireAt : current.expireAt,
    purgedAt: set.purgedAt !== undefined ? set.purgedAt : current.purgedAt,
  };
  return { made: false, name: wanted, columns };
}

/**
 * What a create's prepare does when its name is held by `holder`: the same create already committed (`exists`),
 * or its own prepare record, to resume under the table's lock (`resume`). Anything else is TableExists.
 */
export function planPrepare(holder: TableRecord, req: PrepareCreateRequest): 'exists' | 'resume' {
  const label = formatTableName(req);
  const sameParams = sameCreateParams(holder.params, req.params);
  switch (holder.state) {
    case 'READY':
      if (sameParams) return 'exists';
      throw new TableExistsError(`table ${label} exists (id ${holder.id}) with ${holder.params.shards} shards, not ${req.params.shards}`);
    case 'CREATING':
    case 'CREATE_FAILED':
      if (sameParams) return 'resume';
      throw new TableExistsError(
        `table ${label} has a prepared create (id ${holder.id}, ${holder.params.shards} shards, ${holder.state}); ` +
          `repeat that create to finish it`,
      );
    default:
      throw new TableExistsError(`the name ${label} is held by table ${holder.id}, which is ${holder.state}`);
  }
}
