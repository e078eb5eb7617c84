import fs from 'node:fs';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Worker, type ReplayResult } from '@temporalio/worker';
import { workflowBundle } from './support/harness';
import { OPERATIONS } from '../domain/operations';
import { CONTRACT_CALLS, contractWorkflowType, type ContractCallName } from '../domain/contract';

// Histories recorded from earlier versions of the workflows (test/support/record-histories.ts) stand for runs
// in the field, such as a trash timer that has days to go. Today's workflow code must replay every one of them
// exactly; a change that cannot goes behind `patched()`.
const DIR = path.resolve(__dirname, 'histories');
const files = fs.readdirSync(DIR).filter((f) => f.endsWith('.json'));

interface HistoryJson {
  events: Array<{ workflowExecutionStartedEventAttributes?: { workflowType?: { name?: string } } }>;
}
const readHistory = (file: string) => JSON.parse(fs.readFileSync(path.join(DIR, file), 'utf8')) as HistoryJson;

test('there are recorded histories of every workflow type', () => {
  const types = new Set(files.map((f) => readHistory(f).events[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name));
  const contract = new Set<string | undefined>(CONTRACT_CALLS.map(contractWorkflowType));
  // Every operation's workflow, as the records list them (an adopt runs create's).
  const operations = [...types].filter((type) => !contract.has(type));
  expect(operations.sort()).toEqual([...new Set(Object.values(OPERATIONS).map((op) => op.workflowType))].sort());
  // The contract's calls are one function (workflows/contract.ts): its paths are recorded, a write, a read, a refusal.
  expect([...types].filter((type) => contract.has(type)).sort()).toEqual(
    ['purge', 'describe', 'trash'].map((name) => contractWorkflowType(name as ContractCallName)).sort(),
  );
});

/** Each file's replay, by file: one replay worker replays them all (one worker per history took seconds each). */
const replays = new Map<string, ReplayResult>();
beforeAll(async () => {
  // The proto3 JSON form, as `temporal workflow show --output json` writes it.
  const histories = files.map((file) => ({ workflowId: file, history: historyFromJSON(readHistory(file)) }));
  for await (const result of Worker.runReplayHistories({ workflowBundle: await workflowBundle() }, histories)) {
    replays.set(result.workflowId, result);
  }
});

test.each(files)('%s replays with the current workflow code', (file) => {
  const replay = replays.get(file);
  expect(replay).toBeDefined();
  if (replay?.error) throw replay.error;
});
