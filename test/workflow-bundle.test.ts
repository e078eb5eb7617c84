import { workflowBundle } from './support/harness';

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
