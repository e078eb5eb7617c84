import type { TableInfo } from '../domain/table';
import { describeFinding, type ReconcileReport } from '../domain/health';

const COLUMNS: Array<[header: string, value: (t: TableInfo) => string]> = [
  ['ID', (t) => String(t.id)],
  ['STATE', (t) => t.state],
  ['NAMESPACE', (t) => t.namespace],
  ['NAME', (t) => t.name],
  ['SHARDS', (t) => String(t.shards)],
  ['CREATED', (t) => t.createdAt],
  ['DROPPED', (t) => t.droppedAt ?? '-'],
  ['EXPIRES', (t) => t.expireAt ?? '-'],
];

/** Tables as aligned columns, like Pegasus's `ls`. */
export function formatTableList(tables: readonly TableInfo[]): string {
  const rows = [COLUMNS.map(([header]) => header), ...tables.map((t) => COLUMNS.map(([, value]) => value(t)))];
  const widths = COLUMNS.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** One table, a field per line. */
export function formatTable(table: TableInfo): string {
  const fields: Array<[string, string]> = [
    ['id', String(table.id)],
    ['name', `${table.namespace}.${table.name}`],
    ['state', table.state],
    ['shards', table.placement.map((p) => `${p.shard}@${p.node}`).join(' ')],
    ['created', table.createdAt],
    ['dropped', table.droppedAt ?? '-'],
    ['expires', table.expireAt ?? '-'],
    ['purged', table.purgedAt ?? '-'],
  ];
  const width = Math.max(...fields.map(([k]) => k.length));
  return fields.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}

/** The doctor's report: one line per finding, and the nodes it could not look at. */
export function formatHealth(report: ReconcileReport): string {
  const lines = report.findings.map((f) => `${f.kind.padEnd(13)} ${describeFinding(f)}`);
  if (report.omitted > 0) lines.push(`... and ${report.omitted} more (a survey lists ${report.findings.length})`);
  for (const node of report.skippedNodes)
    lines.push(`${'not checked'.padEnd(13)} ${node}: its files were not looked at (quarantined, or its storage worker did not answer)`);
  if (report.findings.length === 0 && report.skippedNodes.length === 0) lines.unshift('healthy: nothing for the reconciler to do');
  return lines.join('\n');
}
