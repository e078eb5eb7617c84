import fs from 'node:fs';
import path from 'node:path';

/*
 * docs/design.md shows operations as the code writes them: each TypeScript sample that quotes a file it names ("reads
 * (`workflows/trash.ts`):" before the block) is that file's text, word for word, so that the page cannot drift from the
 * code it explains.
 */

const ROOT = path.resolve(__dirname, '../..');
const page = fs.readFileSync(path.join(ROOT, 'docs/design.md'), 'utf8');

/** Each ```ts block, with the file the sentence before it names in backquotes, if any. */
const samples = [...page.matchAll(/\(`([a-z/-]+\.ts)`\):\n\n```ts\n([\s\S]*?)```/g)].map(([, file, code]) => ({
  file: file!,
  code: code!,
}));

test('the page quotes at least one operation as its file writes it', () => {
  expect(samples.map((sample) => sample.file)).toContain('workflows/trash.ts');
});

test.each(samples.map((sample) => [sample.file, sample.code] as const))('its sample of %s is that file’s text', (file, code) => {
  const source = fs.readFileSync(path.join(ROOT, file), 'utf8');
  expect(source).toContain(code.trimEnd());
});
