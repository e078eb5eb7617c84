/** A logger for bundleWorkflowCode that shows webpack's errors only. */
export const quietBundlerLogger = {
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: (message: string, meta?: unknown) => console.error(message, meta),
  log: () => undefined,
};
