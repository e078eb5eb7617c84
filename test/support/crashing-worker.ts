import { spawn } from 'node:child_process';
import { PROJECT_ROOT } from './cli';
import { workflowBundleFile } from './harness';

export interface CrashingWorkerOptions {
  /** Where it works: a harness's home (its catalog and files), server and task queue. */
  on: { home: string; address: string; taskQueue: string };
  /** A workflow bundle written to a file (the child does not bundle: it would take seconds); the run's by default. */
  bundleFile?: string;
  /** The activity after whose first call the worker kills itself; none: it only dies when killed. */
  activity?: string;
  env?: NodeJS.ProcessEnv;
}

/**
 * Starts test/support/crash-worker.ts in a child process and resolves once it polls; `exited` resolves with the
 * signal that ended it (SIGKILL when it reached its crash point).
 */
export async function startCrashingWorker(
  opts: CrashingWorkerOptions,
): Promise<{ exited: Promise<NodeJS.Signals | null>; kill: () => Promise<void> }> {
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', 'test/support/crash-worker.ts'], {
    cwd: PROJECT_ROOT,
    env: {
      ...process.env,
      CRASH_HOME: opts.on.home,
      CRASH_ADDRESS: opts.on.address,
      CRASH_TASK_QUEUE: opts.on.taskQueue,
      CRASH_BUNDLE: opts.bundleFile ?? (await workflowBundleFile()),
      ...(opts.activity ? { CRASH_AFTER: opts.activity } : {}),
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`crash worker exited early (${code})`)));
  });
  // A deploy that does not wait: the worker dies wherever it is.
  const kill = async () => {
    child.kill('SIGKILL');
    await exited;
  };
  return { exited, kill };
}
