import { ApplicationFailure } from '@temporalio/common';
import type { Operation } from '../../domain/steps';
import { OPERATIONS, runCase, type Look, type OperationCase, type Run } from './cases';
import { Engine, keyOf, textOf, type PartMade } from './engine';

/*
 * What a run must have made, derived from the operation's step list (domain/steps.ts) the way the executor's rules
 * read it (docs/design.md, "one executor"): a step is begun once its catalog change is made (at once, if it has none),
 * so before its shards; a point of no return forgets every step begun before it; taking back undoes the steps begun,
 * the last first, each one's shards (in as many calls as its shards take) and then its catalog change, and then
 * releases the run's locks. The last step's change releases the locks with it, unless shards follow it: then they are
 * released once those are changed.
 */

/** The part names of parts, in order. */
export const namesOf = (parts: readonly PartMade[]): string[] => parts.map((made) => made.part);

/** The parts' keys, each once, in the order first made. */
export const distinctKeys = (parts: readonly PartMade[]): string[] => [...new Set(parts.map(keyOf))];

/** The step a part of the forward way belongs to; undefined for the operation's table lock (`lock`). */
export function stepOf(part: string): number | undefined {
  const numbered = /^(\d+)\./.exec(part);
  return numbered ? Number(numbered[1]) : undefined;
}

/**
 * The steps begun, first to last, once the run has come to `part` of its forward way: with the part made (`made`), or
 * failed before it made anything.
 */
export function begunAt(operation: Operation<never>, part: string, made: boolean): number[] {
  // (The release after the last step's shards comes once every step is begun.)
  const at = part === 'release' ? operation.steps.length - 1 : stepOf(part);
  if (at === undefined) return [];
  const kind = part === 'release' ? 'shards' : part.slice(part.indexOf('.') + 1);
  let begun: number[] = [];
  operation.steps.slice(0, at + 1).forEach((step, index) => {
    if (step.pointOfNoReturn) begun = [];
    // The step at `part` is begun if its change is made, or if the part is its shards (its change was made before).
    const isBegun = index < at || kind === 'shards' || (kind === 'change' && made);
    if (step.undo && isBegun) begun.push(index);
  });
  return begun;
}

/** Whether `part` is at or past the operation's point of no return. */
export function pastNoReturn(operation: Operation<never>, part: string): boolean {
  const at = stepOf(part);
  const noReturn = operation.steps.findIndex((step) => step.pointOfNoReturn);
  return at !== undefined && noReturn >= 0 && at >= noReturn;
}

/**
 * The parts that take back the steps `begun` of a table of `shards` shards, `shardsPerCall` a call: the last begun
 * first, its shards then its catalog change; then the run's locks released. Nothing begun: nothing (the workflow
 * releases the locks itself).
 */
export function takingBack(operation: Operation<never>, begun: readonly number[], shards: number, shardsPerCall: number): string[] {
  const undos = [...begun].reverse().flatMap((index) => {
    const { undo } = operation.steps[index]!;
    const shardCalls = undo?.shards ? Array<string>(Math.ceil(shards / shardsPerCall)).fill(`${index}.undo-shards`) : [];
    return [...shardCalls, ...(undo?.change ? [`${index}.undo`] : [])];
  });
  return undos.length > 0 ? [...undos, 'release'] : [];
}

/** How many shards one call of the executor changes, as the run's calls asked. */
export function shardsPerCallOf(run: Run): number {
  return run.calls[0]!.shardsPerCall;
}

/**
 * The answer a run ended with, for comparing: the table's state, or the error's type (for an OperationFailed, the type
 * of the workflow's failure it wraps: an InjectedFailure).
 */
export function outcomeOf(run: Run): string {
  if ('answer' in run.outcome) return run.outcome.answer.state;
  for (let cause: unknown = run.outcome.error; cause instanceof Error; cause = cause.cause) {
    if (cause instanceof ApplicationFailure && cause.type) return cause.type;
  }
  return run.outcome.error.type ?? run.outcome.error.name;
}

/**
 * Where a run taken back leaves the table: as before it (`before`), but for the trash's run once the run got past the
 * change of the step that begins the trash (`beginsTrash`): the expiry it started then finds the table back and ends,
 * as after a recall.
 */
export function takenBack(operation: Operation<never>, parts: readonly PartMade[], before: Look): Look {
  const begins = operation.steps.findIndex((step) => step.beginsTrash);
  if (begins < 0 || before.trashRun !== 'ended') return before;
  const began = parts.some(({ part, injected }) => {
    const step = stepOf(part);
    if (step === undefined || part.includes('undo')) return false;
    // (Its change, when it has one, begins it; a change that failed began nothing. Its shards come after it.)
    return step > begins || (step === begins && !(part.includes('.change') && injected === 'failure'));
  });
  return began ? { ...before, trashRun: 'restored' } : before;
}

