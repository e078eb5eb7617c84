import type { TableState } from '../domain/states';
import type { TableRecord } from '../domain/table';
import type { LockHolder } from './catalog';
import type { Lease } from '../domain/leases';
import type { SettingKey, SettingRow, SettingValue } from '../domain/settings';

/** What both SQL stores share: the shape of their rows, and how to read them as the catalog's records. */

/** A SQL list of state names (`'READY', 'TRASHED'`), for filters over fixed states. */
export const sqlList = (states: readonly string[]) => states.map((s) => `'${s}'`).join(', ');

/** The states `listTables` hides: tombstones always, the trash unless asked for. */
export const hiddenStates = (includeTrashed: boolean) => (includeTrashed ? ['PURGED'] : ['TRASHED', 'PURGING', 'PURGED']);

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
  hold_reason: string | null;
  held_at: number | null;
  /** Since schema version 3 (SQLite and PostgreSQL alike). */
  dropped_by: string | null;
  /** Since schema version 4: a JSON list of sentences, as text (SQLite) or already parsed (PostgreSQL's json). */
  family: string | string[] | null;
  /** Since schema version 5: a JSON list of table ids, as text (SQLite) or already parsed (PostgreSQL's json). */
  dropped_with: string | number[] | null;
  /** Since schema version 6: a truncate's trash entry (on the table truncating) and its table (on the entry). */
  truncate_into: number | string | null;
  truncated_from: number | string | null;
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
    droppedBy: row.dropped_by ?? null,
    ...(row.family === null || row.family === undefined ? {} : { family: json(row.family) }),
    ...(row.dropped_with === null || row.dropped_with === undefined ? {} : { droppedWith: json(row.dropped_with) }),
    ...(row.truncate_into === null || row.truncate_into === undefined ? {} : { truncateInto: Number(row.truncate_into) }),
    ...(row.truncated_from === null || row.truncated_from === undefined ? {} : { truncatedFrom: Number(row.truncated_from) }),
    expireAt: row.expire_at,
    purgedAt: row.purged_at,
    updatedAt: row.updated_at,
    hold: row.held_at === null || row.held_at === undefined ? null : { reason: row.hold_reason, since: row.held_at },
  };
}

export function toHolder(row: LockRow): LockHolder {
  return { resource: row.resource, workflowId: row.owner_workflow_id, runId: row.owner_run_id, since: row.since };
}

/** A table's columns and how each is read off its record, in the order of the stores' INSERT (both write the same row). */
const TABLE_ROW: Array<[column: string, value: (t: TableRecord) => unknown]> = [
  ['id', (t) => t.id],
  ['namespace', (t) => t.namespace],
  ['name', (t) => t.name],
  ['state', (t) => t.state],
  ['params', (t) => JSON.stringify(t.params)],
  ['placement', (t) => JSON.stringify(t.placement)],
  ['created_at', (t) => t.createdAt],
  ['dropped_at', (t) => t.droppedAt],
  ['expire_at', (t) => t.expireAt],
  ['purged_at', (t) => t.purgedAt],
  ['updated_at', (t) => t.updatedAt],
  ['hold_reason', (t) => t.hold?.reason ?? null],
  ['held_at', (t) => t.hold?.since ?? null],
  ['dropped_by', (t) => t.droppedBy ?? null],
  ['family', (t) => (t.family ? JSON.stringify(t.family) : null)],
  ['dropped_with', (t) => (t.droppedWith ? JSON.stringify(t.droppedWith) : null)],
  ['truncate_into', (t) => t.truncateInto ?? null],
  ['truncated_from', (t) => t.truncatedFrom ?? null],
];

/** The columns of an INSERT into `tables`, in the order of tableRowValues. */
export const TABLE_COLUMNS = TABLE_ROW.map(([column]) => column);

/** A table's values in the column order of an INSERT into `tables`. */
export const tableRowValues = (t: TableRecord): unknown[] => TABLE_ROW.map(([, value]) => value(t));

/** What an UPDATE never changes: a row's identity and birth. */
const FIXED = ['id', 'created_at'];
const UPDATED_ROW = TABLE_ROW.filter(([column]) => !FIXED.includes(column));

/**
 * The columns a table's row changes through (every one but id and created_at), in the order of the stores' UPDATE, then
 * the row's id and the state it must still be in: one list for both stores.
 */
export const UPDATED_TABLE_COLUMNS = UPDATED_ROW.map(([column]) => column);

export function tableUpdateValues(t: TableRecord, expected: TableState): unknown[] {
  return [...UPDATED_ROW.map(([, value]) => value(t)), t.id, expected];
}

/** A row of `settings`: namespace '' is the global value; the value is its JSON text. */
export interface SettingDbRow {
  key: string;
  namespace: string;
  value: string;
  updated_at: number;
}

export function toSetting(row: SettingDbRow): SettingRow {
  return {
    key: row.key as SettingKey,
    namespace: row.namespace === '' ? null : row.namespace,
    value: JSON.parse(row.value) as SettingValue,
    updatedAt: row.updated_at,
  };
}

/** A setting's values in the column order of an INSERT into `settings`. */
export const settingRowValues = (s: SettingRow): unknown[] => [s.key, s.namespace ?? '', JSON.stringify(s.value), s.updatedAt];

export interface LeaseRow {
  id: string;
  table_id: number;
  holder: string;
  ttl_seconds: number;
  acquired_at: number;
  expires_at: number;
}

export function toLease(row: LeaseRow): Lease {
  return {
    id: row.id,
    tableId: row.table_id,
    holder: row.holder,
    ttlSeconds: row.ttl_seconds,
    acquiredAt: row.acquired_at,
    expiresAt: row.expires_at,
  };
}

/** A lease's values in the column order of an INSERT into `leases`. */
export const leaseRowValues = (l: Lease): unknown[] => [l.id, l.tableId, l.holder, l.ttlSeconds, l.acquiredAt, l.expiresAt];
