import type { TableFateClient } from '../client/client';
import { mariadbQuery } from '../test/support/mariadb';
import { timed } from './samples';

/**
 * The trash of a MariaDB table of about 1 MB against one of about 1 GB (trash, then recall): a move is a RENAME TABLE,
 * which InnoDB makes without reading a row, so its time may not grow with the rows. The rows are written through the
 * `mariadb` client (the Sequence engine's `seq_1_to_N`), as a DBA loads a table, then ANALYZE TABLE'd so that the size
 * MariaDB reports is the table's.
 */
export async function mariadbTrashBySize(
  client: TableFateClient,
  url: string,
  rounds: number,
): Promise<Array<{ label: string; bytes: number; trashMs: number[]; truncateMs: number[] }>> {
  // (The Sequence engine's tables need a default database: the bench's own.)
  const inBench = new URL(url);
  inBench.pathname = '/bench';
  const sizes = [];
  for (const [label, rows] of [
    ['1 MB', 1_000],
    ['1 GB', 1_000_000],
  ] as const) {
    const name = `size_${rows}`;
    const table = await client.create({ table: `bench.${name}`, columns: 'id BIGINT PRIMARY KEY, payload TEXT' });
    // About 1 kB a row (30 MD5s of its id and a counter), not compressible.
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
    sizes.push({ label, bytes: Number(bytes), table, name, trashMs: [] as number[], truncateMs: [] as number[] });
  }
  // The two sizes in turn, so that the machine's drift hits both alike; one round to warm up, then `rounds`.
  for (let round = -1; round < rounds; round++) {
    for (const size of sizes) {
      await timed(round < 0 ? [] : size.trashMs, () => client.trash({ table: `bench.${size.name}`, retentionSeconds: 3600 }));
      await client.undelete({ table: size.table.id });
    }
  }
  return sizes.map(({ label, bytes, trashMs, truncateMs }) => ({ label, bytes, trashMs, truncateMs }));
}
