import type { Pool, PoolConnection } from 'mariadb';
import { InvalidInputError, NameTakenError, TableExistsError, TableNotFoundError } from '../domain/errors';
import { checkMariadbColumnDefinitions } from '../domain/mariadb-columns';
import { parseNameParts } from '../domain/names';
import { identityAt } from './mariadb-identity';
import { hiddenName, locate, missing, OWN_DATABASE, record, SHARDS, type Place, type ShardTableId } from './mariadb-record';
import { errnoOf, ident, isPermanentMariadbErrno, PRIVILEGE_ERRNOS, qualified } from './mariadb-session';
import { renameTo } from './mariadb-rename';
import { drainOf, type MoveOptions } from './mariadb-drain';

/**
 * How a MariaDB table comes to be tablefate's: made from a definition (a create), or found at its name and recorded (an
 * adopt); and an adopt taken back. MariaDB commits a CREATE TABLE on its own, so a create makes the table under the
 * shard's hidden name (its own: nobody else makes a table so named), records it there with where it is going, and only
 * then gives it its name: a create cut short anywhere is finished by its next attempt, and never takes for its own a
 * table that a user made at the name meanwhile.
 */

/** The table's columns: definitions as inside `CREATE TABLE (...)` (domain/mariadb-columns.ts), or another table's structure. */
export type TableDefinition = { columns: string } | { like: string };

/** Makes the live shard table `live` with `definition` and records it; made already (a retry), it is left as it is. */
export async function createTable(
  c: PoolConnection,
  pool: Pool,
  id: ShardTableId,
  live: Place,
  definition: TableDefinition,
  node: string,
  options: MoveOptions = {},
): Promise<void> {
  if ('columns' in definition && definition.columns !== '') {
    const check = checkMariadbColumnDefinitions(definition.columns);
    if (!check.ok) throw new InvalidInputError(check.reason);
  }
  const found = await locate(c, pool, id);
  if (found?.drift !== undefined) throw missing(id, found.drift);
  const stage: Place = { database: live.database, table: hiddenName(id) };
  if (!found) {
    await refuseTaken(c, live);
    await ensureDatabase(c, live.database);
    // (A table at the shard's hidden name is this create's, cut short before its record: made again.)
    await c.query(`DROP TABLE IF EXISTS ${qualified(stage.database, stage.table)}`);
    const body = 'columns' in definition ? `(${definition.columns})` : `LIKE ${likeSource(definition.like, live.database)}`;
    try {
      await c.query(`CREATE TABLE ${qualified(stage.database, stage.table)} ${body}`);
    } catch (err) {
      // A definition MariaDB refuses (a type it does not know, a --like table this node lacks) is the request's fault.
      const errno = errnoOf(err);
      if (errno === undefined || errno >= 45000 || !isPermanentMariadbErrno(errno) || PRIVILEGE_ERRNOS.has(errno)) throw err;
      const what = 'like' in definition ? `like ${definition.like}` : 'the column definitions';
      throw new InvalidInputError(`${what}: ${(err as { sqlMessage?: string }).sqlMessage ?? (err as Error).message} (on ${node})`);
    }
    const identity = await identityAt(c, pool, OWN_DATABASE, stage.database, stage.table);
    if (identity === null) {
      await c.query(`DROP TABLE IF EXISTS ${qualified(stage.database, stage.table)}`);
      throw new InvalidInputError(`${live.database}.${live.table}: the definition did not make an InnoDB table; nothing was kept`);
    }
    await record(c, id, { area: 'live', ...stage }, identity, false);
    await renameTo(c, id, stage, { area: 'live', ...live }, drainOf(options));
    return;
  }
  if (found.area === 'live' && found.database === stage.database && found.table === stage.table) {
    await refuseTaken(c, live);
    await renameTo(c, id, stage, { area: 'live', ...live }, drainOf(options));
  }
}

/** Records the table already at `live` as this shard's (an adopt); recorded already (a retry), nothing to do. */
export async function adoptTable(c: PoolConnection, pool: Pool, id: ShardTableId, live: Place): Promise<void> {
  const found = await locate(c, pool, id);
  if (found?.drift !== undefined) throw missing(id, found.drift);
  if (found) return;
  const identity = await identityAt(c, pool, OWN_DATABASE, live.database, live.table);
  if (identity === null) {
    const kind = await c.execute<Array<{ type: string; engine: string | null }>>(
      'SELECT TABLE_TYPE AS type, ENGINE AS engine FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?',
      [live.database, live.table],
    );
    const what = kind[0];
    if (what === undefined) throw new TableNotFoundError(`${live.database}.${live.table} is not there: nothing to adopt`);
    throw new InvalidInputError(
      `${live.database}.${live.table} is a ${what.type === 'VIEW' ? 'view' : `table of engine ${what.engine ?? '?'}`}: tablefate keeps InnoDB tables only`,
    );
  }
  const kept = await c.execute<Array<{ catalog_id: string; table_id: number }>>(
    `SELECT catalog_id, table_id FROM ${SHARDS} WHERE identity = ?`,
    [identity],
  );
  if (kept[0]) {
    throw new TableExistsError(
      `${live.database}.${live.table} is a table tablefate keeps already (table ${kept[0].table_id} of catalog ${kept[0].catalog_id})`,
    );
  }
  await record(c, id, { area: 'live', ...live }, identity, true);
}

/** Refuses a name another table (or a view) bears: a create or recall never takes it. */
export async function refuseTaken(c: PoolConnection, at: Place): Promise<void> {
  const rows = await c.execute<Array<{ type: string }>>(
    'SELECT TABLE_TYPE AS type FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?',
    [at.database, at.table],
  );
  if (rows[0])
    throw new NameTakenError(
      `${at.database}.${at.table} is taken: a ${rows[0].type === 'VIEW' ? 'view' : 'table'} tablefate does not keep is there`,
    );
}

/** Makes the live database of a namespace if it is not there. */
export async function ensureDatabase(c: PoolConnection, database: string): Promise<void> {
  await c.query(`CREATE DATABASE IF NOT EXISTS ${ident(database)}`);
}

/** `--like`'s table, qualified: `db.table`, or a bare name in the new table's database. */
function likeSource(like: string, database: string): string {
  const parsed = parseNameParts(like);
  if ('error' in parsed || parsed.parts.length > 2) throw new InvalidInputError(`like ${like}: not a table name (db.table)`);
  const [first, second] = parsed.parts as [string, string | undefined];
  return second === undefined ? qualified(database, first) : qualified(first, second);
}
