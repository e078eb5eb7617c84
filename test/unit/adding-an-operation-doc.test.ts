import fs from 'node:fs';
import path from 'node:path';

/*
 * docs/adding-an-operation.md stays true: every path it names exists, and every symbol it says lives in a named file is
 * declared there. The page is read as a person writes it, in these forms (paths and symbols in backticks):
 *
 *   - a path: `domain/operations.ts`, `client/`; one with a placeholder (`workflows/<name>.ts`) is a pattern, not checked;
 *   - `SYMBOL` in `path` (and `A`, `B` and `C` in `path`): each symbol in that file;
 *   - `SYMBOL` (`path`), or `SYMBOL`, `path` ("(`runSteps`, `workflows/steps.ts`, ..."): the symbol in that file;
 *   - in a list item that begins with its file in bold (**`domain/operations.ts`**: ..., and the items nested in it), a
 *     symbol written "in `SYMBOL`" or alone in parentheses, "(`SYMBOL`)", is in that file, unless a form above puts it
 *     elsewhere.
 *
 * A symbol is an identifier, maybe followed by what the page says of it (`OPERATIONS.<name>.locks(input)`: OPERATIONS).
 * Declared: `const|let|var|function|class|interface|type|enum NAME`, exported or not, or a name an `export { ... }`
 * lists; in a folder (`client/`), in any of its files.
 */

const ROOT = path.resolve(__dirname, '../..');
const PAGE = 'docs/adding-an-operation.md';

/**
 * Names the page may name wrongly for now: the workflow steps, which the lead rewrites for the new workflows/ layout.
 * EMPTY IT once the page's workflow part is rewritten (the last test fails on an entry the page no longer names).
 * An entry is a path (`workflows/steps.ts`) or `SYMBOL in path`.
 */
const NOT_YET_CHECKED: ReadonlySet<string> = new Set<string>([]);

export interface Reference {
  /** A path from the project's root (a folder ends with /). */
  path: string;
  /** The symbol said to live in it, if any. */
  symbol?: string;
}

