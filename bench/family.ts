/**
 * What a family costs (issue 42 item 8): `drop --cascade` with the PostgreSQL driver against a single drop, on one dev
 * server and one PostgreSQL of the bench's own, beside the floor (bench/floor-workflow.ts), interleaved so that drift
 * hits all alike:
 *
 * - the drop (trash) and the recall (undelete) of a plain table with nothing on it, of the same table dropped with
 *   `cascade: true` (a family of none), and of a family: a table like it, 3 views on it and 2 other tables whose foreign
 *   keys reference it, dropped with `cascade: true`; p50 and p90 of each, against the floor, and the family's extra cost
 *   per member ((family - plain) / 5);
 * - the same family with its table holding about 1 MB and about 100 MB of rows (its two referencing tables a row for
 *   each of its rows): a drop moves names only, so its time must not grow with the rows; a recall puts the detached keys
 *   back NOT VALID inside the move and then validates them, which reads the referencing tables (and probes the table's
 *   key): that part does grow with them, and is reported apart;
 * - the SQL statements each of those operations sends to the node, counted in the PostgreSQL server's own log
 *   (`log_min_duration_statement = 0`, turned on for this count only, after the timed rounds), with what the family's
 *   drop and recall send beyond the plain table's, statement by statement.
 *
 *   npm run bench:family
 *   npm run bench:family -- --rounds 50 --size-rounds 11 --big-mb 100
 *   npm run bench:family -- --dump      (and every counted statement of each operation's first counted run)
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { Client as PgClient } from 'pg';
import type { TableFateClient } from '../client/client';
import { startBench, startFloor } from './setup';
import { percentile, timed } from './samples';
import {
  countStatements,
  kindOf,
  offPath,
  onPath,
  SETTLE_MS,
  shape,
  StatementLog,
  type LoggedStatement,
  type OpStatements,
} from './statement-log';

const FLOOR_QUEUE = 'bench-family-floor';
const COLUMNS = 'id bigint primary key, payload text';
const RETENTION = 3600;
/** The family: 3 views on the table, 2 tables whose foreign keys reference it. */
const VIEWS = 3;
const REFERENCING = 2;
const MEMBERS = VIEWS + REFERENCING;
/** Operations counted in the server's log, each variant (their counts must agree: they are reported as a range). */
const COUNT_ROUNDS = 3;

const VARIANTS = ['plain', 'plain --cascade', 'family'] as const;
type Variant = (typeof VARIANTS)[number];

interface Counted {
  drop: OpStatements[];
  recall: OpStatements[];
}

export interface FamilyReport {
  rounds: number;
  floor: number[];
  latency: Record<Variant, { drop: number[]; recall: number[] }>;
  bySize: Array<{ label: string; bytes: number; referencingBytes: number; drop: number[]; recall: number[] }>;
  counts: Record<Variant, Counted>;
  countsBySize: Array<{ label: string; counted: Counted }>;
}

/** A family on `bench.<name>`: its table (tablefate's), 3 views on it, 2 tables keyed to it; `rows` rows in each. */
async function makeFamily(client: TableFateClient, db: PgClient, name: string, rows: number, withFamily: boolean): Promise<number> {
  const table = await client.create({ table: `bench.${name}`, shards: 1, columns: COLUMNS });
  // About 1 kB a row, not compressible (TOAST would shrink a repeated string), as bench/lifecycle.ts's trash by size.
  await db.query(
    `INSERT INTO bench.${name} SELECT g, (SELECT string_agg(md5(g::text || k::text), '') FROM generate_series(1, 30) k) FROM generate_series(1, $1) g`,
    [rows],
  );
  if (withFamily) {
    await db.query(`CREATE VIEW bench.${name}_v1 AS SELECT id, payload FROM bench.${name};
      CREATE VIEW bench.${name}_v2 AS SELECT count(*) AS n FROM bench.${name};
      CREATE VIEW bench.${name}_v3 AS SELECT id FROM bench.${name} WHERE id % 2 = 0`);
    for (let k = 1; k <= REFERENCING; k++)
      await db.query(`CREATE TABLE bench.${name}_ref${k} (id bigint PRIMARY KEY, item_id bigint NOT NULL REFERENCES bench.${name} (id));
        INSERT INTO bench.${name}_ref${k} SELECT g, g FROM generate_series(1, ${rows}) g`);
  }
  // As a DBA ends a bulk load (bench/lifecycle.ts): vacuumed and analyzed, its WAL checkpointed.
  await db.query(`VACUUM (ANALYZE) bench.${name}`);
  for (let k = 1; withFamily && k <= REFERENCING; k++) await db.query(`VACUUM (ANALYZE) bench.${name}_ref${k}`);
  await db.query('CHECKPOINT');
  return table.id;
}

