import pino from 'pino';
import pretty from 'pino-pretty';

export type Logger = pino.Logger;

/**
 * Structured logs on stderr, so stdout stays free for what a command prints: readable lines when stderr is a terminal
 * a person watches, one JSON object a line otherwise (a file, a pipe, a log collector), unless `format` says which
 * (TABLEFATE_LOG_FORMAT).
 */
export function createLogger(level: string, bindings: Record<string, unknown> = {}, format?: 'json' | 'pretty'): Logger {
  const options = { level, base: { pid: process.pid, ...bindings } };
  if ((format ?? (process.stderr.isTTY ? 'pretty' : 'json')) === 'pretty') {
    // In this thread, synchronously: a line is never lost to an exit right after it (pino's transports run in a worker).
    return pino(options, pretty({ destination: 2, sync: true, ignore: 'pid,hostname', translateTime: 'SYS:HH:MM:ss.l' }));
  }
  return pino(options, pino.destination(2));
}
