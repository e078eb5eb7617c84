/**
 * The workflow code of each release, frozen as the bundle its workers ran (`test/released/workflows.<tag>.js.gz`).
 * A trash started on one release may wait for years and finish on a later one: tests start runs on a frozen
 * bundle and finish them on today's code. Like the recorded histories, the frozen bundles are append-only.
 *
 *   npm run freeze-workflows -- <tag>        (for example: npm run freeze-workflows -- v3)
 */
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { execFileSync } from 'node:child_process';
import { bundleWorkflowCode } from '@temporalio/worker';
import { WORKFLOW_CODE } from '../../worker/workflow-bundle';

const DIR = path.resolve(__dirname, '../released');

const fileOf = (tag: string) => path.join(DIR, `workflows.${tag}.js.gz`);

/**
 * An empty inline source map: the worker insists on finding one in a bundle, and the frozen code is kept
 * without its (five times larger) map.
 */
const EMPTY_SOURCE_MAP = `//# sourceMappingURL=data:application/json;base64,${Buffer.from(
  JSON.stringify({ version: 3, file: 'released-workflows.js', sources: [], names: [], mappings: '' }),
).toString('base64')}`;

/** The frozen bundle of release `tag`, in the form a Worker takes as `workflowBundle`. */
export function releasedWorkflows(tag: string): { code: string } {
  return { code: `${zlib.gunzipSync(fs.readFileSync(fileOf(tag))).toString('utf8')}\n${EMPTY_SOURCE_MAP}\n` };
}

async function freeze(tag: string): Promise<void> {
  if (!/^v[0-9]+$/.test(tag)) throw new Error('usage: freeze-workflows <tag>, e.g. v3');
  const target = fileOf(tag);
  if (fs.existsSync(target)) throw new Error(`${path.basename(target)} exists: a release's code is frozen once`);
  const bundle = await bundleWorkflowCode({
    ...WORKFLOW_CODE,
    // No source map: the readable code alone, small enough to keep in the repository.
    webpackConfigHook: (config) => ({ ...config, devtool: false }),
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
  });
  const commit = execFileSync('git', ['rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
  const code = `// tablefate workflows ${tag}, frozen from commit ${commit}\n${bundle.code}`;
  await fs.promises.mkdir(DIR, { recursive: true });
  await fs.promises.writeFile(target, zlib.gzipSync(code, { level: 9 }), { flag: 'wx' });
  console.log(`froze ${path.relative(process.cwd(), target)} (${code.length} bytes of code)`);
}

if (require.main === module) {
  freeze(process.argv[2] ?? '').catch((err: Error) => {
    console.error(err.message);
    process.exit(1);
  });
}