/** Checks the table of `run` looks as `look` says, and that no lock is left on it or its names. */
export async function expectLook(engine: Engine, run: Run, look: Look): Promise<void> {
  const record = run.tableId === undefined ? undefined : await engine.catalog.getTable(run.tableId);
  const state = record?.state ?? 'none';
  const states: ReadonlyArray<string> = [look.state].flat();
  expect({ state }).toEqual({ state: states.includes(state) ? state : states.join(' or ') });
  if (record) {
    if (look.area !== undefined) expect({ files: await engine.filesOf(record.id) }).toEqual({ files: engine.filesIn(record, look.area) });
    if (look.name) expect({ name: textOf(record) }).toEqual({ name: textOf(look.name === 'new' ? run.subject.newName : run.subject.name) });
    if (look.held !== undefined) expect({ held: record.hold !== null }).toEqual({ held: look.held });
    if (look.trashRun) expect({ trashRun: await engine.trashRunOf(record.id, look.trashRun) }).toEqual({ trashRun: look.trashRun });
    if (look.truncatedInto) {
      const entries = await engine.truncatesOf(record.id);
      if (look.truncatedInto === 'none')
        expect({ entries, truncateInto: record.truncateInto }).toEqual({ entries: [], truncateInto: undefined });
      else {
        expect(entries.map((entry) => entry.state)).toEqual(['TRASHED']);
        expect({ files: await engine.filesOf(entries[0]!.id) }).toEqual({ files: engine.filesIn(entries[0]!, 'trash') });
      }
    }
  }
  expect({ locks: await engine.locksOn(record?.id, [run.subject.name, run.subject.newName]) }).toEqual({ locks: [] });
}

/**
 * The undisturbed run of an operation, which the disturbed ones are compared with: it ends as the case says, made each
 * part once, its parts in the order of the steps, and each shard change once.
 */
export async function expectUndisturbed(engine: Engine, op: OperationCase, run: Run): Promise<void> {
  expect(outcomeOf(run)).toBe(op.answers ?? [op.after.state].flat()[0]);
  await expectLook(engine, run, op.after);
  expect(run.parts.filter((made) => made.repeat)).toEqual([]);
  // (The table's lock comes first; a release of the run's locks after the last step's shards, last.)
  const steps = namesOf(run.parts).map((part) => stepOf(part) ?? (part === 'release' ? Infinity : -1));
  expect(steps).toEqual([...steps].sort((a, b) => a - b));
  expect(new Set(run.driver).size).toBe(run.driver.length);
}

/** A run as a failure shows it: how it ended, and each part it made (`!` injected, `+` made again), call by call. */
export function described(run: Run): string {
  const parts = run.parts.map((made) => `${made.injected ? '!' : ''}${made.repeat ? '+' : ''}${keyOf(made)}`);
  return `run ${run.workflowId} ended ${outcomeOf(run)}; its parts: ${parts.join(' ')}`;
}

/**
 * Runs `check` for each item, `concurrency` at a time, and fails once all have run if any did, naming each that failed
 * (a table of cases inside one test: every case is tried, and every failure shown). `check` hands over the run it made
 * (`show`), which a failure describes.
 */
export async function eachCase<T>(
  items: readonly T[],
  label: (item: T, index: number) => string,
  check: (item: T, index: number, show: (run: Run) => void) => Promise<void>,
  concurrency = 1,
): Promise<void> {
  const failures: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      let run: Run | undefined;
      try {
        await check(items[index]!, index, (made) => (run = made));
      } catch (err) {
        const shown = run ? `\n(${described(run)})` : '';
        failures.push(`${label(items[index]!, index)}:${shown}\n${err instanceof Error ? err.message : String(err)}`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  if (failures.length > 0) throw new Error(`${failures.length} of ${items.length} cases failed\n\n${failures.join('\n\n')}`);
}

/**
 * The frame of an engine test file: one Engine for the file, and `title` tested on every operation, after its
 * undisturbed run (`plain`) has been checked. Answers the file's engine, for a test of its own beside these.
 */
export function forEachOperation(title: string, body: (engine: Engine, op: OperationCase, plain: Run) => Promise<void>): () => Engine {
  let engine: Engine;
  beforeAll(async () => {
    engine = await Engine.start();
  });
  afterAll(async () => {
    await engine?.close();
  });
  describe.each(OPERATIONS)('$title', (op) => {
    test(title, async () => {
      const plain = await runCase(engine, op, 'plain', { kind: 'none' });
      await expectUndisturbed(engine, op, plain);
      await body(engine, op, plain);
    });
  });
  return () => engine;
}
