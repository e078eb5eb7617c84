import fs from 'node:fs';
import { mariadbLines } from './mariadb-report';
import type { ChaosReport } from './run-options';
import type { OpKind, OpRecord } from './ops';

/** The summary a person reads after a run: what was done, what was broken, and where the evidence is. */

const KINDS: readonly OpKind[] = [
  'create',
  'trash',
  'truncate',
  'undelete',
  'purge',
  'hold',
  'release',
  'retention',
  'lease',
  'renewLease',
  'releaseLease',
];

function outcomeLabel(op: OpRecord): string {
  switch (op.outcome.kind) {
    case 'ok':
    case 'leased':
      return 'ok';
    case 'rejected':
      return op.outcome.type;
    case 'failed':
      return `failed:${op.outcome.type}`;
    case 'unknown':
      return 'unknown';
  }
}

function countBy<T>(items: readonly T[], key: (item: T) => string): Array<[string, number]> {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1);
  return [...counts.entries()].sort((a, b) => b[1] - a[1]);
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

const CALLERS: Readonly<Record<ChaosReport['options']['caller'], string>> = {
  sdk: 'the SDK',
  cli: 'the command line',
  sql: "the SQL door (its calls on tables of one shard; the rest the SDK's)",
};

/** The calls through the SQL door, and what the end of the run found of their requests. */
function doorLines(report: ChaosReport): string[] {
  const calls = report.ops.filter((op) => op.door !== undefined);
  if (report.options.caller !== 'sql') return [];
  const count = (pick: (op: OpRecord) => boolean) => calls.filter(pick).length;
  const lines = [
    `  SQL door: ${calls.length} calls (${countBy(calls, (op) => op.request.kind)
      .map(([kind, n]) => `${kind} ${n}`)
      .join(', ')}), ${report.ops.length - calls.length} other calls through the SDK; ` +
      `${count((op) => op.outcome.kind === 'ok')} answered a table, ` +
      `${count((op) => op.outcome.kind === 'rejected' && !op.door?.refusedBeforeRequest)} tablefate's refusal, ` +
      `${count((op) => op.door?.refusedBeforeRequest === true)} refused before any request, ` +
      `${count((op) => op.outcome.kind === 'unknown')} no answer (${count((op) => op.door?.sqlstate === 'TF001')} TF001), ` +
      `${count((op) => op.outcome.kind === 'failed')} failed`,
  ];
  const door = report.door;
  if (door) {
    const errors = Object.entries(door.answeredWithError)
      .sort((a, b) => b[1] - a[1])
      .map(([type, n]) => `${type} ${n}`);
    lines.push(
      `  SQL door's requests on the nodes: ${door.requests}, ${door.answered} answered (${door.answeredOk} with a table, ` +
        `${door.answeredAtPlan} of them at their plan; ${errors.join(', ') || 'no error'}); ${door.runsChecked} runs looked up` +
        (door.answerSeconds
          ? `; answered ${door.answerSeconds.median.toFixed(1)} s after the request (median), ` +
            `${door.answerSeconds.p90.toFixed(1)} s (90th percentile), ${door.answerSeconds.max.toFixed(1)} s at most`
          : ''),
    );
  }
  return lines;
}

/**
 * The truncates (issue 43): how they were asked, what they answered, how many had a worker SIGKILLed while they ran (or
 * their table's node, with remote storage), their entries at rest, and how many were looked at right after the answer.
 */
