/**
 * Where an operation's time goes, beside the floor's: each operation run `--rounds` times (after one warm-up round),
 * its history read back, and the medians of its parts printed. From the history: the wait before the first workflow
 * task was started (the server's and the task queue's share), the time the worker held workflow tasks, the time
 * between them (activities and the server), and the client's own share (the answer after the run closed). From the
 * worker: every activity call (local or not) timed where it runs, by name and by its order in its run (`#1`, `#2`), and
 * inside a step call (runStepsHere) each catalog and shard call it made (indented).
 *
 *   npm run bench:trace                               (files, dev server, 20 rounds)
 *   npm run bench:trace -- --driver postgres --rounds 30
 *
 * It changes nothing it measures: the activities are the worker's own, wrapped in a timer.
 */
import { parseArgs } from 'node:util';
import { Context } from '@temporalio/activity';
import type { temporal } from '@temporalio/proto';
import type { StorageDriverName } from '../domain/deployment';
import { OPERATIONS } from '../domain/operations';
import { benchShapeOf, startBench, startFloor } from './setup';

const FLOOR_QUEUE = 'bench-trace-floor';

const OPS = ['floor', 'create', 'trash', 'undelete', 'purge'] as const;
type Op = (typeof OPS)[number];

/** What one run was made of, in ms. */
interface RunParts {
  total: number;
  /** Started to the first workflow task's start. */
  toFirstTask: number;
  /** Workflow tasks, started to completed, summed. */
  inTasks: number;
  /** Between the first task's start and the close, outside workflow tasks: activities, timers, the server's hops. */
  between: number;
  /** From the call until the server recorded the start (the client's own work, the start's way to the server). */
  beforeStart: number;
  /** From the close (the last event, for a run that goes on: a trash) until the client had the answer. */
  afterClose: number;
  tasks: number;
}

