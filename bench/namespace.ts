/**
 * What a unit of several tables costs (issue 42 item 8): with the PostgreSQL driver, on one dev server and one PostgreSQL
 * of the bench's own, beside the floor (bench/floor-workflow.ts), interleaved so that drift hits all alike:
 *
 * - the drop and the recall of one plain table (its namespace holding nothing else);
 * - the drop of a whole namespace of 20 such tables (`drop --namespace`: one operation, one transaction on the node, the
 *   schema set aside with them) and its recall (all 20 back, the schema first);
 * - p50 and p90 of each against the floor, and what each table beyond the first adds ((namespace - single) / 19);
 * - Temporal's own share of that: each table in the trash has an expiry run of its own (`trash:<id>`, its durable timer,
 *   which callers address by the table's id), which a drop starts and a recall tells that its trash is over. So beside
 *   them, as many bare workflows started at once (with the expiry's start delay) against one, and signalled at once
 *   against one: what Temporal alone adds a table, whatever tablefate does;
 * - then the SQL statements each sends to the node (the server's log, bench/statement-log.ts), the one table's and the
 *   namespace's, a few times each: how many a table beyond the first adds.
 *
 *   npm run bench:namespace
 *   npm run bench:namespace -- --rounds 30 --tables 20
 *   npm run bench:namespace -- --rounds 1 --tables 3 --show-statements   # and each statement of a namespace's drop, recall
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { Client as PgClient } from 'pg';
import { startBench, startFloor } from './setup';
import { percentile, timed } from './samples';
import { countStatements, onPath, StatementLog, type LoggedStatement } from './statement-log';

const FLOOR_QUEUE = 'bench-namespace-floor';
const COLUMNS = 'id bigint primary key, payload text';
const RETENTION = 3600;

/**
 * Each drop comes once the expiry runs of the trash its last recall ended have closed: they begin a second after their
 * drop (EXPIRY_START_DELAY), and a drop that finds one not begun yet terminates it and starts its own, four calls to
 * Temporal a table instead of one (bench:lifecycle's trash, right after a recall, measures that case).
 */
const pastExpiryStart = () => new Promise((resolve) => setTimeout(resolve, 1_500));

export interface NamespaceReport {
  rounds: number;
  tables: number;
  floor: number[];
  single: { drop: number[]; recall: number[] };
  namespace: { drop: number[]; recall: number[] };
  /** Bare workflows started at once and then signalled at once: one, and as many as the namespace has tables. */
  temporal: { startOne: number[]; startAll: number[]; signalOne: number[]; signalAll: number[] };
  /** The statements each operation sent the node on its path (COUNT_ROUNDS runs each). */
  statements: { single: { drop: number[]; recall: number[] }; namespace: { drop: number[]; recall: number[] } };
}

/** Runs of each operation whose statements are counted. */
const COUNT_ROUNDS = 2;

