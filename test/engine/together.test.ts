import type { TableFateClient } from '../../client/client';
import type { TableName } from '../../domain/names';
import type { TableInfo } from '../../domain/table';
import type { Operation } from '../../domain/steps';
import { trash } from '../../workflows/trash';
import { undelete } from '../../workflows/undelete';
import type { Look, Run } from './cases';
import { Engine, textOf, type Disturbance } from './engine';
import { distinctKeys, eachCase, expectLook, outcomeOf, stepOf } from './expected';

/*
 * The executor over several tables (a drop of two as one, their recall together), disturbed as the other engine tests
 * disturb a run over one: a failure for good at each part, a cancel at each part, a workflow task lost after each call,
 * every call and part made twice. Whatever befalls the run, the two tables end alike: both as they were, or both where
 * the operation takes them, never one of each; no lock is left, and each change on their shards is made once.
 */

const RETENTION_SECONDS = 3600;
const trashed = { state: 'TRASHED', area: 'trash', trashRun: 'waiting' } as const;

interface GroupCase {
  title: string;
  slug: string;
  op: 'trash' | 'undelete';
  operation: Operation<never>;
  given: 'READY' | 'TRASHED';
  /** Runs the operation on the two tables (`names`, `ids`: the first has the lower id, and names the run). */
  run(client: TableFateClient, names: TableName[], ids: number[]): Promise<TableInfo>;
  before: Look;
  after: Look;
}

const dropBoth = (client: TableFateClient, [a, b]: TableName[]) =>
  client.trash({ table: textOf(a!), together: [textOf(b!)], retentionSeconds: RETENTION_SECONDS });

const CASES: GroupCase[] = [
  {
    title: 'a drop of two tables as one',
    slug: 'dropboth',
    op: 'trash',
    operation: trash,
    given: 'READY',
    run: dropBoth,
    before: { state: 'READY', area: 'live', trashRun: 'ended' },
    after: trashed,
  },
  {
    title: 'the recall of two tables dropped as one',
    slug: 'recallboth',
    op: 'undelete',
    operation: undelete,
    given: 'TRASHED',
    run: (client, _names, [a]) => client.undelete({ table: a! }),
    before: { ...trashed, name: 'given' },
    after: { state: 'READY', area: 'live', name: 'given', trashRun: 'restored' },
  },
];

/** One run of a case on two tables of its own: the run as the engine saw it, and each table's share of it. */
interface GroupRun extends Pick<Run, 'workflowId' | 'outcome' | 'parts' | 'calls' | 'driver'> {
  members: Run[];
}

let engine: Engine;
beforeAll(async () => {
  engine = await Engine.start();
});
afterAll(async () => {
  await engine?.close();
});

async function runGroup(c: GroupCase, tag: string, disturbance: Disturbance): Promise<GroupRun> {
  const names = ['a', 'b'].map((x) => ({ namespace: 'engine', name: `${c.slug}_${tag}_${x}` }));
  const ids: number[] = [];
  for (const name of names) ids.push((await engine.client.create({ table: textOf(name), shards: 2 })).id);
  if (c.given === 'TRASHED') await dropBoth(engine.client, names);
  const workflowId = engine.workflowIdOf(c.op, Math.min(...ids));
  engine.disturb(workflowId, disturbance);
  const driverBefore = ids.map((id) => engine.driverChangesOf(id).length);
  const outcome = await c.run(engine.client, names, ids).then(
    (answer) => ({ answer }),
    (error: Error & { type?: string }) => ({ error }),
  );
  const parts = engine.partsOf(workflowId);
  const calls = engine.callsOf(workflowId);
  const members = names.map((name, i): Run => ({
    subject: { name, newName: { ...name, name: `${name.name}_renamed` } },
    workflowId,
    tableId: ids[i],
    outcome,
    parts,
    calls,
    driver: engine.driverChangesOf(ids[i]!).slice(driverBefore[i]),
  }));
  return { workflowId, outcome, parts, calls, driver: members.flatMap((m) => m.driver.map((d) => `${m.tableId} ${d}`)), members };
}

/**
 * The run's parts' keys, each once, with its tables' ids as `a` and `b` (runs on other tables compare alike): each
 * table's share of a step is a part of its own (`0.change.<id>`).
 */
