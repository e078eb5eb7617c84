import type { Pool, PoolClient } from 'pg';
import { ident } from '../catalog/pg-session';
import type { ShardTableLocation } from './postgres-audit';
import { DEFAULT_DRAIN_TIMEOUT_MS, eachOnItsOwn, lockNamed, tryLocksBriefly, withBriefLocks } from './postgres-drain';
import { AREA_SCHEMAS, areaOf, qualified, SHARDS, type LiveName, type ShardTableId } from './postgres-record';

/**
 * A table frozen in the trash: its own foreign keys to other tables would let those tables' cascades (and SET NULL)
 * rewrite its rows in the trash, and their RESTRICT refuse deletes naming a trashed table. So they are detached on the
 * way out of the live area (their definitions recorded) and put back on the way in: NOT VALID first, inside the move,
 * then validated after it (see `restoreKeys`).
 */

/** A foreign key of the table's own to another table, as detached on its way into the trash. */
export interface DetachedKey {
  name: string;
  definition: string;
  /** The table the key is on, when it is not the shard's own: a live table's key to it, detached with its family. */
  on?: LiveName;
  /** The table it references, by oid (a table's own key): it decides the order of tables moved together. */
  references?: number;
}

/**
 * Locks the other tables the table's foreign keys reference, as dropping the keys will (their triggers go: ACCESS
 * EXCLUSIVE). Writers take several parents in an order of their own (pgbench: accounts, tellers, branches), and while
 * this holds one and waits for the next, a writer holding that one may queue behind it: the try runs out. Once this
 * holds the table every such writer takes first, none is under way and the rest come free. So each try starts from
 * another parent (`attempt`, in turn), and one in a few finds the writers' first. `others`: more tables the move changes
 * (a family's: live tables whose keys, policies or defaults on it are detached), taken the same way.
 */
export async function lockParents(c: PoolClient, oid: number, attempt: number, others: readonly number[] = []): Promise<void> {
  const { rows } = await c.query<{ name: string }>(
    `SELECT pg_catalog.format('%I.%I', n.nspname, p.relname) AS name
       FROM pg_catalog.pg_class p JOIN pg_catalog.pg_namespace n ON n.oid = p.relnamespace
      WHERE p.oid IN (SELECT confrelid FROM pg_catalog.pg_constraint WHERE conrelid = $1 AND contype = 'f' AND confrelid <> $1)
         OR p.oid = ANY ($2::pg_catalog.oid[])
      ORDER BY p.oid`,
    [oid, others],
  );
  if (rows.length === 0) return;
  const first = attempt % rows.length;
  const inTurn = [...rows.slice(first), ...rows.slice(0, first)].map((r) => r.name);
  await lockNamed(c, inTurn);
}

/**
 * Detaches the table's foreign keys to other tables, recording their definitions beside those recorded already (keys
 * that wait for a table still in the trash: see restoreKeys).
 */
export async function detachKeys(c: PoolClient, at: ShardTableLocation): Promise<void> {
  const { rows } = await c.query<{ name: string; definition: string; references: string }>(
    `SELECT conname AS name, pg_catalog.pg_get_constraintdef(oid) AS definition, confrelid::int8 AS references
       FROM pg_catalog.pg_constraint WHERE conrelid = $1 AND contype = 'f' AND confrelid <> $1 AND conparentid = 0 ORDER BY conname`,
    [at.oid],
  );
  if (rows.length === 0) return;
  const keys: DetachedKey[] = rows.map((r) => ({ name: r.name, definition: r.definition, references: Number(r.references) }));
  const names = new Set(keys.map((key) => key.name));
  const waiting = (await recordedKeys(c, at.oid)).filter((key) => !names.has(key.name));
  await c.query(`UPDATE ${SHARDS} SET foreign_keys = $2 WHERE table_oid = $1`, [at.oid, JSON.stringify([...waiting, ...keys])]);
  for (const key of keys) await c.query(`ALTER TABLE ${qualified(at.schema, at.table)} DROP CONSTRAINT ${ident(key.name)}`);
}

async function recordedKeys(c: PoolClient, oid: number): Promise<DetachedKey[]> {
  const { rows } = await c.query<{ foreign_keys: DetachedKey[] | null }>(`SELECT foreign_keys FROM ${SHARDS} WHERE table_oid = $1`, [oid]);
  return rows[0]?.foreign_keys ?? [];
}

