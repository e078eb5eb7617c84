import type { PoolConnection } from 'mariadb';
import { HasDependentsError, NameTakenError } from '../domain/errors';
import { briefly, NOWAIT, type Drain } from './mariadb-drain';
import { ident, MARIADB_SESSION_SQL, qualified } from './mariadb-session';
import { readGrants, type KeptGrant } from './mariadb-grants';
import { innodbName } from './mariadb-identity';
import { MARIADB_OWN_DATABASES } from '../domain/deployment';
import { HIDDEN_PREFIX, type Place } from './mariadb-place';

/**
 * What a MariaDB table cannot take out of its live database, and what must not follow it there (docs/mariadb.md):
 * - its triggers: a table with triggers cannot change database (1435). They are read whole (body, timing, order,
 *   definer, sql_mode), dropped while the table waits under a hidden name in its database (no writer knows that name, so
 *   none writes without them), and made again under that name on the way back, before it takes its name again;
 * - foreign keys, its own and other tables' to it: InnoDB keys follow a renamed table into the trash, so that a delete
 *   in the trash would cascade into a live table and a live table could not drop its parent. They are detached on the
 *   way out (other tables' only with cascade: without, the drop is refused as MariaDB's own DROP TABLE would be), and put
 *   back on the way in with checks off, which changes no row and rebuilds no table; rows that no longer match are
 *   named then, as the keys cannot check them.
 * Each is written down (the record's `kept`) before it is taken off, and each step finds what it did done already.
 */

export interface KeptTrigger {
  name: string;
  timing: string;
  event: string;
  statement: string;
  definer: string;
  sqlMode: string;
}

export interface KeptKey {
  name: string;
  /** The table the key is on (for the table's own keys, the table itself, wherever it is). */
  on: Place;
  columns: string[];
  /** The table it references; none for a key of the table to itself. */
  references: Place | null;
  referencedColumns: string[];
  onDelete: string;
  onUpdate: string;
}

/** What is on a table that cannot leave its database with it, as read where it stands. */
export interface OnTable {
  /** Where the table was when they were read: its triggers' database. */
  from: Place;
  /** Its triggers, in the order they fire. */
  triggers: KeptTrigger[];
  /** Its own foreign keys (a key to itself among them). */
  keys: KeptKey[];
  /** Other tables' foreign keys to it. */
  referencing: KeptKey[];
}

export interface KeptObjects extends OnTable {
  /** The grants on it, given again where it comes back under another name (mariadb-grants.ts). */
  grants: KeptGrant[] | 'unreadable';
}

/** Whether anything must come off the table before it leaves its database (then it waits under its hidden name). */
export const takesAnythingOff = (kept: KeptObjects | null): kept is KeptObjects =>
  kept !== null && kept.triggers.length + kept.keys.length + kept.referencing.length > 0;

/** Whether the record must keep anything of the table while it is away: what comes off, or grants to give elsewhere. */
export const remembersAnything = (kept: KeptObjects): boolean =>
  kept.triggers.length + kept.keys.length + kept.referencing.length > 0 || kept.grants === 'unreadable' || kept.grants.length > 0;

/** What must be taken off the table at `at` before it leaves its database (see above), and the grants on its name. */
export async function readKept(c: PoolConnection, at: Place): Promise<KeptObjects> {
  return { ...(await readOnTable(c, at)), grants: await readGrants(c, at) };
}

/** The triggers and foreign keys, both ways, of the table at `at`. */
export async function readOnTable(c: PoolConnection, at: Place): Promise<OnTable> {
  return { from: { database: at.database, table: at.table }, triggers: await readTriggers(c, at), ...(await readKeys(c, at)) };
}

/** The triggers of the table at `at`, in the order they fire; refused if one cannot be read whole. */
export async function readTriggers(c: PoolConnection, at: Place): Promise<KeptTrigger[]> {
  const triggers = await c.execute<Array<KeptTrigger & { order: number }>>(
    `SELECT TRIGGER_NAME AS name, ACTION_TIMING AS timing, EVENT_MANIPULATION AS event, ACTION_STATEMENT AS statement,
            DEFINER AS definer, SQL_MODE AS sqlMode, ACTION_ORDER AS \`order\`
       FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?
      ORDER BY EVENT_MANIPULATION, ACTION_TIMING, ACTION_ORDER`,
    [at.database, at.table],
  );
  const unreadable = triggers.find((t) => t.statement === null || t.definer === null);
  if (unreadable) {
    throw new HasDependentsError(
      `trigger ${at.database}.${unreadable.name} of ${at.database}.${at.table} cannot be read whole (the worker lacks the TRIGGER privilege on it): it would be lost`,
    );
  }
  return triggers.map(({ order: _order, ...t }) => t);
}

