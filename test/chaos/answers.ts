import type { TableRecord } from '../../domain/table';
import type { Problem } from './problems';
import { requestedId, requestedName, type OpRecord, type OpRequest } from './ops';

/**
 * Every answer a client got must still be true at the end, as far as later operations allow. Later operations
 * are judged leniently, so a check never fires for something a recorded call may explain: a call without an
 * answer (timed out, server down) may have taken effect at any time after it started, even after the run
 * stopped listening, because its workflow goes on.
 */

/**
 * The refusals each operation has a reason to give. Any other domain error is a step that found the world
 * changed under it: a create has no state to find wrong, so its WrongState means a step ran again after the
 * create had let go of its lock.
 */
const EXPECTED_REFUSALS: Readonly<Record<OpRequest['kind'], ReadonlySet<string>>> = {
  create: new Set(['TableExistsError']),
  // TableBusy: a drop whose drain met its deadline with a lease still live (policies.ts checks there was one).
  trash: new Set(['TableNotFoundError', 'TableInTrashError', 'WrongStateError', 'TableBusyError']),
  // As a drop's: not READY (being dropped or truncated already), no table of that id or name, the name's table in the
  // trash (TableInTrash), TableBusy.
  truncate: new Set(['TableNotFoundError', 'TableInTrashError', 'WrongStateError', 'TableBusyError']),
  undelete: new Set(['TableNotFoundError', 'WrongStateError', 'NameTakenError']),
  // OnHold: the table is held (policies.ts checks a hold could have been on it).
  purge: new Set(['TableNotFoundError', 'WrongStateError', 'OnHoldError']),
  // WrongState: held for the other reason, not READY or trashed, or a hold of it running already.
  hold: new Set(['TableNotFoundError', 'WrongStateError']),
  // WrongState: not held, or a release of it running already.
  release: new Set(['TableNotFoundError', 'WrongStateError']),
  // WrongState: no longer in the trash, its trash run busy (a recall or a purge holds the table) or not running.
  retention: new Set(['TableNotFoundError', 'WrongStateError']),
  // WrongState: the table is not READY (DRAINING: a drop waits for its leases, and takes no new one).
  lease: new Set(['TableNotFoundError', 'WrongStateError']),
  // LeaseNotFound: released already, or expired.
  renewLease: new Set(['LeaseNotFoundError']),
  releaseLease: new Set(['LeaseNotFoundError']),
};

/**
 * With the postgres driver, the user's own tables hold some of the names the scenario creates (on one node each): a
 * create whose shard lands on such a node finds the name taken, and must say so.
 */
const USER_TABLE_REFUSALS: Readonly<Partial<Record<OpRequest['kind'], ReadonlySet<string>>>> = {
  create: new Set(['NameTakenError']),
};

/**
 * With the postgres driver the run gives tables views and keys (families.ts): a drop without cascade of one that has
 * some is refused HasDependents (family-checks.ts judges whether it had, and that the drop asked for no cascade).
 */
const FAMILY_REFUSALS: Readonly<Partial<Record<OpRequest['kind'], ReadonlySet<string>>>> = {
  trash: new Set(['HasDependentsError']),
  // What no empty twin can take over from the table: another table's key to it, a materialized view reading it
  // (truncate-families.ts judges).
  truncate: new Set(['HasDependentsError']),
};

const nameOf = (t: { namespace: string; name: string }) => `${t.namespace}.${t.name}`;

