import fs from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import { Client } from 'pg';
import { jsonOf, runCli, runCliInProcess, type CliProcess, type CliResult } from './support/cli';
import { cliTestHome, ensureNamespace, startCliWorker } from './support/cli-worker';
import { sharedPostgres, type TestPostgres } from './support/postgres';
import { testServerAddress } from './support/test-server';
import { untilPast } from './support/wait';
import { TASK_QUEUE } from '../domain/deployment';
import type { Finding, ReconcileReport } from '../domain/health';
import type { TableInfo } from '../domain/table';
import type { reconcileTables } from '../workflows';

/*
 * `tablefate doctor` sees what happened outside (issue 29, item 5): shard tables on the PostgreSQL driver that a user
 * dropped, renamed, moved to another schema or gave to another owner by hand, with psql, are each reported by table, node
 * and what differs, in text and --json, exit 1; and a reconcile pass in repair mode leaves every one of them as it is.
 * A `tablefate worker` (a child process) in a Temporal namespace of this file's own, with no reconcile schedule, on two
 * databases of the shared PostgreSQL server.
 */

const NAMESPACE = 'tablefate-postgres-doctor-test';

let server: TestPostgres;
let home: string;
let env: NodeJS.ProcessEnv;
let connection: Connection;
let worker: CliProcess | undefined;
const psql: Client[] = [];
/** A role of this run's own (roles are the whole server's, shared by every test file), given one table by hand. */
const OTHER_OWNER = `doctor_owner_${randomBytes(4).toString('hex')}`;

const cli = (...args: string[]) => runCliInProcess(args, { env });
const seen = (r: CliResult) => ({ code: r.code, stdout: r.stdout, stderr: r.stderr });

beforeAll(async () => {
  server = await sharedPostgres();
  const urls = [await server.freshDatabase('pgdoctor'), await server.freshDatabase('pgdoctor')];
  for (const url of urls) {
    const client = new Client({ connectionString: url });
    await client.connect();
    psql.push(client);
  }
  ({ home, env } = await cliTestHome('pgdoctor', NAMESPACE));
  env = { ...env, TABLEFATE_STORAGE_DRIVER: 'postgres', TABLEFATE_STORAGE_URLS: urls.join(',') };
  connection = await Connection.connect({ address: testServerAddress() });
  await ensureNamespace(connection, NAMESPACE);
  worker = await startCliWorker(connection, env);
});

afterAll(async () => {
  try {
    if (worker && !worker.exitStatus) expect(await worker.stop('SIGINT')).toEqual({ code: 0, signal: null });
  } finally {
    // The role owns a table in one of this file's databases: take it back before the role goes.
    for (const client of psql) {
      await client.query(`REASSIGN OWNED BY ${OTHER_OWNER} TO postgres`).catch(() => undefined);
      await client.end();
    }
    if (server) {
      const admin = new Client({ connectionString: server.url });
      await admin.connect();
      await admin.query(`DROP ROLE IF EXISTS ${OTHER_OWNER}`).catch(() => undefined);
      await admin.end();
    }
    await connection?.close();
    await server?.stop();
    if (home) await fs.promises.rm(home, { recursive: true, force: true });
  }
});

/** psql on the node that holds shard `shard` of the table. */
const nodeOf = (table: TableInfo, shard = 0) => psql[Number(table.placement[shard]!.node.replace('node-', ''))]!;

