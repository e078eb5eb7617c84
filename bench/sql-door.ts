import { Client as PgClient } from 'pg';
import type { TableFateClient } from '../client/client';

/** The SQL door's drop beside the SDK's and a bare `ALTER TABLE ... SET SCHEMA`, each round's medians' inputs, in ms. */
export interface DoorReport {
  sdkDropMs: number[];
  doorDropMs: number[];
  /** From the request's commit to the worker's claim (the requests' `picked_at - requested_at`). */
  pickUpMs: number[];
  bareMoveMs: number[];
}

/**
 * A drop through the SQL door (`CALL tablefate_sql.drop(...)` in autocommit, as psql makes it, waiting for the answer)
 * against the SDK's drop of a table alike, and against the bare statement a move is made of, on the bench's node; each
 * table recalled (or moved back) between rounds, the three in turn so that drift hits them alike. One round to warm up.
 */
export async function benchSqlDoor(client: TableFateClient, url: string, rounds: number): Promise<DoorReport> {
  const db = new PgClient({ connectionString: url, application_name: 'bench sql door' });
  await db.connect();
  const report: DoorReport = { sdkDropMs: [], doorDropMs: [], pickUpMs: [], bareMoveMs: [] };
  try {
    const columns = 'id bigint primary key, payload text';
    const sdk = await client.create({ table: 'bench.door_sdk', shards: 1, columns });
    const door = await client.create({ table: 'bench.door_sql', shards: 1, columns });
    await db.query(`CREATE TABLE bench.door_bare (${columns}); CREATE SCHEMA IF NOT EXISTS bench_moved`);
    const requests: string[] = [];
    for (let round = -1; round < rounds; round++) {
      const keep = (samples: number[], ms: number) => round >= 0 && samples.push(ms);
      keep(report.sdkDropMs, await timed(() => client.trash({ table: 'bench.door_sdk', retentionSeconds: 3600 })));
      await client.undelete({ table: sdk.id });
      let request: string | undefined;
      keep(
        report.doorDropMs,
        await timed(async () => {
          const { rows } = await db.query<{ request_id: string }>(`CALL tablefate_sql.drop('bench.door_sql', retention_seconds => 3600)`);
          request = rows[0]!.request_id;
        }),
      );
      if (round >= 0) requests.push(request!);
      await client.undelete({ table: door.id });
      keep(report.bareMoveMs, await timed(() => db.query('ALTER TABLE bench.door_bare SET SCHEMA bench_moved')));
      await db.query('ALTER TABLE bench_moved.door_bare SET SCHEMA bench');
    }
    const { rows } = await db.query<{ ms: number }>(
      `SELECT extract(epoch FROM picked_at - requested_at) * 1000 AS ms FROM tablefate.sql_requests WHERE id = ANY($1::bigint[])`,
      [requests],
    );
    report.pickUpMs = rows.map((row) => Number(row.ms));
    return report;
  } finally {
    await db.end();
  }
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}
