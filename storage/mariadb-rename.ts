import type { PoolConnection } from 'mariadb';
import { briefly, NOWAIT, type Drain } from './mariadb-drain';
import { writeRecord, type Destination, type Place, type RecordChange, type ShardTableId } from './mariadb-record';
import { qualified } from './mariadb-session';

/**
 * One rename of a shard table, the only atomic step a MariaDB move has: where it goes is written first (with
 * `alongside`, what else the record must say before it), then the table is renamed (NOWAIT, within the drain), then the
 * record says it is there. A crash after the rename leaves the record saying where it was going, which `locate` reads.
 * Answers where it is.
 */
export async function renameTo(
  c: PoolConnection,
  id: ShardTableId,
  from: Place,
  to: Destination,
  drain: Drain,
  alongside: Pick<RecordChange, 'kept'> = {},
): Promise<Destination> {
  await writeRecord(c, id, { ...alongside, movingTo: to });
  await briefly(c, `RENAME TABLE ${qualified(from.database, from.table)} ${NOWAIT} TO ${qualified(to.database, to.table)}`, from, drain);
  await writeRecord(c, id, { at: to, movingTo: null });
  return to;
}