function describeRequest(r: OpRequest): string {
  switch (r.kind) {
    case 'create':
      return `create ${r.table} (${r.shards} shards)`;
    case 'trash':
      if (r.namespace !== undefined) {
        return `trash namespace ${r.namespace} (${r.retentionSeconds} s${r.drainTimeoutSeconds === undefined ? '' : `, drain timeout ${r.drainTimeoutSeconds} s`}; first ${r.table})`;
      }
      return (
        `trash ${r.table} (${r.retentionSeconds} s${r.drainTimeoutSeconds === undefined ? '' : `, drain timeout ${r.drainTimeoutSeconds} s`}` +
        `${r.cascade ? ', cascade' : ''})${r.together ? ` together with ${r.together.join(', ')}` : ''}`
      );
    case 'truncate':
      return (
        `truncate ${'tableId' in r ? r.tableId : r.table} (${r.retentionSeconds} s` +
        `${r.drainTimeoutSeconds === undefined ? '' : `, drain timeout ${r.drainTimeoutSeconds} s`})`
      );
    case 'undelete':
      return `undelete ${r.tableId}${r.newName ? ` as ${r.newName}` : ''}${r.newNamespace ? ` into ${r.newNamespace}` : ''}${r.alone ? ' alone' : ''}`;
    case 'purge':
      return `purge ${r.tableId}`;
    case 'hold':
      return `hold ${r.tableId} (${JSON.stringify(r.reason)})`;
    case 'release':
      return `release ${r.tableId}`;
    case 'retention':
      return `retention of ${r.tableId}: ${r.retentionSeconds} s (${r.aim})`;
    case 'lease':
      return `lease ${r.tableId} for ${r.ttlSeconds} s`;
    case 'renewLease':
      return `renew lease ${r.leaseId} (table ${r.tableId})`;
    case 'releaseLease':
      return `release lease ${r.leaseId} (table ${r.tableId})`;
  }
}

export function describeOp(op: OpRecord): string {
  return `op #${op.seq} (client ${op.client}, ${new Date(op.startedAt).toISOString()}) ${describeRequest(op.request)}`;
}

/** Whether `op` may have changed something after time `t`. */
export function couldActAfter(op: OpRecord, t: number): boolean {
  if (op.outcome.kind === 'rejected') return false;
  if (op.outcome.kind === 'unknown' || op.outcome.kind === 'failed') return true;
  return op.endedAt > t;
}

/** The table id an operation aimed at, as far as the run knows it (a name resolves when the call is made). */
function targetOf(op: OpRecord): number | undefined {
  return requestedId(op.request) ?? op.before?.id;
}

/**
 * The tables ever dropped as one with table `id`, as far as the run knows (the answers and the records it read): a
 * recall of any of them (not alone) may have brought `id` back too.
 */
export function unitMates(ops: readonly OpRecord[], id: number): Set<number> {
  const mates = new Set<number>();
  const unit = (tableId: number, droppedWith: readonly number[] | undefined) => {
    const all = [tableId, ...(droppedWith ?? [])];
    if (all.length > 1 && all.includes(id)) for (const m of all) if (m !== id) mates.add(m);
  };
  for (const op of ops) {
    if (op.before) unit(op.before.id, op.before.droppedWith);
    if (op.outcome.kind === 'ok') unit(op.outcome.table.id, op.outcome.table.droppedWith);
  }
  return mates;
}

/**
 * Calls of `kind` that may have acted on table `id` (or, for calls by name, on a name it had) after `t`: a drop that
 * named it among others to go as one, and a recall (not alone) of a table dropped with it, too.
 */
export function explainers(
  ops: readonly OpRecord[],
  kind: OpRequest['kind'],
  id: number,
  names: ReadonlySet<string>,
  t: number,
): OpRecord[] {
  const mates = kind === 'undelete' ? unitMates(ops, id) : new Set<number>();
  return ops.filter((op) => {
    if (op.request.kind !== kind || !couldActAfter(op, t)) return false;
    if (targetOf(op) === id) return true;
    if (op.request.kind === 'trash' && (op.request.together ?? []).some((n) => names.has(n))) return true;
    // A whole namespace: every table of it (by any name it had).
    const ns = op.request.kind === 'trash' ? op.request.namespace : undefined;
    if (ns !== undefined && [...names].some((n) => n.startsWith(`${ns}.`))) return true;
    if (op.request.kind === 'undelete' && !op.request.alone && mates.has(op.request.tableId)) return true;
    const name = requestedName(op.request);
    return name !== undefined && names.has(name);
  });
}

/** Every name table `id` is known to have had. */
export function namesOf(ops: readonly OpRecord[], id: number, now: TableRecord | undefined): Set<string> {
  const names = new Set<string>();
  if (now) names.add(nameOf(now));
  for (const op of ops) {
    if (op.before?.id === id) names.add(nameOf(op.before));
    if (op.outcome.kind === 'ok' && op.outcome.table.id === id) names.add(nameOf(op.outcome.table));
    if (op.request.kind === 'undelete' && op.request.tableId === id && op.request.newName) names.add(op.request.newName);
  }
  // Recalled into another namespace (itself, or with a table of its drop): each under its own name there.
  const mates = unitMates(ops, id);
  for (const op of ops) {
    if (op.request.kind !== 'undelete' || op.request.newNamespace === undefined) continue;
    if (op.request.tableId !== id && (op.request.alone || !mates.has(op.request.tableId))) continue;
    for (const n of [...names]) names.add(`${op.request.newNamespace}.${n.slice(n.indexOf('.') + 1)}`);
  }
  return names;
}

