import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { TableFateClient } from '../../client/client';
import { applicationFailureOf } from '../../client/errors';
import type { Catalog } from '../../catalog/catalog';
import { catalogLocation, openCatalog } from '../../catalog/open';
import { catalogPath } from '../../domain/deployment';
import { isDomainErrorType, TableFateError } from '../../domain/errors';
import type { LeaseInfo } from '../../domain/leases';
import type { TableInfo, TableRecord } from '../../domain/table';
import { BIN } from '../support/cli';
import { within } from './time';
import type { ScenarioOptions } from './scenario';
import type { DoorCallRecord, OpKind, OpRequest, Outcome } from './ops';

/** The lease operations, whose answer is a lease, not a table. */
const LEASE_KINDS: readonly OpKind[] = ['lease', 'renewLease', 'releaseLease'];

/*
 * How a chaos client makes a request and hears its answer: through the SDK (CallerClient), or through the command line
 * as an operator would (CommandLineCaller); and what each way's failure means for the run (`classify`). The SQL door's
 * caller is sql-caller.ts.
 */

/** A successful call's answer: a table, or a lease. */
type Answer = Extract<Outcome, { kind: 'ok' | 'leased' }>;

const tableAnswer = (table: TableInfo): Answer => ({ kind: 'ok', table });
const leaseAnswer = (lease: LeaseInfo): Answer => ({ kind: 'leased', lease });

function callSdk(client: TableFateClient, request: OpRequest): Promise<Answer> {
  switch (request.kind) {
    case 'create':
      return client
        .create({ table: request.table, shards: request.shards, ...(request.columns ? { columns: request.columns } : {}) })
        .then(tableAnswer);
    case 'trash':
      if (request.namespace !== undefined) {
        return client
          .trash({
            namespace: request.namespace,
            retentionSeconds: request.retentionSeconds,
            ...(request.drainTimeoutSeconds === undefined ? {} : { drainTimeoutSeconds: request.drainTimeoutSeconds }),
          })
          .then(tableAnswer);
      }
      return client
        .trash({
          table: request.table,
          retentionSeconds: request.retentionSeconds,
          ...(request.drainTimeoutSeconds === undefined ? {} : { drainTimeoutSeconds: request.drainTimeoutSeconds }),
          ...(request.cascade ? { cascade: true } : {}),
          ...(request.together ? { together: request.together } : {}),
        })
        .then(tableAnswer);
    case 'undelete':
      return client
        .undelete({
          table: request.tableId,
          ...(request.newName ? { newName: request.newName } : {}),
          ...(request.newNamespace ? { newNamespace: request.newNamespace } : {}),
          ...(request.alone ? { alone: true } : {}),
        })
        .then(tableAnswer);
    case 'truncate':
      return client
        .truncate({
          table: 'tableId' in request ? request.tableId : request.table,
          retentionSeconds: request.retentionSeconds,
          ...(request.drainTimeoutSeconds === undefined ? {} : { drainTimeoutSeconds: request.drainTimeoutSeconds }),
        })
        .then(tableAnswer);
    case 'purge':
      return client.purge({ tableId: request.tableId }).then(tableAnswer);
    case 'hold':
      return client.hold({ table: request.tableId, reason: request.reason }).then(tableAnswer);
    case 'release':
      return client.release({ table: request.tableId }).then(tableAnswer);
    case 'retention':
      return client.setRetention({ table: request.tableId, retentionSeconds: request.retentionSeconds }).then(tableAnswer);
    case 'lease':
      return client.acquireLease(request.tableId, { ttlSeconds: request.ttlSeconds, holder: request.holder }).then(leaseAnswer);
    case 'renewLease':
      return client.renewLease(request.leaseId).then(leaseAnswer);
    case 'releaseLease':
      return client.releaseLease(request.leaseId).then(leaseAnswer);
  }
}

/** Errors that say nothing about the table: no answer in time, no server, no worker. */
const NO_ANSWER_TYPES = new Set(['OperationTimeout', 'NoWorker', 'ServerUnreachable', 'CatalogNotFound']);

/** What a caller learned from an error's type: a domain answer, a failed operation, or nothing at all. */
function outcomeOfType(type: string, message: string, className: string): Outcome {
  if (isDomainErrorType(type)) return { kind: 'rejected', type: className, message };
  if (NO_ANSWER_TYPES.has(type)) return { kind: 'unknown', reason: `${className}: ${message.split('\n')[0]}` };
  return { kind: 'failed', type, message };
}

