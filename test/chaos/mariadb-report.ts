import type { ChaosReport } from './run-options';

/** The report's lines of a `--driver mariadb` run: the user's service, the cuts and restarts, the user's tables and objects. */
export function mariadbLines(report: ChaosReport): string[] {
  const m = report.mariadb;
  if (!m) return [];
  const { inserts, objects } = m;
  const others = [...inserts.otherErrors.values()].reduce((sum, n) => sum + n, 0);
  const drops = report.ops.filter((op) => op.request.kind === 'trash');
  const outcomes = (cascade: boolean) => {
    const counts = new Map<string, number>();
    for (const op of drops) {
      if (op.request.kind !== 'trash' || (op.request.cascade === true) !== cascade) continue;
      const label = op.outcome.kind === 'rejected' || op.outcome.kind === 'failed' ? op.outcome.type : op.outcome.kind;
      counts.set(label, (counts.get(label) ?? 0) + 1);
    }
    return [...counts.entries()].map(([label, n]) => `${label} ${n}`).join(', ') || 'none';
  };
  const lines = [
    `  storage: MariaDB tables, a server per node; ${m.rowsCommitted} rows seen committed by the user's service ` +
      `(${inserts.noRelation} inserts found no table, ${inserts.notOurs} reached a user's table and were rolled back, ` +
      `${inserts.uncertain} commits unheard, ${others} other failures); ${m.connectionCuts} worker sessions cut ` +
      `(KILL CONNECTION); ${m.serverRestarts} of ${report.options.mariadbRestarts} mariadbd SIGKILL + restarts`,
  ];
  for (const [message, n] of [...inserts.otherErrors.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3)) {
    lines.push(`    insert failed x${n}: ${message.slice(0, 160)}`);
  }
  lines.push(`  rows compared for ${m.shardsCheckedOnAnswer} shards right after a drop, recall or purge of their table answered`);
  lines.push(
    `  the user's objects: ${objects.made.trigger} triggers and ${objects.made['foreign key']} keys from tables of theirs made; ` +
      `${m.objectsLookedOnRecall} looked at right after a recall of their table answered; ` +
      `drops with cascade: ${outcomes(true)}; without: ${outcomes(false)}`,
  );
  for (const [reason, n] of [...objects.missed.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3)) {
    lines.push(`    made nothing x${n}: ${reason.slice(0, 160)}`);
  }
  lines.push(`  adopted: ${m.adopted}`, `  the user's own tables: ${m.userTables.join(', ')}`);
  return lines;
}
