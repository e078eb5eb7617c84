import fs from 'node:fs';
import path from 'node:path';
import { DEFAULT_TEMPORAL_NAMESPACE, TASK_QUEUE } from '../domain/deployment';
import { contractDocument, type ContractDocument } from '../contract/document';
import { renderCallTable, renderFailureTable } from './contract-text';

/**
 * Writes the published copy of the contract: docs/contract/contract.json, for the default namespace and task queue,
 * and the tables of docs/contract/README.md that are made from it. Run it (`npx tsx cli/contract-publish.ts`) after a change
 * of the contract; test/unit/contract-document.test.ts fails until the copy is the code's.
 */

const DOCS = path.join(__dirname, '..', 'docs', 'contract');
export const PUBLISHED_JSON = path.join(DOCS, 'contract.json');
export const PUBLISHED_README = path.join(DOCS, 'README.md');

/** The contract as published: what a deployment started with the defaults offers. */
export const publishedDocument = (): ContractDocument => contractDocument({ namespace: DEFAULT_TEMPORAL_NAMESPACE, taskQueue: TASK_QUEUE });

/** The README's sections made from the document, each between its markers: `<!-- contract:calls -->` ... `<!-- /contract:calls -->`. */
const SECTIONS = { calls: renderCallTable, failures: renderFailureTable } as const;

/** `readme` with each generated section made again from `doc` (the rest is written by hand, and kept). */
export function withGeneratedSections(readme: string, doc: ContractDocument): string {
  let text = readme;
  for (const [name, render] of Object.entries(SECTIONS)) {
    const begin = `<!-- contract:${name} -->`;
    const end = `<!-- /contract:${name} -->`;
    const from = text.indexOf(begin);
    const to = text.indexOf(end);
    if (from < 0 || to < from) throw new Error(`${PUBLISHED_README} has no ${begin} ... ${end} section`);
    text = `${text.slice(0, from + begin.length)}\n${render(doc)}\n${text.slice(to)}`;
  }
  return text;
}

async function publish(): Promise<void> {
  const doc = publishedDocument();
  // Formatted as the repository's other JSON is, so that `prettier --check` (npm run lint) passes it as written. (Loaded
  // here: the test that reads this module's other exports runs where prettier's entry point cannot load.)
  const { format, resolveConfig } = await import('prettier');
  const options = await resolveConfig(PUBLISHED_JSON);
  fs.writeFileSync(PUBLISHED_JSON, await format(JSON.stringify(doc), { ...options, filepath: PUBLISHED_JSON }));
  fs.writeFileSync(PUBLISHED_README, withGeneratedSections(fs.readFileSync(PUBLISHED_README, 'utf8'), doc));
  process.stdout.write(
    `wrote ${path.relative(process.cwd(), PUBLISHED_JSON)} and the tables of ${path.relative(process.cwd(), PUBLISHED_README)}\n`,
  );
}

if (require.main === module) {
  publish().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  });
}
