import type { TableRecord } from '../../domain/table';
import { describeOp, explainers, namesOf } from './answers';
import type { FamilyEvidence } from './family-checks';
import type { Problem } from './problems';
import { requestedName } from './ops';

/**
 * Truncates that met a family (postgres driver; issue 43), judged at rest with the families (family-checks.ts). What
 * no empty twin can take over from the table refuses a truncate, nothing changed: another table's key to it (PostgreSQL's
 * own TRUNCATE refuses it too), a materialized view reading it, and whatever else the product names. So a truncate
 * refused HasDependents came after the run made a dependent of the table (a view, a key or a policy of the run's own
 * tables, a key between tablefate's tables, a namespace's view), and was taken back: the table is READY unless a later
 * drop explains it. (Those a truncate may point at the twin instead, the views, are judged where they are at rest: a
 * READY table's views read its live relation, never its entry's in the trash.)
 */
export function judgeTruncatesOfFamilies(evidence: FamilyEvidence, byId: ReadonlyMap<number, TableRecord>): Problem[] {
  const problems: Problem[] = [];
  const { ops, dependents } = evidence;
  for (const op of ops) {
    const { request, outcome } = op;
    if (request.kind !== 'truncate' || outcome.kind !== 'rejected' || outcome.type !== 'HasDependentsError') continue;
    const problem = (detail: string) => problems.push({ invariant: 'families', detail: `${describeOp(op)}: ${detail}` });
    const id = 'tableId' in request ? request.tableId : op.before?.id;
    const name = requestedName(request);
    const on = (tableId: number, tableName: string) => tableId === id || tableName === name;
    const dependent = dependents.some((d) => on(d.tableId, d.tableName) && d.madeAt < op.endedAt);
    const keyed = (evidence.unitKeys ?? []).some((k) => on(k.parentId, k.parentName) && k.madeAt < op.endedAt);
    if (!dependent && !keyed) {
      problem(`answered HasDependents (${outcome.message}), but the run had made no dependent of the table before the answer`);
    }
    const now = id === undefined ? undefined : byId.get(id);
    const names = id === undefined ? new Set<string>() : namesOf(ops, id, now);
    // (TRUNCATING: left so by this truncate's taking back, unless a truncate called after it explains it.)
    const later =
      id !== undefined && now?.state === 'TRUNCATING' && explainers(ops, 'truncate', id, names, op.endedAt).some((o) => o !== op);
    if (id !== undefined && now && now.state !== 'READY' && !later && explainers(ops, 'trash', id, names, op.startedAt).length === 0) {
      problem(`answered HasDependents (the truncate taken back), but table ${id} is ${now.state} now, and no drop of it was called after`);
    }
  }
  return problems;
}
