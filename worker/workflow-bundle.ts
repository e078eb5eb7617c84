import { fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';

/**
 * The workflow code a worker runs, with the interceptors every run carries (the step it is on, in the web UI and the
 * logs; the operations' metrics): every bundle of it is made from this, and a worker without a bundle loads it so.
 */
export const WORKFLOW_CODE = {
  workflowsPath: require.resolve('../workflows'),
  workflowInterceptorModules: [require.resolve('../workflows/observe')],
};

/**
 * A workflow bundle file built beforehand from this same code (the test suite builds one per run for every worker
 * it starts): the worker loads it, and neither bundles nor removes it.
 */
export const WORKFLOW_BUNDLE_ENV = 'TABLEFATE_WORKFLOW_BUNDLE';

/**
 * The bundle the build (bin/build.js, run by `npm install`) makes beside the compiled code in dist/, from the same
 * sources: a worker that runs from that build (the command line runs dist/ only while it is as new as every source)
 * starts from it instead of bundling, some seconds sooner. A worker run from the sources bundles them itself.
 */
export const BUILT_BUNDLE = 'workflows.bundle.js';
const builtBundle = (): string | undefined => {
  const dist = path.resolve(__dirname, '..');
  const file = path.join(dist, BUILT_BUNDLE);
  return fs.existsSync(path.join(dist, '.built')) && fs.existsSync(file) ? file : undefined;
};

/**
 * The workflow code bundled for the worker's sandbox: the environment's file, the build's, or one built by webpack in a
 * child process and handed over as a file. Bundling in the worker's own process left its heap some 150 MB larger for
 * good (docs/performance.md); the worker reads the finished file instead, and never loads webpack. A file bundled
 * here is removed once `use` is done with it (the SDK reads it when the worker is created).
 */
export async function withWorkflowBundle<T>(use: (codePath: string) => Promise<T>): Promise<T> {
  const prebuilt = process.env[WORKFLOW_BUNDLE_ENV] || builtBundle();
  if (prebuilt) return use(prebuilt);
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-workflows-'));
  try {
    const codePath = path.join(dir, 'workflows.js');
    await new Promise<void>((resolve, reject) => {
      const child = fork(__filename, [codePath], { execArgv: ['--require', 'tsx/cjs'], stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('error', reject);
      child.on('exit', (code) =>
        code === 0 ? resolve() : reject(new Error(`bundling the workflow code failed (exit ${code}): ${stderr.trim()}`)),
      );
    });
    return await use(codePath);
  } finally {
    await fs.promises.rm(dir, { recursive: true, force: true });
  }
}

/** The child: bundles the workflows into the file named by its argument. */
async function bundleInto(codePath: string): Promise<void> {
  const quiet = () => undefined;
  const bundle = await bundleWorkflowCode({
    ...WORKFLOW_CODE,
    logger: { trace: quiet, debug: quiet, info: quiet, warn: quiet, log: quiet, error: (message) => process.stderr.write(`${message}\n`) },
  });
  await fs.promises.writeFile(codePath, bundle.code);
}

if (require.main === module) {
  bundleInto(process.argv[2]!).catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