/** The foreign keys of the table at `at`, both ways: its own (a key to itself among them) and other tables' to it. */
export async function readKeys(c: PoolConnection, at: Place): Promise<Pick<OnTable, 'keys' | 'referencing'>> {
  // Whether it has keys, either way, is asked of InnoDB's own list of keys first: information_schema finds them only by
  // opening tables (every table of the server, for the keys that reference it), some 10 ms on a server of a few
  // tables and 100 ms with 2,000, which a table with no key need not pay. (Its names compare without case here: a
  // near miss costs only the full read.)
  const name = await innodbName(c, MARIADB_OWN_DATABASES.own, at.database, at.table);
  const [has] = await c.execute<Array<{ own: number | null; others: number | null }>>(
    `SELECT SUM(FOR_NAME = ?) AS own, SUM(REF_NAME = ? AND FOR_NAME <> REF_NAME) AS others
       FROM information_schema.INNODB_SYS_FOREIGN WHERE FOR_NAME = ? OR REF_NAME = ?`,
    [name, name, name, name],
  );
  const keys = Number(has?.own ?? 0) === 0 ? [] : await keysWhere(c, 'TABLE_SCHEMA = ? AND TABLE_NAME = ?', [at.database, at.table]);
  const referencing =
    Number(has?.others ?? 0) === 0
      ? []
      : await keysWhere(c, 'REFERENCED_TABLE_SCHEMA = ? AND REFERENCED_TABLE_NAME = ? AND NOT (TABLE_SCHEMA = ? AND TABLE_NAME = ?)', [
          at.database,
          at.table,
          at.database,
          at.table,
        ]);
  return { keys: keys.map((k) => (sameTable(k.references, at) ? { ...k, references: null } : k)), referencing };
}

/**
 * The foreign keys `where` selects of KEY_COLUMN_USAGE, with their rules. The rules are asked table by table, by
 * database and name: joined instead, information_schema would open every table of the server to find them.
 */
async function keysWhere(c: PoolConnection, where: string, params: unknown[]): Promise<KeptKey[]> {
  const rows = await c.execute<
    Array<{ name: string; db: string; tbl: string; col: string; ref_db: string; ref_tbl: string; ref_col: string }>
  >(
    `SELECT CONSTRAINT_NAME AS name, TABLE_SCHEMA AS db, TABLE_NAME AS tbl, COLUMN_NAME AS col,
            REFERENCED_TABLE_SCHEMA AS ref_db, REFERENCED_TABLE_NAME AS ref_tbl, REFERENCED_COLUMN_NAME AS ref_col
       FROM information_schema.KEY_COLUMN_USAGE
      WHERE REFERENCED_TABLE_NAME IS NOT NULL AND ${where}
      ORDER BY TABLE_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, ORDINAL_POSITION`,
    params,
  );
  const keys = new Map<string, KeptKey>();
  const idOf = (db: string, tbl: string, name: string) => `${db}\u0000${tbl}\u0000${name}`;
  for (const r of rows) {
    const id = idOf(r.db, r.tbl, r.name);
    let key = keys.get(id);
    if (!key) {
      key = {
        name: r.name,
        on: { database: r.db, table: r.tbl },
        columns: [],
        references: { database: r.ref_db, table: r.ref_tbl },
        referencedColumns: [],
        onDelete: '',
        onUpdate: '',
      };
      keys.set(id, key);
    }
    key.columns.push(r.col);
    key.referencedColumns.push(r.ref_col);
  }
  const tables = new Map([...keys.values()].map((k) => [idOf(k.on.database, k.on.table, ''), k.on]));
  for (const on of tables.values()) {
    const rules = await c.execute<Array<{ name: string; on_delete: string; on_update: string }>>(
      `SELECT CONSTRAINT_NAME AS name, DELETE_RULE AS on_delete, UPDATE_RULE AS on_update
         FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ?`,
      [on.database, on.table],
    );
    for (const rule of rules) {
      const key = keys.get(idOf(on.database, on.table, rule.name));
      if (key) Object.assign(key, { onDelete: rule.on_delete, onUpdate: rule.on_update });
    }
  }
  return [...keys.values()];
}

