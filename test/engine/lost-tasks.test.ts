import { runCase } from './cases';
import { distinctKeys, eachCase, expectLook, outcomeOf, forEachOperation } from './expected';

// A workflow task lost right after each call of the executor (the local activity ran, its answer never reached the
// history: ./lose-task.ts fails the task that received it, as a worker killed there loses it). The next attempt makes
// the same call again, with the same key and the same progress: each part is answered from the catalog's journal, so
// the operation ends as it would have, and every change (the catalog's, the storage driver's) is made once.

forEachOperation('a workflow task lost after each call converges to the same end, each change made once', async (engine, op, plain) => {
  const calls = [...new Set(plain.calls.map((asked) => asked.call))];
  await eachCase(
    calls,
    (call) => `a workflow task lost after call ${call}`,
    async (call, afterCall, show) => {
      const run = await runCase(engine, op, `lost${afterCall}`, { kind: 'loseTask', afterCall });
      show(run);
      // The call was made again, asked as it was the first time: but for the workflow time of the task that asks (its
      // `now`, and the time a run starts from until it takes its lock).
      const asked = run.calls
        .filter((made) => made.call === call)
        .map(({ now: _now, progress: { lockedAt: _lockedAt, ...progress }, ...rest }) => ({ ...rest, progress }));
      expect(asked).toHaveLength(2);
      expect(asked[1]).toEqual(asked[0]);
      // Its parts were made again under the same keys, answered from the journal: no part the undisturbed run did
      // not make, and each change on the shards made once.
      expect(run.parts.filter((made) => made.call === call).some((made) => made.repeat)).toBe(true);
      expect(distinctKeys(run.parts)).toEqual(distinctKeys(plain.parts));
      expect([...run.driver].sort()).toEqual([...plain.driver].sort());
      expect(outcomeOf(run)).toBe(outcomeOf(plain));
      await expectLook(engine, run, op.after);
    },
    2,
  );
});
