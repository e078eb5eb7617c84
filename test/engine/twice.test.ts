import { OPERATIONS, runCase } from './cases';
import { Engine } from './engine';
import { distinctKeys, expectLook, expectUndisturbed, outcomeOf } from './expected';

// Accumulo's FlakyFate: every call of the executor made twice, and every part of each call twice, the second answering.
// Each is journaled under its key, so the second changes nothing: the operation ends as it does with each made once.

let engine: Engine;
beforeAll(async () => {
  engine = await Engine.start();
});
afterAll(async () => {
  await engine?.close();
});

describe.each(OPERATIONS)('$title', (op) => {
  test('every call and every part made twice ends as made once, each change on the shards made once', async () => {
    const plain = await runCase(engine, op, 'plain', { kind: 'none' });
    await expectUndisturbed(engine, op, plain);
    const run = await runCase(engine, op, 'twice', { kind: 'twice' });
    expect(distinctKeys(run.parts)).toEqual(distinctKeys(plain.parts));
    expect(run.parts.length).toBeGreaterThan(plain.parts.length);
    expect([...run.driver].sort()).toEqual([...plain.driver].sort());
    expect(outcomeOf(run)).toBe(outcomeOf(plain));
    await expectLook(engine, run, op.after);
  });
});