const median = (values: readonly number[]) => {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

const ms = (t: temporal.api.history.v1.IHistoryEvent['eventTime']) => Number(t?.seconds ?? 0) * 1000 + Math.floor((t?.nanos ?? 0) / 1e6);

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { rounds: { type: 'string' }, driver: { type: 'string' } }, strict: true });
  const rounds = Number(values.rounds ?? 20);
  const driver = (values.driver ?? 'files') as StorageDriverName;
  /** Activity call durations by name and operation: the workflow id of each call says which run made it. */
  const calls = new Map<Op, Map<string, number[]>>();
  const opOf = new Map<string, Op>();
  /** How many calls each run has made so far, by workflow id: a run's calls are told apart by their order (`#1`, `#2`). */
  const callsMade = new Map<string, number>();
  /** `fns`, each timed where it runs and counted under the operation whose run called it. */
  const timed = <T extends object>(fns: T, prefix = ''): T =>
    Object.fromEntries(
      Object.entries(fns).map(([name, fn]) => [
        name,
        async (...args: unknown[]) => {
          const began = performance.now();
          const workflowId = Context.current().info.workflowExecution!.workflowId;
          const nth = prefix === '' ? (callsMade.get(workflowId) ?? 0) + 1 : 0;
          if (nth > 0) callsMade.set(workflowId, nth);
          try {
            return await (fn as (...a: unknown[]) => Promise<unknown>)(...args);
          } finally {
            const op = opOf.get(workflowId);
            if (op) {
              const byName = calls.get(op) ?? new Map<string, number[]>();
              calls.set(op, byName);
              const key = nth > 0 ? `${name} #${nth}` : prefix + name;
              const durations = byName.get(key) ?? [];
              byName.set(key, durations);
              durations.push(performance.now() - began);
            }
          }
        },
      ]),
    ) as T;
  const bench = await startBench({ driver, wrapActivities: (activities) => timed(activities), wrapStepParts: (p) => timed(p, '  ') });
  const runFloor = await startFloor(bench, FLOOR_QUEUE);
  const { client, temporal } = bench;
  const shape = benchShapeOf(driver);
  const parts = Object.fromEntries(OPS.map((op) => [op, [] as RunParts[]])) as Record<Op, RunParts[]>;
  const runsOf = Object.fromEntries(OPS.map((op) => [op, 0])) as Record<Op, number>;

  /** Runs `fn` as `op`, then reads back the run it made (the newest of its type) and splits its time. */
  const traced = async <T>(op: Op, counted: boolean, fn: () => Promise<T>, workflowId: () => string): Promise<T> => {
    // (Known before the run starts, by its id: its calls are counted as they are made.)
    if (counted) opOf.set(workflowId(), op);
    const began = Date.now();
    const value = await fn();
    const ended = Date.now();
    opOf.delete(workflowId());
    if (!counted) return value;
    runsOf[op]++;
    const history = await temporal.workflow.getHandle(workflowId()).fetchHistory();
    const events = history.events ?? [];
    const at = (pred: (e: (typeof events)[number]) => boolean) => events.filter(pred).map((e) => ms(e.eventTime));
    const startedAt = ms(events[0]!.eventTime);
    const closedAt = ms(events.at(-1)!.eventTime);
    const taskStarts = at((e) => !!e.workflowTaskStartedEventAttributes);
    const taskEnds = at((e) => !!e.workflowTaskCompletedEventAttributes);
    const inTasks = taskEnds.reduce((sum, end, i) => sum + (end - taskStarts[i]!), 0);
    parts[op].push({
      total: ended - began,
      toFirstTask: taskStarts[0]! - startedAt,
      inTasks,
      between: closedAt - taskStarts[0]! - inTasks,
      beforeStart: startedAt - began,
      afterClose: ended - closedAt,
      tasks: taskStarts.length,
    });
    return value;
  };

  try {
    for (let round = -1; round < rounds; round++) {
      const counted = round >= 0;
      const name = `trace.t${round + 1}`;
      const floorId = () => `trace-floor-${round}`;
      await traced('floor', counted, () => runFloor(floorId()), floorId);
      const id = (op: 'trash' | 'undelete' | 'purge') => () => OPERATIONS[op].workflowId(table.id, bench.catalog.id);
      const table = await traced(
        'create',
        counted,
        () => client.create({ table: name, ...shape }),
        () => OPERATIONS.create.workflowId({ namespace: 'trace', name: `t${round + 1}` }, bench.catalog.id),
      );
      await traced('trash', counted, () => client.trash({ table: name }), id('trash'));
      await traced('undelete', counted, () => client.undelete({ table: table.id }), id('undelete'));
      await client.trash({ table: name });
      await traced('purge', counted, () => client.purge({ tableId: table.id }), id('purge'));
    }
  } finally {
    await bench.close();
  }

  const col = (v: number | string, w = 9) => String(typeof v === 'number' ? v.toFixed(1) : v).padStart(w);
  console.log(`where the time goes: ${driver}, dev server, medians of ${rounds} runs, ms`);
  console.log(
    `${'op'.padEnd(10)}${col('total')}${col('to task')}${col('in tasks')}${col('between')}${col('before')}${col('after')}${col('tasks')}`,
  );
  for (const op of OPS) {
    const p = parts[op];
    const m = (k: keyof RunParts) => median(p.map((r) => r[k]));
    console.log(
      `${op.padEnd(10)}${col(m('total'))}${col(m('toFirstTask'))}${col(m('inTasks'))}${col(m('between'))}${col(m('beforeStart'))}${col(m('afterClose'))}${col(m('tasks'), 9)}`,
    );
  }
  console.log('\nactivity calls, as the worker ran them: median ms, and calls per operation');
  for (const op of OPS.slice(1)) {
    for (const [name, durations] of calls.get(op) ?? []) {
      console.log(`${op.padEnd(10)}${name.padEnd(26)}${col(median(durations))}${col((durations.length / runsOf[op]).toFixed(1))}`);
    }
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
