import { WrongStateError, type TableFateError } from './errors';
import type { TableName } from './names';
import type { PurgeInput, UndeleteInput } from './operation-inputs';
import { nameChanged, notTrashed, onHold, tableNotFound } from './refusals';
import type { TableState } from './states';
import type { TableRecord } from './table';

// Release v18's checks, made by its lock attempt and by its check step alike (workflows/legacy/v18/,
// activities/legacy-v18.ts). Retired with them (the patch `step-executor`).

/**
 * What an undelete and a purge check of their table under its lock, before they change anything (FATE's isReady, past
 * the lock), and the first change each makes once the check lets it. Pure, because two places decide on it: the
 * workflow's check step, and (since v18) the local activity that takes the lock and makes the first change in the same
 * call (workflows/lock.ts's `firstChange`). Both must decide alike on the same table read at the same time.
 */
export type Verdict =
  /** Go on: `change` from the first step; `forward`, a purge an earlier run took past its point of no return. */
  | { proceed: 'change' | 'forward' }
  /** Nothing to do: the operation ends now, successfully (`why` for the log). */
  | { finished: 'purged already' | 'not in that trash' | 'held' | 'not expired yet' }
  /** Refused, with the error the caller hears. */
  | { refuse: TableFateError };

/** What the first change is for, as the local activity that takes the lock is told. */
export type FirstChangeFor =
  | { op: 'undelete'; tableId: number; expectedName?: TableName; newName?: TableName }
  | { op: 'purge'; tableId: number; trigger: PurgeInput['trigger']; droppedAt?: number; endsTimer: boolean };

/** An undelete: its table is TRASHED and not expired (held past its expiry is fine), or RESTORING (a recall to finish). */
export function undeleteVerdict(table: TableRecord | null, input: Pick<UndeleteInput, 'tableId' | 'expectedName'>, at: number): Verdict {
  if (!table || table.state === 'PURGED') return { refuse: tableNotFound(input.tableId, { orPurged: true }) };
  if (input.expectedName && (table.namespace !== input.expectedName.namespace || table.name !== input.expectedName.name)) {
    return { refuse: nameChanged(table, input.expectedName) };
  }
  // RESTORING: an earlier undelete stopped half way; this one finishes it.
  if (table.state !== 'TRASHED' && table.state !== 'RESTORING') return { refuse: notTrashed(table, 'can be restored') };
  // (Past its expiry but held, it is not being purged: its data waits for the release, and may be recalled.)
  if (table.state === 'TRASHED' && table.expireAt !== null && table.expireAt <= at && !table.hold) {
    return { refuse: new WrongStateError(`table ${table.id} expired at ${new Date(table.expireAt).toISOString()} and is being purged`) };
  }
  return { proceed: 'change' };
}

/**
 * A purge: its table is TRASHED, in the trash this purge is for (an expiry's or a policy's is the one at its drop time),
 * or already on its way: PURGING (an earlier purge stopped after it began deleting; this one finishes it and never goes
 * back) or PURGED (nothing left to do). A held table is never purged: a purge by hand is OnHold, naming the reason; an
 * expiry or a policy finds nothing to do yet, as it does for an expiry moved later (a new retention) since its timer
 * fired.
 */
export function purgeVerdict(table: TableRecord | null, input: Pick<PurgeInput, 'tableId' | 'trigger' | 'droppedAt'>, at: number): Verdict {
  if (!table) return { refuse: tableNotFound(input.tableId) };
  if (table.state === 'PURGED') return { finished: 'purged already' };
  const inThatTrash = (table.state === 'TRASHED' || table.state === 'PURGING') && table.droppedAt === input.droppedAt;
  // Restored (or trashed again) since this timer was set: this expiry no longer applies.
  if (input.trigger !== 'manual' && !inThatTrash) return { finished: 'not in that trash' };
  if (table.state === 'PURGING') return { proceed: 'forward' };
  if (table.state !== 'TRASHED') return { refuse: notTrashed(table, 'can be purged') };
  if (table.hold) return input.trigger === 'manual' ? { refuse: onHold({ ...table, hold: table.hold }) } : { finished: 'held' };
  if (input.trigger === 'expiry' && table.expireAt! > at) return { finished: 'not expired yet' };
  return { proceed: 'change' };
}

/** The verdict of the operation `what` is for, on `table` as read under the lock at `at`. */
export function verdictFor(what: FirstChangeFor, table: TableRecord | null, at: number): Verdict {
  return what.op === 'undelete' ? undeleteVerdict(table, what, at) : purgeVerdict(table, what, at);
}

/** A change of a table's state, as a step asks the catalog for it. */
export interface StateMove {
  from: TableState[];
  to: TableState;
  rename?: TableName;
  /** A purge by hand's commit tells the table's trash run that its timer is over (the trash at `droppedAt`). */
  endTrashTimer?: { reason: 'purged'; droppedAt: number };
}

/**
 * The state changes the first shard call makes, from the table as read under the lock: before the shards (an undelete
 * claims its name, its own or the new one, as it goes RESTORING; a purge marks PURGING) and, for a purge whose every
 * shard that call changes, the commit after them. The workflow's steps ask for the same (undelete.ts, purge.ts).
 */
export function firstStateChanges(what: FirstChangeFor, table: TableRecord): { before: StateMove; commit?: StateMove } {
  if (what.op === 'undelete') {
    return { before: { from: ['TRASHED'], to: 'RESTORING', rename: what.newName ?? { namespace: table.namespace, name: table.name } } };
  }
  const endsTimer = what.endsTimer && table.droppedAt !== null;
  return {
    before: { from: ['TRASHED'], to: 'PURGING' },
    commit: { from: ['PURGING'], to: 'PURGED', ...(endsTimer ? { endTrashTimer: { reason: 'purged', droppedAt: table.droppedAt! } } : {}) },
  };
}
