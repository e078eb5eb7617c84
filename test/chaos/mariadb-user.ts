import type { Connection } from 'mariadb';
import type { TableFateClient } from '../../client/client';
import type { Problem } from './problems';
import { ident, qualified as qualifiedName } from '../../storage/mariadb-session';
import { identityOf, type MariadbRowInserter } from './mariadb-rows';
import { WORKER_ACCOUNT, withMariadb, type MariadbNode } from './mariadb-servers';
import type { MadeObject } from './mariadb-objects';
import { CHAOS_COLUMNS } from './rows';
import { USER_TABLE_NAMES } from './tables';

/**
 * What the user of a MariaDB chaos run made by hand before tablefate ran (as root, plain SQL):
 * - tables tablefate does not keep, under names the scenario asks tablefate for (`chaos.legacy` on two nodes,
 *   `chaos.users_1` on one: tables.ts's list): a create placed there is refused NameTaken, and they must end untouched
 *   (the same InnoDB table, the same rows, the same indexes, never recorded in tablefate.shards);
 * - a table tablefate is then asked to adopt, `chaos_legacy.accounts` on node-0, with rows, a trigger and another
 *   table's foreign key to it (`chaos_legacy.logins`, with a row that references it): from then on the scenario drops,
 *   recalls and purges it as any other table, and its rows must be found as the inserter's are.
 */

export const ADOPTED_DATABASE = 'chaos_legacy';
const ADOPTED_TABLE = 'accounts';
const ADOPTED_NODE = 'node-0';
/** The hand-made rows' ids: far above the inserter's. */
const HAND_ROWS_FROM = 1_000_000_001;
const HAND_ROWS = 20;

/** A table of the user's, as it was when the run began: what it must still be at the end. */
export interface MariadbUserTable {
  node: string;
  database: string;
  table: string;
  before: TableLook;
}

interface TableLook {
  identity: number;
  rows: number;
  /** md5 of the rows in id order, and the names of its indexes: any write or rename shows. */
  content: string;
  indexes: string;
}

const urlOf = (nodes: readonly MariadbNode[], node: string) => nodes.find((n) => n.node === node)!.rootUrl;

async function lookAt(c: Connection, database: string, table: string): Promise<TableLook | undefined> {
  const identity = await identityOf(c, database, table);
  if (identity === null) return undefined;
  const [rows] = await c.query<Array<{ n: number; content: string | null }>>(
    `SELECT COUNT(*) AS n, MD5(GROUP_CONCAT(CONCAT_WS(',', id, client, v) ORDER BY id SEPARATOR ';')) AS content
       FROM ${qualifiedName(database, table)}`,
  );
  const [indexes] = await c.query<Array<{ names: string | null }>>(
    `SELECT GROUP_CONCAT(DISTINCT INDEX_NAME ORDER BY INDEX_NAME) AS names FROM information_schema.STATISTICS
      WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
    [database, table],
  );
  return { identity, rows: Number(rows!.n), content: rows!.content ?? '', indexes: indexes!.names ?? '' };
}

/** Makes the user's tables by hand, with an index and a few rows each. */
export async function makeMariadbUserTables(nodes: readonly MariadbNode[]): Promise<MariadbUserTable[]> {
  const made: MariadbUserTable[] = [];
  for (const name of USER_TABLE_NAMES) {
    if (!nodes.some((n) => n.node === name.node)) continue;
    const { schema: database, table } = name;
    made.push(
      await withMariadb(urlOf(nodes, name.node), async (c) => {
        await c.query(`CREATE DATABASE IF NOT EXISTS ${ident(database)}`);
        await c.query(`CREATE TABLE ${qualifiedName(database, table)} (${CHAOS_COLUMNS}, KEY ${table}_by_client (client(20)))`);
        for (let k = 1; k <= 25; k++) {
          await c.query(`INSERT INTO ${qualifiedName(database, table)} VALUES (?, 'the user', ?)`, [k, `kept by hand ${k}`]);
        }
        return { node: name.node, database, table, before: (await lookAt(c, database, table))! };
      }),
    );
  }
  return made;
}

/** The user's tables, untouched: the same InnoDB table under the same name, the same rows and indexes, never recorded. */
export async function checkMariadbUserTables(
  nodes: readonly MariadbNode[],
  userTables: readonly MariadbUserTable[],
  recorded: ReadonlySet<string>,
): Promise<Problem[]> {
  const problems: Problem[] = [];
  const problem = (detail: string) => problems.push({ invariant: 'user-tables', detail });
  for (const u of userTables) {
    const now = await withMariadb(urlOf(nodes, u.node), (c) => lookAt(c, u.database, u.table));
    const name = `${u.node}: the user's table ${u.database}.${u.table}`;
    if (!now) problem(`${name} is gone`);
    else if (now.identity !== u.before.identity)
      problem(`${name} is another table now (InnoDB id ${now.identity}, was ${u.before.identity})`);
    else if (now.rows !== u.before.rows || now.content !== u.before.content)
      problem(`${name} has other rows now: ${now.rows} rows of md5 ${now.content}, it had ${u.before.rows} of ${u.before.content}`);
    else if (now.indexes !== u.before.indexes) problem(`${name} has other indexes now (${now.indexes}, had ${u.before.indexes})`);
    if (recorded.has(`${u.node}/${u.before.identity}`)) problem(`${name} is recorded in tablefate.shards as a table tablefate placed`);
  }
  return problems;
}

