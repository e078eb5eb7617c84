import fs from 'node:fs';
import path from 'node:path';
import { PATCHES, RELEASE } from '../../workflows/patches';

/*
 * A patch lives for one release (docs/changing-workflows.md): the release after the one that brought it retires it, and
 * the old code it kept (workflows/legacy/v<N>/) goes with it. This test fails once a patch, or a release's old code,
 * outlives that, and once the page's inventory of live patches says other than the code.
 */

const ROOT = path.resolve(__dirname, '../..');
const LEGACY = path.join(ROOT, 'workflows/legacy');

test('every live patch was brought by this release or the one before', () => {
  for (const [name, patch] of Object.entries(PATCHES)) {
    expect({ name, since: patch.since, outlived: RELEASE - patch.since > 1 }).toEqual({ name, since: patch.since, outlived: false });
  }
});

test("the old code kept in workflows/legacy/ is the previous release's, kept for a live patch of this one", () => {
  const kept = fs.existsSync(LEGACY) ? fs.readdirSync(LEGACY).filter((entry) => /^v[0-9]+$/.test(entry)) : [];
  const sinces = new Set<number>(Object.values(PATCHES).map((patch) => patch.since));
  for (const folder of kept) {
    const release = Number(folder.slice(1));
    expect({ folder, keptFor: sinces.has(release + 1) }).toEqual({ folder, keptFor: true });
  }
});

test("docs/changing-workflows.md's inventory names exactly the live patches, each with its release", () => {
  const page = fs.readFileSync(path.join(ROOT, 'docs/changing-workflows.md'), 'utf8');
  const inventory = page.slice(page.indexOf('## Live patches'), page.indexOf('\n## ', page.indexOf('## Live patches') + 1));
  expect(inventory.length).toBeGreaterThan(20);
  const rows = [...inventory.matchAll(/^\| `([a-z0-9-]+)` \| v([0-9]+) \|/gm)].map(([, id, since]) => ({ id, since: Number(since) }));
  expect(rows.sort((a, b) => a.id!.localeCompare(b.id!))).toEqual(
    Object.values(PATCHES)
      .map((patch) => ({ id: patch.id, since: patch.since }))
      .sort((a, b) => a.id.localeCompare(b.id)),
  );
  expect(inventory).toContain(`release v${RELEASE}`);
});
