/**
 * Every error the storage driver throws, and the one place that decides what each means for the operation:
 *
 * - permanent: retrying cannot fix it (the disk refuses, the node is unknown or quarantined, the driver
 *   refuses to destroy data). The operation ends at once and compensates.
 * - transient: another attempt may succeed (a full disk, too many open files, a set seen half moved by a
 *   concurrent attempt, anything unknown). Retried, but only so often: the worker's budget.
 * - fatal: a set could be neither renamed nor put back. The worker stops and the node is quarantined.
 */

export type StorageFaultKind = 'permanent' | 'transient' | 'fatal';

/** A storage failure that retrying cannot fix (an injected permanent fault, a refusal to lose data, ...). */
export class PermanentStorageError extends Error {
  override readonly name: string = 'PermanentStorageError';
}

/** A shard reference that cannot name a shard of this driver: a bad id, or a node it does not have. */
export class InvalidShardRefError extends PermanentStorageError {
  override readonly name: string = 'InvalidShardRefError';
}

/** What `<storage root>/<node>/QUARANTINED` holds: why, since when and who stopped using the node. */
export interface QuarantineMarker {
  node: string;
  reason: string;
  /** ISO 8601. */
  since: string;
  pid: number;
  host: string;
}

/** The storage node is quarantined: nothing may touch it until an operator has looked and cleared it. */
export class QuarantinedNodeError extends PermanentStorageError {
  override readonly name: string = 'QuarantinedNodeError';
  constructor(readonly marker: QuarantineMarker) {
    super(
      `${marker.node} is quarantined since ${marker.since} (${marker.reason}); ` +
        `inspect it, then run \`tablefate quarantine clear ${marker.node}\``,
    );
  }
}

/**
 * A shard's set is not where the driver expects (in neither area, in both, incomplete). Transient: a
 * concurrent attempt at the same move (a retried activity beside a stale one) can make a check see a file in
 * flight, and the next attempt sees it settled.
 */
export class StorageInvariantError extends Error {
  override readonly name: string = 'StorageInvariantError';
}

/**
 * A file-system (or other unexpected) error met while working on one shard, with the shard and node it
 * concerns; `code` is the errno name (ENOTDIR, ENOSPC, ...) when there is one.
 */
export class StorageIoError extends Error {
  override readonly name: string = 'StorageIoError';
  readonly code: string | undefined;
  constructor(
    readonly op: string,
    readonly shard: string,
    readonly node: string,
    cause: unknown,
  ) {
    const code = errnoOf(cause);
    super(`${op} of ${shard} failed: ${messageOf(cause)}${code && !messageOf(cause).includes(code) ? ` (${code})` : ''}`, {
      cause,
    });
    this.code = code;
  }
}

/**
 * A set of files could neither be renamed nor put back: the data is in an unknown state and the process must
 * stop before it does more damage (Manticore's rule).
 */
export class FatalStorageError extends Error {
  override readonly name: string = 'FatalStorageError';
}

/** Errno names that retrying cannot fix: the file system refuses, or something else is in the shard's way. */
const PERMANENT_ERRNOS = new Set([
  'EACCES',
  'EPERM',
  'EROFS',
  'ENOTDIR',
  'EISDIR',
  'EIO',
  'EEXIST', // mkdir over a file: a non-directory sits where an area directory belongs
  'ENOTEMPTY', // a directory sits where a shard file belongs
  'ENAMETOOLONG',
  'ELOOP',
  'EXDEV',
  'EINVAL',
  'EBADF',
  'ENXIO',
  'ENODEV',
]);

/**
 * Errno names worth another attempt: resources that free up (ENOSPC, EDQUOT, EMFILE, ENFILE, ENOMEM), calls
 * that may go through next time (EBUSY, EAGAIN, EINTR, ETIMEDOUT, ESTALE), and ENOENT, which in this driver
 * means a concurrent attempt moved a file between a check and its use. Listed for the record: any errno not
 * in PERMANENT_ERRNOS is transient.
 */
export const TRANSIENT_ERRNOS: ReadonlySet<string> = new Set([
  'ENOSPC',
  'EDQUOT',
  'EMFILE',
  'ENFILE',
  'ENOMEM',
  'EBUSY',
  'EAGAIN',
  'EINTR',
  'ETIMEDOUT',
  'ESTALE',
  'ENOENT',
]);

/**
 * The errno name of an error (`ENOTDIR`), read structurally: fs errors come from Node's own realm, which is
 * not the caller's under jest's vm sandbox, so `instanceof Error` cannot be trusted for them.
 */
export function errnoOf(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  const code = err.code;
  return typeof code === 'string' && /^E[A-Z0-9]+$/.test(code) ? code : undefined;
}

/** A node-style error's message, structurally (see errnoOf). */
export function messageOf(err: unknown): string {
  const message: unknown = typeof err === 'object' && err !== null && 'message' in err ? err.message : undefined;
  return typeof message === 'string' ? message : String(err);
}

export function classifyErrno(code: string): 'permanent' | 'transient' {
  return PERMANENT_ERRNOS.has(code) ? 'permanent' : 'transient';
}

/**
 * What a storage failure means, or undefined for an error that is not storage's (a domain error, a catalog
 * error, an ApplicationFailure): those are left to whoever owns them.
 */
export function classifyStorageError(err: unknown): StorageFaultKind | undefined {
  if (err instanceof FatalStorageError) return 'fatal';
  if (err instanceof PermanentStorageError) return 'permanent';
  if (err instanceof StorageInvariantError) return 'transient';
  const code = errnoOf(err);
  if (code) return classifyErrno(code);
  // The driver wraps everything it throws; an unknown failure inside it may well pass.
  if (err instanceof StorageIoError) return 'transient';
  return undefined;
}
