import type { LeaseInfo } from '../../domain/leases';
import type { Catalog } from '../../catalog/catalog';
import type { TableFateClient } from '../../client/client';
import type { TableInfo, TableRecord } from '../../domain/table';
import { couldActAfter, describeOp, explainers, namesOf } from './answers';
import { classify } from './callers';
import { allTables } from './observe';
import type { Problem } from './problems';
import type { OpRecord, Outcome } from './ops';
import { entriesOf, lineageOf } from './truncate-lineage';

/**
 * The trash's policies under chaos (issue 17): legal holds, retention changes of trashed tables, and leases with the
 * drops and truncates (issue 43) that drain them. What each answer promised must still be true, judged as answers.ts
 * does: a later call that may have acted (answered, or without an answer) excuses a change, a refusal never does.
 *
 * The rule for holds at the end of a run: once the operations are over and the product is at rest (a held table past
 * its expiry counts as at rest: it must stay in the trash), `checkHolds` looks at the catalog while every hold the run
 * placed is still on, and a table held with no release since is never PURGED then. The run then releases every hold
 * (`releaseEveryHold` below) and waits for rest again: from there on no table is held, so every trash whose
 * expiry passed must be PURGED at the end, the released ones included (invariants.ts, `expiry` and `holds`).
 */

const iso = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString());
const ms = (time: string | null) => (time === null ? null : Date.parse(time));

/** A release of every hold, made by the run after the operations (not one of the clients' calls). */
export interface FinalRelease {
  tableId: number;
  /** Released while TRASHED and already past its expiry: the table must be PURGED at rest. */
  state: TableRecord['state'];
  expireAt: number | null;
  at: number;
  outcome: Outcome;
}

/** What the look at the holds found, with the counts the report shows. */
export interface HoldFindings {
  problems: Problem[];
  /** Tables held by a hold that answered, with no release since. */
  held: number;
  /** Of those, tables in the trash past their expiry: kept there by their hold alone. */
  heldPastExpiry: number;
}

const holdsOf = (ops: readonly OpRecord[], tableId: number) =>
  ops.filter((op) => op.request.kind === 'hold' && op.request.tableId === tableId);
const releasesOf = (ops: readonly OpRecord[], tableId: number) =>
  ops.filter((op) => op.request.kind === 'release' && op.request.tableId === tableId);

/**
 * Before the run releases the holds: a table a hold answered for, with no release that may have acted since that hold
 * began, is still held (for that hold's reason) and not purged, nor being purged: not by its expiry, not by a purge. Nor
 * are its rows, when a truncate moved them into the trash meanwhile: an entry truncated from it after the hold answered
 * (and not recalled since: then it is a table of its own) is not purged either, whatever its expiry.
 */
