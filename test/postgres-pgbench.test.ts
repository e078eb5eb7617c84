import type { ChildProcess } from 'node:child_process';
import { Client } from 'pg';
import { processedOf, startPgbench, tpsOf } from './support/pgbench';
import { Harness } from './support/harness';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { failureOf, waitFor } from './support/wait';

/*
 * Issue 29, item 8: pgbench's own tables, made by `pgbench -i --foreign-keys`, adopted by tablefate; pgbench_history
 * dropped while pgbench's clients write it, and recalled with every row a committed transaction wrote (a tpcb-like
 * transaction inserts exactly one history row, and history starts empty); its foreign keys detached in the trash and
 * back, validated, after the recall; a drop of pgbench_branches refused for the keys on it; pgbench run again on the
 * recalled table. Real processes: the pgbench binary installed beside initdb, on a database of the run's server.
 */

let server: TestPostgres;
let h: Harness;
let url: string;
let db: Client;
/** The pgbench processes this file started that have not exited: stopped after a failed test, never left running. */
const running = new Set<ChildProcess>();

/** pgbench on the test's database. */
const pgbench = (args: string[]) => startPgbench(url, args, running);

/** The transactions a run of pgbench saw commit. */
function processed(output: string): number {
  const n = processedOf(output);
  if (n === undefined) throw new Error(`no processed count in pgbench's output:\n${output}`);
  return n;
}

const tps = tpsOf;

const rows = async (sql: string, params: unknown[] = []) => (await db.query(sql, params)).rows as Array<Record<string, unknown>>;
const count = async (table: string) => Number((await rows(`SELECT count(*) AS n FROM ${table}`))[0]!.n);
/** The foreign keys `table` holds now: name, validated, and the table they point to. */
const keysOf = (table: string) =>
  rows(
    `SELECT conname AS name, convalidated AS validated, confrelid::regclass::text AS parent FROM pg_constraint
      WHERE conrelid = to_regclass($1) AND contype = 'f' ORDER BY conname`,
    [table],
  );

beforeAll(async () => {
  server = await sharedPostgres();
  url = await server.freshDatabase('pgbench');
  db = new Client({ connectionString: url });
  await db.connect();
  h = await Harness.start({ postgresNodes: [url] });
});

afterAll(async () => {
  for (const child of running) child.kill('SIGTERM');
  await h?.close();
  await db?.end();
  await server?.stop();
});

