import { MARIADB_OWN_DATABASES } from '../domain/deployment';
import { ident } from './mariadb-session';

/**
 * The privileges the MariaDB driver's worker needs, and no more (docs/mariadb.md explains each), as the statements a DBA
 * runs for account `user`@`host` and the databases of its namespaces:
 * - PROCESS, globally: a table's identity is read from InnoDB's tables (INNODB_SYS_TABLES), and a drain names the
 *   sessions holding a table (PROCESSLIST);
 * - everything on tablefate's own three databases (its record, the trash, the garbage);
 * - on each namespace's database: the rights a rename and a create take (CREATE, DROP, ALTER, INSERT), reading rows (a
 *   key put back is checked by a read), REFERENCES and TRIGGER (keys and triggers taken off and put back), and the
 *   table privileges users hold there, WITH GRANT OPTION, so that a table back under another name gets its grants;
 * - reading mysql.tables_priv and mysql.columns_priv: the grants on a table as it leaves its name.
 * Not listed: SET USER, needed only to make again a trigger another user defined (without it such a drop is refused).
 */
export function MARIADB_WORKER_GRANTS(opts: { user: string; host: string; namespaces: readonly string[] }): string[] {
  const who = `'${opts.user.replace(/'/g, "''")}'@'${opts.host.replace(/'/g, "''")}'`;
  return [
    `GRANT PROCESS ON *.* TO ${who}`,
    ...Object.values(MARIADB_OWN_DATABASES).map((db) => `GRANT ALL PRIVILEGES ON ${ident(db)}.* TO ${who}`),
    ...opts.namespaces.map(
      (db) =>
        `GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, REFERENCES, TRIGGER, CREATE VIEW, SHOW VIEW ON ${ident(db)}.* TO ${who} WITH GRANT OPTION`,
    ),
    `GRANT SELECT ON mysql.tables_priv TO ${who}`,
    `GRANT SELECT ON mysql.columns_priv TO ${who}`,
  ];
}
