import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { Harness } from './support/harness';
import { processedOf, startPgbench } from './support/pgbench';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { waitFor } from './support/wait';

/*
 * Issue 43, item 4: a truncate under load. pgbench's clients insert into a table tablefate keeps, one row a
 * transaction, while it is truncated: no client fails, every row a committed transaction wrote before the truncate is in
 * its trash entry and every one after it in the table, none in both and none lost, and the ids go on across the two
 * (each one handed out once). Real processes: the pgbench binary beside initdb, on a database of the run's server.
 */

let server: TestPostgres;
let h: Harness;
let url: string;
let db: Client;
let dir: string;
const running = new Set<ChildProcess>();

beforeAll(async () => {
  server = await sharedPostgres();
  url = await server.freshDatabase('pgtruncload');
  db = new Client({ connectionString: url });
  await db.connect();
  dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tablefate-truncload-'));
  h = await Harness.start({ postgresNodes: [url] });
});

afterAll(async () => {
  for (const child of running) child.kill('SIGTERM');
  await h?.close();
  await db?.end();
  await server?.stop();
  if (dir) await fs.promises.rm(dir, { recursive: true, force: true });
});

const ids = async (table: string) =>
  (await db.query<{ id: string }>(`SELECT id FROM ${table} ORDER BY id`)).rows.map((row) => Number(row.id));

test('pgbench inserting all along: rows committed before the truncate are in the trash, those after in the table, each once', async () => {
  const table = await h.client.create({
    table: 'load.events',
    shards: 1,
    columns: 'id bigserial primary key, at timestamptz default now(), client int',
  });
  const script = path.join(dir, 'insert.sql');
  await fs.promises.writeFile(script, 'INSERT INTO load.events (client) VALUES (:client_id);\n');
  // 4 clients for 8 s, each transaction one INSERT.
  const load = startPgbench(url, ['-c', '4', '-j', '2', '-T', '8', '--no-vacuum', '-f', script], running);
  await waitFor(
    async () => Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM load.events')).rows[0]!.n),
    (n) => n > 100 || load.exited(),
    { what: "pgbench's first rows", intervalMs: 20, timeoutMs: 15_000 },
  );
  expect(load.exited()).toBe(false);

  const entry = await h.client.truncate({ table: 'load.events', retentionSeconds: 3600, drainTimeoutSeconds: 10 });
  expect(entry).toMatchObject({ state: 'TRASHED', truncatedFrom: table.id });
  const [shard] = (await db.query<{ table_name: string }>('SELECT table_name FROM tablefate.shards WHERE table_id = $1', [entry.id])).rows;
  const inTrash = `tablefate_trash.${shard!.table_name}`;
  expect(load.exited()).toBe(false);

  const run = await load.done;
  // No client failed: each waited for the truncate's lock, then wrote on into the empty table.
  expect(run.code).toBe(0);
  expect(run.stderr).not.toMatch(/ERROR|aborted/);
  const committed = processedOf(run.stdout)!;
  const [before, after] = [await ids(inTrash), await ids('load.events')];
  console.log(`pgbench under the truncate: ${committed} rows committed, ${before.length} before it, ${after.length} after`);
  expect(before.length).toBeGreaterThan(0);
  expect(after.length).toBeGreaterThan(0);
  // Every committed row once: none lost, none in both.
  expect(before.length + after.length).toBe(committed);
  // The ids go on: every id the table hands out after the truncate is above every one it handed out before.
  // (Each list in ascending order.)
  expect(before.at(-1)!).toBeLessThan(after[0]!);
  expect(new Set([...before, ...after]).size).toBe(committed);
});
