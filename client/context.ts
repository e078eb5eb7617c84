import type { Client } from '@temporalio/client';
import type { CatalogReader } from '../catalog/catalog';
import type { StorageDriverName } from '../domain/deployment';
import type { Backoff, LockWaitPolicy } from '../domain/backoff';
import type { WriteOptions } from './options';
import { timeoutOf, type WriteRunner } from './writes';

/**
 * What the SDK's operations share, settled once by TableFateClient from its options: each concern's module takes this
 * instead of the facade, so that none of them sees another's code.
 */
export interface ClientContext {
  readonly client: Client;
  /** Reads and name resolution go to the catalog directly; writes go through workflows. */
  readonly catalog: CatalogReader;
  readonly taskQueue: string;
  /** The worker check, the deadline and the typed errors around every write. */
  readonly writes: WriteRunner;
  readonly storageDriver: StorageDriverName;
  /** Who starts the operations this client starts (TableFateClientOptions.identity). */
  readonly startedBy: string;
  readonly lockWait: LockWaitPolicy | undefined;
  readonly expiryRetry: Backoff | undefined;
  readonly defaultTimeoutMs: number;
  /** Whether the client was given its default timeout (a drop's own default then gives way to it). */
  readonly defaultTimeoutGiven: boolean;
}

/** The call's timeout, validated with the request: before anything is read or started. */
export function callTimeout(ctx: ClientContext, opts: WriteOptions): number {
  return timeoutOf(opts.timeoutMs, ctx.defaultTimeoutMs, 'timeoutMs');
}

/** Where a person sees how a write on table `table` stands, for its timeout's and lost server's messages. */
export const describeCheck = (table: string | number): string => `\`tablefate describe ${table}\``;
