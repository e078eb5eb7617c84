import { Client as PgClient } from 'pg';
import type { TableFateClient } from '../client/client';
import { mariadbQuery } from '../test/support/mariadb';
import { timed } from './samples';

/**
 * The trash of a table of about 1 MB against one of about 1 GB (trash, then recall), and its truncate where the driver
 * makes one (then the empty table dropped, and its rows recalled in its place, as the table of that name): a move of a
 * real table reads no row, nor does a truncate (a move and an empty twin), so neither's time may grow with the rows. Each table is loaded through the database's own
 * client, as a DBA loads one (about 1 kB a row of MD5s, not compressible), and settled as a DBA ends a bulk load; then
 * the two sizes take turns, so that the machine's drift hits both alike: one round to warm up, then `rounds`.
 */
export interface SizeSamples {
  label: string;
  bytes: number;
  trashMs: number[];
  truncateMs: number[];
}

/** Loads `rows` rows into the new table `bench.<name>` and answers its size as the database counts it. */
type Loader = (name: string, rows: number) => Promise<number>;

const SIZES = [
  ['1 MB', 1_000],
  ['1 GB', 1_000_000],
] as const;

export async function trashBySize(
  client: TableFateClient,
  load: Loader,
  { rounds, truncates }: { rounds: number; truncates: boolean },
): Promise<SizeSamples[]> {
  const sizes = [];
  for (const [label, rows] of SIZES) {
    const name = `size_${rows}`;
    const table = await client.create({ table: `bench.${name}`, shards: 1, columns: 'id bigint primary key, payload text' });
    const bytes = await load(name, rows);
    sizes.push({ label, bytes, name, trashMs: [] as number[], truncateMs: [] as number[], table });
  }
  for (let round = -1; round < rounds; round++) {
    for (const size of sizes) {
      const table = `bench.${size.name}`;
      await timed(round < 0 ? [] : size.trashMs, () => client.trash({ table, retentionSeconds: 3600 }));
      size.table = await client.undelete({ table: size.table.id });
      if (!truncates) continue;
      const entry = await timed(round < 0 ? [] : size.truncateMs, () => client.truncate({ table, retentionSeconds: 3600 }));
      const emptied = await client.trash({ table, retentionSeconds: 3600 });
      size.table = await client.undelete({ table: entry.id });
      await client.purge({ tableId: emptied.id });
    }
  }
  return sizes.map(({ label, bytes, trashMs, truncateMs }) => ({ label, bytes, trashMs, truncateMs }));
}

/**
 * PostgreSQL's load, vacuumed and analyzed, its WAL checkpointed: otherwise the first trash meets the load's own
 * after-effects (autovacuum starting on the new table, the WAL of a gigabyte being flushed), which are the load's cost,
 * not the move's.
 */
export const postgresLoader =
  (url: string): Loader =>
  async (name, rows) => {
    const db = new PgClient({ connectionString: url });
    await db.connect();
    try {
      await db.query(
        `INSERT INTO bench.${name} SELECT g, (SELECT string_agg(md5(g::text || k::text), '') FROM generate_series(1, 30) k) FROM generate_series(1, $1) g`,
        [rows],
      );
      await db.query(`VACUUM (ANALYZE) bench.${name}`);
      await db.query('CHECKPOINT');
      return Number((await db.query<{ b: string }>(`SELECT pg_total_relation_size('bench.${name}') AS b`)).rows[0]!.b);
    } finally {
      await db.end();
    }
  };

/** MariaDB's load (the Sequence engine's `seq_1_to_N`), ANALYZE TABLE'd so that the size MariaDB reports is the table's. */
export const mariadbLoader =
  (url: string): Loader =>
  async (name, rows) => {
    // (The Sequence engine's tables need a default database: the bench's own.)
    const inBench = new URL(url);
    inBench.pathname = '/bench';
    await mariadbQuery(
      inBench.toString(),
      `INSERT INTO bench.${name} SELECT s.seq, (SELECT GROUP_CONCAT(MD5(CONCAT(s.seq, '/', k.seq)) SEPARATOR '') FROM seq_1_to_30 k) FROM seq_1_to_${rows} s;
       ANALYZE TABLE bench.${name}`,
      { timeoutMs: 30 * 60_000 },
    );
    const [[bytes]] = (await mariadbQuery(
      url,
      `SELECT DATA_LENGTH + INDEX_LENGTH FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'bench' AND TABLE_NAME = '${name}'`,
    )) as [[string]];
    return Number(bytes);
  };
