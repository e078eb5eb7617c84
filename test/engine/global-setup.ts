import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { WORKFLOW_CODE } from '../../worker/workflow-bundle';
import { quietBundlerLogger } from '../support/quiet-bundler';

/** Where the engine's workflow bundle is, for the run's engine test files (jest's workers inherit it). */
export const ENGINE_BUNDLE_ENV = 'TABLEFATE_ENGINE_BUNDLE';

/**
 * The engine project's setup: today's workflows with ./lose-task.ts's interceptor, bundled once for the run into a file
 * that every engine test file's worker loads (./engine.ts), instead of each bundling them again.
 */
export default async function globalSetup(): Promise<void> {
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-engine-bundle-'));
  const bundle = await bundleWorkflowCode({
    ...WORKFLOW_CODE,
    workflowInterceptorModules: [...WORKFLOW_CODE.workflowInterceptorModules, require.resolve('./lose-task')],
    logger: quietBundlerLogger,
  });
  const file = path.join(dir, 'workflows.js');
  await fs.promises.writeFile(file, bundle.code);
  process.env[ENGINE_BUNDLE_ENV] = file;
}