/** `rounds` rounds, each: the floor, the single table's drop and recall, the namespace's drop and recall. */
export async function benchNamespace(opts: { rounds?: number; tables?: number; showStatements?: boolean } = {}): Promise<NamespaceReport> {
  const rounds = opts.rounds ?? 20;
  const count = opts.tables ?? 20;
  const bench = await startBench({ driver: 'postgres' });
  const { client } = bench;
  const runFloor = await startFloor(bench, FLOOR_QUEUE);
  const db = new PgClient({ connectionString: bench.nodeUrl, application_name: 'bench namespace' });
  await db.connect();
  const report: NamespaceReport = {
    rounds,
    tables: count,
    floor: [],
    single: { drop: [], recall: [] },
    namespace: { drop: [], recall: [] },
    temporal: { startOne: [], startAll: [], signalOne: [], signalAll: [] },
    statements: { single: { drop: [], recall: [] }, namespace: { drop: [], recall: [] } },
  };
  /** Starts `n` floor workflows at once, as a drop starts its tables' expiry runs, then signals each, as a recall ends them. */
  const startAndSignal = async (n: number, start: number[], signal: number[]) => {
    const ids = Array.from({ length: n }, () => `bare-${randomUUID()}`);
    await timed(start, () =>
      Promise.all(
        ids.map((workflowId) => bench.temporal.workflow.start('floorWorkflow', { taskQueue: FLOOR_QUEUE, workflowId, startDelay: '1s' })),
      ),
    );
    await timed(signal, () => Promise.all(ids.map((id) => bench.temporal.workflow.getHandle(id).signal('over'))));
    await Promise.all(
      ids.map((id) =>
        bench.temporal.workflow
          .getHandle(id)
          .terminate('bench')
          .catch(() => undefined),
      ),
    );
  };
  try {
    const single = await client.create({ table: 'alone.t', shards: 1, columns: COLUMNS });
    const members: Array<{ id: number; name: string }> = [];
    for (let k = 0; k < count; k++) members.push(await client.create({ table: `whole.t${k}`, shards: 1, columns: COLUMNS }));
    for (const schema of ['alone', 'whole'])
      for (const t of schema === 'alone' ? [single] : members)
        await db.query(`INSERT INTO ${schema}.${t.name} SELECT g, md5(g::text) FROM generate_series(1, 100) g`);
    // The namespace's first drop is checked once: every table in it, and the schema set aside.
    const first = await client.trash({ namespace: 'whole', retentionSeconds: RETENTION });
    if (first.droppedWith?.length !== count - 1) throw new Error(`the namespace's drop took ${first.droppedWith?.length ?? 0} more tables`);
    if ((await db.query(`SELECT 1 FROM pg_namespace WHERE nspname = 'whole'`)).rows.length > 0) throw new Error('the schema stayed');
    await client.undelete({ table: members[0]!.id });

    console.log(`${rounds} rounds after one to warm up, each: floor, a table's drop and recall, a namespace of ${count}'s`);
    for (let round = -1; round < rounds; round++) {
      const keep = (samples: number[]) => (round < 0 ? [] : samples);
      await timed(keep(report.floor), () => runFloor(`floor-${randomUUID()}`));
      await pastExpiryStart();
      await timed(keep(report.single.drop), () => client.trash({ table: 'alone.t', retentionSeconds: RETENTION }));
      await timed(keep(report.single.recall), () => client.undelete({ table: single.id }));
      await pastExpiryStart();
      await timed(keep(report.namespace.drop), () => client.trash({ namespace: 'whole', retentionSeconds: RETENTION }));
      await timed(keep(report.namespace.recall), () => client.undelete({ table: members[0]!.id }));
      await startAndSignal(1, keep(report.temporal.startOne), keep(report.temporal.signalOne));
      await startAndSignal(count, keep(report.temporal.startAll), keep(report.temporal.signalAll));
    }

    const log = await StatementLog.open(db);
    const ownPid = (await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const counted = async (into: number[], op: () => Promise<unknown>, shown?: string) => {
      const sent = onPath(await countStatements(log, ownPid, op));
      into.push(sent.length);
      if (shown && opts.showStatements) showStatements(shown, sent);
    };
    await log.enable(true);
    try {
      for (let round = 0; round < COUNT_ROUNDS; round++) {
        await pastExpiryStart();
        await counted(report.statements.single.drop, () => client.trash({ table: 'alone.t', retentionSeconds: RETENTION }));
        await counted(report.statements.single.recall, () => client.undelete({ table: single.id }));
        await pastExpiryStart();
        await counted(
          report.statements.namespace.drop,
          () => client.trash({ namespace: 'whole', retentionSeconds: RETENTION }),
          round === 0 ? 'drop' : undefined,
        );
        await counted(
          report.statements.namespace.recall,
          () => client.undelete({ table: members[0]!.id }),
          round === 0 ? 'recall' : undefined,
        );
      }
    } finally {
      await log.enable(false);
    }
    return report;
  } finally {
    await db.end();
    await bench.close();
  }
}

const ms = (n: number) => n.toFixed(1).padStart(7);

/** Each statement of a namespace's drop or recall, in order, with its session and server time (--show-statements). */
function showStatements(op: string, sent: LoggedStatement[]): void {
  console.log(`\nthe namespace's ${op}: ${sent.length} statements to the node`);
  for (const s of sent)
    console.log(`  ${String(s.pid).padStart(7)} ${s.ms.toFixed(2).padStart(7)} ms  ${s.text.replace(/\s+/g, ' ').slice(0, 180)}`);
}

export function printNamespace(report: NamespaceReport): void {
  const floor50 = percentile(report.floor, 50);
  const floor90 = percentile(report.floor, 90);
  console.log(
    `\ntablefate drop --namespace, ${report.tables} tables as one against one table: ${report.rounds} rounds, ${os.cpus().length} cores, ` +
      `node ${process.version}, dev server, postgres driver (1 shard a table, 100 rows each)`,
  );
  console.log('                              p50 ms  p90 ms  p50/floor p90/floor');
  console.log(`floor                        ${ms(floor50)} ${ms(floor90)}`);
  for (const unit of ['single', 'namespace'] as const)
    for (const op of ['drop', 'recall'] as const) {
      const [a, b] = [percentile(report[unit][op], 50), percentile(report[unit][op], 90)];
      const label = unit === 'single' ? `${op} one table` : `${op} namespace of ${report.tables}`;
      console.log(
        `${label.padEnd(28)} ${ms(a)} ${ms(b)}   ${(a / floor50).toFixed(2).padStart(6)}x   ${(b / floor90).toFixed(2).padStart(6)}x`,
      );
    }
  for (const line of summarizeNamespace(report)) console.log(line);
}

/**
 * A line per operation: the namespace against one table, what each table beyond the first adds, and how much of that is
 * Temporal's own (a drop's expiry run started, a recall's signal to it: see startAndSignal).
 */
export function summarizeNamespace(report: NamespaceReport): string[] {
  const floor = percentile(report.floor, 50);
  const perTable = (one: number[], all: number[]) => (percentile(all, 50) - percentile(one, 50)) / (report.tables - 1);
  const temporal = {
    drop: perTable(report.temporal.startOne, report.temporal.startAll),
    recall: perTable(report.temporal.signalOne, report.temporal.signalAll),
  };
  return (['drop', 'recall'] as const).map((op) => {
    const [one, all] = [percentile(report.single[op], 50), percentile(report.namespace[op], 50)];
    const each = perTable(report.single[op], report.namespace[op]);
    const statements = report.statements;
    const [oneSent, allSent] = [Math.min(...statements.single[op]), Math.min(...statements.namespace[op])];
    return (
      `namespace ${op} (${report.tables} tables): p50 ${all.toFixed(0)} ms (${(all / floor).toFixed(2)}x the floor) against ${one.toFixed(0)} ms ` +
      `(${(one / floor).toFixed(2)}x) for one table: ${each.toFixed(1)} ms a table beyond the first, of which Temporal's own ` +
      `${temporal[op].toFixed(1)} ms (its expiry run ${op === 'drop' ? 'started' : 'signalled'}), tablefate's ${(each - temporal[op]).toFixed(1)} ms; ` +
      `statements to the node ${allSent} against ${oneSent}: ${((allSent - oneSent) / (report.tables - 1)).toFixed(1)} a table beyond the first`
    );
  });
}

if (require.main === module) {
  const { values } = parseArgs({
    options: { rounds: { type: 'string' }, tables: { type: 'string' }, 'show-statements': { type: 'boolean' } },
    strict: true,
  });
  benchNamespace({
    ...(values.rounds ? { rounds: Number(values.rounds) } : {}),
    ...(values.tables ? { tables: Number(values.tables) } : {}),
    showStatements: values['show-statements'] === true,
  })
    .then((report) => {
      printNamespace(report);
      process.exit(0);
    })
    .catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
}