export function checkHolds(ops: readonly OpRecord[], tables: ReadonlyMap<number, TableRecord>, at: number): HoldFindings {
  const findings: HoldFindings = { problems: [], held: 0, heldPastExpiry: 0 };
  const heldIds = new Set(ops.flatMap((op) => (op.request.kind === 'hold' && op.outcome.kind === 'ok' ? [op.request.tableId] : [])));
  for (const id of heldIds) {
    const releases = releasesOf(ops, id);
    const standing = holdsOf(ops, id).filter(
      (hold) => hold.outcome.kind === 'ok' && !releases.some((release) => couldActAfter(release, hold.startedAt)),
    );
    if (standing.length === 0) continue;
    findings.held++;
    const now = tables.get(id);
    const last = standing[standing.length - 1]!;
    const label = `table ${id}${now ? ` (${now.namespace}.${now.name})` : ''}`;
    const problem = (detail: string) =>
      findings.problems.push({
        invariant: 'holds',
        detail: `${describeOp(last)} answered it held, and no release was called since: ${detail}`,
      });
    if (!now) {
      problem(`${label} is not in the catalog`);
      continue;
    }
    if (now.state === 'PURGED' || now.state === 'PURGING') {
      problem(
        `${label} is ${now.state} (dropped ${iso(now.droppedAt)}, expiry ${iso(now.expireAt)}, purged ${iso(now.purgedAt)}): ` +
          `a held table was purged`,
      );
      continue;
    }
    for (const hold of standing) {
      const reason = hold.request.kind === 'hold' ? hold.request.reason : '';
      if (now.hold?.reason !== reason) {
        problem(`${label} is ${now.state} with hold ${JSON.stringify(now.hold)} in the catalog, not held for ${JSON.stringify(reason)}`);
        break;
      }
    }
    if (now.state === 'TRASHED' && now.expireAt !== null && now.expireAt < at) findings.heldPastExpiry++;
    const heldSince = Math.min(...standing.map((hold) => hold.endedAt));
    for (const entry of entriesOf(tables.values(), id)) {
      // (Recalled since, it is a table of its own; released since, a call lifted its hold.)
      const recalled = ops.some(
        (op) =>
          (op.request.kind === 'undelete' || op.request.kind === 'release') &&
          op.request.tableId === entry.id &&
          op.outcome.kind !== 'rejected',
      );
      // (Its drop time is its truncate's commit, kept on the tombstone: after the hold answered, the table was held then.)
      if (recalled || entry.droppedAt === null || entry.droppedAt <= heldSince) continue;
      if (entry.state === 'PURGED' || entry.state === 'PURGING') {
        problem(
          `the rows truncated from ${label} at ${iso(entry.droppedAt)}, while it was held, are entry ${entry.id}, ${entry.state} ` +
            `(expiry ${iso(entry.expireAt)}, purged ${iso(entry.purgedAt)}): a held table's rows were purged`,
        );
      }
    }
  }
  return findings;
}

/**
 * Whether a hold may have been on table `id` at some time between `from` and `to`: a hold that did not fail to place
 * it began before `to`, and no release that answered began after that hold had answered and ended before `from`. A
 * truncate's entry is held as its table was (issue 43): a hold of that table (or of the one it came from) that began
 * before `to` may be on it too, whatever the table's releases since.
 */
function mayBeHeldDuring(
  ops: readonly OpRecord[],
  id: number,
  from: number,
  to: number,
  tables: ReadonlyMap<number, TableRecord>,
): boolean {
  const releases = releasesOf(ops, id).filter((op) => op.outcome.kind === 'ok');
  const inherited = lineageOf(tables, id)
    .slice(1)
    .some((ancestor) => holdsOf(ops, ancestor).some((hold) => hold.outcome.kind !== 'rejected' && hold.startedAt < to));
  return (
    inherited ||
    holdsOf(ops, id).some(
      (hold) =>
        hold.outcome.kind !== 'rejected' &&
        hold.startedAt < to &&
        !releases.some((release) => release.startedAt > hold.endedAt && release.endedAt < from),
    )
  );
}

/** A lease as the run knows it: taken (answered), renewed, released. */
interface KnownLease {
  acquire: OpRecord & { outcome: { kind: 'leased'; lease: LeaseInfo } };
  renewals: OpRecord[];
  releases: OpRecord[];
}

/**
 * How long the lease lasted at least: its expiry, moved by each renewal that answered before the lease could have
 * expired (a renewal answered later may have been ordered after a drop that saw the lease expired; it proves nothing).
 */
function liveAtLeastUntil(lease: KnownLease): number {
  let until = Date.parse(lease.acquire.outcome.lease.expiresAt);
  for (const renewal of [...lease.renewals].sort((a, b) => a.endedAt - b.endedAt)) {
    if (renewal.outcome.kind !== 'leased' || renewal.endedAt >= until) continue;
    until = Math.max(until, Date.parse(renewal.outcome.lease.expiresAt));
  }
  return until;
}