/**
 * Makes `chaos_legacy.accounts` by hand on node-0 (rows, a trigger the worker's account defines, a key from
 * `chaos_legacy.logins` with a row), and asks tablefate to adopt it; its rows go into the ledger as the table's, and its
 * trigger and key are the run's objects, judged as those the run makes later (mariadb-objects.ts).
 */
export async function adoptHandMadeTable(o: {
  nodes: readonly MariadbNode[];
  sdk: TableFateClient;
  inserter: MariadbRowInserter;
  nextObject: () => number;
}): Promise<{ tableId: number; name: string; objects: MadeObject[] }> {
  const qualified = qualifiedName(ADOPTED_DATABASE, ADOPTED_TABLE);
  const n = [o.nextObject(), o.nextObject()] as const;
  const trigger = `chaos_trg_${n[0]}`;
  const statement = `SET NEW.v = IFNULL(NEW.v, '${trigger}')`;
  const child = { database: ADOPTED_DATABASE, table: 'logins' };
  const key = `chaos_fk_${n[1]}`;
  const identity = await withMariadb(urlOf(o.nodes, ADOPTED_NODE), async (c) => {
    await c.query(`CREATE DATABASE ${ident(ADOPTED_DATABASE)}`);
    await c.query(`CREATE TABLE ${qualified} (${CHAOS_COLUMNS})`);
    for (let k = 0; k < HAND_ROWS; k++) {
      await c.query(`INSERT INTO ${qualified} VALUES (?, 'by hand', ?)`, [HAND_ROWS_FROM + k, `account ${k}`]);
    }
    await c.query(
      `CREATE DEFINER='${WORKER_ACCOUNT}'@'%' TRIGGER ${qualifiedName(ADOPTED_DATABASE, trigger)} BEFORE INSERT ON ${qualified} FOR EACH ROW ${statement}`,
    );
    await c.query(
      `CREATE TABLE ${qualifiedName(child.database, child.table)} (id BIGINT PRIMARY KEY, account BIGINT,
         CONSTRAINT ${key} FOREIGN KEY (account) REFERENCES ${qualified} (id))`,
    );
    await c.query(`INSERT INTO ${qualifiedName(child.database, child.table)} VALUES (1, ?)`, [HAND_ROWS_FROM]);
    return (await identityOf(c, ADOPTED_DATABASE, ADOPTED_TABLE))!;
  });
  const adopted = await o.sdk.adopt({ table: `${ADOPTED_DATABASE}.${ADOPTED_TABLE}`, node: ADOPTED_NODE }, { timeoutMs: 60_000 });
  const at = Date.now();
  for (let k = 0; k < HAND_ROWS; k++) {
    o.inserter.ledger.add({ id: HAND_ROWS_FROM + k, tableId: adopted.id, shard: 0, node: ADOPTED_NODE, at, oid: identity });
  }
  const on = { node: ADOPTED_NODE, tableId: adopted.id, shard: 0, madeAt: at };
  return {
    tableId: adopted.id,
    name: `${ADOPTED_DATABASE}.${ADOPTED_TABLE}`,
    objects: [
      { ...on, n: n[0], kind: 'trigger', name: trigger, database: ADOPTED_DATABASE, statement },
      { ...on, n: n[1], kind: 'foreign key', name: key, database: ADOPTED_DATABASE, child },
    ],
  };
}
