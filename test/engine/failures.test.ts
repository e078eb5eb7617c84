import { runCase } from './cases';
import {
  begunAt,
  eachCase,
  expectLook,
  namesOf,
  outcomeOf,
  pastNoReturn,
  shardsPerCallOf,
  takenBack,
  takingBack,
  forEachOperation,
} from './expected';

// A failure for good at each part of each operation (the part throws a non-retryable failure, as a refused change or a
// storage fault does): the run takes back exactly the steps it began, the last first, and the table is as it was before.
// Past a point of no return nothing is taken back: the table stays in its transitional state, and the next run finishes.

forEachOperation(
  'a failure at each part takes back exactly the steps begun, the last first, and leaves the table as it was',
  async (engine, op, plain) => {
    await eachCase(
      plain.parts,
      ({ part, call }) => `a failure at ${part} (call ${call})`,
      async ({ part }, at, show) => {
        const run = await runCase(engine, op, `fail${at}`, { kind: 'fail', at });
        show(run);
        const failed = run.parts.findIndex((made) => made.injected === 'failure');
        // Forward as undisturbed up to the part that failed; then the undos of what was begun, and nothing else.
        expect(namesOf(run.parts.slice(0, failed + 1))).toEqual(namesOf(plain.parts.slice(0, at + 1)));
        const begun = begunAt(op.operation, part, false);
        expect(namesOf(run.parts.slice(failed + 1))).toEqual(takingBack(op.operation, begun, op.shards, shardsPerCallOf(plain)));
        expect(outcomeOf(run)).toBe('InjectedFailure');
        if (!pastNoReturn(op.operation, part)) {
          await expectLook(engine, run, takenBack(op.operation, run.parts, op.before));
          return;
        }
        // Past the point of no return: left as it is, and the same operation run again goes forward to its end.
        await expectLook(engine, run, op.stuck!);
        engine.disturb(run.workflowId, { kind: 'none' });
        await op.run(engine.client, run.subject, run.tableId);
        await expectLook(engine, run, op.after);
      },
    );
  },
);