function knownLeases(ops: readonly OpRecord[]): KnownLease[] {
  const leases = new Map<string, KnownLease>();
  for (const op of ops) {
    if (op.request.kind === 'lease' && op.outcome.kind === 'leased') {
      leases.set(op.outcome.lease.id, { acquire: op as KnownLease['acquire'], renewals: [], releases: [] });
    }
  }
  for (const op of ops) {
    if (op.request.kind !== 'renewLease' && op.request.kind !== 'releaseLease') continue;
    const lease = leases.get(op.request.leaseId);
    if (!lease) continue;
    if (op.request.kind === 'renewLease') lease.renewals.push(op);
    else lease.releases.push(op);
  }
  return [...leases.values()];
}

/**
 * Every drop the run knows of, as (table, drop time): those answered, and those the catalog holds at the end; and every
 * truncate, which drains its table as a drop does, as (its table, its entry's commit): those answered, and the entries
 * the catalog holds (whose drop time is their truncate's, unless a recall of the entry was called since).
 */
function knownDrops(ops: readonly OpRecord[], tables: ReadonlyMap<number, TableRecord>): Array<{ tableId: number; droppedAt: number }> {
  const drops = new Map<string, { tableId: number; droppedAt: number }>();
  const add = (tableId: number, droppedAt: number | null) => {
    if (droppedAt !== null) drops.set(`${tableId}@${droppedAt}`, { tableId, droppedAt });
  };
  for (const op of ops) {
    if (op.outcome.kind !== 'ok') continue;
    if (op.request.kind === 'trash') add(op.outcome.table.id, ms(op.outcome.table.droppedAt));
    const from = op.request.kind === 'truncate' ? op.outcome.table.truncatedFrom : undefined;
    if (from !== undefined) add(from, ms(op.outcome.table.droppedAt));
  }
  for (const t of tables.values()) {
    add(t.id, t.droppedAt);
    const recalled = ops.some((op) => op.request.kind === 'undelete' && op.request.tableId === t.id && op.outcome.kind !== 'rejected');
    if (t.truncatedFrom !== undefined && !recalled) add(t.truncatedFrom, t.droppedAt);
  }
  return [...drops.values()];
}

/** The table a TableBusy names ("table 7 is still leased at the drop's drain deadline ..."), or the one the call resolved. */
function busyTableOf(op: OpRecord & { outcome: { kind: 'rejected' } }): number | undefined {
  const named = /table (\d+) is still leased/.exec(op.outcome.message);
  return named ? Number(named[1]) : op.before?.id;
}

export interface PolicyOptions {
  /** With the postgres or mariadb driver a drop also waits for the sessions using the table: TableBusy needs no lease then. */
  driver: 'files' | 'postgres' | 'mariadb';
}

