import type { ChildProcess } from 'node:child_process';
import { Client } from 'pg';
import { processedOf, startPgbench, type PgbenchResult } from './support/pgbench';
import { Harness } from './support/harness';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { sleep, waitFor } from './support/wait';

/*
 * Issue 42, item 9 (the pgbench part): a real client's schema, pgbench's four tables made by `pgbench -i --foreign-keys`
 * and adopted by tablefate, dropped as one family while pgbench's clients write them, and recalled (by one member) while
 * pgbench keeps trying to write them again; every committed transaction's effect is there after the recall, and pgbench
 * runs on the recalled tables. Real processes: the pgbench binary installed beside initdb, on a database of the run's
 * server.
 *
 * The load, and why it is a loop of pgbench runs, one after another on the same database: pgbench aborts a client on an
 * error that is not a serialization failure or a deadlock (--max-tries retries only those), and a relation that does
 * not exist is such an error, as is a scale it cannot read from pgbench_branches at its start. So a run cannot outlive
 * the drop, and the loop starts the next one as soon as one ends, as an application's restarted workers would: while
 * the tables are in the trash each run fails at once (nothing committed), and once they are back a run commits again.
 * The run under the drop is long (-T 60) and ends only because the drop takes its tables away; the runs after it are
 * short (-T 2), so that the loop ends soon after the first run that commits on the recalled tables. Every run's
 * "number of transactions actually processed" is added up: pgbench counts a transaction there only once its END
 * committed. A tpcb-like transaction adds one delta to one account, one teller and the one branch (scale 1) and inserts
 * one history row, and pgbench -i leaves every balance 0 and history empty, so after the load the four sums of deltas
 * agree and history holds exactly that many rows: a committed transaction lost, or half of one kept, breaks one of them.
 */

let server: TestPostgres;
let h: Harness;
let url: string;
let db: Client;
/** A second session of the test's own, watching pg_class while the drop and the recall run. */
let watcher: Client;
/** The pgbench processes this file started that have not exited: stopped after a failed test, never left running. */
const running = new Set<ChildProcess>();
/** Set when the file ends: the load loop starts no other run. */
let closing = false;

const TABLES = ['pgbench_accounts', 'pgbench_branches', 'pgbench_history', 'pgbench_tellers'] as const;

/** pgbench on the test's database, to its end. */
const pgbench = (args: string[]): Promise<PgbenchResult> => startPgbench(url, args, running).done;

/**
 * The transactions a run of pgbench saw commit: its "number of transactions actually processed: N", or 0 for a run that
 * stopped before any client started because it could not read the scale (pgbench_branches not there).
 */
function processed(run: PgbenchResult): number {
  const found = processedOf(run.stdout);
  if (found !== undefined) return found;
  if (run.code === 1 && /could not count number of branches/.test(run.stderr)) return 0;
  throw new Error(`no processed count in pgbench's output (exit ${String(run.code)}):\n${run.stdout}${run.stderr}`);
}

/** pgbench's "tps = X (without initial connection time)". */
const tps = (output: string) => Number(/tps = ([\d.]+)/.exec(output)?.[1] ?? NaN);

/** The lines in which pgbench said why a client was aborted. */
const aborts = (stderr: string) => stderr.split('\n').filter((line) => /client \d+ .*aborted/.test(line));

interface LoopRun extends PgbenchResult {
  startedAt: number;
  endedAt: number;
  /** Its -T. */
  seconds: number;
  committed: number;
}

/**
 * pgbench's load as a loop of runs, one after another, each of 4 clients on 2 threads, tpcb-like: `seconds()` is the -T
 * of the next run; the loop ends after the first run that exits 0 once `stopAfterSuccess()` says so.
 */
function loadLoop(seconds: () => number, stopAfterSuccess: () => boolean) {
  const runs: LoopRun[] = [];
  let current: Promise<PgbenchResult> | undefined;
  const done = (async () => {
    while (!closing) {
      const startedAt = Date.now();
      const T = seconds();
      current = pgbench(['-c', '4', '-j', '2', '-T', String(T), '--no-vacuum']);
      const run = await current;
      runs.push({ ...run, startedAt, endedAt: Date.now(), seconds: T, committed: processed(run) });
      if (run.code === 0 && stopAfterSuccess()) return;
      // (A run that failed at once: a breath before the next, as a restarted worker's.)
      if (run.code !== 0) await sleep(50);
    }
  })();
  return { runs, done, current: () => current };
}

