import type { TableRecord } from '../../domain/table';
import { describeOp, explainers, namesOf } from './answers';
import type { Problem } from './problems';
import { PARTITION_SCHEMA } from './rows';
import { mayTruncate } from './truncate-lineage';
import { requestedId, type OpRecord } from './ops';

/**
 * What a truncate's answers promise (issue 43), judged as answers.ts judges the other calls: against the catalog at rest,
 * a later call that may have acted excusing a change, a refusal never.
 *
 * - A truncate answered `ok` with its rows' trash entry: a new table id (above its table's, and no call before this one
 *   had heard of it), under the table's name, TRASHED (the run never turns the trash off) for the retention asked, with
 *   `truncatedFrom` the table asked for (by id, or the one that held the name). At rest the catalog's entry says the same
 *   (a tombstone keeps it), and is out of the trash only if a recall of it was called; the table itself is READY unless
 *   a later drop explains it: a truncate leaves its table live.
 * - Two calls answered the same entry only if they overlapped: the second joined the first one's run.
 * - A truncate refused InvalidInput aimed at a leaf of the user's partitioned table, which no empty twin can stand in
 *   for (the only such table the run has), and left it as it was.
 * - At rest, every entry's table is in the catalog, below it, placed as the entry is, and some truncate of it was called
 *   and not refused; no table keeps the id of an entry (`truncateInto`) outside TRUNCATING.
 * (TableBusy is judged in policies.ts with the leases, HasDependents in family-checks.ts with the families, the rows and
 * files in truncate-rows.ts, row-homes.ts and truncate-files.ts.)
 */

const nameOf = (t: { namespace: string; name: string }) => `${t.namespace}.${t.name}`;

/** Whether `op` heard of table `id`: aimed at it, or was answered with it. */
function mentions(op: OpRecord, id: number): boolean {
  return (
    op.before?.id === id ||
    requestedId(op.request) === id ||
    (op.outcome.kind === 'ok' && op.outcome.table.id === id) ||
    (op.outcome.kind === 'leased' && op.outcome.lease.tableId === id)
  );
}

