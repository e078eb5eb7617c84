import type { PoolClient } from 'pg';
import { ident } from '../catalog/pg-session';
import { describeDependent, familyNotes, type Dependents, type Detached, type FamilyMember } from './postgres-dependents';
import { eachOnItsOwn } from './postgres-drain';
import { addKeyStatement, type DetachedKey } from './postgres-foreign-keys';
import type { Companion } from './postgres-names';
import type { Step, StepPlan } from './postgres-steps';
import { qualified, SHARDS, type LiveName, type ShardTableId } from './postgres-record';

/**
 * A table's family on its way through the areas (its partitions always; with `cascade`, its views: see
 * postgres-dependents.ts for who is in it). They move into the trash with it in the same transaction, under names
 * derived from the table's parked name and their own oid (`<parked>_m<oid>`, their indexes and owned sequences `_i<k>`,
 * `_q<k>`), so that two trashed families never collide; they follow it to the garbage, and back to their schemas and
 * names on its recall. The live tables' keys,
 * policies and defaults that name it are detached in the same transaction. All of it is recorded in the table's row
 * of `tablefate.shards` (`family`) before any of it changes: a crash rolls the whole move back, and a recall reads what
 * to put back from there.
 */

/** A member as recorded: where it lives while the table is live, its name in tablefate's areas, its companions' names. */
interface RecordedMember extends FamilyMember {
  parked: string;
  /** Each of its indexes and owned sequences: its parked name, to the name it had and what it is. */
  companions: Record<string, { name: string; kind: 'INDEX' | 'SEQUENCE' }>;
}

interface RecordedFamily {
  /** The table's name when its family was taken: what the detached definitions name it by. */
  table: LiveName;
  members: RecordedMember[];
  detached: Detached[];
}

const KIND_SQL = { view: 'VIEW', 'materialized view': 'MATERIALIZED VIEW', partition: 'TABLE' } as const;

/**
 * Takes the family out of the live area with its table (which is at `table`, about to be parked as `parked`): records
 * it and detaches what live tables have on it, now; answers the steps that move its views into `toSchema`, which the
 * move runs with its tables' (postgres-steps.ts). `companions`: each member's indexes and owned sequences.
 */
export async function takeFamily(
  c: PoolClient,
  oid: number,
  table: LiveName,
  parked: string,
  found: Dependents,
  toSchema: string,
  companions: ReadonlyMap<number, readonly Companion[]>,
): Promise<Step[]> {
  if (found.members.length === 0 && found.detached.length === 0) return [];
  const members: RecordedMember[] = found.members.map((member) => {
    const memberParked = `${parked}_m${member.oid}`;
    const own = (companions.get(member.oid) ?? []).map(({ name, kind }, k): [string, Companion] => [
      `${memberParked}_${kind === 'SEQUENCE' ? 'q' : 'i'}${k}`,
      { name, kind },
    ]);
    return { ...member, parked: memberParked, companions: Object.fromEntries(own) };
  });
  const family: RecordedFamily = { table, members, detached: found.detached };
  await c.query(`UPDATE ${SHARDS} SET family = $2 WHERE table_oid = $1`, [oid, JSON.stringify(family)]);
  for (const detached of found.detached) await c.query(detachStatement(detached));
  return members.flatMap((member): Step[] => [
    ...Object.entries(member.companions).map(([derived, { name, kind }]): Step => ({
      alter: kind,
      schema: member.schema,
      name,
      rename: derived,
    })),
    { alter: KIND_SQL[member.kind], schema: member.schema, name: member.name, rename: member.parked },
    { alter: KIND_SQL[member.kind], schema: member.schema, name: member.parked, setSchema: toSchema },
  ]);
}

/** The family's members, recorded with any shard of the table on this node (views may read several of its shards). */
export async function recordedMembers(c: PoolClient, id: Pick<ShardTableId, 'catalogId' | 'tableId'>): Promise<RecordedMember[]> {
  const { rows } = await c.query<{ family: RecordedFamily | null }>(
    `SELECT family FROM ${SHARDS} WHERE catalog_id = $1 AND table_id = $2 AND family IS NOT NULL`,
    [id.catalogId, id.tableId],
  );
  return rows.flatMap((row) => row.family?.members ?? []);
}

/** What the move that took the family out of the live area said of it, said again from its record. */
export async function recordedFamilyNotes(c: PoolClient, oid: number): Promise<string[]> {
  const family = await familyOf(c, oid);
  return family ? familyNotes(family) : [];
}

/** Moves the family's views along with their table between tablefate's areas (trash and garbage). */
export async function relocateMembers(c: PoolClient, oid: number, toSchema: string): Promise<void> {
  const members = (await familyOf(c, oid))?.members ?? [];
  const where = await whereAre(
    c,
    members.map((m) => m.oid),
  );
  for (const member of members) {
    const now = where.get(member.oid);
    if (now && now.schema !== toSchema)
      await c.query(`ALTER ${KIND_SQL[member.kind]} ${qualified(now.schema, now.table)} SET SCHEMA ${ident(toSchema)}`);
  }
}

/**
 * Puts the family back with its table, coming back live at `live`: the steps that move each view into its schema under
 * its name (beside it, with a note, if another relation took the name meanwhile), which the move runs with its tables'
 * (`plan`); then, once they ran (`detachedBack`), what was detached, in savepoints: one that cannot be put back is said,
 * with its definition. Detached definitions name the table as it was, so they are put back only when it comes back
 * under that name; otherwise each is said. Answers the foreign keys to validate once the move commits.
 * (`ensureSchema`: makes sure a schema is there, as the move does for its tables, once a transaction.)
 */