export interface AnswerFindings {
  problems: Problem[];
  notes: string[];
}

export function checkAnswers(
  ops: readonly OpRecord[],
  tables: ReadonlyMap<number, TableRecord>,
  opts: { userTables?: boolean; families?: boolean } = {},
): AnswerFindings {
  const expected = (kind: OpRequest['kind'], type: string) =>
    EXPECTED_REFUSALS[kind].has(type) ||
    (opts.userTables === true && (USER_TABLE_REFUSALS[kind]?.has(type) ?? false)) ||
    (opts.families === true && (FAMILY_REFUSALS[kind]?.has(type) ?? false));
  const problems: Problem[] = [];
  const notes: string[] = [];
  const problem = (op: OpRecord, detail: string) => problems.push({ invariant: 'answers', detail: `${describeOp(op)}: ${detail}` });

  for (const op of ops) {
    const { outcome, request } = op;
    if (outcome.kind === 'failed') {
      problem(op, `failed with ${outcome.type}, which is no domain error: ${outcome.message}`);
      continue;
    }
    if (outcome.kind === 'rejected') {
      // (A truncate's InvalidInput is judged in truncate-answers.ts: a leaf of a partitioned table is refused so.)
      if (outcome.type === 'InvalidInputError') {
        if (request.kind !== 'truncate') problem(op, `the chaos run sent an invalid request: ${outcome.message}`);
      } else if (!expected(request.kind, outcome.type)) {
        problem(op, `answered ${outcome.type}, which a ${request.kind} has no reason to give: ${outcome.message}`);
      }
      // "Not found" for an id that existed before the call and is not purged now: ids are never deleted, and
      // a purged table never comes back, so it was there the whole time.
      const requested = requestedId(request);
      if (
        outcome.type === 'TableNotFoundError' &&
        requested !== undefined &&
        request.kind !== 'renewLease' &&
        request.kind !== 'releaseLease'
      ) {
        const now = tables.get(requested);
        if (op.before && op.before.state !== 'PURGED' && now && now.state !== 'PURGED') {
          problem(
            op,
            `answered TableNotFound (${outcome.message}), but table ${requested} was ${op.before.state} ` +
              `before the call and is ${now.state} now`,
          );
        }
      }
      continue;
    }
    // (A lease's answer is judged with the other leases, in policies.ts.)
    if (outcome.kind !== 'ok') continue;

    const answer = outcome.table;
    const now = tables.get(answer.id);
    const label = `table ${answer.id}`;
    if (!now) {
      problem(op, `answered ${label}, which is not in the catalog`);
      continue;
    }
    if (now.state === 'CREATING' || now.state === 'CREATE_FAILED') {
      problem(op, `answered ${label} ${answer.state}, but it is ${now.state} now`);
      continue;
    }
    const names = namesOf(ops, answer.id, now);

    switch (request.kind) {
      case 'create': {
        if (answer.state !== 'READY' || nameOf(answer) !== request.table || answer.shards !== request.shards) {
          problem(op, `answered ${label} ${nameOf(answer)} ${answer.state} with ${answer.shards} shards`);
        }
        if (now.params.shards !== answer.shards || JSON.stringify(now.placement) !== JSON.stringify(answer.placement)) {
          problem(
            op,
            `${label} has ${now.params.shards} shards at ${JSON.stringify(now.placement)} now, ` +
              `the answer said ${answer.shards} at ${JSON.stringify(answer.placement)}`,
          );
        }
        const mates = unitMates(ops, answer.id);
        const renamed = ops.some(
          (o) =>
            o.request.kind === 'undelete' &&
            ((o.request.tableId === answer.id && o.request.newName) ||
              (o.request.newNamespace !== undefined &&
                (o.request.tableId === answer.id || (!o.request.alone && mates.has(o.request.tableId))))),
        );
        if (!renamed && nameOf(now) !== nameOf(answer)) problem(op, `${label} is named ${nameOf(now)} now, and no undelete renamed it`);
        break;
      }
      case 'trash': {
        const kept = answer.droppedAt && answer.expireAt ? (Date.parse(answer.expireAt) - Date.parse(answer.droppedAt)) / 1000 : null;
        const asked = request.namespace === undefined ? nameOf(answer) === request.table : answer.namespace === request.namespace;
        if (answer.state !== 'TRASHED' || !asked || kept !== request.retentionSeconds) {
          problem(op, `answered ${label} ${nameOf(answer)} ${answer.state}, kept ${String(kept)} s`);
        }
        if (
          ['READY', 'TRASHING', 'RESTORING'].includes(now.state) &&
          explainers(ops, 'undelete', answer.id, names, op.startedAt).length === 0
        ) {
          // Says so when the answer's trash is older than the call: an earlier trash's answer, handed on (see isTrashSince).
          const dropped = answer.droppedAt ? Date.parse(answer.droppedAt) : null;
          const before =
            dropped !== null && dropped < op.startedAt ? ` (the answer's trash is of ${answer.droppedAt}, before the call)` : '';
          problem(op, `${label} was answered TRASHED and is ${now.state} now, but no undelete of it was called after${before}`);
        }
        break;
      }
      case 'undelete': {
        if (
          answer.id !== request.tableId ||
          answer.state !== 'READY' ||
          (request.newName && nameOf(answer) !== request.newName) ||
          (request.newNamespace !== undefined && answer.namespace !== request.newNamespace)
        ) {
          problem(op, `answered ${label} ${nameOf(answer)} ${answer.state}`);
        }
        // (Left TRUNCATING by a truncate called after: that one is the finding, with the transitional states.)
        const truncating = now.state === 'TRUNCATING' && explainers(ops, 'truncate', answer.id, names, op.startedAt).length > 0;
        if (now.state !== 'READY' && !truncating && explainers(ops, 'trash', answer.id, names, op.startedAt).length === 0) {
          problem(op, `${label} was answered READY and is ${now.state} now, but no trash of it was called after`);
        }
        break;
      }
      case 'purge': {
        if (answer.id !== request.tableId || answer.state !== 'PURGED') problem(op, `answered ${label} ${answer.state}`);
        if (now.state !== 'PURGED') problem(op, `answered PURGED, but ${label} is ${now.state} now`);
        break;
      }
      case 'hold': {
        // Held, for the reason asked, and only a READY or trashed table (whether it stays held is judged in policies.ts).
        if (answer.id !== request.tableId || answer.hold?.reason !== request.reason || !['READY', 'TRASHED'].includes(answer.state)) {
          problem(op, `answered ${label} ${answer.state}, hold ${JSON.stringify(answer.hold)}`);
        }
        break;
      }
      case 'release': {
        if (answer.id !== request.tableId || answer.hold !== null) {
          problem(op, `answered ${label} ${answer.state}, hold ${JSON.stringify(answer.hold)}`);
        }
        break;
      }
      case 'retention':
        // Judged in policies.ts, with the other retention changes of the table.
        break;
      case 'truncate':
        // Judged in truncate-answers.ts, with the entry and its table.
        break;
      case 'lease':
      case 'renewLease':
      case 'releaseLease':
        problem(op, `answered a table (${label}), where a lease was expected`);
        break;
    }
  }

  // A purge before the expiry must have been asked for: otherwise data was deleted that should have been kept.
  for (const table of tables.values()) {
    if (table.state !== 'PURGED' || table.purgedAt === null || table.expireAt === null || table.purgedAt >= table.expireAt) continue;
    const asked = ops.some((op) => op.request.kind === 'purge' && op.request.tableId === table.id && op.outcome.kind !== 'rejected');
    if (!asked) {
      problems.push({
        invariant: 'answers',
        detail:
          `table ${table.id} (${nameOf(table)}) was purged at ${new Date(table.purgedAt).toISOString()}, ` +
          `before its expiry ${new Date(table.expireAt).toISOString()}, and no purge of it was called`,
      });
    }
  }
  return { problems, notes };
}
