import { runCase } from './cases';
import { distinctKeys, expectLook, outcomeOf, forEachOperation } from './expected';

// Accumulo's FlakyFate: every call of the executor made twice, and every part of each call twice, the second answering.
// Each is journaled under its key, so the second changes nothing: the operation ends as it does with each made once.

forEachOperation(
  'every call and every part made twice ends as made once, each change on the shards made once',
  async (engine, op, plain) => {
    const run = await runCase(engine, op, 'twice', { kind: 'twice' });
    expect(distinctKeys(run.parts)).toEqual(distinctKeys(plain.parts));
    expect(run.parts.length).toBeGreaterThan(plain.parts.length);
    expect([...run.driver].sort()).toEqual([...plain.driver].sort());
    expect(outcomeOf(run)).toBe(outcomeOf(plain));
    await expectLook(engine, run, op.after);
  },
);
