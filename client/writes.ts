import type { Client, Connection, ConnectionLike } from '@temporalio/client';
import { InvalidInputError, NoWorkerError, OperationTimeoutError, ServerUnreachableError, TableFateError } from '../domain/errors';
import { DEFAULT_WRITE_TIMEOUT_MS } from '../domain/limits';
import { watchDetails } from './details';
import { isDeadlineOrCancelled, isUnreachable, toTableFateError, unreachable } from './errors';

/** How long a write waits for its answer unless told otherwise. */
export const DEFAULT_TIMEOUT_MS = DEFAULT_WRITE_TIMEOUT_MS;
/** How long a write looks for a worker before it fails with NoWorkerError (one that has just started may not poll yet). */
const NO_WORKER_GRACE_MS = 2_000;
/** How long a worker once seen polling the task queue is believed to be there, before the server is asked again. */
const WORKER_SEEN_TTL_MS = 10_000;
/** How long the server may take to answer the worker check, the first call of a write: past it, it is unreachable. */
const SERVER_ANSWER_MS = 5_000;

/** One write: what its caller is told about it if it fails or times out. */
export interface Operation {
  workflowId: string;
  /** "create of shop.orders", for messages. */
  what: string;
  /** How to see where it is: "`tablefate describe shop.orders`". */
  check: string;
  /** Hears what the run says it is doing (its current details), each time that changes, while the write waits for it. */
  onDetails?: (details: string) => void;
}

/** A timeout in ms as given (above 0, at most a day), or the fallback when absent; anything else is InvalidInput. */
export function timeoutOf(value: number | undefined, fallback: number, field: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > 86_400_000) {
    throw new InvalidInputError(`${field} must be a number of milliseconds above 0 and at most 86400000 (a day), not ${String(value)}`);
  }
  return value;
}

/**
 * How the SDK's writes meet the Temporal server: a worker must poll the task queue before anything starts,
 * every write has a deadline, and whatever goes wrong comes out as a typed error.
 */
