import fs from 'node:fs';
import path from 'node:path';

/*
 * No circle between the source files (issue 30): a file that imports, directly or not, one that imports it back makes
 * both harder to read and to move. Type-only imports count too: they tie the files' meanings together all the same.
 */

const ROOT = path.resolve(__dirname, '../..');
const FOLDERS = ['activities', 'catalog', 'cli', 'client', 'config', 'domain', 'servers', 'storage', 'worker', 'workflows'];

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** The project files `file` imports (relative specifiers only), as absolute paths. */
function importsOf(file: string): string[] {
  const text = fs.readFileSync(file, 'utf8');
  const found: string[] = [];
  for (const [, spec] of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s+'(\.[^']+)'/g)) {
    const base = path.resolve(path.dirname(file), spec!);
    const target = [`${base}.ts`, path.join(base, 'index.ts')].find((candidate) => fs.existsSync(candidate));
    if (target) found.push(target);
  }
  return found;
}

test('no source file imports, through any chain, a file that imports it back', () => {
  const files = FOLDERS.filter((f) => fs.existsSync(path.join(ROOT, f))).flatMap((f) => sourceFiles(path.join(ROOT, f)));
  const graph = new Map(files.map((f) => [f, importsOf(f)]));
  const cycles: string[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string) => {
    state.set(file, 'visiting');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'visiting') {
        cycles.push([...stack.slice(stack.indexOf(next)), next].map((f) => path.relative(ROOT, f)).join(' > '));
      } else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of files) if (!state.has(file)) visit(file);
  expect(files.length).toBeGreaterThan(50);
  expect(cycles).toEqual([]);
});