/**
 * Runs the whole bench on a dev server and a PostgreSQL of its own: `rounds` rounds of the three variants beside the
 * floor, `sizeRounds` of the family at about 1 MB and `bigMb` MB, then the statements counted.
 */
export async function benchFamily(opts: { rounds?: number; sizeRounds?: number; bigMb?: number } = {}): Promise<FamilyReport> {
  const rounds = opts.rounds ?? 30;
  const sizeRounds = opts.sizeRounds ?? 11;
  const bigMb = opts.bigMb ?? 100;
  const bench = await startBench({ driver: 'postgres' });
  const { client } = bench;
  const runFloor = await startFloor(bench, FLOOR_QUEUE);
  const floor = () => runFloor(`floor-${randomUUID()}`);
  const db = new PgClient({ connectionString: bench.nodeUrl, application_name: 'bench family' });
  await db.connect();
  const report: FamilyReport = {
    rounds,
    floor: [],
    latency: Object.fromEntries(VARIANTS.map((v) => [v, { drop: [], recall: [] }])) as unknown as FamilyReport['latency'],
    bySize: [],
    counts: Object.fromEntries(VARIANTS.map((v) => [v, { drop: [], recall: [] }])) as unknown as FamilyReport['counts'],
    countsBySize: [],
  };
  try {
    // Each variant's table: a few rows, the same shape.
    const tables: Record<Variant, { name: string; id: number; cascade: boolean }> = {
      plain: { name: 'plain', id: await makeFamily(client, db, 'plain', 100, false), cascade: false },
      'plain --cascade': { name: 'plainc', id: await makeFamily(client, db, 'plainc', 100, false), cascade: true },
      family: { name: 'fam', id: await makeFamily(client, db, 'fam', 100, true), cascade: true },
    };
    const drop = (v: Variant) =>
      client.trash({ table: `bench.${tables[v].name}`, retentionSeconds: RETENTION, cascade: tables[v].cascade });
    const recall = (v: Variant) => client.undelete({ table: tables[v].id });
    // The family's first drop says what it took: checked once, so that the figures are a family's.
    const first = await drop('family');
    const said = (first.notes ?? []).join('; ');
    if (!said.includes('view bench.fam_v3') || !said.includes(`foreign key fam_ref${REFERENCING}_item_id_fkey`))
      throw new Error(`the family's drop did not take its family: ${said}`);
    await recall('family');

    console.log(`latency: ${rounds} rounds after one to warm up, each: floor, then each variant's drop and recall`);
    for (let round = -1; round < rounds; round++) {
      const keep = (samples: number[]) => (round < 0 ? [] : samples);
      for (const v of VARIANTS) {
        await timed(keep(report.floor), floor);
        await timed(keep(report.latency[v].drop), () => drop(v));
        await timed(keep(report.latency[v].recall), () => recall(v));
      }
    }

    console.log(`by size: families of about 1 MB and ${bigMb} MB, ${sizeRounds} rounds after one to warm up`);
    const sizes = [];
    for (const [label, rows] of [
      ['1 MB', 1_000],
      [`${bigMb} MB`, bigMb * 1_000],
    ] as const) {
      const name = `fam_${rows}`;
      const id = await makeFamily(client, db, name, rows, true);
      const bytes = Number((await db.query<{ b: string }>(`SELECT pg_total_relation_size('bench.${name}') AS b`)).rows[0]!.b);
      const referencingBytes = Number(
        (
          await db.query<{ b: string }>(
            `SELECT pg_total_relation_size('bench.${name}_ref1') + pg_total_relation_size('bench.${name}_ref2') AS b`,
          )
        ).rows[0]!.b,
      );
      sizes.push({ label, name, id, bytes, referencingBytes, drop: [] as number[], recall: [] as number[] });
    }
    for (let round = -1; round < sizeRounds; round++) {
      for (const size of sizes) {
        await timed(round < 0 ? [] : size.drop, () =>
          client.trash({ table: `bench.${size.name}`, retentionSeconds: RETENTION, cascade: true }),
        );
        await timed(round < 0 ? [] : size.recall, () => client.undelete({ table: size.id }));
      }
    }
    report.bySize = sizes.map(({ label, bytes, referencingBytes, drop: d, recall: r }) => ({
      label,
      bytes,
      referencingBytes,
      drop: d,
      recall: r,
    }));

    console.log(`statements: the server's log on, ${COUNT_ROUNDS} of each operation after one not counted`);
    const log = await StatementLog.open(db);
    const ownPid = (await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    await log.enable(true);
    try {
      const count = async (counted: Counted, dropIt: () => Promise<unknown>, recallIt: () => Promise<unknown>) => {
        for (let round = -1; round < COUNT_ROUNDS; round++) {
          const d = await countStatements(log, ownPid, dropIt);
          const r = await countStatements(log, ownPid, recallIt);
          if (round < 0) continue;
          counted.drop.push(d);
          counted.recall.push(r);
        }
      };
      for (const v of VARIANTS)
        await count(
          report.counts[v],
          () => drop(v),
          () => recall(v),
        );
      for (const size of sizes) {
        const counted: Counted = { drop: [], recall: [] };
        await count(
          counted,
          () => client.trash({ table: `bench.${size.name}`, retentionSeconds: RETENTION, cascade: true }),
          () => client.undelete({ table: size.id }),
        );
        report.countsBySize.push({ label: size.label, counted });
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
const ratio = (n: number, floor: number) => `${(n / floor).toFixed(2)}x`.padStart(7);

/** The range of the counts of several runs of one operation: "41", or "41-43" when they differ. */
function range(values: readonly number[]): string {
  const [lo, hi] = [Math.min(...values), Math.max(...values)];
  return lo === hi ? `${lo}` : `${lo}-${hi}`;
}

/** The statements of `more` beyond `base`'s, by shape, as `+N (ms) shape` lines. */
function extraStatements(base: readonly LoggedStatement[], more: readonly LoggedStatement[]): string[] {
  const diff = new Map<string, { n: number; ms: number }>();
  const add = (s: LoggedStatement, sign: number) => {
    const d = diff.get(shape(s.text)) ?? { n: 0, ms: 0 };
    diff.set(shape(s.text), { n: d.n + sign, ms: d.ms + sign * s.ms });
  };
  for (const s of more) add(s, 1);
  for (const s of base) add(s, -1);
  return [...diff.entries()]
    .filter(([, d]) => d.n !== 0)
    .sort((a, b) => b[1].n - a[1].n)
    .map(([text, d]) => `${`${d.n > 0 ? '+' : ''}${d.n}`.padStart(3)} (${d.ms.toFixed(2).padStart(5)})  ${text}`);
}

function byKind(statements: readonly LoggedStatement[]): string {
  const tally = new Map<string, number>();
  for (const s of statements) tally.set(kindOf(s.text), (tally.get(kindOf(s.text)) ?? 0) + 1);
  return [...tally.entries()].map(([k, n]) => `${k} ${n}`).join(', ');
}

export function printFamily(report: FamilyReport): void {
  const floor50 = percentile(report.floor, 50);
  const floor90 = percentile(report.floor, 90);
  console.log(
    `\ntablefate drop --cascade, a family against a single table: ${report.rounds} rounds, ${os.cpus().length} cores, node ${process.version}, ` +
      `dev server as \`tablefate dev\` starts it, postgres driver (1 shard); the family: 1 table + ${VIEWS} views + ${REFERENCING} tables whose keys reference it`,
  );
  console.log('                              p50 ms  p90 ms  p50/floor p90/floor');
  console.log(`floor                        ${ms(floor50)} ${ms(floor90)}`);
  for (const v of VARIANTS)
    for (const op of ['drop', 'recall'] as const) {
      const s = report.latency[v][op];
      const [a, b] = [percentile(s, 50), percentile(s, 90)];
      console.log(`${`${op} ${v}`.padEnd(28)} ${ms(a)} ${ms(b)}   ${ratio(a, floor50)}   ${ratio(b, floor90)}`);
    }
  for (const op of ['drop', 'recall'] as const) {
    const plain = report.latency.plain[op];
    const fam = report.latency.family[op];
    const d50 = percentile(fam, 50) - percentile(plain, 50);
    const d90 = percentile(fam, 90) - percentile(plain, 90);
    console.log(
      `${op}: the family costs ${d50.toFixed(1)} ms more at p50 (${d90.toFixed(1)} at p90): ` +
        `${(d50 / MEMBERS).toFixed(2)} ms a member at p50 (${(d90 / MEMBERS).toFixed(2)} at p90), ${MEMBERS} members`,
    );
  }

  console.log(
    '\nthe family by size (drop with cascade, then recall; a recall validates the 2 detached keys after its move, reading the referencing tables)',
  );
  console.log('size                       table MiB  referencing MiB   drop p50  drop p90   recall p50  recall p90');
  for (const s of report.bySize)
    console.log(
      `${s.label.padEnd(26)} ${(s.bytes / 2 ** 20).toFixed(1).padStart(9)} ${(s.referencingBytes / 2 ** 20).toFixed(1).padStart(16)}   ` +
        `${ms(percentile(s.drop, 50))}   ${ms(percentile(s.drop, 90))}   ${ms(percentile(s.recall, 50))}   ${ms(percentile(s.recall, 90))}`,
    );
  const [small, big] = report.bySize;
  if (small && big) {
    const [a, b] = [percentile(small.drop, 50), percentile(big.drop, 50)];
    console.log(
      `drop: ${big.label} against ${small.label}: ${(((b - a) / a) * 100).toFixed(0)} % at p50 (goal: independent of size, within 10 %)`,
    );
  }

  console.log(
    `\nSQL statements the operation sent to the node (its storage sessions, from its call to its answer), as the server logged them ` +
      `(log_min_duration_statement = 0; ${COUNT_ROUNDS} runs each, a range when they differ; server ms: parse, bind and execute, summed)`,
  );
  console.log(`${'operation'.padEnd(28)} statements  transactions  server ms   of which`);
  const row = (label: string, runs: readonly OpStatements[]) => {
    const first = onPath(runs[0]!);
    const serverMs = first.reduce((t, s) => t + s.ms, 0);
    const transactions = range(runs.map((r) => onPath(r).filter((s) => /^BEGIN\b/i.test(s.text)).length));
    console.log(
      `${label.padEnd(28)} ${range(runs.map((r) => onPath(r).length)).padStart(10)}  ${transactions.padStart(12)}  ${serverMs.toFixed(1).padStart(9)}   ${byKind(first)}`,
    );
  };
  for (const v of VARIANTS) for (const op of ['drop', 'recall'] as const) row(`${op} ${v}`, report.counts[v][op]);
  for (const { label, counted } of report.countsBySize)
    for (const op of ['drop', 'recall'] as const) row(`${op} family ${label}`, counted[op]);
  const others = new Map<string, number[]>();
  for (const counted of [...Object.values(report.counts), ...report.countsBySize.map((c) => c.counted)])
    for (const op of [...counted.drop, ...counted.recall])
      for (const [app, n] of tally(offPath(op).map((s) => s.app))) others.set(app, [...(others.get(app) ?? []), n]);
  for (const [app, n] of others)
    console.log(
      `(besides: ${range(n)} statements of "${app}" sessions after some answers, within ${SETTLE_MS} ms; not the operation's path)`,
    );
  for (const op of ['drop', 'recall'] as const) {
    const plain = onPath(report.counts.plain[op][0]!);
    const fam = onPath(report.counts.family[op][0]!);
    const extra = fam.length - plain.length;
    const extraMs = fam.reduce((t, s) => t + s.ms, 0) - plain.reduce((t, s) => t + s.ms, 0);
    console.log(
      `\n${op}: the family sends ${extra} statements more than the plain table (${(extra / MEMBERS).toFixed(1)} a member, ${MEMBERS} members), ` +
        `${extraMs.toFixed(1)} ms more server time; by shape (count, server ms):`,
    );
    for (const line of extraStatements(plain, fam)) console.log(`  ${line}`);
  }
  const validations = report.countsBySize.map(({ label, counted }) => {
    const v = counted.recall.flatMap((r) =>
      onPath(r)
        .filter((s) => /VALIDATE CONSTRAINT/i.test(s.text))
        .map((s) => s.ms),
    );
    return `${label}: ${v.map((t) => t.toFixed(1)).join(', ')} ms`;
  });
  console.log(
    `\nthe recall's VALIDATE CONSTRAINT statements (server time each; they read the referencing tables): ${validations.join('; ')}`,
  );
}

/** The family's figures in a few lines, for `npm run bench`'s side-by-side summary. */
export function summarizeFamily(report: FamilyReport): string[] {
  const floor = percentile(report.floor, 50);
  const p50 = (samples: readonly number[]) => percentile(samples, 50);
  const statements = (v: Variant, op: 'drop' | 'recall') => range(report.counts[v][op].map((r) => onPath(r).length));
  const lines = (['drop', 'recall'] as const).map((op) => {
    const [plain, fam] = [p50(report.latency.plain[op]), p50(report.latency.family[op])];
    return (
      `family ${op} (1 table + ${VIEWS} views + ${REFERENCING} keys, cascade): p50 ${fam.toFixed(0)} ms (${(fam / floor).toFixed(2)}x the floor) against ` +
      `${plain.toFixed(0)} ms (${(plain / floor).toFixed(2)}x) for a plain table: ${((fam - plain) / MEMBERS).toFixed(1)} ms a member; ` +
      `statements ${statements('family', op)} against ${statements('plain', op)}`
    );
  });
  const [small, big] = report.bySize;
  if (small && big) {
    const [a, b] = [p50(small.drop), p50(big.drop)];
    lines.push(
      `family drop by size: ${small.label} ${a.toFixed(0)} ms, ${big.label} ${b.toFixed(0)} ms (${(((b - a) / a) * 100).toFixed(0)} %); ` +
        `recall (validates its keys) ${p50(small.recall).toFixed(0)} / ${p50(big.recall).toFixed(0)} ms`,
    );
  }
  return lines;
}

function tally(values: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return counts;
}

/** Every statement of each operation's first counted run: when (from its call), session, application, time, text. */
export function dumpStatements(report: FamilyReport): void {
  const dump = (label: string, op: OpStatements) => {
    console.log(`\n-- ${label}: ${(op.end - op.start).toFixed(0)} ms`);
    for (const s of op.statements)
      console.log(
        `${`${(s.at - op.start).toFixed(0)}`.padStart(6)} ms ${s.at > op.end ? '(after) ' : ''}[${s.pid}] ${s.app}: ${s.ms.toFixed(2)} ms  ${s.text.replace(/\s+/g, ' ').slice(0, 160)}`,
      );
  };
  for (const v of VARIANTS) for (const op of ['drop', 'recall'] as const) dump(`${op} ${v}`, report.counts[v][op][0]!);
  for (const { label, counted } of report.countsBySize)
    for (const op of ['drop', 'recall'] as const) dump(`${op} family ${label}`, counted[op][0]!);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { rounds: { type: 'string' }, 'size-rounds': { type: 'string' }, 'big-mb': { type: 'string' }, dump: { type: 'boolean' } },
    strict: true,
  });
  const report = await benchFamily({
    rounds: Number(values.rounds ?? 30),
    sizeRounds: Number(values['size-rounds'] ?? 11),
    bigMb: Number(values['big-mb'] ?? 100),
  });
  if (values.dump) dumpStatements(report);
  printFamily(report);
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