const rows = async (sql: string, params: unknown[] = []) => (await db.query(sql, params)).rows as Array<Record<string, unknown>>;
const count = async (table: string) => Number((await rows(`SELECT count(*) AS n FROM ${table}`))[0]!.n);

/** The four sums of the deltas pgbench's transactions added, and history's rows, read in one snapshot. */
async function ledger(tables: Record<(typeof TABLES)[number], string>) {
  const [row] = await rows(
    `SELECT (SELECT count(*) FROM ${tables.pgbench_history})::int8 AS history_rows,
            (SELECT coalesce(sum(delta), 0) FROM ${tables.pgbench_history})::int8 AS history,
            (SELECT sum(abalance) FROM ${tables.pgbench_accounts})::int8 AS accounts,
            (SELECT sum(tbalance) FROM ${tables.pgbench_tellers})::int8 AS tellers,
            (SELECT sum(bbalance) FROM ${tables.pgbench_branches})::int8 AS branches`,
  );
  return {
    historyRows: Number(row!.history_rows),
    history: Number(row!.history),
    accounts: Number(row!.accounts),
    tellers: Number(row!.tellers),
    branches: Number(row!.branches),
  };
}

const live = Object.fromEntries(TABLES.map((t) => [t, `public.${t}`])) as Record<(typeof TABLES)[number], string>;

/** The four tables' oids, read after pgbench -i: the same relations throughout (no row is copied by a move). */
const oids: Record<string, string> = {};

/** Every foreign key on the four tables: its table, name, definition and whether it is validated. */
const keys = () =>
  rows(
    `SELECT conrelid::regclass::text AS "table", conname AS name, pg_get_constraintdef(oid) AS def, convalidated AS validated
       FROM pg_constraint WHERE contype = 'f' AND conrelid = ANY ($1::oid[]) ORDER BY 1, 2`,
    [Object.values(oids)],
  );

/** Where each of the four tables is now, by oid, in one snapshot of pg_class. */
async function whereAll(client: Client): Promise<Record<string, string | undefined>> {
  const { rows: found } = await client.query<{ oid: string; schema: string; name: string }>(
    `SELECT c.oid::int8 AS oid, n.nspname AS schema, c.relname AS name
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ANY ($1::oid[])`,
    [Object.values(oids)],
  );
  const byOid = new Map(found.map((r) => [String(r.oid), `${r.schema}.${r.name}`]));
  return Object.fromEntries(TABLES.map((t) => [t, byOid.get(oids[t]!)]));
}

/**
 * Watches pg_class from a session of its own until stopped: every look, the set of schemas the four tables were in.
 * All or none: no look may find them in more than one.
 */
function watchSchemas() {
  const seen: string[][] = [];
  let stop = false;
  const done = (async () => {
    while (!stop) {
      const at = await whereAll(watcher);
      seen.push([...new Set(Object.values(at).map((q) => q?.split('.')[0] ?? 'gone'))].sort());
      await sleep(2);
    }
  })();
  return {
    stop: async () => {
      stop = true;
      await done;
      return seen;
    },
  };
}

beforeAll(async () => {
  server = await sharedPostgres();
  url = await server.freshDatabase('pgbench_family');
  db = new Client({ connectionString: url });
  await db.connect();
  watcher = new Client({ connectionString: url });
  await watcher.connect();
  h = await Harness.start({ postgresNodes: [url] });
});

afterAll(async () => {
  closing = true;
  for (const child of running) child.kill('SIGTERM');
  await h?.close();
  await watcher?.end();
  await db?.end();
  await server?.stop();
});

