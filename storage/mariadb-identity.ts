import { randomBytes } from 'node:crypto';
import type { Pool, PoolConnection } from 'mariadb';
import { ident, qualified } from './mariadb-session';

/**
 * What a MariaDB table is, whatever its name: InnoDB's table id (`information_schema.INNODB_SYS_TABLES.TABLE_ID`). A
 * rename keeps it, into another database too, as do instant and in-place changes that do not rebuild (an index added,
 * a foreign key dropped, or added with checks off); anything that makes the table anew changes it: DROP and CREATE,
 * TRUNCATE, and every rebuild (OPTIMIZE, `ALTER ... FORCE`, a copying ALTER). Ids are never reused, restarts included.
 * So an unchanged id proves "the same table, not rebuilt, since tablefate last saw it", which is what a move must know
 * before it renames whatever bears a name; a rebuild by a DBA looks like a replacement, and the doctor says "replaced or
 * rebuilt". A partitioned table has no id of its own, one per partition: its identity is its lowest partition's id,
 * which a rename keeps too. Reading it needs the PROCESS privilege (docs/mariadb.md lists the worker's).
 *
 * InnoDB names a table `<database>/<table>` in the server's file-name encoding: letters, digits and `_` as they are, any
 * other character `@` and four hex digits of its code point, except those of some ranges of letters (accented Latin,
 * Greek, Cyrillic, ...), which take a code of two characters from a table of the server's own. Those are asked of the
 * server once (a table made and dropped in tablefate's database) and remembered.
 */

/** The code points whose file-name codes come from the server's table rather than their hex (see above). */
const TABLED_RANGES: ReadonlyArray<readonly [number, number]> = [
  [0x00c0, 0x05ff],
  [0x1e00, 0x1fff],
  [0x2160, 0x217f],
  [0x24b0, 0x24ef],
  [0xff20, 0xff5f],
];

/** The codes the server gave for tabled characters, by character: the encoding is the server's, fixed for its life. */
const tabledCodes = new Map<string, string>();

/** The name of `database`.`table` as InnoDB keeps it (see above); `ownDatabase` is where a character's code is asked. */
export async function innodbName(pool: Pool | PoolConnection, ownDatabase: string, database: string, table: string): Promise<string> {
  return `${await encoded(pool, ownDatabase, database)}/${await encoded(pool, ownDatabase, table)}`;
}

async function encoded(pool: Pool | PoolConnection, ownDatabase: string, name: string): Promise<string> {
  let out = '';
  for (const ch of name) {
    const code = ch.codePointAt(0)!;
    if (/^[A-Za-z0-9_]$/.test(ch)) out += ch;
    else if (TABLED_RANGES.some(([from, to]) => code >= from && code <= to)) out += await tabledCode(pool, ownDatabase, ch);
    else out += `@${code.toString(16).padStart(4, '0')}`;
  }
  return out;
}

/** The server's code for a tabled character, from a table it names so (made with a name of this process's own, and dropped). */
async function tabledCode(pool: Pool | PoolConnection, ownDatabase: string, ch: string): Promise<string> {
  const known = tabledCodes.get(ch);
  if (known !== undefined) return known;
  const prefix = `probe_${randomBytes(6).toString('hex')}_`;
  const probe = qualified(ownDatabase, `${prefix}${ch}`);
  // (A session of the caller's, or one of the pool's, given back after.)
  const own = 'getConnection' in pool;
  const c = own ? await pool.getConnection() : pool;
  try {
    await c.query(`CREATE TABLE ${probe} (x int) ENGINE=InnoDB`);
    try {
      const rows = await c.execute<Array<{ name: string }>>(
        'SELECT NAME AS name FROM information_schema.INNODB_SYS_TABLES WHERE NAME LIKE ?',
        [`%/${prefix}%`],
      );
      const name = rows[0]?.name;
      if (!name) throw new Error(`MariaDB did not show the table ${probe} it made to learn how it names "${ch}"`);
      const code = name.slice(name.indexOf(prefix) + prefix.length);
      tabledCodes.set(ch, code);
      return code;
    } finally {
      await c.query(`DROP TABLE IF EXISTS ${probe}`);
    }
  } finally {
    if (own) await c.release();
  }
}

/**
 * The identity of the table `database`.`table` (see above): its id, or its lowest partition's; null when no InnoDB
 * table bears the name (none at all, a view, a table of another engine).
 */
export async function identityAt(
  c: PoolConnection | Pool,
  pool: Pool,
  ownDatabase: string,
  database: string,
  table: string,
): Promise<number | null> {
  const name = await innodbName(pool, ownDatabase, database, table);
  const rows = await c.execute<Array<{ id: number | null }>>(
    `SELECT MIN(TABLE_ID) AS id FROM information_schema.INNODB_SYS_TABLES
      WHERE NAME = ? OR LEFT(NAME, CHAR_LENGTH(?) + 3) = CONCAT(?, '#P#')`,
    [name, name, name],
  );
  return rows[0]?.id ?? null;
}

/** Where the table of identity `id` is now, as InnoDB names it (`db/table`, encoded; a partition's suffix cut), or null. */
export async function innodbNameOf(c: PoolConnection | Pool, id: number): Promise<string | null> {
  const rows = await c.execute<Array<{ name: string }>>(
    'SELECT NAME AS name FROM information_schema.INNODB_SYS_TABLES WHERE TABLE_ID = ?',
    [id],
  );
  const name = rows[0]?.name;
  return name === undefined ? null : name.replace(/#P#.*$/, '');
}

export { ident };