function truncateLines(report: ChaosReport): string[] {
  const truncates = report.ops.filter((op) => op.request.kind === 'truncate');
  if (truncates.length === 0) return [];
  const byName = truncates.filter((op) => op.request.kind === 'truncate' && 'table' in op.request).length;
  const previous = new Map<number, OpRecord>();
  let afterLease = 0;
  let afterCreate = 0;
  for (const op of report.ops) {
    const before = previous.get(op.client);
    if (op.request.kind === 'truncate' && before?.outcome.kind === 'leased' && before.request.kind === 'lease') afterLease++;
    const created = before?.request.kind === 'create' && before.outcome.kind === 'ok' ? before.outcome.table.id : undefined;
    if (op.request.kind === 'truncate' && 'tableId' in op.request && op.request.tableId === created) afterCreate++;
    previous.set(op.client, op);
  }
  const kills = [...report.stats.killedAt.values()];
  const killed = truncates.filter((op) => kills.some((at) => at >= op.startedAt && at <= op.endedAt));
  const entries = (report.convergence?.snapshot.tables ?? []).filter((t) => t.truncatedFrom !== undefined);
  const states = countBy(entries, (t) => t.state)
    .map(([state, n]) => `${state} ${n}`)
    .join(', ');
  return [
    `  truncates: ${truncates.length} (${truncates.length - byName} by id, ${byName} by name, ${afterLease} right after a lease, ` +
      `${afterCreate} right after their table's create); ` +
      `${killed.length} had a process SIGKILLed while they ran (${
        countBy(killed, outcomeLabel)
          .map(([label, n]) => `${label} ${n}`)
          .join(', ') || '-'
      }); ` +
      `entries at rest: ${entries.length}${states ? ` (${states})` : ''}; ${report.truncatesCheckedOnAnswer ?? 0} of their shards ` +
      'looked at right after the answer',
  ];
}

/** The user's views and keys on the tables (postgres driver), and the drops that met them. */
function familyLines(report: ChaosReport): string[] {
  const families = report.postgres?.families;
  if (!families) return [];
  const { made, viewsOnViews, missed, orphans } = families;
  const drops = report.ops.filter((op) => op.request.kind === 'trash');
  const asked = (cascade: boolean) =>
    countBy(
      drops.filter((op) => op.request.kind === 'trash' && (op.request.cascade === true) === cascade),
      outcomeLabel,
    )
      .map(([label, n]) => `${label} ${n}`)
      .join(', ') || 'none';
  const lines = [
    `  families: ${made.view} views (${viewsOnViews} on a view), ${made['materialized view']} materialized views, ` +
      `${made['foreign key']} foreign keys and ${made.policy} policies of the user's tables made; ` +
      `${orphans.committed} rows matching no parent went in, ${orphans.refused} refused by their key`,
    `  drops with cascade: ${asked(true)}; without: ${asked(false)}`,
  ];
  for (const [reason, n] of [...missed.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3)) {
    lines.push(`    made nothing x${n}: ${reason.slice(0, 160)}`);
  }
  return lines;
}

/** The fields of a pino line (ours, or the Temporal SDK's routed through pino) that say what went wrong. */
interface LogEntry {
  level?: number;
  msg?: string;
  activityType?: string;
  workflowType?: string;
  err?: { type?: string; message?: string };
  error?: string | { type?: string; message?: string };
}

// Built from a string: a control character in a regex literal is what no-control-regex is there to catch.
const ANSI_COLOUR = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');

/** A raw log line without colours, its timestamp, and the run and task ids that make every line unique. */
function normalize(line: string): string {
  return line
    .replace(ANSI_COLOUR, '')
    .replace(/^\s*\d{4}-\d\d-\d\dT[0-9:.]+Z\s*/, '')
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(:\d+:\d+)?/g, '<run>');
}

/** The worker log's warnings and errors, by message, most frequent first. */
export function summarizeWorkerLog(file: string, limit = 8): string[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const messages: string[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim() || line.startsWith('--- ')) continue;
    try {
      const entry = JSON.parse(line) as LogEntry;
      if ((entry.level ?? 0) < 40) continue;
      const about = entry.activityType ?? entry.workflowType;
      const error = typeof entry.error === 'string' ? entry.error : (entry.err ?? entry.error);
      const detail = typeof error === 'string' ? error : [error?.type, error?.message].filter(Boolean).join(': ');
      messages.push(`${entry.msg ?? '?'}${about ? ` (${about})` : ''}${detail ? `: ${detail}` : ''}`.slice(0, 240));
    } catch {
      // Not pino's: a stack trace or the SDK core's own output; the first line of each is enough.
      if (!/^\s+at /.test(line)) messages.push(normalize(line).slice(0, 240));
    }
  }
  return countBy(messages, (m) => m)
    .slice(0, limit)
    .map(([message, count]) => `${String(count).padStart(4)} x ${message}`);
}