test("pgbench's tables adopted; pgbench_history dropped under pgbench's load and recalled with every committed row", async () => {
  const init = await pgbench(['-i', '-s', '1', '--foreign-keys', '--quiet']).done;
  expect(init).toMatchObject({ code: 0 });
  expect(await count('public.pgbench_history')).toBe(0);
  const historyKeys = [
    { name: 'pgbench_history_aid_fkey', validated: true, parent: 'pgbench_accounts' },
    { name: 'pgbench_history_bid_fkey', validated: true, parent: 'pgbench_branches' },
    { name: 'pgbench_history_tid_fkey', validated: true, parent: 'pgbench_tellers' },
  ];
  expect(await keysOf('public.pgbench_history')).toEqual(historyKeys);

  const adopted = new Map<string, number>();
  for (const name of ['pgbench_accounts', 'pgbench_branches', 'pgbench_tellers', 'pgbench_history']) {
    const table = await h.client.adopt({ table: `public.${name}`, node: 'node-0' });
    expect(table).toMatchObject({ namespace: 'public', name, state: 'READY', shards: 1, placement: [{ shard: 0, node: 'node-0' }] });
    adopted.set(name, table.id);
  }
  const historyId = adopted.get('pgbench_history')!;

  // pgbench's load: 4 clients, tpcb-like, for up to 30 s (it ends once its clients fail on the dropped table).
  const load = pgbench(['-c', '4', '-j', '2', '-T', '30', '--no-vacuum']);
  await waitFor(
    () => count('public.pgbench_history'),
    (n) => n > 0 || load.exited(),
    { what: "pgbench's first committed transactions", intervalMs: 20, timeoutMs: 15_000 },
  );
  expect(load.exited()).toBe(false);

  const dropStarted = Date.now();
  const trashed = await h.client.trash({ table: 'public.pgbench_history', retentionSeconds: 3600, drainTimeoutSeconds: 10 });
  const dropMs = Date.now() - dropStarted;
  expect(trashed).toMatchObject({ id: historyId, state: 'TRASHED' });
  // It was dropped under pgbench's load: pgbench's clients, writing it until then, failed on the table that is gone
  // (clients aborted: exit 2), long before its 30 s were up, and on nothing else.
  const loaded = await load.done;
  const output = loaded.stdout + loaded.stderr;
  expect(Date.now() - dropStarted).toBeLessThan(20_000);
  expect(loaded.code).toBe(2);
  expect(loaded.stderr).toMatch(/relation "pgbench_history" does not exist/);
  expect(loaded.stderr).not.toMatch(/deadlock|could not serialize|violates|lock timeout/);
  const committed = processed(output);
  expect(committed).toBeGreaterThan(0);
  console.log(`pgbench under the drop: ${committed} transactions committed, ${tps(output)} tps, the drop took ${dropMs} ms`);

  // In the trash: no foreign key of history is left on it, and pgbench_history is gone from public.
  const [shard] = await rows(
    `SELECT schema_name, table_name, jsonb_array_length(foreign_keys) AS detached
       FROM tablefate.shards WHERE table_id = $1 AND shard = 0`,
    [historyId],
  );
  expect(shard).toMatchObject({ schema_name: 'tablefate_trash', detached: 3 });
  const inTrash = `tablefate_trash.${String(shard!.table_name)}`;
  expect(await rows('SELECT to_regclass($1) AS t', ['public.pgbench_history'])).toEqual([{ t: null }]);
  expect(await keysOf(inTrash)).toEqual([]);
  // Every committed transaction's row is there, in the trash.
  expect(await count(inTrash)).toBe(committed);

  // A teller the trashed rows name can be deleted: history's key to it was detached, and nothing reaches the trash.
  const [teller] = await rows(`SELECT tid, count(*)::int AS n FROM ${inTrash} GROUP BY tid ORDER BY n DESC LIMIT 1`);
  const before = await rows(`SELECT tid, bid, aid, delta, mtime FROM ${inTrash} ORDER BY tid, bid, aid, delta, mtime`);
  await db.query('BEGIN');
  try {
    const deleted = await db.query('DELETE FROM public.pgbench_tellers WHERE tid = $1', [teller!.tid]);
    expect(deleted.rowCount).toBe(1);
    expect(await rows(`SELECT count(*)::int AS n FROM ${inTrash} WHERE tid = $1`, [teller!.tid])).toEqual([{ n: teller!.n }]);
  } finally {
    await db.query('ROLLBACK');
  }
  expect(await rows(`SELECT tid, bid, aid, delta, mtime FROM ${inTrash} ORDER BY tid, bid, aid, delta, mtime`)).toEqual(before);

  // Recalled: every committed row, and its three keys back, validated.
  const recalled = await h.client.undelete({ table: historyId });
  expect(recalled).toMatchObject({ id: historyId, namespace: 'public', name: 'pgbench_history', state: 'READY' });
  expect(await count('public.pgbench_history')).toBe(committed);
  expect(await keysOf('public.pgbench_history')).toEqual(historyKeys);
  expect(await rows('SELECT notes FROM tablefate.shards WHERE table_id = $1', [historyId])).toEqual([{ notes: null }]);
  // Enforced again: the teller's rows now keep it from being deleted.
  await db.query('BEGIN');
  try {
    await expect(db.query('DELETE FROM public.pgbench_tellers WHERE tid = $1', [teller!.tid])).rejects.toThrow(
      'violates foreign key constraint "pgbench_history_tid_fkey" on table "pgbench_history"',
    );
  } finally {
    await db.query('ROLLBACK');
  }

  // pgbench_branches has other tables' keys on it: its drop is refused, naming them, and it stays live and READY.
  const refusal = (await failureOf(
    h.client.trash({ table: 'public.pgbench_branches', retentionSeconds: 3600, drainTimeoutSeconds: 10 }),
  )) as { type?: string; message: string };
  expect(refusal.type).toBe('HasDependents');
  for (const key of ['pgbench_accounts_bid_fkey', 'pgbench_history_bid_fkey', 'pgbench_tellers_bid_fkey']) {
    expect(refusal.message).toContain(key);
  }
  console.log(`the drop of pgbench_branches: ${refusal.message}`);
  expect((await h.catalog.getTable(adopted.get('pgbench_branches')!))?.state).toBe('READY');
  expect(await count('public.pgbench_branches')).toBe(1);
  expect(await h.catalog.listLocks()).toEqual([]);

  // pgbench again, on the recalled table: 4 clients of 500 transactions each (about a second), none failing, and
  // history grows by exactly what it committed.
  const again = await pgbench(['-c', '4', '-j', '2', '-t', '500', '--no-vacuum']).done;
  expect(again.code).toBe(0);
  expect(again.stdout).toMatch(/number of transactions actually processed: 2000\/2000/);
  expect(await count('public.pgbench_history')).toBe(committed + processed(again.stdout));
  console.log(`pgbench after the recall: 2000 transactions, ${tps(again.stdout)} tps`);
});