const sameTable = (a: Place | null, b: Place) => a !== null && a.database === b.database && a.table === b.table;

/** How a person reads a key: `orders_customer_fk of shop.orders (references shop.customers)`. */
export const describeKey = (key: KeptKey, self: Place) => {
  const to = key.references ?? self;
  return `foreign key ${key.name} of ${key.on.database}.${key.on.table} (references ${to.database}.${to.table})`;
};

/**
 * Refuses, before anything moves, a drop that would leave a live table's key pointing into the trash: without cascade,
 * as MariaDB's DROP TABLE refuses (1451), naming each; `moving`: the tables that move with it, whose keys go along.
 */
export function refuseReferences(kept: KeptObjects, at: Place, cascade: boolean, moving: readonly Place[]): void {
  if (cascade) return;
  const live = kept.referencing.filter((k) => !moving.some((m) => sameTable(m, k.on)));
  if (live.length === 0) return;
  throw new HasDependentsError(
    `${at.database}.${at.table} is referenced by ${live.map((k) => describeKey(k, at)).join(', ')}: ` +
      'drop with --cascade to detach them until its recall, or drop those tables with it',
  );
}

/**
 * What `there` (read under the table's hidden name, or in the area it went to straight) holds that `kept` (read at its
 * live name, before the drop moved it) does not: a trigger, a key of its own, or a live table's key to it, that a user
 * added by its name while the drop drained it. Keys of tables on the move (`moving`, those that leave with it; any in
 * tablefate's own databases or under a hidden name) are theirs to carry, not added. The rest of `kept` stays as it is.
 */
export function addedMeanwhile(kept: KeptObjects, there: OnTable, moving: readonly Place[]): KeptObjects {
  const known = (list: readonly { name: string }[], name: string) => list.some((x) => x.name === name);
  const onTheMove = (on: Place) =>
    moving.some((m) => sameTable(m, on)) ||
    (Object.values(MARIADB_OWN_DATABASES) as string[]).includes(on.database) ||
    on.table.startsWith(HIDDEN_PREFIX);
  return {
    ...kept,
    triggers: there.triggers.filter((t) => !known(kept.triggers, t.name)),
    keys: there.keys.filter((k) => !known(kept.keys, k.name)),
    referencing: there.referencing
      .filter((k) => !onTheMove(k.on) && !kept.referencing.some((r) => r.name === k.name && sameTable(r.on, k.on)))
      // (Named as they reference the table by its live name, as those read there are.)
      .map((k) => ({ ...k, references: kept.from })),
  };
}

/** `kept` with `added` (addedMeanwhile's) after it. */
export const withAdded = (kept: KeptObjects, added: KeptObjects): KeptObjects => ({
  ...kept,
  triggers: [...kept.triggers, ...added.triggers],
  keys: [...kept.keys, ...added.keys],
  referencing: [...kept.referencing, ...added.referencing],
});

/**
 * Refuses, before anything moves, a drop whose triggers the worker could not make again: one defined by another user
 * needs SET USER (or SUPER) to be made with that definer, and a trigger made by the worker instead would run with the
 * worker's rights, not its definer's.
 */
export async function refuseTriggersNotRemade(c: PoolConnection, kept: OnTable, at: Place): Promise<void> {
  if (kept.triggers.length === 0) return;
  const [me] = await c.query<Array<{ me: string }>>('SELECT CURRENT_USER() AS me');
  const others = kept.triggers.filter((t) => t.definer !== me!.me);
  if (others.length === 0) return;
  const [may] = await c.query<Array<{ n: number }>>(
    `SELECT COUNT(*) AS n FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE IN ('SET USER', 'SUPER')
        AND GRANTEE = CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')`,
  );
  if (Number(may!.n) > 0) return;
  throw new HasDependentsError(
    `${at.database}.${at.table} has triggers defined by other users (${others.map((t) => `${t.name}, by ${t.definer}`).join('; ')}), ` +
      `which the worker (${me!.me}) could not make again on its recall without the SET USER privilege: grant it, or drop the triggers first`,
  );
}