/** What the caller learned from an error: a domain answer, a failed operation, or nothing at all. */
export function classify(err: unknown): Outcome {
  if (err instanceof TableFateError) return outcomeOfType(err.type, err.message, err.name);
  const failure = applicationFailureOf(err);
  if (failure) return { kind: 'failed', type: failure.type ?? 'ApplicationFailure', message: failure.message };
  const error = err instanceof Error ? err : new Error(String(err));
  return { kind: 'unknown', reason: `${error.name}: ${error.message.split('\n')[0]}` };
}

/**
 * One client as a service would hold it, built the way TableFateClient.connect builds one, but keeping the
 * connection: a call the run gives up on is cancelled through it (as a caller's deadline would), so that no
 * abandoned call is left retrying when the connection closes (the gRPC retry then throws from a timer).
 */
export interface Caller {
  /**
   * The call's answer, or `unknown` after `timeoutMs` or when the run is aborted (the call is then given up); `before`
   * is its target as the catalog held it just before (the SQL caller finds the table's node by it).
   */
  answer(request: OpRequest, before: TableRecord | undefined, timeoutMs: number, signal: AbortSignal): Promise<CallAnswer>;
  close(): Promise<void>;
}

/** What a call learned, and (through the SQL door) how it went there. */
export interface CallAnswer {
  outcome: Outcome;
  door?: DoorCallRecord;
}

export class CallerClient implements Caller {
  private readonly connection: Connection;
  private readonly sdk: TableFateClient;
  private readonly pending = new Set<Promise<unknown>>();

  private constructor(
    config: ScenarioOptions['config'],
    private readonly catalog: Catalog,
  ) {
    this.connection = Connection.lazy({ address: config.temporalAddress, connectTimeout: '5s' });
    const temporal = new Client({ connection: this.connection, namespace: config.temporalNamespace });
    this.sdk = new TableFateClient({ client: temporal, catalog: this.catalog, storageDriver: config.storageDriver });
  }

  /** A client with a catalog of its own, where the worker's is (the SQLite file under home, or catalogUrl). */
  static async open(config: ScenarioOptions['config']): Promise<CallerClient> {
    return new CallerClient(config, await openCatalog(catalogLocation(config.catalogUrl, config.home)));
  }

  /** The call's answer, or `unknown` after `timeoutMs` or when the run is aborted (the call is then cancelled). */
  async answer(request: OpRequest, _before: TableRecord | undefined, timeoutMs: number, signal: AbortSignal): Promise<CallAnswer> {
    const cancel = new AbortController();
    const onAbort = () => cancel.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    const timeout = sleep(timeoutMs, undefined, { signal: cancel.signal }).then(
      (): Outcome => ({ kind: 'unknown', reason: `no answer within ${timeoutMs / 1000} s` }),
      (): Outcome => ({ kind: 'unknown', reason: 'the run was interrupted' }),
    );
    const call = this.connection.withAbortSignal(cancel.signal, () => callSdk(this.sdk, request));
    const answer = call.then((answered): Outcome => answered, classify);
    this.pending.add(answer);
    void answer.finally(() => this.pending.delete(answer));
    try {
      return { outcome: await Promise.race([answer, timeout]) };
    } finally {
      signal.removeEventListener('abort', onAbort);
      cancel.abort();
    }
  }

  /** Waits (bounded) for cancelled calls to settle, then closes the connection and the catalog. */
  async close(): Promise<void> {
    await within(Promise.allSettled([...this.pending]), 10_000);
    await this.connection.close().catch(() => undefined);
    await this.catalog.close().catch(() => undefined);
  }
}

