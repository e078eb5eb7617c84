import type { PoolClient } from 'pg';
import { HasDependentsError } from '../domain/errors';
import type { ShardTableLocation } from './postgres-audit';

/**
 * Refuses while anything outside the table depends on it, its row type (and that type's array) or its owned sequences,
 * as PostgreSQL itself records it (pg_depend): views and materialized views, other tables' foreign keys, defaults,
 * row-level security policies and columns of its row type, functions with SQL-standard bodies or of its row type, tables
 * that inherit from it. They point at it by oid, so they would follow it into the trash (a view would go on reading its
 * rows there, a default on calling its sequence), and its purge could not drop it without them. What belongs to the
 * table itself (its indexes, constraints, defaults, triggers, policies, rules, statistics, publication memberships)
 * moves with it. And a table that inherits from another, or is its partition, would leave its rows in the parent's.
 */
export async function refuseDependents(c: PoolClient, at: ShardTableLocation, what: string): Promise<void> {
  const { rows } = await c.query<{ dependent: string }>(
    `WITH own AS (
       SELECT 'pg_catalog.pg_class'::pg_catalog.regclass::oid AS classid, $1::oid AS objid
       UNION ALL
       SELECT 'pg_catalog.pg_type'::pg_catalog.regclass::oid, t.oid FROM pg_catalog.pg_class c
         JOIN pg_catalog.pg_type t ON t.oid IN (c.reltype, (SELECT typarray FROM pg_catalog.pg_type WHERE oid = c.reltype))
        WHERE c.oid = $1
       UNION ALL
       SELECT 'pg_catalog.pg_class'::pg_catalog.regclass::oid, d.objid FROM pg_catalog.pg_depend d
         JOIN pg_catalog.pg_class s ON s.oid = d.objid AND s.relkind = 'S'
        WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
          AND d.refobjid = $1 AND d.deptype IN ('a', 'i')
     ), parts AS (
       SELECT 'pg_catalog.pg_class'::pg_catalog.regclass::oid AS classid, indexrelid AS objid FROM pg_catalog.pg_index WHERE indrelid = $1
       UNION ALL SELECT 'pg_catalog.pg_attrdef'::pg_catalog.regclass::oid, oid FROM pg_catalog.pg_attrdef WHERE adrelid = $1
       UNION ALL SELECT 'pg_catalog.pg_constraint'::pg_catalog.regclass::oid, oid FROM pg_catalog.pg_constraint WHERE conrelid = $1
       UNION ALL SELECT 'pg_catalog.pg_trigger'::pg_catalog.regclass::oid, oid FROM pg_catalog.pg_trigger WHERE tgrelid = $1
       UNION ALL SELECT 'pg_catalog.pg_policy'::pg_catalog.regclass::oid, oid FROM pg_catalog.pg_policy WHERE polrelid = $1
       UNION ALL SELECT 'pg_catalog.pg_rewrite'::pg_catalog.regclass::oid, oid FROM pg_catalog.pg_rewrite WHERE ev_class = $1
       UNION ALL SELECT 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass::oid, oid FROM pg_catalog.pg_statistic_ext WHERE stxrelid = $1
       UNION ALL SELECT 'pg_catalog.pg_publication_rel'::pg_catalog.regclass::oid, oid FROM pg_catalog.pg_publication_rel WHERE prrelid = $1
       UNION ALL SELECT classid, objid FROM own
     )
     SELECT DISTINCT CASE WHEN r.ev_class IS NOT NULL
                          THEN pg_catalog.pg_describe_object('pg_catalog.pg_class'::pg_catalog.regclass, r.ev_class, 0)
                          ELSE pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid) END AS dependent
       FROM pg_catalog.pg_depend d JOIN own o ON o.classid = d.refclassid AND o.objid = d.refobjid
       -- A view depends through its rewrite rule: named as the view.
       LEFT JOIN pg_catalog.pg_rewrite r ON d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass AND r.oid = d.objid
      WHERE d.deptype IN ('n', 'a')
        AND NOT EXISTS (SELECT 1 FROM parts p WHERE p.classid = d.classid AND p.objid = d.objid)
     UNION
     SELECT pg_catalog.format('%s (%s)', pg_catalog.pg_describe_object('pg_catalog.pg_class'::pg_catalog.regclass, i.inhparent, 0),
                              'it inherits from it or is its partition')
       FROM pg_catalog.pg_inherits i WHERE i.inhrelid = $1
     ORDER BY 1`,
    [at.oid],
  );
  if (rows.length > 0)
    throw hasDependents(
      `${at.schema}.${at.table}`,
      rows.map((r) => r.dependent),
      what,
    );
}

/** A trash (or purge) refused because objects outside the table depend on it: they would follow it into the trash, or strand its purge. */
function hasDependents(table: string, dependents: readonly string[], what: string): HasDependentsError {
  return new HasDependentsError(`${table} cannot be ${what} while others depend on it: ${dependents.join(', ')}; drop them first`);
}