/** Where each relation of `oids` is now, and whether it is a table (one a key can reference), by oid (none for one dropped). */
async function whereNow(c: PoolClient, oids: readonly number[]): Promise<Map<number, LiveName & { isTable: boolean }>> {
  if (oids.length === 0) return new Map();
  const { rows } = await c.query<LiveName & { oid: string; is_table: boolean }>(
    `SELECT c.oid::int8 AS oid, n.nspname AS schema, c.relname AS table, c.relkind IN ('r', 'p') AS is_table
       FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ANY ($1::pg_catalog.oid[])`,
    [[...oids]],
  );
  return new Map(rows.map(({ oid, schema, table, is_table }) => [Number(oid), { schema, table, isTable: is_table }]));
}

const referenced = (keys: readonly DetachedKey[]) => keys.flatMap((key) => (key.references === undefined ? [] : [key.references]));

/** An identifier as PostgreSQL's deparsers write it: double-quoted, its quotes doubled, or plain. */
const QUOTED = String.raw`"(?:[^"]|"")*"(?!")`;
const IDENT = String.raw`(?:${QUOTED}|[A-Za-z_\u0080-\uFFFF][\w$\u0080-\uFFFF]*)`;
/** What pg_get_constraintdef writes before the referenced table's name: `FOREIGN KEY (<columns>) REFERENCES `. */
const KEY_HEAD = new RegExp(String.raw`\s*FOREIGN\s+KEY\s*\((?:[^"()]|${QUOTED})*\)\s+REFERENCES\s+`, 'iy');
/** The referenced table's name, one to three parts; its column list follows. */
const KEY_TARGET = new RegExp(String.raw`${IDENT}(?:\.${IDENT}){0,2}(?=\s*\()`, 'y');

/**
 * The key's definition with the table it references named `to` (qualified, quoted), in place of the name it had when
 * the key was detached; null when the definition does not read as `FOREIGN KEY (<columns>) REFERENCES <name>(...`.
 *
 * A detached key's text names its parent by name, while the record knows the parent by oid (`references`), and the
 * name may have gone to another table by the recall: the parent went through the trash and came back under a new
 * name, or a truncate moved it into the trash and its empty twin took its name. Run as recorded, the key would bind
 * to whatever has the name now (the twin, a table made since), or fail. Only the name after the column list is
 * replaced: a quoted column may hold anything, `REFERENCES x.y(` too.
 */
export function retargeted(definition: string, to: string): string | null {
  KEY_HEAD.lastIndex = 0;
  if (!KEY_HEAD.test(definition)) return null;
  const start = KEY_HEAD.lastIndex;
  KEY_TARGET.lastIndex = start;
  if (!KEY_TARGET.test(definition)) return null;
  return `${definition.slice(0, start)}${to}${definition.slice(KEY_TARGET.lastIndex)}`;
}

/**
 * The key as it is put back: referencing its parent where that is now, when the record knows the parent (by oid) and
 * it is live; as recorded otherwise (older records, without `references`; a parent dropped, its oid gone; a parent
 * in tablefate's areas), which then binds or fails as the recorded name decides, as it always did.
 */
function aimed(key: DetachedKey, now: ReadonlyMap<number, LiveName & { isTable: boolean }>): DetachedKey {
  const parent = key.references === undefined ? undefined : now.get(key.references);
  if (!parent?.isTable || areaOf(parent.schema) !== 'live') return key;
  const definition = retargeted(key.definition, qualified(parent.schema, parent.table));
  return definition === null ? key : { ...key, definition };
}

/** The statement that puts a detached key back on `on`: NOT VALID, its rows validated after the move. */
export function addKeyStatement(on: LiveName, key: Pick<DetachedKey, 'name' | 'definition'>): string {
  const notValid = /\bNOT VALID$/.test(key.definition) ? '' : ' NOT VALID';
  return `ALTER TABLE ${qualified(on.schema, on.table)} ADD CONSTRAINT ${ident(key.name)} ${key.definition}${notValid}`;
}

/**
 * Puts back the foreign keys detached on the way into the trash, NOT VALID (checked for new rows at once, the old ones
 * not read here, so that a recall stays a rename however big the table). One that cannot be put back at all (its
 * parent is gone) is left out and said. Answers those to validate once the move has committed.
 */
export async function restoreKeys(c: PoolClient, oid: number, live: LiveName): Promise<{ keys: DetachedKey[]; notes: string[] }> {
  const keys = await recordedKeys(c, oid);
  const now = await whereNow(c, referenced(keys));
  // A key to a table still in the trash (dropped with this one, which is recalled alone) waits for that table's recall.
  const waiting = keys.filter((key) => key.references !== undefined && now.get(key.references)?.schema === AREA_SCHEMAS.trash);
  const back = keys.filter((key) => !waiting.includes(key)).map((key) => aimed(key, now));
  const errors = await eachOnItsOwn(
    c,
    back.map((key) => addKeyStatement(live, key)),
  );
  const restored = back.map((key, i): DetachedKey => (errors[i] === null ? key : { name: key.name, definition: `!${errors[i]}` }));
  if (keys.length > 0)
    await c.query(`UPDATE ${SHARDS} SET foreign_keys = $2 WHERE table_oid = $1`, [
      oid,
      waiting.length > 0 ? JSON.stringify(waiting) : null,
    ]);
  const notes = waiting.map(
    (key) =>
      `foreign key ${key.name} stays detached while the table it references is in the trash; it comes back with that table (${key.definition})`,
  );
  return { keys: restored, notes };
}

