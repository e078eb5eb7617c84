import type { PoolConnection } from 'mariadb';
import { briefly, NOWAIT, type Drain } from './mariadb-drain';
import { markAt, markMoving, type Destination, type Place, type ShardTableId } from './mariadb-record';
import { qualified } from './mariadb-session';

/**
 * One rename of a shard table, the only atomic step a MariaDB move has: where it goes is written first, then the
 * table is renamed (NOWAIT, within the drain), then the record says it is there. A crash after the rename leaves the
 * record saying where it was going, which `locate` reads. Answers where it is.
 */
export async function renameTo(c: PoolConnection, id: ShardTableId, from: Place, to: Destination, drain: Drain): Promise<Destination> {
  await markMoving(c, id, to);
  await briefly(c, `RENAME TABLE ${qualified(from.database, from.table)} ${NOWAIT} TO ${qualified(to.database, to.table)}`, from, drain);
  await markAt(c, id, to);
  return to;
}
