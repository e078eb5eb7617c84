/**
 * Bounds shared by every edge that accepts them (the SDK's requests, the worker's configuration), so that a
 * value one accepts the other never refuses.
 */

/** The shortest trash retention: a table is never purged in the same instant it is trashed. */
export const MIN_RETENTION_SECONDS = 1;
/** The longest trash retention: 10 years (of 365 days). */
export const MAX_RETENTION_SECONDS = 10 * 365 * 24 * 3600;
/** Retention of a trash that names none (Pegasus: 7 days). */
export const DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600;

/** How long an SDK write (and a command) waits for its answer when the call does not say. */
export const DEFAULT_WRITE_TIMEOUT_MS = 60_000;

/** Attempts a storage activity gets for a transient fault before the operation ends with StorageFault. */
export const DEFAULT_STORAGE_RETRY_ATTEMPTS = 10;
export const MAX_STORAGE_RETRY_ATTEMPTS = 1000;

/** Storage nodes a worker may be configured with. */
export const MAX_STORAGE_NODES = 64;

/** How often the reconciler runs (its schedule); 0 turns the schedule off. At most once a day. */
export const DEFAULT_RECONCILE_SECONDS = 60;
export const MAX_RECONCILE_SECONDS = 24 * 3600;

/**
 * How long a set of files that no catalog row accounts for is left alone before the reconciler collects it:
 * an hour, so that nothing a running operation (or a person) is still doing can be mistaken for garbage.
 */
export const DEFAULT_ORPHAN_GRACE_SECONDS = 3600;
export const MAX_ORPHAN_GRACE_SECONDS = 30 * 24 * 3600;

/** The largest page a listing returns at once (`ls --limit`, the SDK's `list({ limit })`). */
export const MAX_LIST_LIMIT = 100_000;

/**
 * How many workflow runs an orchestrating worker keeps in memory between their tasks (TABLEFATE_WORKFLOW_CACHE).
 * A run not in memory is replayed from its history when its next task comes; an operation is one workflow task, and
 * a waiting trash needs nothing until its timer fires, so a small cache costs little but the crowd at an expiry.
 * The SDK's default grows with the heap (about 2,300 runs, 3 GB with 2,000 waiting trashes); 250 held 1 GB with
 * 2,000 waiting, 50 held 477 MB (docs/performance.md). At least the 40 workflow tasks a worker runs at once.
 */
export const DEFAULT_WORKFLOW_CACHE = 50;
export const MIN_WORKFLOW_CACHE = 40;
export const MAX_WORKFLOW_CACHE = 100_000;

/** How long a drop waits for other sessions to let go of a PostgreSQL table before it is TableBusy (the drain). */
export const DEFAULT_DRAIN_TIMEOUT_SECONDS = 60;
export const MAX_DRAIN_TIMEOUT_SECONDS = 3600;

/**
 * How many tables one drop may take as one: every one's record rides in each call of its run (and so in its history),
 * and each node moves its share in one transaction.
 */
export const MAX_TABLES_DROPPED_TOGETHER = 100;