/** What PostgreSQL has of every shard table tablefate recorded on every node: its identity, place, kind, owner and rows. */
async function everyShardTable(): Promise<unknown[]> {
  const all: unknown[] = [];
  for (const [k, db] of psql.entries()) {
    const { rows } = await db.query<{ oid: string; schema: string | null; name: string | null }>(
      `SELECT s.table_id, s.shard, s.table_oid::int8 AS oid, s.schema_name, s.table_name, n.nspname AS schema, c.relname AS name,
              c.relkind AS kind, pg_get_userbyid(c.relowner) AS owner
         FROM tablefate.shards s LEFT JOIN pg_class c ON c.oid = s.table_oid LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
        ORDER BY s.table_id, s.shard`,
    );
    for (const row of rows) {
      const count =
        row.schema === null
          ? null
          : (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${row.schema}"."${row.name}"`)).rows[0];
      all.push({ node: `node-${k}`, ...row, count });
    }
  }
  return all;
}

test('dropped, renamed, moved and given away by hand: doctor names each, text and --json, exit 1; a repair pass touches none', async () => {
  const make = async (name: string) => {
    const table = jsonOf<TableInfo>(await cli('create', `shop.${name}`, '--columns', 'id int primary key, note text', '--json'));
    await nodeOf(table).query(`INSERT INTO shop.${name} SELECT g, 'row ' || g FROM generate_series(1, 3) g`);
    return table;
  };
  const [gone, renamed, moved, owned, stale, unrecorded] = [
    await make('gone'),
    await make('renamed'),
    await make('moved'),
    await make('owned'),
    await make('stale'),
    await make('unrecorded'),
  ];
  const fine = jsonOf<TableInfo>(await cli('create', 'shop.fine', '--shards', '2', '--columns', 'id int', '--json'));
  const createdAt = Date.now();

  // A healthy deployment: exit 0, as a shell sees it.
  expect(seen(await runCli(['doctor'], { env }))).toEqual({ code: 0, stdout: 'healthy: nothing for the reconciler to do\n', stderr: '' });

  // By hand, as a user with psql (no guard installed: PostgreSQL lets every one through).
  await nodeOf(gone).query('DROP TABLE shop.gone');
  await nodeOf(renamed).query('ALTER TABLE shop.renamed RENAME TO people');
  await nodeOf(moved).query('CREATE SCHEMA elsewhere; ALTER TABLE shop.moved SET SCHEMA elsewhere');
  await nodeOf(owned).query(`CREATE ROLE ${OTHER_OWNER}; ALTER TABLE shop.owned OWNER TO ${OTHER_OWNER}`);
  // And tablefate's own record, as a catalog restored from an older backup would leave it: one record naming the table
  // otherwise than the catalog (the table renamed along, so PostgreSQL agrees with the record), one record deleted.
  await nodeOf(stale).query(
    "ALTER TABLE shop.stale RENAME TO stale_old; UPDATE tablefate.shards SET table_name = 'stale_old' WHERE table_oid = 'shop.stale_old'::regclass",
  );
  await nodeOf(unrecorded).query("DELETE FROM tablefate.shards WHERE table_oid = 'shop.unrecorded'::regclass");
  // The catalog is compared with a record only for rows that did not change within a second of the listing (the
  // doctor's clock margin): the listing comes after every row's last change by more than that.
  await untilPast(createdAt + 1_000);

  const where = (t: TableInfo) => `table ${t.id} (shop.${t.name}) shard 0 on ${t.placement[0]!.node}`;
  const expected: Array<[TableInfo, string]> = [
    [gone, 'shop.gone was dropped outside tablefate'],
    [renamed, 'shop.renamed was renamed outside tablefate to shop.people'],
    [moved, 'shop.moved was moved outside tablefate to schema elsewhere (as moved)'],
    [owned, `shop.owned's owner was changed outside tablefate from postgres to ${OTHER_OWNER}`],
    [stale, `the catalog names it shop.stale, but tablefate's record on ${stale.placement[0]!.node} has it as shop.stale_old`],
    [
      unrecorded,
      `the catalog has it READY with this shard on ${unrecorded.placement[0]!.node}, but ${unrecorded.placement[0]!.node} keeps no record of it: ` +
        'it was never placed there, or its record was deleted outside tablefate',
    ],
  ];
  const text = await runCli(['doctor'], { env });
  expect({ code: text.code, stderr: text.stderr }).toEqual({ code: 1, stderr: '' });
  expect(text.stdout.trimEnd().split('\n').sort()).toEqual(expected.map(([t, what]) => `outside-change ${where(t)}: ${what}`).sort());

  const json = await cli('doctor', '--json');
  expect({ code: json.code, stderr: json.stderr }).toEqual({ code: 1, stderr: '' });
  const report = JSON.parse(json.stdout) as ReconcileReport & { healthy: boolean };
  expect({ ...report, findings: [] }).toEqual({ healthy: false, findings: [], omitted: 0, skippedNodes: [], actions: [], deferred: 0 });
  const byId = (a: Finding, b: Finding) => (a.kind === 'outside-change' && b.kind === 'outside-change' ? a.table.id - b.table.id : 0);
  expect([...report.findings].sort(byId)).toEqual(
    expected.map(([t, what]) => ({
      kind: 'outside-change',
      table: { id: t.id, namespace: 'shop', name: t.name, shards: 1, params: expect.objectContaining({ shards: 1 }) as unknown },
      shard: 0,
      node: t.placement[0]!.node,
      differences: [what],
    })),
  );

  // A reconcile pass in repair mode, as the schedule runs it: it reports them, does nothing about them.
  const before = await everyShardTable();
  const [{ catalog_id: catalogId }] = (await psql[0]!.query<{ catalog_id: string }>('SELECT DISTINCT catalog_id FROM tablefate.shards'))
    .rows as [{ catalog_id: string }];
  const temporal = new TemporalClient({ connection, namespace: NAMESPACE });
  const repaired = await temporal.workflow.execute<typeof reconcileTables>('reconcileTables', {
    workflowId: `reconcile@${catalogId}-${randomUUID()}`,
    taskQueue: TASK_QUEUE,
    args: [{ catalogId, mode: 'repair' }],
  });
  expect(repaired).toMatchObject({ actions: [], deferred: 0, skippedNodes: [] });
  expect(repaired.findings.map((f) => f.kind)).toEqual(report.findings.map(() => 'outside-change'));
  // Every table where the hand left it, the same oid, owner and rows; the dropped one still gone, its record still kept.
  expect(await everyShardTable()).toEqual(before);
  expect(before).toContainEqual(expect.objectContaining({ table_id: String(gone.id), schema: null, count: null }));
  expect(before).toContainEqual(expect.objectContaining({ table_id: String(renamed.id), schema: 'shop', name: 'people', count: { n: 3 } }));
  expect(before).toContainEqual(
    expect.objectContaining({ table_id: String(moved.id), schema: 'elsewhere', name: 'moved', count: { n: 3 } }),
  );
  expect(before).toContainEqual(expect.objectContaining({ table_id: String(owned.id), owner: OTHER_OWNER, count: { n: 3 } }));
  expect((await nodeOf(unrecorded).query('SELECT count(*)::int AS n FROM shop.unrecorded')).rows).toEqual([{ n: 3 }]);
  // The catalog too: every one of them still READY, as the user left it (nothing resumed, nothing trashed).
  const listed = jsonOf<TableInfo[]>(await cli('ls', '--json'));
  expect(listed.map((t) => [t.name, t.state]).sort()).toEqual(
    [gone, renamed, moved, owned, stale, unrecorded, fine].map((t) => [t.name, 'READY']).sort(),
  );
});