/** The answers of the policies' calls, and what they promised, against the catalog at rest at the end. */
export function checkPolicyAnswers(
  ops: readonly OpRecord[],
  tables: ReadonlyMap<number, TableRecord>,
  options: PolicyOptions,
): { problems: Problem[]; notes: string[] } {
  const problems: Problem[] = [];
  const notes: string[] = [];
  const problem = (invariant: string, op: OpRecord, detail: string) => problems.push({ invariant, detail: `${describeOp(op)}: ${detail}` });
  const leases = knownLeases(ops);

  for (const op of ops) {
    const { request, outcome } = op;

    // A retention change answered: the new expiry, counted from the drop, is the catalog's for that trash from then on
    // (unless another change may have come after), and the table is not purged before it unless a purge was asked.
    if (request.kind === 'retention' && outcome.kind === 'ok') {
      const answer = outcome.table;
      const droppedAt = ms(answer.droppedAt);
      const expireAt = ms(answer.expireAt);
      if (
        answer.id !== request.tableId ||
        answer.state !== 'TRASHED' ||
        droppedAt === null ||
        expireAt !== droppedAt + request.retentionSeconds * 1000
      ) {
        problem(
          'retention',
          op,
          `answered table ${answer.id} ${answer.state}, dropped ${answer.droppedAt ?? '-'}, expiring ${answer.expireAt ?? '-'}: ` +
            `not its drop time + ${request.retentionSeconds} s`,
        );
        continue;
      }
      const now = tables.get(answer.id);
      if (!now || now.droppedAt !== droppedAt) continue; // recalled since (or trashed again): another trash
      const later = ops.filter(
        (other) =>
          other !== op && other.request.kind === 'retention' && other.request.tableId === answer.id && couldActAfter(other, op.startedAt),
      );
      if (now.expireAt !== expireAt && later.length === 0) {
        problem(
          'retention',
          op,
          `answered expiry ${answer.expireAt} for the trash of ${answer.droppedAt}; table ${answer.id} is ${now.state} in that ` +
            `trash with expiry ${iso(now.expireAt)}, and no other retention change of it was called after`,
        );
      }
      if (now.state === 'PURGED' && now.purgedAt !== null && now.purgedAt < expireAt) {
        const purges = explainers(ops, 'purge', answer.id, new Set(), op.startedAt);
        if (purges.length === 0 && later.length === 0) {
          problem(
            'retention',
            op,
            `answered expiry ${answer.expireAt}, but table ${answer.id} was purged at ${iso(now.purgedAt)}, before it, ` +
              `and neither a purge nor another retention change of it was called after`,
          );
        }
      }
    }

    // A purge refused OnHold: some hold may have been on the table then.
    if (request.kind === 'purge' && outcome.kind === 'rejected' && outcome.type === 'OnHoldError') {
      if (!mayBeHeldDuring(ops, request.tableId, op.startedAt, op.endedAt, tables)) {
        problem('holds', op, `answered OnHold (${outcome.message}), but no hold of table ${request.tableId} may have been on then`);
      }
    }

    // A drop or a truncate refused TableBusy: taken back, so the table is READY unless a later drop explains it; and
    // (files) some lease of it may have been live during the drain.
    if ((request.kind === 'trash' || request.kind === 'truncate') && outcome.kind === 'rejected' && outcome.type === 'TableBusyError') {
      const id = busyTableOf(op as OpRecord & { outcome: { kind: 'rejected' } });
      if (id === undefined) {
        problem('leases', op, `answered TableBusy (${outcome.message}) for a table the run cannot name`);
        continue;
      }
      const now = tables.get(id);
      const names = namesOf(ops, id, now);
      // (TRUNCATING: left so by a truncate called after this one, if any: the finding is that one's.)
      const later = now?.state === 'TRUNCATING' && explainers(ops, 'truncate', id, names, op.endedAt).some((o) => o !== op);
      if (now?.state !== 'READY' && !later && explainers(ops, 'trash', id, names, op.startedAt).length === 0) {
        problem(
          'leases',
          op,
          `answered TableBusy (the ${request.kind === 'trash' ? 'drop' : 'truncate'} taken back), but table ${id} is ` +
            `${now?.state ?? 'not in the catalog'} now, and no drop of it was called after`,
        );
      }
      if (options.driver === 'files') {
        const leased = ops.some((lease) => {
          if (lease.request.kind !== 'lease' || lease.request.tableId !== id || lease.outcome.kind === 'rejected') return false;
          if (lease.startedAt >= op.endedAt) return false;
          if (lease.outcome.kind !== 'leased') return true; // no answer: it may live still
          const leaseId = lease.outcome.lease.id;
          const renewedUnknown = ops.some(
            (r) =>
              r.request.kind === 'renewLease' &&
              r.request.leaseId === leaseId &&
              r.outcome.kind !== 'rejected' &&
              r.outcome.kind !== 'leased',
          );
          const until = Math.max(
            Date.parse(lease.outcome.lease.expiresAt),
            ...ops.flatMap((r) =>
              r.request.kind === 'renewLease' && r.request.leaseId === leaseId && r.outcome.kind === 'leased'
                ? [Date.parse(r.outcome.lease.expiresAt)]
                : [],
            ),
          );
          return renewedUnknown || until > op.startedAt;
        });
        if (!leased) {
          problem(
            'leases',
            op,
            `answered TableBusy (${outcome.message}), but no lease the run took on table ${id} may have been live during the drain`,
          );
        }
      }
    }

    // A lease's answer says what was asked.
    if (outcome.kind === 'leased') {
      const lease = outcome.lease;
      const bad = (what: string) => problem('leases', op, `answered lease ${JSON.stringify(lease)}: ${what}`);
      const lasts = Date.parse(lease.expiresAt) - Date.parse(lease.acquiredAt);
      if (request.kind === 'lease') {
        if (lease.tableId !== request.tableId || lease.holder !== request.holder || lease.ttlSeconds !== request.ttlSeconds) {
          bad(`not the lease asked for (table ${request.tableId}, holder ${request.holder}, ${request.ttlSeconds} s)`);
        } else if (lasts !== request.ttlSeconds * 1000) bad(`it lasts ${lasts} ms, not ${request.ttlSeconds} s`);
      } else if ((request.kind === 'renewLease' || request.kind === 'releaseLease') && lease.id !== request.leaseId) {
        bad(`not lease ${request.leaseId}`);
      }
    }
  }

  // No drop (nor truncate) went past a lease: a lease answered before the table was dropped (or truncated) was released,
  // or had expired, by then.
  const drops = knownDrops(ops, tables);
  for (const lease of leases) {
    const info = lease.acquire.outcome.lease;
    const until = liveAtLeastUntil(lease);
    for (const drop of drops) {
      if (drop.tableId !== info.tableId || lease.acquire.endedAt >= drop.droppedAt || drop.droppedAt >= until) continue;
      const released = lease.releases.find((r) => r.outcome.kind !== 'rejected' && r.startedAt < drop.droppedAt);
      if (released) continue;
      problems.push({
        invariant: 'leases',
        detail:
          `table ${info.tableId} was dropped (or truncated) at ${iso(drop.droppedAt)} while ${describeOp(lease.acquire)}'s lease ` +
          `${info.id} (${info.holder}, taken ${info.acquiredAt}) was live until at least ${iso(until)} and not released: ` +
          'the drain did not wait for it',
      });
    }
  }

  const busy = ops.filter(
    (op) =>
      (op.request.kind === 'trash' || op.request.kind === 'truncate') &&
      op.outcome.kind === 'rejected' &&
      op.outcome.type === 'TableBusyError',
  );
  if (busy.length > 0) {
    notes.push(`${busy.length} drop(s) or truncate(s) answered TableBusy (a lease outlived the drain timeout), each found taken back`);
  }
  return { problems, notes };
}