/**
 * The keys of live tables that wait for these tables, just back in the live area (they reference one, and their tables
 * were recalled while it was in the trash): put back NOT VALID on their tables, as the tables' own are, and answered,
 * by the table each references, to validate once the move commits. One that cannot be put back is said, and forgotten.
 */
export async function restoreWaitingKeys(
  c: PoolClient,
  oids: readonly number[],
): Promise<Map<number, { keys: DetachedKey[]; notes: string[] }>> {
  const all = new Map(oids.map((oid): [number, { keys: DetachedKey[]; notes: string[] }] => [oid, { keys: [], notes: [] }]));
  if (oids.length === 0) return all;
  const { rows } = await c.query<{ table_oid: string; schema_name: string; table_name: string; foreign_keys: DetachedKey[] }>(
    `SELECT table_oid::int8, schema_name, table_name, foreign_keys FROM ${SHARDS}
      WHERE foreign_keys IS NOT NULL AND schema_name <> ALL ($2::text[])
        AND EXISTS (SELECT 1 FROM pg_catalog.jsonb_array_elements(foreign_keys) k WHERE (k->>'references')::int8 = ANY ($1::int8[]))`,
    [oids, Object.values(AREA_SCHEMAS)],
  );
  if (rows.length === 0) return all;
  const now = await whereNow(c, [...all.keys()]);
  for (const row of rows) {
    const on: LiveName = { schema: row.schema_name, table: row.table_name };
    const waited = row.foreign_keys.filter((key) => key.references !== undefined && all.has(key.references));
    const put = waited.map((key) => aimed(key, now));
    const errors = await eachOnItsOwn(
      c,
      put.map((key) => addKeyStatement(on, key)),
    );
    for (const [i, key] of put.entries()) {
      const answer = all.get(key.references!)!;
      if (errors[i] === null) answer.keys.push({ name: key.name, definition: key.definition, on });
      else answer.notes.push(`foreign key ${key.name} of ${on.schema}.${on.table} was not put back: ${errors[i]} (${key.definition})`);
    }
    const left = row.foreign_keys.filter((key) => !waited.includes(key));
    await c.query(`UPDATE ${SHARDS} SET foreign_keys = $2 WHERE table_oid = $1`, [
      Number(row.table_oid),
      left.length > 0 ? JSON.stringify(left) : null,
    ]);
  }
  return all;
}

/** A key a recall put back NOT VALID, with the table it is on as the record names it now (its own, or `on`). */
export type KeyToValidate = DetachedKey & { table: LiveName };

/**
 * Validates the foreign keys a recall put back (`keys`, each table's), in one transaction. One whose parent rows are gone
 * (deleted while its table was in the trash) stays NOT VALID: enforced for new rows, the old ones kept as they are, and
 * said; it ends that transaction, and the keys after it are validated in the next. Answers each table's notes.
 */
export async function validateKeys(pool: Pool, id: ShardTableId, keys: ReadonlyArray<readonly KeyToValidate[]>): Promise<string[][]> {
  const notes = keys.map((): string[] => []);
  const left: Array<{ key: KeyToValidate; of: number }> = [];
  for (const [of, own] of keys.entries()) {
    for (const key of own) {
      if (key.definition.startsWith('!')) notes[of]!.push(`foreign key ${key.name} was not put back: ${key.definition.slice(1)}`);
      else if (!/\bNOT VALID$/.test(key.definition)) left.push({ key, of });
    }
  }
  while (left.length > 0) {
    let at = 0;
    try {
      await withBriefLocks(pool, id, { drainTimeoutMs: DEFAULT_DRAIN_TIMEOUT_MS }, async (c) => {
        await tryLocksBriefly(c);
        for (at = 0; at < left.length; at++) {
          const { key } = left[at]!;
          await c.query(`ALTER TABLE ${qualified(key.table.schema, key.table.table)} VALIDATE CONSTRAINT ${ident(key.name)}`);
        }
      });
      break;
    } catch (err) {
      const { key, of } = left[at]!;
      const on = key.on ? ` of ${key.on.schema}.${key.on.table}` : '';
      notes[of]!.push(`foreign key ${key.name}${on} is back NOT VALID, its old rows kept as they were: ${(err as Error).message}`);
      left.splice(0, at + 1);
    }
  }
  return notes;
}