/** Takes the kept triggers and keys off the table, now at `at` (under its hidden name when it has triggers). */
export async function takeOff(c: PoolConnection, kept: KeptObjects, at: Place, drain: Drain): Promise<string[]> {
  const notes: string[] = [];
  for (const trigger of kept.triggers) {
    await c.query(`DROP TRIGGER IF EXISTS ${qualified(at.database, trigger.name)}`);
  }
  if (kept.triggers.length > 0) notes.push(`triggers kept until its recall: ${kept.triggers.map((t) => t.name).join(', ')}`);
  for (const key of kept.keys) {
    await briefly(c, `ALTER TABLE ${qualified(at.database, at.table)} ${NOWAIT} DROP FOREIGN KEY IF EXISTS ${ident(key.name)}`, at, drain);
  }
  for (const key of kept.referencing) {
    if (!(await tableExists(c, key.on))) continue;
    await briefly(
      c,
      `ALTER TABLE ${qualified(key.on.database, key.on.table)} ${NOWAIT} DROP FOREIGN KEY IF EXISTS ${ident(key.name)}`,
      key.on,
      drain,
    );
  }
  const detached = [...kept.keys, ...kept.referencing];
  if (detached.length > 0) notes.push(`detached until its recall: ${detached.map((k) => describeKey(k, at)).join(', ')}`);
  return notes;
}

/**
 * Refuses, before anything moves, a way back that cannot put everything back (named): triggers into another database
 * (their bodies name tables of their own), or a trigger name taken there meanwhile by another table's.
 */
export async function refuseComingBack(c: PoolConnection, kept: KeptObjects, to: Place, stage: Place): Promise<void> {
  if (kept.triggers.length === 0) return;
  const { from } = kept;
  if (from.database !== to.database) {
    throw new NameTakenError(
      `${to.database}.${to.table}: its triggers (${kept.triggers.map((t) => t.name).join(', ')}) were made in database ${from.database}, ` +
        `and their bodies name its tables: recall it into ${from.database}`,
    );
  }
  const taken = await c.execute<Array<{ name: string; tbl: string }>>(
    `SELECT TRIGGER_NAME AS name, EVENT_OBJECT_TABLE AS tbl FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? AND TRIGGER_NAME IN (${kept.triggers.map(() => '?').join(', ')})`,
    [to.database, ...kept.triggers.map((t) => t.name)],
  );
  const others = taken.filter((t) => t.tbl !== stage.table);
  if (others.length > 0) {
    throw new NameTakenError(
      `trigger ${others.map((t) => `${to.database}.${t.name} (now of table ${t.tbl})`).join(', ')} of ${to.database}.${to.table} is taken meanwhile`,
    );
  }
}

/**
 * Puts the kept triggers and keys back on the table, now at `stage` in its live database (its hidden name), to be `to`:
 * triggers as they were, in their order; keys with checks off, each then checked by a read, and named where rows no
 * longer match. A key whose other table is gone stays off, named. Answers what it said.
 */
