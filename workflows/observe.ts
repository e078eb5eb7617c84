import {
  ApplicationFailure,
  ContinueAsNew,
  isCancellation,
  metricMeter,
  setCurrentDetails,
  workflowInfo,
  type WorkflowInterceptorsFactory,
} from '@temporalio/workflow';
import { METRICS, type MetricSpec, type OperationOutcome } from '../domain/metrics';
import { OPERATIONS } from '../domain/operations';
import { SEARCH_ATTRIBUTES } from '../domain/search-attributes';

/*
 * What an operator sees of a run while it runs: the step it is on (the web UI's current details, and a field of
 * every log line), and the operation's metrics. The worker loads this module as its workflow interceptors
 * (workflowBundleOptions in worker/workflow-bundle.ts). Module state is the run's own: the SDK gives each
 * workflow run its own copy of the bundle's modules.
 */

/** The step the run is on, and what the web UI shows of it. */
let step: string | undefined;
/** The run's operation has had its outcome counted (a trash counts it when its caller is answered). */
let reported = false;
/** The run took back what it had begun (the executor's compensation ran to its end). */
let compensated = false;

/** The step begins: the UI and the logs say so. */
export function enterStep(name: string): void {
  step = name;
  setCurrentDetails(name);
}

/** How far the step is: "move shards to trash: 3/8". */
export function stepProgress(name: string, done: number, total: number): void {
  step = name;
  setCurrentDetails(`${name}: ${done}/${total}`);
}

/** The run is taking back step `name` (compensation). */
export function undoingStep(name: string): void {
  step = `undo ${name}`;
  setCurrentDetails(`taking back: ${name}`);
}

/** Every undo of the run's compensation ran: the operation was taken back (an undo that failed leaves it failed). */
export function tookBack(): void {
  compensated = true;
}

/** The run waits, or rests, with nothing running: the details say why, the logs name no step. */
export function waiting(details: string): void {
  step = undefined;
  setCurrentDetails(details);
}

/** The run's table, as its search attributes name it (a create's before it has an id: its name only). */
function tableOf(): { tableId?: number; table?: string } {
  const attributes = workflowInfo().typedSearchAttributes;
  const tableId = attributes.get(SEARCH_ATTRIBUTES.tableId);
  const namespace = attributes.get(SEARCH_ATTRIBUTES.tableNamespace);
  const name = attributes.get(SEARCH_ATTRIBUTES.tableName);
  return {
    ...(tableId !== undefined ? { tableId } : {}),
    ...(namespace !== undefined && name !== undefined ? { table: `${namespace}.${name}` } : {}),
  };
}

/** The operation a run is: its TableOp (create, adopt, trash, ...), else its workflow type (the reconciler's, say). */
function operationOf(): string {
  return workflowInfo().typedSearchAttributes.get(SEARCH_ATTRIBUTES.tableOp) ?? workflowInfo().workflowType;
}

/**
 * The operation's outcome, counted once, with its duration from the start of its first run (a run that continued as
 * new is the same operation). Workflow metrics are emitted on the first execution only, never on replay.
 */
export function reportOutcome(outcome: OperationOutcome, error?: string): void {
  if (reported) return;
  reported = true;
  const operation = operationOf();
  if (outcome === 'succeeded') counter(METRICS.operationsSucceeded).add(1, { operation });
  else if (outcome === 'compensated') counter(METRICS.operationsCompensated).add(1, { operation, error: error ?? '' });
  else counter(METRICS.operationsFailed).add(1, { operation, error: error ?? '' });
  const seconds = (Date.now() - workflowInfo().startTime.getTime()) / 1000;
  histogram(METRICS.operationDuration).record(Math.max(seconds, 0), { operation, outcome });
}

/** The operation waited `seconds` for a lock another held. */
export function reportLockWait(seconds: number): void {
  const operation = operationOf();
  counter(METRICS.lockWaits).add(1, { operation });
  histogram(METRICS.lockWaitDuration).record(Math.max(seconds, 0), { operation });
}

/** A purge at a trash's expiry failed; it is tried again. */
export function reportExpiryPurgeFailure(): void {
  counter(METRICS.expiryPurgeFailures).add(1);
}

const counter = (spec: MetricSpec) => metricMeter.createCounter(spec.name, undefined, spec.help);
const histogram = (spec: MetricSpec) => metricMeter.createHistogram(spec.name, 'float', 's', spec.help);

/** Why an operation failed, as a metric label: the domain failure's type, or Cancelled. */
function errorType(err: unknown): string {
  if (isCancellation(err)) return 'Cancelled';
  let cause: unknown = err;
  while (cause instanceof Error) {
    if (cause instanceof ApplicationFailure && cause.type) return cause.type;
    cause = cause.cause;
  }
  return err instanceof Error ? err.name : 'Error';
}

/**
 * A run that is no operation counts nothing: a trash's expiry (its drop counted, and what ends it early is an operation
 * of its own), and a trash run of v19 that only carries on one already answered (re-armed on its drop time).
 */
const countsNothing = (args: readonly unknown[]) =>
  workflowInfo().workflowType === OPERATIONS.expiry.workflowType || (typeof args[0] === 'object' && args[0] !== null && 'rearm' in args[0]);

export const interceptors: WorkflowInterceptorsFactory = () => ({
  inbound: [
    {
      async execute(input, next) {
        if (countsNothing(input.args)) reported = true;
        else if (workflowInfo().continuedFromExecutionRunId === undefined) {
          counter(METRICS.operationsStarted).add(1, { operation: operationOf() });
        }
        try {
          const result = await next(input);
          reportOutcome('succeeded');
          return result;
        } catch (err) {
          // The same operation goes on in the next run, which counts its outcome.
          if (!(err instanceof ContinueAsNew)) reportOutcome(compensated ? 'compensated' : 'failed', errorType(err));
          throw err;
        }
      },
    },
  ],
  outbound: [
    {
      getLogAttributes(input, next) {
        return next({ ...input, ...tableOf(), ...(step !== undefined ? { step } : {}) });
      },
    },
  ],
});
