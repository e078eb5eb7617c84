import fs from 'node:fs';
import path from 'node:path';

/*
 * The README's "Layout" names the tree as it is: every top-level folder of the project (not a dot-folder, nor one
 * .gitignore keeps out: node_modules/, dist/...) has its entry, every entry is a folder that exists, and every path or
 * file the entries name exists. The check is on folders first, so that files moving inside one (a split, a rename) leave
 * it alone, unless the Layout names that file itself.
 *
 * In an entry, a word with a slash (test/unit, docs/contract, deploy/temporal) is a path from the project's root; a word
 * with a file's extension and no slash (commands.ts, jest.cluster.config.js) is a file of the entry's folder, or of the
 * root. So the Layout writes no slash in prose ("dev, worker and storage-node", not "dev/worker/storage-node").
 */

const ROOT = path.resolve(__dirname, '../..');

/** The Layout's entries: each line of its code block that begins a folder (`cli/   the command line...`), with its text. */
export function layoutEntries(readme: string): { folder: string; text: string }[] {
  const section = /^## Layout\n([\s\S]*?)(?=^## )/m.exec(readme)?.[1];
  if (section === undefined) throw new Error('README.md has no "## Layout" section');
  const block = /^```\n([\s\S]*?)^```/m.exec(section)?.[1];
  if (block === undefined) throw new Error('the Layout section has no code block');
  const entries: { folder: string; text: string }[] = [];
  for (const line of block.split('\n')) {
    const start = /^(\S+)\/\s+(.*)$/.exec(line);
    if (start) entries.push({ folder: start[1]!, text: start[2]! });
    else if (line.trim() !== '') {
      const last = entries.at(-1);
      if (!last || !/^\s/.test(line)) throw new Error(`the Layout's line "${line}" continues no folder's entry`);
      last.text += ` ${line.trim()}`;
    }
  }
  return entries;
}

/** What an entry names besides its folder: paths from the root (with a slash) and files (an extension, no slash). */
export function namedPaths(text: string): { paths: string[]; files: string[] } {
  const words = text.split(/[\s,;:()`]+/).map((word) => word.replace(/[.]+$/, ''));
  const paths = words.filter((word) => word.includes('/') && !/^[a-z]+:\/\//.test(word)).map((word) => word.replace(/\/$/, ''));
  const files = words.filter((word) => !word.includes('/') && /^[\w.-]+\.(ts|js|mjs|cjs|json|ya?ml|md|sh|py|toml)$/.test(word));
  return { paths, files };
}

const escapeRegExp = (text: string) => text.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&');

/** The top-level patterns of .gitignore that name folders (dist/, and globs as dist.*), as expressions. */
function ignoredFolders(): RegExp[] {
  return fs
    .readFileSync(path.join(ROOT, '.gitignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => /^\/?[^/#!\s]+\/$/.test(line))
    .map((line) => line.replace(/^\//, '').replace(/\/$/, ''))
    .map((glob) => new RegExp('^' + glob.split('*').map(escapeRegExp).join('[^/]*') + '$'));
}

/** The project's top-level folders: not hidden, not ignored. */
function topLevelFolders(): string[] {
  const ignored = ignoredFolders();
  return fs
    .readdirSync(ROOT, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && !entry.name.startsWith('.') && !ignored.some((re) => re.test(entry.name)))
    .map((entry) => entry.name)
    .sort();
}

const entries = layoutEntries(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'));
const isDir = (rel: string) => fs.existsSync(path.join(ROOT, rel)) && fs.statSync(path.join(ROOT, rel)).isDirectory();

test('every top-level folder has its entry in the Layout, once', () => {
  const named = entries.map((e) => e.folder);
  const missing = topLevelFolders().filter((folder) => !named.includes(folder));
  if (missing.length > 0) throw new Error(`README.md's Layout names no ${missing.map((f) => `${f}/`).join(', ')}: add a line for each`);
  expect(named.filter((folder, i) => named.indexOf(folder) !== i)).toEqual([]);
});

test('every entry of the Layout is a top-level folder that exists', () => {
  const absent = entries.map((e) => e.folder).filter((folder) => folder.includes('/') || !isDir(folder));
  if (absent.length > 0) throw new Error(`README.md's Layout names ${absent.map((f) => `${f}/`).join(', ')}, which is no top-level folder`);
});

test('every path and file the Layout names exists', () => {
  const absent: string[] = [];
  for (const { folder, text } of entries) {
    const { paths, files } = namedPaths(text);
    for (const rel of paths) if (!fs.existsSync(path.join(ROOT, rel))) absent.push(`${rel} (in ${folder}/'s entry)`);
    for (const file of files) {
      if (!fs.existsSync(path.join(ROOT, folder, file)) && !fs.existsSync(path.join(ROOT, file))) {
        absent.push(`${file} (in ${folder}/'s entry: neither ${folder}/${file} nor ./${file})`);
      }
    }
  }
  if (absent.length > 0) throw new Error(`README.md's Layout names what does not exist:\n  ${absent.join('\n  ')}`);
});

test('the check reads entries, paths and files as the Layout writes them', () => {
  const readme =
    '## Layout\n\n```\ncli/   the command line: commands.ts, main.ts\n       and test/unit; see https://x.y/z.\nbin/   tablefate.js\n```\n\n## Next\n';
  expect(layoutEntries(readme)).toEqual([
    { folder: 'cli', text: 'the command line: commands.ts, main.ts and test/unit; see https://x.y/z.' },
    { folder: 'bin', text: 'tablefate.js' },
  ]);
  expect(namedPaths('commands.ts its table, test/unit: and docs/contract/. jest.cluster.config.js')).toEqual({
    paths: ['test/unit', 'docs/contract'],
    files: ['commands.ts', 'jest.cluster.config.js'],
  });
});