const keysOf = (run: GroupRun): string[] =>
  distinctKeys(run.parts).map((key) =>
    run.members.reduce((named, member, i) => named.replace(new RegExp(`\\.${member.tableId}$`), `.${'ab'[i]!}`), key),
  );

/**
 * Whether `part` comes after the operation's first change that cannot be taken back (a drop's commit, a recall's), which
 * the executor makes on both tables at once: from there the run only goes forward. (A failure of that part itself makes
 * it on neither.)
 */
function pastCommit(operation: Operation<never>, part: string): boolean {
  const commit = operation.steps.findIndex((step) => step.change !== undefined && step.undo === undefined);
  const at = part === 'release' ? operation.steps.length : stepOf(part);
  return at !== undefined && at > commit;
}

/** Both tables look as `look` says. */
async function expectBoth(run: GroupRun, look: Look): Promise<void> {
  for (const member of run.members) await expectLook(engine, member, look);
}

describe.each(CASES)('$title', (c) => {
  let plain: GroupRun;
  beforeAll(async () => {
    plain = await runGroup(c, 'plain', { kind: 'none' });
  });

  test('undisturbed, both tables end where the operation takes them, each part made once, each shard moved once', async () => {
    expect(outcomeOf(plain.members[0]!)).toBe(c.after.state);
    await expectBoth(plain, c.after);
    expect(plain.parts.filter((made) => made.repeat)).toEqual([]);
    // Each table's lock, then each step's change on each table.
    expect(plain.parts.map((made) => made.part)).toEqual(expect.arrayContaining(plain.members.map((m) => `lock.${m.tableId}`)));
    expect(new Set(plain.driver).size).toBe(plain.driver.length);
    expect(plain.members.every((m) => m.driver.length > 0)).toBe(true);
  });

  test('a failure for good at each part leaves both tables as they were, or, past the commit, where it takes them', async () => {
    await eachCase(
      plain.parts,
      ({ part, call }) => `a failure at ${part} (call ${call})`,
      async ({ part }, at, show) => {
        const run = await runGroup(c, `fail${at}`, { kind: 'fail', at });
        show(run.members[0]!);
        expect(outcomeOf(run.members[0]!)).toBe('InjectedFailure');
        // (Failed once its change that cannot be taken back is made: only the release of its locks is left, which the
        // workflow makes on its way out.)
        await expectBoth(run, pastCommit(c.operation, part) ? c.after : c.before);
      },
    );
  });

  test('a cancel at each part leaves both as they were, or, too late, both where the operation takes them', async () => {
    await eachCase(
      plain.parts,
      ({ part, call }) => `a cancel at ${part} (call ${call})`,
      async (_part, at, show) => {
        const run = await runGroup(c, `cancel${at}`, { kind: 'cancel', at });
        show(run.members[0]!);
        const outcome = outcomeOf(run.members[0]!);
        expect(['WorkflowCancelled', c.after.state]).toContain(outcome);
        await expectBoth(run, outcome === 'WorkflowCancelled' ? c.before : c.after);
      },
      2,
    );
  });

  test('a workflow task lost after each call converges to the same end, each change made once', async () => {
    const calls = [...new Set(plain.calls.map((asked) => asked.call))];
    await eachCase(
      calls,
      (call) => `a workflow task lost after call ${call}`,
      async (_call, afterCall, show) => {
        const run = await runGroup(c, `lost${afterCall}`, { kind: 'loseTask', afterCall });
        show(run.members[0]!);
        expect(keysOf(run)).toEqual(keysOf(plain));
        expect(run.members.map((m) => [...m.driver].sort())).toEqual(plain.members.map((m) => [...m.driver].sort()));
        expect(outcomeOf(run.members[0]!)).toBe(c.after.state);
        await expectBoth(run, c.after);
      },
      2,
    );
  });

  test('every call and every part made twice ends as made once, each change on the shards made once', async () => {
    const run = await runGroup(c, 'twice', { kind: 'twice' });
    expect(keysOf(run)).toEqual(keysOf(plain));
    expect(run.parts.length).toBeGreaterThan(plain.parts.length);
    expect(run.members.map((m) => [...m.driver].sort())).toEqual(plain.members.map((m) => [...m.driver].sort()));
    expect(outcomeOf(run.members[0]!)).toBe(c.after.state);
    await expectBoth(run, c.after);
  });
});