/** The command line of a request; `--json` answers on stdout, and errors as `{"error": type, "message"}` on stderr. */
function commandOf(request: OpRequest, timeoutMs: number): string[] {
  const common = ['--json', '--timeout', String(Math.max(1, Math.floor(timeoutMs / 1000)))];
  switch (request.kind) {
    case 'create':
      return [
        'create',
        request.table,
        '--shards',
        String(request.shards),
        ...(request.columns ? ['--columns', request.columns] : []),
        ...common,
      ];
    case 'trash':
      return [
        'trash',
        ...(request.namespace !== undefined ? ['--namespace', request.namespace] : [request.table, ...(request.together ?? [])]),
        '--reserve-seconds',
        String(request.retentionSeconds),
        ...(request.drainTimeoutSeconds === undefined ? [] : ['--drain-timeout', String(request.drainTimeoutSeconds)]),
        ...(request.cascade && request.namespace === undefined ? ['--cascade'] : []),
        ...common,
      ];
    case 'undelete':
      return [
        'undelete',
        String(request.tableId),
        ...(request.newName ? [request.newName] : []),
        ...(request.newNamespace ? ['--into', request.newNamespace] : []),
        ...(request.alone ? ['--alone'] : []),
        ...common,
      ];
    case 'truncate':
      return [
        'truncate',
        'tableId' in request ? String(request.tableId) : request.table,
        '--reserve-seconds',
        String(request.retentionSeconds),
        ...(request.drainTimeoutSeconds === undefined ? [] : ['--drain-timeout', String(request.drainTimeoutSeconds)]),
        ...common,
      ];
    case 'purge':
      return ['purge', String(request.tableId), ...common];
    case 'hold':
      return ['hold', String(request.tableId), '--reason', request.reason, ...common];
    case 'release':
      return ['release', String(request.tableId), ...common];
    case 'retention':
      return ['retention', String(request.tableId), String(request.retentionSeconds), ...common];
    case 'lease':
      return ['lease', 'acquire', String(request.tableId), '--ttl', String(request.ttlSeconds), '--holder', request.holder, ...common];
    case 'renewLease':
      return ['lease', 'renew', request.leaseId, ...common];
    case 'releaseLease':
      return ['lease', 'release', request.leaseId, ...common];
  }
}

/**
 * A caller that runs the command line for each call, as an operator on another host would: from a directory of
 * its own, with an empty TABLEFATE_HOME, knowing only the server's address and the catalog's URL (or file).
 */
export class CommandLineCaller implements Caller {
  private readonly env: NodeJS.ProcessEnv;
  private readonly running = new Set<ChildProcess>();

  constructor(
    config: ScenarioOptions['config'],
    private readonly cwd: string,
  ) {
    this.env = {
      PATH: process.env.PATH,
      TABLEFATE_HOME: path.join(cwd, 'empty-home'),
      TABLEFATE_CATALOG_URL: config.catalogUrl ?? catalogPath(path.resolve(config.home)),
      TEMPORAL_ADDRESS: config.temporalAddress,
      TEMPORAL_NAMESPACE: config.temporalNamespace,
      // The operator knows which storage the deployment has, as the workers do (a create's --columns needs it).
      ...(config.storageDriver === 'postgres' || config.storageDriver === 'mariadb'
        ? { TABLEFATE_STORAGE_DRIVER: config.storageDriver, TABLEFATE_STORAGE_URLS: (config.storageUrls ?? []).join(',') }
        : {}),
    };
  }

  async answer(request: OpRequest, _before: TableRecord | undefined, timeoutMs: number, signal: AbortSignal): Promise<CallAnswer> {
    return { outcome: await this.run(request, timeoutMs, signal) };
  }

  private run(request: OpRequest, timeoutMs: number, signal: AbortSignal): Promise<Outcome> {
    // The command's own --timeout first; a command still there 15 s later is killed, its outcome unknown.
    const child = spawn(process.execPath, [BIN, ...commandOf(request, timeoutMs)], {
      cwd: this.cwd,
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.running.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const kill = () => child.kill('SIGKILL');
    const timer = setTimeout(kill, timeoutMs + 15_000);
    signal.addEventListener('abort', kill, { once: true });
    return new Promise<Outcome>((resolve) => {
      child.once('error', (err) => resolve({ kind: 'unknown', reason: `the command did not start: ${err.message}` }));
      child.once('close', (code, killedBy) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', kill);
        this.running.delete(child);
        if (code === 0) {
          if (LEASE_KINDS.includes(request.kind)) return resolve({ kind: 'leased', lease: JSON.parse(stdout) as LeaseInfo });
          return resolve({ kind: 'ok', table: JSON.parse(stdout) as TableInfo });
        }
        if (killedBy) return resolve({ kind: 'unknown', reason: `the command was killed (${killedBy}) without an answer` });
        try {
          const error = JSON.parse(stderr.trim().split('\n').pop() ?? '') as { error: string; message: string };
          // Exit 5: no answer in time, or the server was lost after the start; the operation may go on.
          if (code === 5) return resolve({ kind: 'unknown', reason: `${error.error}: ${error.message}` });
          resolve(outcomeOfType(error.error, error.message, `${error.error}Error`));
        } catch {
          resolve({ kind: 'unknown', reason: `exit ${String(code)} with no error line: ${stderr.slice(0, 500)}` });
        }
      });
    });
  }

  /** Kills the commands still running (the run was given up) and waits for them to end. */
  async close(): Promise<void> {
    const ended = [...this.running].map((child) => new Promise((resolve) => child.once('close', resolve)));
    for (const child of this.running) child.kill('SIGKILL');
    await Promise.all(ended);
  }
}