export async function restoreFamily(
  c: PoolClient,
  oid: number,
  live: LiveName,
  ensureSchema: (schema: string) => Promise<void>,
  plan: StepPlan,
): Promise<{ detachedBack: () => Promise<{ notes: string[]; keys: DetachedKey[] }> }> {
  const family = await familyOf(c, oid);
  if (!family) return { detachedBack: () => Promise.resolve({ notes: [], keys: [] }) };
  const members = [...family.members].sort((a, b) => a.depth - b.depth);
  const now = await whereAre(
    c,
    members.map((m) => m.oid),
  );
  const said: Array<() => string | null> = [];
  for (const member of members) {
    const at = now.get(member.oid);
    if (!at) {
      said.push(() => `${describeDependent(member)} was not put back: it was dropped while in the trash`);
      continue;
    }
    // A member of the table's own schema follows the table into another (a namespace recalled under a new name).
    const schema = member.schema === family.table.schema ? live.schema : member.schema;
    await ensureSchema(schema);
    const kind = KIND_SQL[member.kind];
    const took = plan.add([
      ...(at.schema !== schema ? [{ alter: kind, schema: at.schema, name: at.table, setSchema: schema }] : []),
      { alter: kind, schema, name: at.table, renameFree: [member.name] },
      ...Object.entries(member.companions).map(([derived, { name: original, kind: companion }]): Step => ({
        alter: companion,
        schema,
        name: derived,
        renameFree: [original],
        ifExists: true,
      })),
    ]);
    said.push(() => {
      const name = took().find((t) => t !== null)!;
      if (name === member.name && schema === member.schema) return null;
      return `${describeDependent(member)} came back as ${schema}.${name}${name !== member.name ? ': its name was taken meanwhile' : ''}`;
    });
  }
  return {
    detachedBack: async () => {
      const notes = said.flatMap((say) => say() ?? []);
      const keys: DetachedKey[] = [];
      const sameName = live.schema === family.table.schema && live.table === family.table.table;
      const on = await whereAre(
        c,
        family.detached.map((d) => d.tableOid),
      );
      const back: Array<{ detached: Detached; table: LiveName }> = [];
      for (const detached of family.detached) {
        const what = describeDependent(detached);
        const table = on.get(detached.tableOid);
        if (!sameName)
          notes.push(
            `${what} was not put back: it names the table as ${family.table.schema}.${family.table.table}, not ${live.schema}.${live.table} (${detached.definition})`,
          );
        else if (!table) notes.push(`${what} was not put back: its table was dropped meanwhile`);
        else back.push({ detached, table });
      }
      const errors = await eachOnItsOwn(
        c,
        back.map(({ detached, table }) => attachStatement(detached, table)),
      );
      for (const [i, { detached, table }] of back.entries()) {
        if (errors[i] !== null) notes.push(`${describeDependent(detached)} was not put back: ${errors[i]} (${detached.definition})`);
        else if (detached.kind === 'foreign key') keys.push({ name: detached.name, definition: detached.definition, on: table });
      }
      await c.query(`UPDATE ${SHARDS} SET family = NULL WHERE table_oid = $1`, [oid]);
      return { notes, keys };
    },
  };
}

/** Drops the family's views that are in tablefate's areas (a purge's last step), the deepest first. */
export async function dropMembers(c: PoolClient, members: readonly RecordedMember[], areaSchemas: readonly string[]): Promise<void> {
  const where = await whereAre(
    c,
    members.map((m) => m.oid),
  );
  for (const member of [...members].sort((a, b) => b.depth - a.depth)) {
    const now = where.get(member.oid);
    // (IF EXISTS: the purge of another shard of the table on this node may drop the same view at the same time.)
    if (now && areaSchemas.includes(now.schema))
      await c.query(`DROP ${KIND_SQL[member.kind]} IF EXISTS ${qualified(now.schema, now.table)}`);
  }
}

async function familyOf(c: PoolClient, oid: number): Promise<RecordedFamily | null> {
  const { rows } = await c.query<{ family: RecordedFamily | null }>(`SELECT family FROM ${SHARDS} WHERE table_oid = $1`, [oid]);
  return rows[0]?.family ?? null;
}

/** Where each relation of `oids` is now (none for one there is not), in one statement. */
async function whereAre(c: PoolClient, oids: readonly number[]): Promise<Map<number, LiveName>> {
  if (oids.length === 0) return new Map();
  const { rows } = await c.query<LiveName & { oid: string }>(
    `SELECT c.oid::int8 AS oid, n.nspname AS schema, c.relname AS table FROM pg_catalog.pg_class c
       JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ANY ($1::pg_catalog.oid[])`,
    [[...oids]],
  );
  return new Map(rows.map(({ oid, schema, table }) => [Number(oid), { schema, table }]));
}

function detachStatement(detached: Detached): string {
  const on = qualified(detached.table.schema, detached.table.table);
  switch (detached.kind) {
    case 'foreign key':
      return `ALTER TABLE ${on} DROP CONSTRAINT ${ident(detached.name)}`;
    case 'policy':
      return `DROP POLICY ${ident(detached.name)} ON ${on}`;
    case 'default':
      return `ALTER TABLE ${on} ALTER COLUMN ${ident(detached.name)} DROP DEFAULT`;
  }
}

function attachStatement(detached: Detached, at: LiveName): string {
  const on = qualified(at.schema, at.table);
  switch (detached.kind) {
    case 'foreign key':
      // (As the table's own: new rows checked at once, the old ones by the validation after the move.)
      return addKeyStatement(at, detached);
    case 'policy':
      return `CREATE POLICY ${ident(detached.name)} ON ${on} ${detached.definition}`;
    case 'default':
      return `ALTER TABLE ${on} ALTER COLUMN ${ident(detached.name)} SET DEFAULT ${detached.definition}`;
  }
}
