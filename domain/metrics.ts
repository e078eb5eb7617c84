/**
 * tablefate's own metrics, said once: the workflows and the worker emit them through the SDK's metric meter, the
 * Prometheus exporter serves them beside Temporal's (counters with `_total` added), and docs/operations.md lists them.
 * Pure: workflow code imports it.
 */
export const METRICS = {
  operationsStarted: {
    name: 'tablefate_operations_started',
    kind: 'counter',
    labels: ['operation'],
    help: 'Operations started (a run that continues as new is the same operation).',
  },
  operationsSucceeded: {
    name: 'tablefate_operations_succeeded',
    kind: 'counter',
    labels: ['operation'],
    help: 'Operations that did what they were asked (a trash: once the table is in the trash and its caller answered).',
  },
  operationsCompensated: {
    name: 'tablefate_operations_compensated',
    kind: 'counter',
    labels: ['operation', 'error'],
    help: 'Operations that failed or were cancelled after they had begun to change the table, and were taken back.',
  },
  operationsFailed: {
    name: 'tablefate_operations_failed',
    kind: 'counter',
    labels: ['operation', 'error'],
    help: 'Operations that failed and were not taken back: refused before changing anything, stopped for good, or whose undo failed.',
  },
  operationDuration: {
    name: 'tablefate_operation_duration_seconds',
    kind: 'histogram',
    labels: ['operation', 'outcome'],
    help: 'From the start of an operation to its outcome (a trash: to its answer, not its expiry), lock waits included.',
  },
  lockWaits: {
    name: 'tablefate_lock_waits',
    kind: 'counter',
    labels: ['operation'],
    help: 'Operations that found their table (or name) locked by another and waited for it.',
  },
  lockWaitDuration: {
    name: 'tablefate_lock_wait_seconds',
    kind: 'histogram',
    labels: ['operation'],
    help: 'How long an operation that waited for a lock waited.',
  },
  expiryPurgeFailures: {
    name: 'tablefate_expiry_purge_failures',
    kind: 'counter',
    labels: [],
    help: 'Purges at a trash expiry that failed and will be tried again (a storage node down, say).',
  },
  tables: {
    name: 'tablefate_tables',
    kind: 'gauge',
    labels: ['state'],
    help: 'Tables in the catalog by state (PURGED: tombstones).',
  },
  trashBytes: {
    name: 'tablefate_trash_bytes',
    kind: 'gauge',
    labels: ['node'],
    help: 'Bytes the trashed tables hold, as last measured (the trash space cap counts these).',
  },
  trashTimersPending: {
    name: 'tablefate_trash_timers_pending',
    kind: 'gauge',
    labels: [],
    help: 'Trash runs open in Temporal, each waiting on its table\'s expiry timer (compare with tables{state="TRASHED"}).',
  },
  drainsWaiting: {
    name: 'tablefate_drains_waiting',
    kind: 'gauge',
    labels: [],
    help: 'Drops waiting for their table to drain (DRAINING: leases, and PostgreSQL sessions, still on it).',
  },
} as const satisfies Record<string, MetricSpec>;

export interface MetricSpec {
  name: string;
  kind: 'counter' | 'histogram' | 'gauge';
  labels: readonly string[];
  help: string;
}

/** A metric's name as Prometheus shows it: counters end in `_total`. */
export function exportedName(spec: MetricSpec): string {
  return spec.kind === 'counter' ? `${spec.name}_total` : spec.name;
}

/** The operation's outcomes, as the duration histogram labels them. */
export type OperationOutcome = 'succeeded' | 'compensated' | 'failed';

/**
 * Histogram buckets (seconds) for operations and lock waits: from a catalog-only change (tens of ms) to a drain or a
 * long move (minutes). The exporter's default stops at 10 s.
 */
export const DURATION_BUCKETS_SECONDS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
