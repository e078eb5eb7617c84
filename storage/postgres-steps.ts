import type { PoolClient } from 'pg';
import { OWN_SCHEMA } from './postgres-record';

/**
 * How a move's renames run: planned here for every table moved as one, then sent to the node in one call,
 * `tablefate.apply_steps` (record migration 8, postgres-record-schema.ts), which runs them in order in the move's
 * transaction. A table beyond the first then costs the move its share of that call, not a round trip per rename.
 *
 * The plan keeps the guard's rule (postgres-guard.ts): each table's record is written before each ALTER that moves it,
 * so that at the end of every statement the table is where its record says.
 */

/** The relations a step may ALTER, as the statement names them (a partition is a TABLE). */
export type RelationKind = 'TABLE' | 'INDEX' | 'SEQUENCE' | 'VIEW' | 'MATERIALIZED VIEW';

/** Where the record puts a table, written as a step: with, if asked, its companions' names while live, and that it moved. */
export interface RecordStep {
  record: { oid: number; schema: string; table: string; liveNames?: Record<string, string>; moved?: true };
}

/** One ALTER of one relation (`schema.name`, as it is named when its turn comes). */
export type AlterStep = { alter: RelationKind; schema: string; name: string } & (
  | { setSchema: string }
  /** To exactly this name: a relation there already fails the move. */
  | { rename: string }
  /**
   * To the first of these names free in the schema, else the last numbered (`_2`, `_3`...) until one is; `ifExists`: only
   * if the relation is still there (a companion may have been dropped while its table was in the trash).
   */
  | { renameFree: string[]; ifExists?: true }
);

export type Step = RecordStep | AlterStep;

/** Runs the steps in order, on the move's transaction; answers the name each rename gave (null for other steps). */
async function applySteps(c: PoolClient, steps: readonly Step[]): Promise<Array<string | null>> {
  if (steps.length === 0) return [];
  const { rows } = await c.query<{ took: Array<string | null> }>({
    name: 'tablefate.apply-steps',
    text: `SELECT "${OWN_SCHEMA}".apply_steps($1::jsonb) AS took`,
    values: [JSON.stringify(steps)],
  });
  return rows[0]!.took;
}

/** The record write and ALTER that move a table from `from` to `to`: its schema, or its name (one of the two differs). */
export function moveTableSteps(
  oid: number,
  from: { schema: string; table: string },
  to: { schema: string; table: string },
  also: Omit<RecordStep['record'], 'oid' | 'schema' | 'table'> = {},
): Step[] {
  const record: RecordStep = { record: { oid, schema: to.schema, table: to.table, ...also } };
  if (from.schema !== to.schema) return [record, { alter: 'TABLE', schema: from.schema, name: from.table, setSchema: to.schema }];
  if (from.table !== to.table) return [record, { alter: 'TABLE', schema: from.schema, name: from.table, rename: to.table }];
  return [record];
}

/**
 * The steps of the tables moved as one, gathered in their order, then applied in one call. Each part added can read,
 * once applied, the names its own renames took.
 */
export class StepPlan {
  private readonly steps: Step[] = [];
  private took: Array<string | null> | undefined;

  /** Adds `steps` after those already planned; answers how to read their names once the plan is applied. */
  add(steps: readonly Step[]): () => Array<string | null> {
    const from = this.steps.length;
    this.steps.push(...steps);
    return () => {
      if (!this.took) throw new Error('the move read the names its steps took before it applied them');
      return this.took.slice(from, from + steps.length);
    };
  }

  async apply(c: PoolClient): Promise<void> {
    this.took = await applySteps(c, this.steps);
  }
}