const PATH = /^[\w.-]+\/(?:[\w.<>*-]+\/?)*$/;
const SYMBOL = /^([A-Za-z_$][\w$]*)(?:[.(][^`]*)?$/;
const isPath = (text: string) => PATH.test(text) && !/\s/.test(text);
const isPattern = (text: string) => /[<>*]/.test(text);
const symbolOf = (text: string): string | undefined => (isPath(text) ? undefined : SYMBOL.exec(text)?.[1]);

/** The page's units: a paragraph or a list item (with its nested items), each with the file its item begins with in bold. */
function units(page: string): { text: string; head?: string }[] {
  const out: { text: string; head?: string }[] = [];
  let head: string | undefined;
  let current: string[] = [];
  const flush = () => {
    if (current.length > 0) out.push({ text: current.join(' '), head });
    current = [];
  };
  let inFence = false;
  for (const line of page.split('\n')) {
    if (line.startsWith('```')) {
      inFence = !inFence;
      continue;
    }
    if (inFence) continue;
    const item = /^(\s*)(?:\d+\.|-)\s+(.*)$/.exec(line);
    if (line.trim() === '' || line.startsWith('#')) {
      flush();
      if (line.startsWith('#')) head = undefined;
    } else if (item) {
      flush();
      if (item[1] === '') {
        const bold = /^\*\*`([^`]+)`\*\*/.exec(item[2]!);
        head = bold && isPath(bold[1]!) ? bold[1] : undefined;
      }
      current.push(item[2]!);
    } else {
      if (!/^\s/.test(line) && current.length === 0) head = undefined; // (a paragraph of its own)
      current.push(line.trim());
    }
  }
  flush();
  return out;
}

/** Every path the page names, and every symbol it says lives in one. */
export function references(page: string): Reference[] {
  const refs: Reference[] = [];
  for (const { text, head } of units(page)) {
    // The backticked spans, each with the text between it and the next.
    const spans: { code: string; before: string; after: string }[] = [];
    const parts = text.split('`');
    for (let i = 1; i < parts.length; i += 2) spans.push({ code: parts[i]!, before: parts[i - 1]!, after: parts[i + 1] ?? '' });
    const placed = new Set<number>();
    spans.forEach(({ code }, i) => {
      if (!isPath(code)) return;
      if (!isPattern(code)) refs.push({ path: code });
      // `A`, `B` and `C` in `path`
      if (i > 0 && /^\s*in\s*$/.test(spans[i - 1]!.after)) {
        for (let j = i - 1; j >= 0; j--) {
          const symbol = symbolOf(spans[j]!.code);
          if (!symbol) break;
          refs.push({ path: code, symbol });
          placed.add(j);
          if (j === 0 || !/^\s*(?:,|and|, and)\s*$/.test(spans[j - 1]!.after)) break;
        }
      }
      // `SYMBOL` (`path`) and `SYMBOL`, `path`
      if (i > 0 && /^\s*[,(]\s*$/.test(spans[i - 1]!.after) && !placed.has(i - 1)) {
        const symbol = symbolOf(spans[i - 1]!.code);
        if (symbol) {
          refs.push({ path: code, symbol });
          placed.add(i - 1);
        }
      }
    });
    if (head === undefined) continue;
    spans.forEach(({ code, before, after }, i) => {
      const symbol = symbolOf(code);
      if (!symbol || placed.has(i)) return;
      if (/\bin\s*$/.test(before) || (/\(\s*$/.test(before) && /^\s*\)/.test(after))) refs.push({ path: head, symbol });
    });
  }
  return refs;
}

const keyOf = (ref: Reference) => (ref.symbol === undefined ? ref.path : `${ref.symbol} in ${ref.path}`);

/** The source files a reference's symbol may be declared in: the file, or a folder's files. */
function sourcesOf(rel: string): string[] {
  const abs = path.join(ROOT, rel);
  if (!fs.existsSync(abs)) return [];
  if (!fs.statSync(abs).isDirectory()) return [abs];
  return fs
    .readdirSync(abs, { recursive: true, encoding: 'utf8' })
    .filter((file) => /\.(ts|js)$/.test(file))
    .map((file) => path.join(abs, file));
}

export function declares(source: string, symbol: string): boolean {
  const name = symbol.replace(/\$/g, '\\$');
  const declaration = new RegExp(
    `(?:^|\\n)[ \\t]*(?:export[ \\t]+)?(?:default[ \\t]+)?(?:declare[ \\t]+)?(?:abstract[ \\t]+)?(?:async[ \\t]+)?` +
      `(?:const|let|var|function\\*?|class|interface|type|enum)[ \\t]+${name}\\b`,
  );
  const listed = new RegExp(`export[ \\t]+(?:type[ \\t]+)?\\{[^}]*\\b${name}\\b[^}]*\\}`);
  return declaration.test(source) || listed.test(source);
}

const refs = references(fs.readFileSync(path.join(ROOT, PAGE), 'utf8'));

test(`every path ${PAGE} names exists, and every symbol it places in one is declared there`, () => {
  const wrong: string[] = [];
  for (const ref of refs) {
    if (NOT_YET_CHECKED.has(keyOf(ref))) continue;
    const sources = sourcesOf(ref.path);
    if (sources.length === 0 && !fs.existsSync(path.join(ROOT, ref.path))) wrong.push(`${keyOf(ref)}: ${ref.path} is no file or folder`);
    else if (ref.symbol !== undefined && !sources.some((file) => declares(fs.readFileSync(file, 'utf8'), ref.symbol!))) {
      wrong.push(`${ref.symbol}: not declared in ${ref.path}`);
    }
  }
  if (wrong.length > 0) throw new Error(`${PAGE} names what is not there:\n  ${[...new Set(wrong)].join('\n  ')}`);
});

test(`every name the test lets ${PAGE} name wrongly for now is still on the page (else remove it from NOT_YET_CHECKED)`, () => {
  const named = new Set(refs.map(keyOf));
  expect([...NOT_YET_CHECKED].filter((key) => !named.has(key))).toEqual([]);
});

test('the page is read in its forms', () => {
  const page = [
    'The record (`OPERATIONS` in `domain/operations.ts`; `A`, `B` and `C` in `x/y.ts`), `CALLS` (`client/call-table.ts`),',
    'under its locks (`withLock`, `workflows/lock.ts`, with `OPERATIONS.<name>.locks(input)`); `workflows/<name>.ts`.',
    '',
    '1. **`domain/requests.ts`**: its schema in `OPERATION_REQUESTS`, its type (`RenameRequest`), the field `table`.',
    '   - nested: its input (`RenameInput`); `RESUMED_BY` in `domain/health.ts`.',
    '2. **`cli/`**: a record in `COMMANDS`.',
    '',
    'After the list: in `NOTHING`.',
  ].join('\n');
  expect(references(page).map(keyOf)).toEqual([
    'domain/operations.ts',
    'OPERATIONS in domain/operations.ts',
    'x/y.ts',
    'C in x/y.ts',
    'B in x/y.ts',
    'A in x/y.ts',
    'client/call-table.ts',
    'CALLS in client/call-table.ts',
    'workflows/lock.ts',
    'withLock in workflows/lock.ts',
    'domain/requests.ts',
    'OPERATION_REQUESTS in domain/requests.ts',
    'RenameRequest in domain/requests.ts',
    'domain/health.ts',
    'RESUMED_BY in domain/health.ts',
    'RenameInput in domain/requests.ts',
    'cli/',
    'COMMANDS in cli/',
  ]);
  expect(declares('export const CALLS = {', 'CALLS')).toBe(true);
  expect(declares('interface Foo {}\nfunction bar() {}', 'bar')).toBe(true);
  expect(declares('export { a, CALLS as B }', 'CALLS')).toBe(true);
  expect(declares('const CALLSX = 1; use(CALLS);', 'CALLS')).toBe(false);
});
