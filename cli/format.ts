import { formatTableName } from '../domain/names';
import type { TableInfo } from '../domain/table';
import type { OperationInfo } from '../domain/operation-runs';
import type { LeaseInfo } from '../domain/leases';
import { formatSettingValue, type EffectiveSetting } from '../domain/settings';
import { describeFindingLines, type ReconcileReport } from '../domain/health';

/** A table of text: its rows, each a cell per column (the first row its header, if it has one). */
export type Rows = readonly (readonly string[])[];

/**
 * The one renderer of tables of text: every listing of the command line, and the contract's Markdown tables
 * (cli/contract-text.ts). `aligned`: each column padded to its widest cell, two spaces apart, and no blanks at a line's
 * end. `markdown`: a Markdown table, the first row its header.
 */
export function renderRows(rows: Rows, style: 'aligned' | 'markdown' = 'aligned'): string {
  if (style === 'markdown') {
    const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
    const [header = [], ...body] = rows;
    return [line(header), `|${header.map(() => '---|').join('')}`, ...body.map(line)].join('\n');
  }
  const widths = (rows[0] ?? []).map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** Columns of a listing: each its header, and its cell of an item. */
type Columns<T> = ReadonlyArray<readonly [header: string, value: (item: T) => string]>;

/** Items as aligned columns under their headers. */
function formatColumns<T>(columns: Columns<T>, items: readonly T[]): string {
  return renderRows([columns.map(([header]) => header), ...items.map((item) => columns.map(([, value]) => value(item)))]);
}

const COLUMNS: Columns<TableInfo> = [
  ['ID', (t) => String(t.id)],
  ['STATE', (t) => t.state],
  ['NAMESPACE', (t) => t.namespace],
  ['NAME', (t) => t.name],
  ['SHARDS', (t) => String(t.shards)],
  ['SIZE', (t) => formatBytes(t.bytes)],
  ['CREATED', (t) => t.createdAt],
  ['DROPPED', (t) => t.droppedAt ?? '-'],
  ['BY', (t) => droppedBy(t)],
  ['EXPIRES', (t) => t.expireAt ?? '-'],
  ['HOLD', (t) => (t.hold ? (t.hold.reason ?? 'held') : '-')],
  ['WITH', (t) => withCell(t)],
];

/**
 * What a table's drop took along: the tables dropped with it as one, then its family as the drop said it, without the
 * table's name before each sentence; for a truncate's entry, the table whose rows it holds.
 */
function withCell(t: TableInfo): string {
  const parts = [
    ...(t.truncatedFrom !== undefined ? [`truncated from table ${t.truncatedFrom}`] : []),
    ...(t.droppedWith && t.droppedWith.length > 0 ? [`tables ${t.droppedWith.join(', ')}`] : []),
    ...(t.family ?? []).map((said) => said.replace(/^[^:]*: /, '')),
  ];
  return parts.length > 0 ? parts.join('; ') : '-';
}

/** Who dropped a table: `-` when it was not dropped, `?` when its drop did not say (one made before it was recorded). */
function droppedBy(t: TableInfo): string {
  if (t.droppedBy !== null && t.droppedBy !== undefined) return t.droppedBy;
  return t.droppedAt === null ? '-' : '?';
}

const UNITS = ['bytes', 'kB', 'MB', 'GB', 'TB'];

/**
 * A size as PostgreSQL's pg_size_pretty writes it (`8192 bytes`, `16 kB`, `1234 MB`: a unit of 1024 once the number
 * would pass 10240 of the smaller one); `?` when the nodes did not say, `-` when it was not asked.
 */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === undefined) return '-';
  if (bytes === null) return '?';
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 10 * 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${Math.round(value)} ${UNITS[unit]}`;
}

/** Tables as aligned columns, like Pegasus's `ls`. */
export function formatTableList(tables: readonly TableInfo[]): string {
  return formatColumns(COLUMNS, tables);
}

const LEASE_COLUMNS: Columns<LeaseInfo> = [
  ['LEASE', (l) => l.id],
  ['TABLE', (l) => String(l.tableId)],
  ['HOLDER', (l) => l.holder],
  ['TTL', (l) => `${l.ttlSeconds} s`],
  ['ACQUIRED', (l) => l.acquiredAt],
  ['EXPIRES', (l) => l.expiresAt],
];

/** Leases as aligned columns (`lease ls`). */
export function formatLeaseList(leases: readonly LeaseInfo[]): string {
  return formatColumns(LEASE_COLUMNS, leases);
}

const SETTING_COLUMNS: Columns<EffectiveSetting> = [
  ['KEY', (s) => s.key],
  ['VALUE', (s) => formatSettingValue(s.value)],
  ['FROM', (s) => (s.source === 'namespace' ? `namespace ${s.namespace}` : s.source)],
];

/** Settings in force, with where each value comes from (`config get`). */
export function formatSettings(settings: readonly EffectiveSetting[]): string {
  return formatColumns(SETTING_COLUMNS, settings);
}

const OPERATION_COLUMNS: Columns<OperationInfo> = [
  ['STARTED', (o) => o.startedAt],
  ['OPERATION', (o) => o.operation],
  ['TABLE', (o) => (o.tableId === null ? '-' : String(o.tableId))],
  ['NAME', (o) => o.table ?? '-'],
  ['STATUS', (o) => o.status],
  ['CLOSED', (o) => o.closedAt ?? '-'],
  ['BY', (o) => o.startedBy],
  ['WORKFLOW', (o) => o.workflowId],
  ['STEP', (o) => o.currentStep ?? '-'],
];

/** Operations as aligned columns (`ops`), newest first as given; STEP is a running one's current details. */
export function formatOperations(operations: readonly OperationInfo[]): string {
  return formatColumns(OPERATION_COLUMNS, operations);
}

/** One table's life (`history`): a line of what the catalog says of it now, then its operations (without its id). */
export function formatHistory(history: { table: TableInfo; operations: readonly OperationInfo[] }): string {
  const t = history.table;
  const now =
    t.state === 'PURGED'
      ? `PURGED at ${t.purgedAt ?? '?'} (a tombstone)`
      : t.state === 'TRASHED'
        ? `TRASHED since ${t.droppedAt ?? '?'}${t.droppedBy ? ` by ${t.droppedBy}` : ''}, expires ${t.expireAt ?? '?'}`
        : t.state;
  const hold = t.hold ? `, on hold${t.hold.reason ? `: ${t.hold.reason}` : ''}` : '';
  const head = `table ${t.id} ${formatTableName(t)}: ${now}${hold}`;
  if (history.operations.length === 0) {
    return `${head}\nno operation on it is left in the server's visibility (runs are kept for the namespace's retention)`;
  }
  return `${head}\n\n${formatColumns(
    OPERATION_COLUMNS.filter(([header]) => header !== 'TABLE'),
    history.operations,
  )}`;
}

/** A size for `describe`: pretty, and exact when the pretty form rounded it (`16 kB (16384 bytes)`). */
function describeBytes(bytes: number | null | undefined): string {
  const pretty = formatBytes(bytes);
  return typeof bytes === 'number' && pretty !== `${bytes} bytes` ? `${pretty} (${bytes} bytes)` : pretty;
}

/** One table, a field per line. */
export function formatTable(table: TableInfo): string {
  const fields: Array<[string, string]> = [
    ['id', String(table.id)],
    ['name', formatTableName(table)],
    ['state', table.state],
    ['shards', table.placement.map((p) => `${p.shard}@${p.node}`).join(' ')],
    // Only where it was asked of the nodes (describe); a write's answer has none.
    ...(table.bytes !== undefined ? [['size', describeBytes(table.bytes)] as [string, string]] : []),
    ['created', table.createdAt],
    ['dropped', table.droppedAt ?? '-'],
    ['dropped by', droppedBy(table)],
    ['expires', table.expireAt ?? '-'],
    ['purged', table.purgedAt ?? '-'],
    ['hold', table.hold ? `since ${table.hold.since}${table.hold.reason ? `: ${table.hold.reason}` : ' (no reason given)'}` : '-'],
  ];
  if (table.truncatedFrom !== undefined) fields.push(['truncated from', `table ${table.truncatedFrom}`]);
  if (table.droppedWith && table.droppedWith.length > 0) fields.push(['dropped with', `tables ${table.droppedWith.join(', ')}`]);
  for (const member of table.family ?? []) fields.push(['with', member]);
  for (const note of table.notes ?? []) fields.push(['note', note]);
  return renderRows(fields);
}

/** The doctor's report: one line per finding, and the nodes it could not look at. */
export function formatHealth(report: ReconcileReport): string {
  // A shard table changed outside tablefate: one line per difference (dropped, renamed, moved, another owner).
  const lines = report.findings.flatMap((f) => describeFindingLines(f).map((line) => `${f.kind.padEnd(13)} ${line}`));
  if (report.omitted > 0) lines.push(`... and ${report.omitted} more (a survey lists ${report.findings.length})`);
  for (const node of report.skippedNodes)
    lines.push(`${'not checked'.padEnd(13)} ${node}: its files were not looked at (quarantined, or its storage worker did not answer)`);
  if (report.findings.length === 0 && report.skippedNodes.length === 0) lines.unshift('healthy: nothing for the reconciler to do');
  return lines.join('\n');
}
