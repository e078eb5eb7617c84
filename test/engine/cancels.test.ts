import { OPERATIONS, runCase } from './cases';
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

// A cancel requested at each part of each operation. A call of the executor runs where a cancel cannot reach it, and
// the run takes the cancel before its next call: so the cancel is taken at the end of the call under way, and what the
// run has begun by then is taken back, the last first. A cancel that lands in the run's last call comes too late (the
// operation is done), and one past a purge's point of no return lets the purge finish.

const engineOfFile = forEachOperation(
  'a cancel requested at each part is taken when its call ends: what was begun is taken back, the last first',
  async (engine, op, plain) => {
    await eachCase(
      plain.parts,
      ({ part, call }) => `a cancel at ${part} (call ${call})`,
      async ({ call }, at, show) => {
        const run = await runCase(engine, op, `cancel${at}`, { kind: 'cancel', at });
        show(run);
        expect(run.parts.filter((made) => made.injected === 'cancel')).toHaveLength(1);
        // The call under way ends as it would have.
        let endOfCall = plain.parts.map((made) => made.call).lastIndexOf(call);
        // (A release of the run's locks has no call key: it is made by the call before it.)
        if (plain.parts[endOfCall + 1]?.part === 'release') endOfCall += 1;
        const made = plain.parts.slice(0, endOfCall + 1);
        expect(namesOf(run.parts.slice(0, endOfCall + 1))).toEqual(namesOf(made));
        const last = made.at(-1)!.part;
        if (endOfCall === plain.parts.length - 1 || pastNoReturn(op.operation, last)) {
          // Too late to take anything back: the operation goes on to its end.
          expect(namesOf(run.parts)).toEqual(namesOf(plain.parts));
          expect(outcomeOf(run)).toBe(outcomeOf(plain));
          await expectLook(engine, run, op.after);
          return;
        }
        const begun = begunAt(op.operation, last, true);
        expect(namesOf(run.parts.slice(endOfCall + 1))).toEqual(takingBack(op.operation, begun, op.shards, shardsPerCallOf(plain)));
        expect(outcomeOf(run)).toBe('WorkflowCancelled');
        await expectLook(engine, run, takenBack(op.operation, run.parts, op.before));
      },
      4,
    );
  },
);

// The case of the table above, on its own: a cancel that lands in the call where a purge of more shards than one call
// changes crosses its point of no return (the second of three: the last marks, then the first deletes).
test('a purge cancelled in the call that crosses its point of no return finishes: PURGED, no file left, its trash run ended', async () => {
  const op = OPERATIONS.find((o) => o.slug === 'purge17')!;
  const plain = await runCase(engineOfFile(), op, 'noreturn_plain', { kind: 'none' });
  const crossing = plain.parts.findIndex((made) => pastNoReturn(op.operation, made.part));
  const firstOfThatCall = plain.parts.findIndex((made) => made.call === plain.parts[crossing]!.call);
  const run = await runCase(engineOfFile(), op, 'noreturn', { kind: 'cancel', at: firstOfThatCall });
  expect({ outcome: outcomeOf(run), state: (await engineOfFile().catalog.getTable(run.tableId!))?.state }).toEqual({
    outcome: 'PURGED',
    state: 'PURGED',
  });
  await expectLook(engineOfFile(), run, op.after);
});