export function checkTruncateAnswers(ops: readonly OpRecord[], tables: ReadonlyMap<number, TableRecord>): { problems: Problem[] } {
  const problems: Problem[] = [];
  const problem = (op: OpRecord, detail: string) => problems.push({ invariant: 'truncates', detail: `${describeOp(op)}: ${detail}` });
  const truncates = ops.filter((op) => op.request.kind === 'truncate');
  const byEntry = new Map<number, OpRecord[]>();
  for (const op of truncates) {
    if (op.outcome.kind === 'ok') byEntry.set(op.outcome.table.id, [...(byEntry.get(op.outcome.table.id) ?? []), op]);
  }

  for (const op of truncates) {
    const { request, outcome } = op;
    if (request.kind !== 'truncate') continue;
    if (outcome.kind === 'rejected' && outcome.type === 'InvalidInputError') {
      // A leaf of chaos_p.events (the only partitioned table of the run; a leaf recalled under another name may stay in
      // its place): PostgreSQL would TRUNCATE it, but no empty twin can stand in for a partition.
      const id = 'tableId' in request ? request.tableId : op.before?.id;
      const now = id === undefined ? undefined : tables.get(id);
      const names = id === undefined ? new Set<string>() : namesOf(ops, id, now);
      const wasLeaf = [...names].some((name) => name.startsWith(`${PARTITION_SCHEMA}.`));
      const leaf = wasLeaf && new RegExp(`it is a partition of table ${PARTITION_SCHEMA}\\.`).test(outcome.message);
      if (!leaf) problem(op, `the chaos run sent an invalid request, or one refused as such: ${outcome.message}`);
      const later = now?.state === 'TRUNCATING' && explainers(ops, 'truncate', id!, names, op.endedAt).some((o) => o !== op);
      if (leaf && now && now.state !== 'READY' && !later && explainers(ops, 'trash', id!, names, op.startedAt).length === 0) {
        problem(op, `refused (nothing changed), but table ${id} is ${now.state} now, and no drop of it was called after`);
      }
      continue;
    }
    if (outcome.kind !== 'ok') continue;
    const answer = outcome.table;
    const from = answer.truncatedFrom;
    if (from === undefined) {
      problem(op, `answered table ${answer.id} ${answer.state}, which names no table it was truncated from: not a trash entry`);
      continue;
    }
    const table = tables.get(from);
    const names = namesOf(ops, from, table);
    const asked = 'tableId' in request ? request.tableId === from : names.has(request.table);
    if (!asked) problem(op, `answered entry ${answer.id} truncated from table ${from} (${[...names].join(', ')}), not the table asked for`);
    // A call that read its table READY joins only a run that has not begun: one that has committed already answers an
    // earlier call's truncate, and this call's own is never made (the rows written since stay in the table).
    if (answer.droppedAt !== null && Date.parse(answer.droppedAt) < op.startedAt) {
      problem(
        op,
        `answered entry ${answer.id}, committed at ${answer.droppedAt}, before this call began: an earlier truncate's answer, ` +
          `handed on (it joined that truncate's run as it ended); its own truncate of table ${from} was never made`,
      );
    }
    if (answer.id <= from) problem(op, `answered entry ${answer.id}, whose id is not above its table's (${from}): not a new id`);
    const known = ops.find((other) => other.endedAt < op.startedAt && mentions(other, answer.id));
    if (known) problem(op, `answered entry ${answer.id}, which ${describeOp(known)} had heard of already: not a new id`);
    const kept = answer.droppedAt && answer.expireAt ? (Date.parse(answer.expireAt) - Date.parse(answer.droppedAt)) / 1000 : null;
    // (As a drop's: a call that joins another's run with another retention is refused WrongState, not answered so.)
    if (answer.state !== 'TRASHED' || kept !== request.retentionSeconds || !names.has(nameOf(answer))) {
      problem(
        op,
        `answered entry ${answer.id} ${nameOf(answer)} ${answer.state}, kept ${String(kept)} s where ${request.retentionSeconds} s ` +
          `were asked (table ${from}: ${[...names].join(', ')})`,
      );
    }
    const entry = tables.get(answer.id);
    if (!entry) {
      problem(op, `answered entry ${answer.id}, which is not in the catalog`);
      continue;
    }
    if (entry.truncatedFrom !== from)
      problem(op, `answered entry ${answer.id} of table ${from}; the catalog says of table ${String(entry.truncatedFrom)}`);
    const entryNames = namesOf(ops, answer.id, entry);
    if (
      ['READY', 'TRASHING', 'RESTORING'].includes(entry.state) &&
      explainers(ops, 'undelete', answer.id, entryNames, op.startedAt).length === 0
    ) {
      problem(op, `entry ${answer.id} was answered TRASHED and is ${entry.state} now, but no recall of it was called after`);
    }
    if (!table) {
      problem(op, `its table ${from} is not in the catalog`);
      continue;
    }
    // (A table left TRUNCATING is reported with the transitional states.)
    if (!['READY', 'TRUNCATING'].includes(table.state) && explainers(ops, 'trash', from, names, op.startedAt).length === 0) {
      problem(op, `its table ${from} is ${table.state} now, and no drop of it was called after: a truncate leaves its table live`);
    }
  }

  // Two calls answered one entry: the later one joined the run of the first (USE_EXISTING), so they overlapped.
  for (const [id, answered] of byEntry) {
    for (const a of answered) {
      const apart = answered.find((b) => b.startedAt > a.endedAt);
      if (apart) problem(apart, `answered entry ${id}, which ${describeOp(a)} was answered before this call began: one truncate, twice`);
    }
  }

  for (const t of tables.values()) {
    const label = `table ${t.id} (${nameOf(t)}, ${t.state})`;
    if (t.truncateInto !== undefined && t.state !== 'TRUNCATING') {
      problems.push({
        invariant: 'truncates',
        detail: `${label} still names trash entry ${t.truncateInto} as its truncate's, outside TRUNCATING`,
      });
    }
    if (t.truncatedFrom === undefined) continue;
    const from = tables.get(t.truncatedFrom);
    const entry = `${label}, an entry truncated from table ${t.truncatedFrom}`;
    if (!from) {
      problems.push({ invariant: 'truncates', detail: `${entry}: its table is not in the catalog` });
      continue;
    }
    if (from.id >= t.id) problems.push({ invariant: 'truncates', detail: `${entry}: its id is not above its table's` });
    if (JSON.stringify(from.placement) !== JSON.stringify(t.placement)) {
      problems.push({
        invariant: 'truncates',
        detail: `${entry}: placed at ${JSON.stringify(t.placement)}, its table at ${JSON.stringify(from.placement)}`,
      });
    }
    const names = namesOf(ops, from.id, from);
    if (!ops.some((op) => op.outcome.kind !== 'rejected' && mayTruncate(op, from.id, names))) {
      problems.push({ invariant: 'truncates', detail: `${entry}: no truncate of that table was called, or each was refused` });
    }
  }
  return { problems };
}