export function formatReport(report: ChaosReport): string {
  const lines: string[] = [];
  const { stats, options } = report;
  lines.push(`tablefate chaos run, seed ${report.seed}${report.aborted ? ' (ABORTED)' : ''}`);
  lines.push(
    `  ${report.ops.length} of ${options.ops} operations by ${options.clients} clients in ${seconds(report.opsPhaseMs)}; ` +
      `total ${seconds(report.durationMs)}`,
  );
  if (options.catalog !== 'sqlite' || options.workers !== 1 || options.storage !== 'local' || options.caller !== 'sdk') {
    lines.push(
      `  catalog: ${options.catalog}; ${options.workers} worker${options.workers === 1 ? '' : 's'} at once (${options.killWorkers} killed); ` +
        `storage ${options.storage}${options.storage === 'remote' ? ` (${options.killNodes} node${options.killNodes === 1 ? '' : 's'} killed)` : ''}; ` +
        `calls by ${CALLERS[options.caller]}`,
    );
  }
  for (const kind of KINDS) {
    const ops = report.ops.filter((op) => op.request.kind === kind);
    const outcomes = countBy(ops, outcomeLabel).map(([label, n]) => `${label} ${n}`);
    lines.push(`  ${kind.padEnd(12)} ${String(ops.length).padStart(4)}: ${outcomes.join(', ') || '-'}`);
  }
  const drains = report.ops.filter(
    (op) => (op.request.kind === 'trash' || op.request.kind === 'truncate') && op.request.drainTimeoutSeconds !== undefined,
  );
  const aims = countBy(
    report.ops.filter((op) => op.request.kind === 'retention' && op.outcome.kind === 'ok'),
    (op) => (op.request.kind === 'retention' ? op.request.aim : ''),
  );
  lines.push(
    `  policies: ${drains.length} drops or truncates with a short drain timeout (${countBy(drains, outcomeLabel)
      .map(([label, n]) => `${label} ${n}`)
      .join(', ')}); retentions answered: ${aims.map(([aim, n]) => `${aim} ${n}`).join(', ') || 'none'}`,
  );
  lines.push(...truncateLines(report));
  if (report.holds) {
    const { held, heldPastExpiry, released } = report.holds;
    lines.push(
      `  holds: ${held} table(s) held at rest before the release (${heldPastExpiry} of them in the trash past their expiry); ` +
        `${released.length} released by the run then (${released.filter((r) => r.state === 'TRASHED' && r.expireAt !== null && r.expireAt < r.at).length} expired)`,
    );
  }
  const unknown = countBy(
    report.ops.filter((op) => op.outcome.kind === 'unknown'),
    (op) => (op.outcome.kind === 'unknown' ? op.outcome.reason.slice(0, 160) : ''),
  );
  for (const [reason, n] of unknown.slice(0, 5)) lines.push(`    unknown x${n}: ${reason}`);
  const slowest = [...report.ops].sort((a, b) => b.endedAt - b.startedAt - (a.endedAt - a.startedAt)).slice(0, 3);
  const slow = slowest.map((op) => `#${op.seq} ${op.request.kind} ${seconds(op.endedAt - op.startedAt)} (${outcomeLabel(op)})`);
  lines.push(`  slowest: ${slow.join(', ') || '-'}`);
  lines.push(
    `  processes: ${stats.workerKills} SIGKILLs (${
      Object.entries(stats.killsOf)
        .map(([name, n]) => `${name} ${n}`)
        .join(', ') || 'none'
    }; ` +
      `${stats.killsOnOpStart} right after an operation started), ${stats.workerStarts} starts, ` +
      `${stats.workerExits.length} exits on its own (${stats.workerExits.filter((e) => e.serverTrouble).length} with the server in trouble), ` +
      `${stats.workersNeverReady} never polled`,
  );
  lines.push(
    options.temporal === 'cluster'
      ? `  Temporal cluster: ${stats.serverRestarts} of ${options.serverRestarts} SIGKILL + restarts of a history process`
      : `  dev server: ${stats.serverRestarts} of ${options.serverRestarts} SIGKILL + restarts on the same port and db`,
  );
  if (report.holdCheckpoint) {
    lines.push(
      report.holdCheckpoint.converged
        ? `  at rest with the holds on ${seconds(report.holdCheckpoint.waitedMs)} after the chaos stopped`
        : `  NOT at rest with the holds on after ${seconds(report.holdCheckpoint.waitedMs)}`,
    );
  }
  if (report.convergence) {
    lines.push(
      report.convergence.converged
        ? `  at rest ${seconds(report.convergence.waitedMs)} after the holds were released`
        : `  NOT at rest after ${seconds(report.convergence.waitedMs)} (limit ${seconds(options.convergenceTimeoutMs)})`,
    );
  }
  lines.push(...doorLines(report));
  lines.push(...mariadbLines(report));
  if (report.postgres) {
    const { inserts, rowsCommitted, connectionCuts, userTables, shardsCheckedOnAnswer } = report.postgres;
    const others = [...inserts.otherErrors.values()].reduce((sum, n) => sum + n, 0);
    lines.push(
      `  storage: PostgreSQL tables; ${rowsCommitted} rows seen committed by the user's service ` +
        `(${inserts.noRelation} inserts found no table, ${inserts.notOurs} reached a user's table and were rolled back, ` +
        `${inserts.uncertain} commits unheard, ${others} other failures); ${connectionCuts} storage connections cut`,
    );
    for (const [message, n] of [...inserts.otherErrors.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3)) {
      lines.push(`    insert failed x${n}: ${message.slice(0, 160)}`);
    }
    lines.push(`  rows compared for ${shardsCheckedOnAnswer} shards right after a trash or recall of their table answered`);
    lines.push(...familyLines(report));
    lines.push(`  the user's own tables: ${userTables.join(', ')}`);
    const { lockWaits } = report.postgres;
    const looks = lockWaits.reduce((sum, w) => sum + w.seen, 0);
    lines.push(
      `  lock waits over 5 s on the nodes: ${lockWaits.length === 0 ? 'none seen' : `${looks} seen, ${lockWaits.length} kinds; the most seen:`}`,
    );
    for (const wait of lockWaits.slice(0, 4)) {
      lines.push(`    x${wait.seen} (longest ${seconds(wait.longestS * 1000)}) ${wait.waiter}`, `      waited for ${wait.blocker}`);
    }
  }
  lines.push(`  checked ${report.tables} tables; ${report.storageSummary}`);
  lines.push('');
  if (report.aborted) lines.push('interrupted: the invariants were not checked');
  else lines.push(report.problems.length === 0 ? 'no problems found' : `${report.problems.length} PROBLEM(S):`);
  for (const p of report.problems) lines.push(`  [${p.invariant}] ${p.detail}`);
  if (report.notes.length > 0) {
    lines.push('', `notes (${report.notes.length}):`);
    for (const note of report.notes.slice(0, 15)) lines.push(`  ${note}`);
    if (report.notes.length > 15) lines.push(`  ... and ${report.notes.length - 15} more`);
  }
  const workerLog = report.workerLogSummary;
  if (workerLog.length > 0) {
    lines.push('', 'worker log, warnings and errors by message:');
    lines.push(...workerLog.map((l) => `  ${l}`));
  }
  lines.push(
    '',
    report.kept ? `state, catalog and logs kept in ${report.dir} (worker.log, temporal.log, home/)` : 'state directory removed',
  );
  lines.push(
    `repeat with: npm run chaos -- --seed ${report.seed} --ops ${options.ops} --clients ${options.clients} ` +
      `--server-restarts ${options.serverRestarts} --converge-seconds ${options.convergenceTimeoutMs / 1000}` +
      (options.temporal === 'dev' ? '' : ` --temporal ${options.temporal}`) +
      (options.catalog === 'sqlite' ? '' : ` --catalog ${options.catalog}`) +
      (options.driver === 'files' ? '' : ` --driver ${options.driver}`) +
      (options.driver !== 'files' && !options.connectionCuts ? ' --connection-cuts off' : '') +
      (options.driver === 'mariadb' && options.mariadbRestarts !== 2 ? ` --mariadb-restarts ${options.mariadbRestarts}` : '') +
      (options.workers === 1 ? '' : ` --workers ${options.workers}`) +
      (options.storage === 'local' ? '' : ` --storage ${options.storage} --kill-nodes ${options.killNodes}`) +
      (options.killWorkers === options.workers ? '' : ` --kill-workers ${options.killWorkers}`) +
      (options.caller === 'sdk' ? '' : ` --caller ${options.caller}`),
  );
  return lines.join('\n');
}
