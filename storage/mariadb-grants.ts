import type { PoolConnection } from 'mariadb';
import type { Place } from './mariadb-place';
import { errnoOf, ident, isPermanentMariadbErrno, qualified } from './mariadb-session';

/**
 * Grants on a MariaDB table are kept by name, not by table (docs/next/mariadb-facts.md §6): a table renamed leaves them
 * behind under its old name, where they wait (and where a table made at that name would take them, as after MariaDB's
 * own DROP TABLE). So a table that comes back under its own name finds them again by itself, and one that comes back
 * (or is renamed) under another is given them there: read from `mysql.tables_priv` and `mysql.columns_priv` as it
 * leaves its name, granted again at the new one. The old name's stay, as MariaDB leaves them.
 */

export interface KeptGrant {
  user: string;
  /** '' for a role. */
  host: string;
  /** Table privileges, as MariaDB lists them (`Select`, `Insert`, `Grant`, `Show view`, ...). */
  table: string[];
  /** Column privileges, by column. */
  columns: Array<{ column: string; privileges: string[] }>;
}

/** The grants on the table at `at`, by grantee; none when the worker may not read them (said by `putGrants`). */
export async function readGrants(c: PoolConnection, at: Place): Promise<KeptGrant[] | 'unreadable'> {
  let rows: Array<{ user: string; host: string; col: string | null; privs: string }>;
  try {
    rows = await c.execute(
      `SELECT User AS user, Host AS host, NULL AS col, CAST(Table_priv AS CHAR) AS privs FROM mysql.tables_priv
        WHERE Db = ? AND Table_name = ?
       UNION ALL
       SELECT User, Host, Column_name, CAST(Column_priv AS CHAR) FROM mysql.columns_priv WHERE Db = ? AND Table_name = ?`,
      [at.database, at.table, at.database, at.table],
    );
  } catch (err) {
    if (errnoOf(err) === 1142) return 'unreadable';
    throw err;
  }
  const grants = new Map<string, KeptGrant>();
  const grantee = (user: string, host: string) => {
    const key = `${user}\u0000${host}`;
    let grant = grants.get(key);
    if (!grant) grants.set(key, (grant = { user, host, table: [], columns: [] }));
    return grant;
  };
  // (In order: by grantee, its table privileges, then its columns'. Sorted here: sorting a union, the server makes a table.)
  rows.sort((a, b) => compare(a.user, b.user) || compare(a.host, b.host) || compare(a.col ?? '', b.col ?? ''));
  for (const row of rows) {
    if (row.col === null) grantee(row.user, row.host).table.push(...split(row.privs));
    else grantee(row.user, row.host).columns.push({ column: row.col, privileges: split(row.privs) });
  }
  return [...grants.values()];
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const split = (privs: string) => (privs === '' ? [] : privs.split(','));

/**
 * Grants `grants` on the table at `to` (GRANT is idempotent: a step run again grants nothing new). Answers what it
 * could not grant, in words: the worker needs each privilege it grants, WITH GRANT OPTION (docs/mariadb.md).
 */
export async function putGrants(c: PoolConnection, grants: KeptGrant[] | 'unreadable', to: Place, from: Place): Promise<string[]> {
  if (grants === 'unreadable') {
    return [
      `grants on ${from.database}.${from.table} were not read (the worker may not read mysql.tables_priv): grant them on ${to.database}.${to.table} by hand`,
    ];
  }
  const notes: string[] = [];
  for (const grant of grants) {
    const withGrant = grant.table.includes('Grant');
    const privileges = [
      ...grant.table.filter((p) => p !== 'Grant').map(privilegeWord),
      ...grant.columns.flatMap(({ column, privileges }) => privileges.map((p) => `${privilegeWord(p)} (${ident(column)})`)),
    ];
    if (privileges.length === 0 && !withGrant) continue;
    const who = grant.host === '' ? quoted(grant.user) : `${quoted(grant.user)}@${quoted(grant.host)}`;
    try {
      await c.query(
        `GRANT ${privileges.length > 0 ? privileges.join(', ') : 'USAGE'} ON ${qualified(to.database, to.table)} TO ${who}${withGrant ? ' WITH GRANT OPTION' : ''}`,
      );
    } catch (err) {
      // (A lost connection or a lock not had is tried again, as any step's; only the server's refusal is a note.)
      const errno = errnoOf(err);
      if (errno === undefined || errno >= 45000 || !isPermanentMariadbErrno(errno)) throw err;
      notes.push(
        `grants of ${who} not given on ${to.database}.${to.table}: ${(err as { sqlMessage?: string }).sqlMessage ?? (err as Error).message}`,
      );
    }
  }
  return notes;
}

/** A privilege of tables_priv's list as GRANT spells it: `Show view` is SHOW VIEW. Only letters and spaces pass. */
function privilegeWord(privilege: string): string {
  if (!/^[A-Za-z ]+$/.test(privilege)) throw new Error(`unknown privilege ${JSON.stringify(privilege)} in mysql.tables_priv`);
  return privilege.toUpperCase();
}

const quoted = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
