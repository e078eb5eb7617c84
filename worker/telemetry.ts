import { DefaultLogger, Runtime, type ActivityInterceptorsFactory, type LogLevel } from '@temporalio/worker';
import { DURATION_BUCKETS_SECONDS, METRICS } from '../domain/metrics';
import type { Logger } from './logger';

const SDK_LEVELS: Record<string, LogLevel> = {
  trace: 'TRACE',
  debug: 'DEBUG',
  info: 'INFO',
  warn: 'WARN',
  error: 'ERROR',
  fatal: 'ERROR',
  silent: 'ERROR',
};

/** What the SDK says when a worker has no workflows to run (each storage node's worker). */
const ACTIVITY_ONLY_WARNING = 'No workflows registered, not polling for workflow tasks';

/** The log lines our own code writes through the SDK: the workflows' `log` and the activities' `Context.log`. */
const OURS = new Set(['workflow', 'activity']);

/**
 * Sets up the SDK's runtime for this process, once: its own logs go through pino (ours from workflows and activities
 * at the configured level, the SDK's chatter at warn and above unless asked for debug), and, with a metrics address,
 * a Prometheus endpoint that serves Temporal's worker metrics (`temporal_*`) and ours (`tablefate_*`, domain/metrics.ts).
 */
export function installRuntime(logger: Logger, level: string, metricsAddress?: string): void {
  // (Each line says which part of the SDK wrote it in its own sdkComponent: workflow, activity, worker, core.)
  const sdk = logger;
  const threshold = SDK_LEVELS[level] ?? 'INFO';
  const sdkThreshold = threshold === 'INFO' ? 'WARN' : threshold;
  const rank: Record<LogLevel, number> = { TRACE: 0, DEBUG: 1, INFO: 2, WARN: 3, ERROR: 4 };
  const buckets = Object.fromEntries(
    [METRICS.operationDuration, METRICS.lockWaitDuration].map((spec) => [spec.name, DURATION_BUCKETS_SECONDS]),
  );
  Runtime.install({
    // Ctrl-C is ours to handle: stop the worker, then the dev server, in that order.
    shutdownSignals: [],
    logger: new DefaultLogger(threshold, ({ level: l, message, meta }) => {
      // A storage node's worker runs activities only, by design: the SDK's warning about it is no news.
      if (message.startsWith(ACTIVITY_ONLY_WARNING)) return;
      if (!OURS.has(String(meta?.sdkComponent)) && rank[l] < rank[sdkThreshold]) return;
      const method = l === 'TRACE' ? 'trace' : l === 'DEBUG' ? 'debug' : l === 'INFO' ? 'info' : l === 'WARN' ? 'warn' : 'error';
      // An error in `error` is pino's `err`, which it serializes (message, type, stack) instead of printing {}.
      const { error, ...rest } = meta ?? {};
      sdk[method](error instanceof Error ? { ...rest, err: error } : (meta ?? {}), message);
    }),
    ...(metricsAddress
      ? {
          telemetryOptions: {
            metrics: {
              prometheus: {
                bindAddress: metricsAddress,
                countersTotalSuffix: true,
                useSecondsForDurations: true,
                histogramBucketOverrides: buckets,
              },
            },
          },
        }
      : {}),
  });
  if (metricsAddress) logger.info({ metrics: `http://${metricsAddress}/metrics` }, 'serving Prometheus metrics');
}

/**
 * Every log line of an activity carries what the SDK gives (its workflow id, type and activity) plus the table and the
 * operation's step it serves, read from its input (CallScope's `step`; a table id, or the shards' table).
 */
export const activityLogFields: ActivityInterceptorsFactory = () => {
  let fields: Record<string, unknown> = {};
  return {
    inbound: {
      execute(input, next) {
        const arg = (input.args[0] ?? {}) as { tableId?: unknown; step?: unknown; shards?: Array<{ tableId?: unknown }> };
        const tableId = arg.tableId ?? arg.shards?.[0]?.tableId;
        fields = { ...(tableId !== undefined ? { tableId } : {}), ...(arg.step !== undefined ? { step: arg.step } : {}) };
        return next(input);
      },
    },
    outbound: {
      getLogAttributes: (attributes, next) => next({ ...attributes, ...fields }),
    },
  };
};