/** The table as a final release answered it, or undefined. */
export const releasedTable = (release: FinalRelease): TableInfo | undefined =>
  release.outcome.kind === 'ok' ? release.outcome.table : undefined;

/**
 * Releases every hold the catalog holds (only the run places holds), as an operator would at the end of a case: a
 * table whose expiry passed while it was held is purged right after. Looked at again until none is left (a round or
 * two: a hold call that had no answer may land late).
 */
export async function releaseEveryHold(
  sdk: TableFateClient,
  catalog: Catalog,
  knownIds: () => Iterable<number>,
  log: (line: string) => void,
): Promise<FinalRelease[]> {
  const releases: FinalRelease[] = [];
  for (let round = 0; round < 3; round++) {
    const held = (await allTables(catalog, knownIds())).filter((t) => t.hold !== null);
    if (held.length === 0) break;
    log(`releasing the holds of ${held.length} table(s): ${held.map((t) => `${t.id} (${t.state})`).join(', ')}`);
    for (const table of held) {
      const at = Date.now();
      let outcome: Outcome;
      try {
        outcome = { kind: 'ok', table: await sdk.release({ table: table.id }, { timeoutMs: 30_000 }) };
      } catch (err) {
        outcome = classify(err);
      }
      releases.push({ tableId: table.id, state: table.state, expireAt: table.expireAt, at, outcome });
    }
  }
  return releases;
}
