import pino from 'pino';

export type Logger = pino.Logger;

/** Structured logs on stderr, so stdout stays free for what a command prints. */
export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino({ level, base: { pid: process.pid, ...bindings } }, pino.destination(2));
}