export async function putBack(c: PoolConnection, kept: KeptObjects, stage: Place, to: Place, drain: Drain): Promise<string[]> {
  const notes: string[] = [];
  const present = new Set(
    (
      await c.execute<Array<{ name: string }>>(
        'SELECT TRIGGER_NAME AS name FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?',
        [stage.database, stage.table],
      )
    ).map((t) => t.name),
  );
  for (const trigger of kept.triggers) {
    if (present.has(trigger.name)) continue;
    await c.query('SET SESSION sql_mode = ?', [trigger.sqlMode]);
    try {
      await c.query(
        `CREATE DEFINER=${definerOf(trigger.definer)} TRIGGER ${qualified(stage.database, trigger.name)} ${trigger.timing} ${trigger.event} ` +
          `ON ${qualified(stage.database, stage.table)} FOR EACH ROW ${trigger.statement}`,
      );
    } finally {
      await c.query(MARIADB_SESSION_SQL[0]!);
    }
  }
  await c.query('SET SESSION foreign_key_checks = 0');
  try {
    for (const key of kept.keys) {
      const parent = key.references ?? stage;
      if (key.references && !(await tableExists(c, key.references))) {
        notes.push(`${describeKey(key, to)} not put back: ${parent.database}.${parent.table} is not there`);
        continue;
      }
      if (await keyExists(c, stage, key.name)) continue;
      await briefly(c, `ALTER TABLE ${qualified(stage.database, stage.table)} ${NOWAIT} ADD ${keyClause(key, parent)}`, stage, drain);
    }
    for (const key of kept.referencing) {
      if (!(await tableExists(c, key.on))) {
        notes.push(`${describeKey(key, to)} not put back: ${key.on.database}.${key.on.table} is not there`);
        continue;
      }
      if (await keyExists(c, key.on, key.name)) continue;
      await briefly(c, `ALTER TABLE ${qualified(key.on.database, key.on.table)} ${NOWAIT} ADD ${keyClause(key, stage)}`, key.on, drain);
    }
  } finally {
    await c.query('SET SESSION foreign_key_checks = 1');
  }
  const checks = [
    ...kept.keys.map((key) => ({ key, child: stage, parent: key.references ?? stage })),
    ...kept.referencing.map((key) => ({ key, child: key.on, parent: stage })),
  ];
  for (const { key, child, parent } of checks) {
    if (!(await tableExists(c, child)) || !(await tableExists(c, parent)) || !(await keyExists(c, child, key.name))) continue;
    const orphans = await unmatched(c, key, child, parent);
    if (orphans > 0) {
      notes.push(
        `${describeKey(key, to)}: put back, but ${orphans} of its rows reference no row (MariaDB keys do not check rows already there)`,
      );
    }
  }
  return notes;
}

/** `'user'@'host'` from the `user@host` information_schema gives. */
function definerOf(definer: string): string {
  const at = definer.lastIndexOf('@');
  const quote = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
  return at < 0 ? quote(definer) : `${quote(definer.slice(0, at))}@${quote(definer.slice(at + 1))}`;
}

function keyClause(key: KeptKey, parent: Place): string {
  const list = (columns: string[]) => columns.map(ident).join(', ');
  return (
    `CONSTRAINT ${ident(key.name)} FOREIGN KEY (${list(key.columns)}) REFERENCES ${qualified(parent.database, parent.table)} ` +
    `(${list(key.referencedColumns)}) ON DELETE ${rule(key.onDelete)} ON UPDATE ${rule(key.onUpdate)}`
  );
}

/** A referential action as the server said it, checked before it goes into a statement. */
function rule(action: string): string {
  if (!['RESTRICT', 'CASCADE', 'SET NULL', 'NO ACTION', 'SET DEFAULT'].includes(action))
    throw new Error(`unknown foreign key action ${action}`);
  return action;
}

async function unmatched(c: PoolConnection, key: KeptKey, child: Place, parent: Place): Promise<number> {
  const present = key.columns.map((col) => `c.${ident(col)} IS NOT NULL`).join(' AND ');
  const match = key.columns.map((col, i) => `p.${ident(key.referencedColumns[i]!)} = c.${ident(col)}`).join(' AND ');
  const rows = await c.query<Array<{ n: number }>>(
    `SELECT COUNT(*) AS n FROM ${qualified(child.database, child.table)} c
      WHERE ${present} AND NOT EXISTS (SELECT 1 FROM ${qualified(parent.database, parent.table)} p WHERE ${match})`,
  );
  return Number(rows[0]?.n ?? 0);
}

export async function tableExists(c: PoolConnection, at: Place): Promise<boolean> {
  const rows = await c.execute<unknown[]>(
    "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND TABLE_TYPE = 'BASE TABLE'",
    [at.database, at.table],
  );
  return rows.length > 0;
}

async function keyExists(c: PoolConnection, on: Place, name: string): Promise<boolean> {
  const rows = await c.execute<unknown[]>(
    "SELECT 1 FROM information_schema.TABLE_CONSTRAINTS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND CONSTRAINT_NAME = ? AND CONSTRAINT_TYPE = 'FOREIGN KEY'",
    [on.database, on.table, name],
  );
  return rows.length > 0;
}
