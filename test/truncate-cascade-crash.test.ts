import { Client } from 'pg';
import { Harness, workflowBundleFile } from './support/harness';
import { startCrashingWorker } from './support/crashing-worker';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { workflowIdFor } from '../domain/operations';
import type { truncateTable } from '../workflows';
import type { TableInfo } from '../domain/table';
import { waitFor } from './support/wait';

// A cascade truncate (PostgreSQL: a table and the table whose key references it, truncated as one) whose worker is
// killed right after its first call moved both tables' rows, before the workflow task knew it, or whose run is then lost
// for good: it ends with both tables live and empty and each one's rows in its own entry, moved once; never one without
// the other.
const LOST_TASK_TIMEOUT_MS = 3_000;

let server: TestPostgres;
let url: string;
let user: Client;
let h: Harness;
let bundleFile: string;
beforeAll(async () => {
  server = await sharedPostgres();
  url = await server.freshDatabase('cascadecrash');
  user = new Client({ connectionString: url });
  await user.connect();
  h = await Harness.start({ startWorker: false, workflowTaskTimeoutMs: LOST_TASK_TIMEOUT_MS, postgresNodes: [url] });
  bundleFile = await workflowBundleFile();
});
afterAll(async () => {
  await h?.close();
  await user?.end();
  await server?.stop();
});

const crashAfterCall = (n: number) =>
  startCrashingWorker({ on: h, bundleFile, activity: 'runStepsHere', env: { CRASH_ON_CALL: String(n), CRASH_POSTGRES_URLS: url } });

const count = async (table: string) => (await user.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]!.n;

/** An order table and its lines (a key to it), with rows, made by a worker that is stopped again. */
async function family(schema: string): Promise<[TableInfo, TableInfo]> {
  await h.startWorker();
  const orders = await h.client.create({ table: `${schema}.orders`, shards: 1, columns: 'id int primary key' });
  const lines = await h.client.create({
    table: `${schema}.lines`,
    shards: 1,
    columns: `order_id int not null constraint lines_order_fk references ${schema}.orders`,
  });
  await user.query(
    `INSERT INTO ${schema}.orders SELECT generate_series(1, 3); INSERT INTO ${schema}.lines SELECT 1 + g % 3 FROM generate_series(1, 9) g`,
  );
  await h.stopWorker();
  return [orders, lines];
}

/** Both live and empty, each one's rows in one entry of its own (3 orders, 9 lines), the keys between the twins and between the entries' tables. */
async function expectTruncated(schema: string, tables: readonly TableInfo[]): Promise<void> {
  for (const t of tables) {
    expect(await h.catalog.getTable(t.id)).toMatchObject({ state: 'READY' });
    expect((await h.catalog.getTable(t.id))?.droppedWith).toBeUndefined();
  }
  expect([await count(`${schema}.orders`), await count(`${schema}.lines`)]).toEqual([0, 0]);
  const entries = (await h.catalog.listTables({ includeTrashed: true })).filter((t) =>
    tables.some((table) => table.id === t.truncatedFrom),
  );
  expect(entries.map((e) => [e.truncatedFrom, e.state])).toEqual(
    tables.map((t) => [t.id, 'TRASHED']).sort((a, b) => Number(a[0]) - Number(b[0])),
  );
  const keys = await user.query<{ key: string }>(
    `SELECT k.conrelid::regclass || ' -> ' || k.confrelid::regclass AS key FROM pg_constraint k
       JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE k.conname = 'lines_order_fk' AND n.nspname = $1`,
    [schema],
  );
  expect(keys.rows).toEqual([{ key: `${schema}.lines -> ${schema}.orders` }]);
  expect(await h.catalog.listLocks()).toEqual([]);
}

test('killed after both tables moved, in a lost task: the next worker commits them once, as one', async () => {
  const tables = await family('crashed');
  const worker = await crashAfterCall(1);
  const truncating = h.client.truncate({ table: 'crashed.orders', cascade: true, retentionSeconds: 3600 });
  expect(await worker.exited).toBe('SIGKILL');
  for (const t of tables) expect(await h.catalog.getTable(t.id)).toMatchObject({ state: 'TRUNCATING' });
  expect([await count('crashed.orders'), await count('crashed.lines')]).toEqual([0, 0]);

  await h.startWorker();
  const entry = await truncating;
  expect(entry).toMatchObject({ state: 'TRASHED', truncatedFrom: tables[0].id });
  await expectTruncated('crashed', tables);
  // Each entry's rows whole: recalled under names of their own.
  const listed = await h.client.list({ includeTrashed: true });
  const linesEntry = listed.find((t) => t.truncatedFrom === tables[1].id && t.state === 'TRASHED')!;
  await h.client.undelete({ table: linesEntry.id, newName: 'crashed.lines_before' });
  await h.client.undelete({ table: entry.id, newName: 'crashed.orders_before' });
  expect([await count('crashed.orders_before'), await count('crashed.lines_before')]).toEqual([3, 9]);
  await h.stopWorker();
}, 120_000);

test('its run lost for good once both tables moved: the reconciler resumes the two as one, into the same entries', async () => {
  const tables = await family('lost');
  const worker = await crashAfterCall(1);
  const truncating = h.client.truncate({ table: 'lost.orders', cascade: true, retentionSeconds: 3600 }).catch((err: unknown) => err);
  expect(await worker.exited).toBe('SIGKILL');
  const half = await Promise.all(tables.map((t) => h.catalog.getTable(t.id)));
  expect(half.map((t) => t?.state)).toEqual(['TRUNCATING', 'TRUNCATING']);
  expect(half[0]?.droppedWith).toEqual([tables[1].id]);
  await h.temporal.workflow.getHandle(workflowIdFor.truncate(tables[0].id, h.catalog.id)).terminate('test: a lost truncate');
  await truncating;

  await h.startWorker();
  await h.reconcile();
  const lead = Math.min(...tables.map((t) => t.id));
  const resumed = h.temporal.workflow.getHandle<typeof truncateTable>(workflowIdFor.truncate(lead, h.catalog.id));
  await resumed.result();
  await waitFor(
    () => Promise.all(tables.map((t) => h.catalog.getTable(t.id))),
    (all) => all.every((t) => t?.state === 'READY'),
    { what: 'the resumed truncate' },
  );
  await expectTruncated('lost', tables);
  for (const [i, t] of tables.entries()) {
    const entry = (await h.catalog.listTables({ includeTrashed: true })).find((e) => e.truncatedFrom === t.id);
    expect(entry?.id).toBe(half[i]!.truncateInto);
  }
  await h.stopWorker();
}, 120_000);