export class WriteRunner {
  /** Until when a worker is believed to poll the task queue (see ensureWorker). */
  private workerSeenUntil = 0;
  private workerCheck: Promise<void> | undefined;
  /** Whether the server has answered a read once (see read). */
  private serverAnswered = false;

  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
  ) {}

  /** The server's address, for messages. */
  get address(): string {
    return (this.client.connection as Partial<Pick<Connection, 'options'>>).options?.address ?? 'the configured address';
  }

  /**
   * Runs one write within `timeoutMs`: first makes sure a worker polls the task queue, then `body` (which calls
   * `started` once it knows the workflow exists). Past the deadline every call the body has in flight is
   * cancelled and OperationTimeoutError is thrown; the workflow itself goes on. Failures come out typed.
   */
  async run<T>(op: Operation, timeoutMs: number, body: (started: () => void, signal: AbortSignal) => Promise<T>): Promise<T> {
    const abort = new AbortController();
    let started = false;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        abort.abort();
        // (An update-with-start tells nothing before its answer: whether the workflow exists is asked then.)
        void this.exists(op.workflowId, started).then((ran) => reject(timeoutError(op, timeoutMs, ran)));
      }, timeoutMs);
    });
    timedOut.catch(() => undefined); // heard below, unless the work settled first
    let checked = false;
    const work = this.connection.withAbortSignal(abort.signal, async () => {
      await this.ensureWorker();
      checked = true;
      const answer = body(() => (started = true), abort.signal);
      if (op.onDetails) void watchDetails(this.client, op.workflowId, answer, op.onDetails, abort.signal);
      return answer;
    });
    work.catch(() => undefined); // settled after a timeout, unheard
    try {
      return await Promise.race([work, timedOut]);
    } catch (err) {
      // Past the deadline, whatever the cancelled calls ended with, the answer is the timeout.
      if (abort.signal.aborted) return await timedOut;
      const typed = toTableFateError(err, { workflowId: op.workflowId, address: this.address, check: op.check });
      // Lost after the worker check: the start may have reached the server, and the operation may go on.
      if (typed instanceof ServerUnreachableError && checked) {
        throw new ServerUnreachableError(
          `lost the Temporal server at ${this.address} during the ${op.what} (${(err as Error).message.replace(/\s*\n\s*/g, ' ')}); ` +
            `it may go on as workflow ${op.workflowId}: check with ${op.check} once the server is back`,
          this.address,
          { cause: err, mayHaveStarted: true, workflowId: op.workflowId },
        );
      }
      throw typed;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * A read of the server's (visibility, a run's description) within `timeoutMs`, needing no worker: a server that
   * cannot be reached or does not answer in time is ServerUnreachableError; a TableFateError passes as it is.
   */
  async read<T>(what: string, timeoutMs: number, call: () => Promise<T>): Promise<T> {
    try {
      // A server that does not answer at all fails within SERVER_ANSWER_MS, as a write's worker check does.
      if (!this.serverAnswered) {
        await this.detached(SERVER_ANSWER_MS, () => this.client.workflowService.getSystemInfo({}));
        this.serverAnswered = true;
      }
      return await this.connection.withDeadline(Date.now() + timeoutMs, call);
    } catch (err) {
      if (err instanceof TableFateError) throw err;
      if (isUnreachable(err)) throw unreachable(err, this.address);
      if (isDeadlineOrCancelled(err)) {
        const within = this.serverAnswered ? timeoutMs : SERVER_ANSWER_MS;
        throw unreachable(err, this.address, `no answer to the ${what} within ${within / 1000} s`);
      }
      throw err;
    }
  }

  /** Whether a worker polls the task queue now (as ensureWorker finds it, without waiting for one); false if unsure. */
  async workerPolling(): Promise<boolean> {
    if (Date.now() < this.workerSeenUntil) return true;
    try {
      const count = await this.pollerCount(this.client.options.namespace);
      if (count > 0) this.workerSeenUntil = Date.now() + WORKER_SEEN_TTL_MS;
      return count > 0;
    } catch {
      return false;
    }
  }

  private get connection(): ConnectionLike {
    return this.client.connection;
  }

  /** Whether the workflow `workflowId` exists on the server (known already when `started`); false if unsure. */
  private async exists(workflowId: string, started: boolean): Promise<boolean> {
    if (started) return true;
    try {
      await this.detached(1_000, () => this.client.workflow.getHandle(workflowId).describe());
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Fails with NoWorkerError unless a worker polls the task queue (asked of the server: DescribeTaskQueue),
   * so that a write without one fails within NO_WORKER_GRACE_MS instead of waiting for its deadline, and
   * starts nothing. A worker seen is believed for WORKER_SEEN_TTL_MS, and calls arriving together share one
   * question. (The server lists a worker for a while after it died: that case ends in OperationTimeoutError.)
   */
  private async ensureWorker(): Promise<void> {
    if (Date.now() < this.workerSeenUntil) return;
    this.workerCheck ??= this.checkWorker().finally(() => (this.workerCheck = undefined));
    await this.workerCheck;
  }

  private async checkWorker(): Promise<void> {
    const namespace = this.client.options.namespace;
    // A worker that has just started takes a moment to poll (tens of ms here): ask again for a short while.
    const giveUp = Date.now() + NO_WORKER_GRACE_MS;
    while ((await this.pollerCount(namespace)) === 0) {
      if (Date.now() >= giveUp) {
        throw new NoWorkerError(
          `no tablefate worker is polling task queue ${this.taskQueue} in namespace ${namespace} at ${this.address}; ` +
            'start one with `tablefate worker` (or `tablefate dev`)',
          this.taskQueue,
          namespace,
          this.address,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    this.workerSeenUntil = Date.now() + WORKER_SEEN_TTL_MS;
  }

  /** How many workers poll the task queue for workflow tasks, as the server (DescribeTaskQueue) lists them. */
  private async pollerCount(namespace: string): Promise<number> {
    try {
      const queue = await this.detached(SERVER_ANSWER_MS, () =>
        this.client.workflowService.describeTaskQueue({ namespace, taskQueue: { name: this.taskQueue } }),
      );
      return queue.pollers?.length ?? 0;
    } catch (err) {
      if (isUnreachable(err)) throw unreachable(err, this.address);
      if (isDeadlineOrCancelled(err)) throw unreachable(err, this.address, `no answer within ${SERVER_ANSWER_MS / 1000} s`);
      throw err;
    }
  }

  /** A call with its own deadline and no caller's abort signal: shared by several calls, or made after one gave up. */
  private detached<T>(deadlineMs: number, call: () => Promise<T>): Promise<T> {
    return this.connection.withAbortSignal(new AbortController().signal, () => this.connection.withDeadline(Date.now() + deadlineMs, call));
  }
}

function timeoutError(op: Operation, timeoutMs: number, started: boolean): OperationTimeoutError {
  const within = `within ${timeoutMs / 1000} s`;
  const message = started
    ? `${op.what} did not finish ${within}; it goes on in the background as workflow ${op.workflowId}: see where it is with ${op.check}`
    : `${op.what} did not start ${within} (no answer from the server); if it started, it goes on in the background as ` +
      `workflow ${op.workflowId}: see with ${op.check}`;
  return new OperationTimeoutError(message, op.workflowId, timeoutMs, started);
}
