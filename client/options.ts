import os from 'node:os';
import type { Client } from '@temporalio/client';
import type { CatalogReader } from '../catalog/catalog';
import type { StorageDriverName } from '../domain/deployment';
import type { Backoff, LockWaitPolicy } from '../domain/backoff';
import type { RecallProgress } from '../domain/contracts';

/** `user@host` of this process: who the operations a client starts are started by, unless it says otherwise. */
export function defaultIdentity(): string {
  let user: string;
  try {
    user = os.userInfo().username;
  } catch {
    // (No entry for this uid: a container's, say.)
    user = process.env.USER ?? process.env.LOGNAME ?? `uid ${process.getuid?.() ?? '?'}`;
  }
  return `${user}@${os.hostname()}`;
}

export interface TableFateClientOptions {
  /**
   * The Temporal client; or what makes it, called once when a call first needs the server (TableFateClient.connect's:
   * a call the catalog answers alone loads no Temporal code).
   */
  client: Client | (() => Client);
  /** Reads (list, describe, name resolution) go to the catalog directly; writes go through workflows. */
  catalog: CatalogReader;
  taskQueue?: string;
  /** How long a write waits for its answer when the call does not say; DEFAULT_TIMEOUT_MS (60 s) by default. */
  defaultTimeoutMs?: number;
  /** How the operations this client starts wait while another holds their table (DEFAULT_LOCK_WAIT when absent). */
  lockWait?: LockWaitPolicy;
  /** How the trashes this client starts try again when the purge at their expiry fails (DEFAULT_EXPIRY_RETRY when absent). */
  expiryRetry?: Backoff;
  /** The deployment's storage driver (TABLEFATE_STORAGE_DRIVER; `files` when absent): what a create may ask for. */
  storageDriver?: StorageDriverName;
  /**
   * Who starts the operations this client starts (a service's name, a person): recorded in each run's input and memo
   * (`startedBy`), and shown by `history` and `operations`. `user@host` of this process by default.
   */
  identity?: string;
}

export interface WriteOptions {
  /**
   * How long to wait for the answer, in ms (the client's default, 60 s, when absent). Past it the call throws
   * OperationTimeoutError; the operation itself is not stopped and goes on in the background.
   */
  timeoutMs?: number;
  /**
   * Hears what the operation's run says it is doing (its current details: `draining table 5 until ...: lease ...`,
   * `move shards to trash: 3/8`) each time that changes, from a second into the wait on: for a person watching.
   */
  onDetails?: (details: string) => void;
}

export interface LeaseOptions extends WriteOptions {
  /** How long the lease lasts before it must be renewed, in seconds (DEFAULT_LEASE_TTL_SECONDS, 60, when absent). */
  ttlSeconds?: number;
  /** Who holds it, named by a drop that waits for it: the client's identity (`user@host` of this process by default). */
  holder?: string;
}

export interface UndeleteOptions extends WriteOptions {
  /** Hears how many shards are back, each time that changes (Pegasus's recall progress). */
  onProgress?: (progress: RecallProgress) => void;
}