test("pgbench's four tables dropped as one under pgbench's load, and recalled under it with every committed transaction", async () => {
  const init = await pgbench(['-i', '-s', '1', '--foreign-keys', '--quiet']);
  expect(init).toMatchObject({ code: 0 });
  for (const t of TABLES) oids[t] = String((await rows('SELECT to_regclass($1)::oid::int8 AS oid', [live[t]]))[0]!.oid);
  const keysBefore = await keys();
  // pgbench's keys: history to the other three, tellers and accounts to branches; all valid.
  expect(keysBefore.map((k) => `${String(k.table)}.${String(k.name)}`)).toEqual([
    'pgbench_accounts.pgbench_accounts_bid_fkey',
    'pgbench_history.pgbench_history_aid_fkey',
    'pgbench_history.pgbench_history_bid_fkey',
    'pgbench_history.pgbench_history_tid_fkey',
    'pgbench_tellers.pgbench_tellers_bid_fkey',
  ]);
  expect(keysBefore.every((k) => k.validated === true)).toBe(true);
  expect(await ledger(live)).toEqual({ historyRows: 0, history: 0, accounts: 0, tellers: 0, branches: 0 });

  const ids: Record<string, number> = {};
  for (const t of TABLES) {
    const table = await h.client.adopt({ table: live[t], node: 'node-0' });
    expect(table).toMatchObject({ namespace: 'public', name: t, state: 'READY' });
    ids[t] = table.id;
  }

  // The load: one long run until the drop, short runs after it (see the top of the file).
  let dropping = false;
  let recalled = false;
  const load = loadLoop(
    () => (dropping ? 2 : 60),
    () => recalled,
  );
  try {
    // Writing: a few hundred transactions committed before the drop.
    await waitFor(
      () => count(live.pgbench_history),
      (n) => n >= 300 || load.runs.length > 0,
      { what: "pgbench's first committed transactions", intervalMs: 20, timeoutMs: 20_000 },
    );
    expect(load.runs).toEqual([]);
    const underDrop = load.current()!;

    // The drop: the four tables as one, named from branches (which every other table's keys reference).
    dropping = true;
    const watching = watchSchemas();
    const dropStarted = Date.now();
    const trashed = await h.client.trash({
      table: live.pgbench_branches,
      together: [live.pgbench_tellers, live.pgbench_accounts, live.pgbench_history],
      retentionSeconds: 3600,
      drainTimeoutSeconds: 30,
    });
    const dropMs = Date.now() - dropStarted;
    const duringDrop = await watching.stop();
    expect(trashed).toMatchObject({ id: ids.pgbench_branches, state: 'TRASHED' });
    expect([...(trashed.droppedWith ?? [])].sort((a, b) => a - b)).toEqual(
      [ids.pgbench_accounts!, ids.pgbench_history!, ids.pgbench_tellers!].sort((a, b) => a - b),
    );
    for (const t of TABLES) expect((await h.catalog.getTable(ids[t]!))?.state).toBe('TRASHED');

    // All four in the trash at once, none live; and every look at pg_class while the drop ran found them all in one
    // schema: public, then tablefate_trash.
    const inTrash = await whereAll(db);
    for (const t of TABLES) expect(inTrash[t]).toMatch(/^tablefate_trash\./);
    for (const t of TABLES) expect(await rows('SELECT to_regclass($1) AS t', [live[t]])).toEqual([{ t: null }]);
    expect(duringDrop.length).toBeGreaterThan(0);
    expect(duringDrop.filter((schemas) => schemas.length !== 1)).toEqual([]);
    expect(duringDrop.at(-1)).toEqual(['tablefate_trash']);

    // The run under the drop: writing until the drop took its tables, then every client aborted (exit 2), long before
    // its 60 s. The drop waited for the transactions in flight: none failed (no lock timeout, no deadlock, no
    // serialization failure), and each client was aborted at the first statement of a transaction (UPDATE of
    // pgbench_accounts, which it could not find), never midway through one: no transaction saw some of the four tables
    // gone and others there.
    const dropRun = await underDrop;
    const dropOutput = dropRun.stdout + dropRun.stderr;
    expect(Date.now() - dropStarted).toBeLessThan(20_000);
    expect(dropRun.code).toBe(2);
    expect(dropRun.stdout).toMatch(/number of failed transactions: 0 \(/);
    expect(dropRun.stderr).not.toMatch(/deadlock|could not serialize|lock timeout|canceling statement|violates/);
    const dropAborts = aborts(dropRun.stderr);
    expect(dropAborts).toHaveLength(4);
    for (const line of dropAborts) expect(line).toMatch(/ERROR: +relation "pgbench_accounts" does not exist/);
    const committedBeforeDrop = processed(dropRun);
    expect(committedBeforeDrop).toBeGreaterThanOrEqual(300);
    console.log(
      `pgbench under the drop: ${committedBeforeDrop} transactions committed, ${tps(dropOutput)} tps; the drop took ${dropMs} ms, ` +
        `${duringDrop.length} looks at pg_class while it ran`,
    );

    // In the trash, every committed transaction: as many history rows, and the four sums agree.
    const trashTables = Object.fromEntries(TABLES.map((t) => [t, inTrash[t]!])) as Record<(typeof TABLES)[number], string>;
    const trashedLedger = await ledger(trashTables);
    expect(trashedLedger.historyRows).toBe(committedBeforeDrop);
    expect([trashedLedger.accounts, trashedLedger.tellers, trashedLedger.branches]).toEqual([
      trashedLedger.history,
      trashedLedger.history,
      trashedLedger.history,
    ]);

    // pgbench tries again while they are in the trash: runs that fail, committing nothing.
    await waitFor(
      () => Promise.resolve(load.runs.filter((r) => r.startedAt > dropStarted).length),
      (n) => n >= 3,
      { what: 'pgbench runs failing on the tables in the trash', intervalMs: 20, timeoutMs: 10_000 },
    );

    // The recall, by one member (tellers): all four back, under pgbench's runs starting again and again.
    const recallWatch = watchSchemas();
    const recallStarted = Date.now();
    const back = await h.client.undelete({ table: ids.pgbench_tellers! });
    const recallEnded = Date.now();
    const duringRecall = await recallWatch.stop();
    recalled = true;
    expect(back).toMatchObject({ id: ids.pgbench_tellers, namespace: 'public', name: 'pgbench_tellers', state: 'READY' });
    expect(back.droppedWith).toBeUndefined();
    for (const t of TABLES) expect((await h.catalog.getTable(ids[t]!))?.state).toBe('READY');
    expect(duringRecall.filter((schemas) => schemas.length !== 1)).toEqual([]);
    expect(duringRecall.at(-1)).toEqual(['public']);
    // Each under its own name: the same relations, by oid.
    expect(await whereAll(db)).toEqual(Object.fromEntries(TABLES.map((t) => [t, `public.${t}`])));

    // The loop ends after the first run that commits on the recalled tables and exits 0.
    await load.done;
    const after = load.runs.filter((r) => r.startedAt > dropStarted);
    const failedInTrash = after.filter((r) => r.committed === 0 && r.code !== 0);
    // Runs were failing throughout: some started while the recall ran.
    expect(failedInTrash.some((r) => r.startedAt >= recallStarted && r.startedAt < recallEnded)).toBe(true);
    for (const r of failedInTrash) {
      // Failed only for the tables not being there: at pgbench's start (the scale), or at a client's first statement.
      const output = r.stdout + r.stderr;
      expect(output).toMatch(/relation "pgbench_(branches|accounts)" does not exist/);
      expect(output).not.toMatch(/deadlock|could not serialize|lock timeout|canceling statement|violates/);
    }
    expect(after.at(-1)).toMatchObject({ code: 0 });
    expect(after.at(-1)!.committed).toBeGreaterThan(0);
    for (const r of after.filter((x) => x.committed > 0)) {
      expect(r.startedAt).toBeGreaterThan(recallStarted);
      expect(r.stdout).toMatch(/number of failed transactions: 0 \(/);
    }
    const committed = [dropRun, ...after].reduce((n, r) => n + processed(r), 0);
    expect(load.runs.length).toBe(1 + after.length);
    console.log(
      `pgbench while the tables were in the trash and recalled: ${after.length} runs, ${failedInTrash.length} failing at once; ` +
        `the recall took ${recallEnded - recallStarted} ms; ${committed - committedBeforeDrop} transactions committed after it`,
    );

    // Every foreign key back, as it was, and validated.
    expect(await keys()).toEqual(keysBefore);
    expect(await rows('SELECT count(*)::int AS n FROM tablefate.shards WHERE foreign_keys IS NOT NULL OR notes IS NOT NULL')).toEqual([
      { n: 0 },
    ]);
    // Every committed transaction's effect, before the drop and after the recall: one history row each, and the four
    // sums of deltas agree.
    const recalledLedger = await ledger(live);
    expect(recalledLedger.historyRows).toBe(committed);
    expect([recalledLedger.accounts, recalledLedger.tellers, recalledLedger.branches]).toEqual([
      recalledLedger.history,
      recalledLedger.history,
      recalledLedger.history,
    ]);
    expect(await h.catalog.listLocks()).toEqual([]);

    // pgbench again, on the recalled tables: 4 clients of 250 transactions each, none failing; history grows by exactly
    // what it committed, and the sums still agree.
    const again = await pgbench(['-c', '4', '-j', '2', '-t', '250', '--no-vacuum']);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/number of transactions actually processed: 1000\/1000/);
    expect(again.stdout).toMatch(/number of failed transactions: 0 \(/);
    const last = await ledger(live);
    expect(last.historyRows).toBe(committed + 1000);
    expect([last.accounts, last.tellers, last.branches]).toEqual([last.history, last.history, last.history]);
    console.log(`pgbench after the recall: 1000 transactions, ${tps(again.stdout)} tps`);
  } finally {
    // (After a failure: the loop's run, if one is still going, is stopped rather than waited for.)
    closing = true;
    for (const child of running) child.kill('SIGTERM');
    await load.done.catch(() => undefined);
  }
});
