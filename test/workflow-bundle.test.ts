import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { workflowBundle } from './support/harness';
import { BUILT_BUNDLE, WORKFLOW_BUNDLE_ENV, withWorkflowBundle } from '../worker/workflow-bundle';

// The worker evaluates every module of the workflow bundle again for each run it holds in memory (the SDK's reused
// V8 context keeps a module cache per run), so what the bundle carries is paid once per cached run, and again
// whenever an evicted run is replayed. A validation library pulled in through a shared domain module once made up
// 460 KB of the bundle's 1.1 MB.
const ALLOWED_PACKAGES = ['@temporalio/workflow', '@temporalio/common', 'long', 'nexus-rpc', 'ms'];

/**
 * The bundle's modules, as webpack names them: `./node_modules/<pkg>/...`, `./workflows/...`, `./domain/...`
 * (and `?<hash>`, the empty stand-ins for modules the SDK tells webpack to leave out, which are not counted).
 */
async function bundledModules(): Promise<string[]> {
  const { code } = await workflowBundle();
  return [...code.matchAll(/^\/\*\*\*\/ "([^"]+)"/gm)].map((m) => m[1]!).filter((name) => !name.startsWith('?'));
}

function packageOf(modulePath: string): string {
  const inModules = modulePath.split('node_modules/').pop()!;
  if (inModules === modulePath) return `(ours) ${modulePath.replace(/^(\.\.\/)*(\.\/)?/, '').split('/')[0]}`;
  const parts = inModules.split('/');
  return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
}

test('the workflow bundle holds only the SDK’s workflow side and our workflows/ and domain/ code', async () => {
  const modules = await bundledModules();
  expect(modules.length).toBeGreaterThan(20);
  const packages = new Set(modules.map(packageOf));
  const foreign = [...packages].filter((p) => !ALLOWED_PACKAGES.includes(p) && !['(ours) workflows', '(ours) domain'].includes(p));
  expect(foreign).toEqual([]);
  expect(packages).toContain('(ours) workflows');
});

test('no module the workflows import pulls in the request validation (zod, domain/requests, domain/deployment)', async () => {
  const modules = await bundledModules();
  expect(modules.filter((m) => /\/zod\/|domain\/requests|domain\/deployment/.test(m))).toEqual([]);
});

// The worker's own bundling (`tablefate worker`, `dev`): the tests hand every worker the run's bundle through
// TABLEFATE_WORKFLOW_BUNDLE, so the path a deployment takes, bundling in a child process, is proved here.
describe('withWorkflowBundle, which the worker starts from', () => {
  test('bundles the workflows in a child process into a temp file, and removes it once used', async () => {
    const prebuilt = process.env[WORKFLOW_BUNDLE_ENV];
    delete process.env[WORKFLOW_BUNDLE_ENV];
    let used = '';
    try {
      const code = await withWorkflowBundle(async (codePath) => {
        used = codePath;
        return fs.promises.readFile(codePath, 'utf8');
      });
      expect(used).not.toBe(prebuilt);
      expect(fs.existsSync(used)).toBe(false);
      // The very code the run's bundle holds: what the tests' workers run is what a deployment's would.
      expect(code).toBe((await workflowBundle()).code);
    } finally {
      process.env[WORKFLOW_BUNDLE_ENV] = prebuilt;
    }
  });

  test('with TABLEFATE_WORKFLOW_BUNDLE, hands over that file and keeps it', async () => {
    const prebuilt = process.env[WORKFLOW_BUNDLE_ENV];
    expect(prebuilt).toBeDefined();
    expect(await withWorkflowBundle((codePath) => Promise.resolve(codePath))).toBe(prebuilt);
    expect(fs.existsSync(prebuilt!)).toBe(true);
  });

  test('run from the build (dist/), hands over the bundle the build made: the very code the tests run', async () => {
    const root = path.resolve(__dirname, '..');
    execFileSync(process.execPath, [path.join(root, 'bin', 'build.js')], { cwd: root, stdio: 'ignore' });
    const used = execFileSync(
      process.execPath,
      ['-e', "require('./dist/worker/workflow-bundle').withWorkflowBundle(async (codePath) => console.log(codePath))"],
      { cwd: root, env: { ...process.env, [WORKFLOW_BUNDLE_ENV]: '' }, encoding: 'utf8' },
    ).trim();
    expect(used).toBe(path.join(root, 'dist', BUILT_BUNDLE));
    expect(await fs.promises.readFile(used, 'utf8')).toBe((await workflowBundle()).code);
  });
});
