import type { PurgeInput, UndeleteInput } from '../../domain/operation-inputs';
import { mayJoinCall, startOf, valueOf, type Operation, type StepContext, type Verdict } from '../../domain/steps';
import { columnsOnEntering } from '../../domain/states';
import type { TableRecord } from '../../domain/table';
import { purge } from '../../workflows/purge';
import { undelete } from '../../workflows/undelete';
import { create } from '../../workflows/create';
import { trash } from '../../workflows/trash';
import { rename } from '../../workflows/rename';
import { OPERATION_STEPS } from '../../workflows/operations';

const NOW = Date.parse('2026-12-05T12:00:00Z');

function table(over: Partial<TableRecord> = {}): TableRecord {
  return {
    id: 7,
    namespace: 'ns',
    name: 't',
    state: 'TRASHED',
    params: { shards: 2 },
    placement: [
      { shard: 0, node: 'node-0' },
      { shard: 1, node: 'node-1' },
    ],
    createdAt: NOW - 10_000,
    droppedAt: NOW - 5_000,
    droppedBy: 'alice@test',
    expireAt: NOW + 60_000,
    purgedAt: null,
    updatedAt: NOW - 5_000,
    hold: null,
    ...over,
  };
}

/** The context a step sees: the table as read under the lock at `at` (the one it is made on: the input's). */
const context = <I extends { tableId: number }>(input: I, checked: TableRecord | null, at = NOW): StepContext<I> => ({
  input,
  checked,
  ...(checked ? { table: checked } : {}),
  lockedAt: at,
  said: [],
  now: at,
  leases: [],
  tableId: input.tableId,
});

/** What an operation's check step decides. */
const checkOf =
  <I extends { tableId: number }>(operation: Operation<I>) =>
  (checked: TableRecord | null, input: I, at: number): Verdict =>
    operation.steps.find((step) => step.check)!.check!(context(input, checked, at));
const undeleteVerdict = checkOf<UndeleteInput>(undelete);
const purgeVerdict = checkOf<PurgeInput>(purge);

const refusal = (verdict: Verdict) => ('refuse' in verdict ? verdict.refuse.type : undefined);

describe('what a recall checks under the lock', () => {
  test('a trashed table before its expiry, or a recall to finish (RESTORING), goes on', () => {
    expect(undeleteVerdict(table(), { tableId: 7 }, NOW)).toEqual({ proceed: true });
    expect(undeleteVerdict(table({ state: 'RESTORING' }), { tableId: 7 }, NOW)).toEqual({ proceed: true });
  });

  test('past its expiry it is refused, unless it is held (a held table waits for its release, and may be recalled)', () => {
    const expired = table({ expireAt: NOW - 1 });
    expect(refusal(undeleteVerdict(expired, { tableId: 7 }, NOW))).toBe('WrongState');
    expect(undeleteVerdict({ ...expired, hold: { reason: 'audit', since: NOW - 2 } }, { tableId: 7 }, NOW)).toEqual({ proceed: true });
    // (Decided at the time it was read: the same read checked again later decides the same.)
    expect(undeleteVerdict(expired, { tableId: 7 }, NOW - 2)).toEqual({ proceed: true });
  });

  test('no table, a tombstone, a live table or another name than the caller resolved is refused', () => {
    expect(refusal(undeleteVerdict(null, { tableId: 7 }, NOW))).toBe('TableNotFound');
    expect(refusal(undeleteVerdict(table({ state: 'PURGED' }), { tableId: 7 }, NOW))).toBe('TableNotFound');
    expect(refusal(undeleteVerdict(table({ state: 'READY' }), { tableId: 7 }, NOW))).toBe('WrongState');
    expect(refusal(undeleteVerdict(table(), { tableId: 7, expectedName: { namespace: 'ns', name: 'other' } }, NOW))).toBe('WrongState');
  });
});

describe('what a purge checks under the lock', () => {
  const manual = { tableId: 7, trigger: 'manual' as const };
  const expiry = { tableId: 7, trigger: 'expiry' as const, droppedAt: NOW - 5_000 };

  test('by hand: a trashed table goes on, a held one is OnHold, a live one is refused, a purged one is done', () => {
    expect(purgeVerdict(table(), manual, NOW)).toEqual({ proceed: true });
    expect(refusal(purgeVerdict(table({ hold: { reason: null, since: NOW } }), manual, NOW))).toBe('OnHold');
    expect(refusal(purgeVerdict(table({ state: 'READY' }), manual, NOW))).toBe('WrongState');
    expect(refusal(purgeVerdict(null, manual, NOW))).toBe('TableNotFound');
    expect(purgeVerdict(table({ state: 'PURGED' }), manual, NOW)).toEqual({ finish: 'purged already' });
  });

  test('a purge an earlier run took past its point of no return (PURGING) only goes forward', () => {
    expect(purgeVerdict(table({ state: 'PURGING' }), manual, NOW)).toEqual({ forward: true });
    expect(purgeVerdict(table({ state: 'PURGING' }), expiry, NOW)).toEqual({ forward: true });
  });

  test('at expiry: only the trash the timer was set for, once expired, and never a held table', () => {
    expect(purgeVerdict(table({ expireAt: NOW }), expiry, NOW)).toEqual({ proceed: true });
    expect(purgeVerdict(table(), expiry, NOW)).toEqual({ finish: 'not expired yet' });
    expect(purgeVerdict(table({ expireAt: NOW, droppedAt: NOW - 1 }), expiry, NOW)).toEqual({
      finish: 'no longer in the trash this purge is for',
    });
    expect(purgeVerdict(table({ state: 'READY', expireAt: null }), expiry, NOW)).toEqual({
      finish: 'no longer in the trash this purge is for',
    });
    expect(purgeVerdict(table({ expireAt: NOW, hold: { reason: 'x', since: NOW } }), expiry, NOW)).toEqual({ finish: 'held' });
  });
});

describe('what the steps change, from what the check read', () => {
  const claim = undelete.steps[1]!;
  test("a recall claims the name asked for, or the table's own, and its undo gives the trashed name back", () => {
    const own = context<UndeleteInput>({ tableId: 7 }, table());
    expect(valueOf(claim.change, own)).toEqual({
      kind: 'transition',
      from: ['TRASHED'],
      to: 'RESTORING',
      rename: { namespace: 'ns', name: 't' },
    });
    const asked = context<UndeleteInput>({ tableId: 7, newName: { namespace: 'ns2', name: 'u' } }, table());
    expect(valueOf(claim.change, asked)).toMatchObject({ rename: { namespace: 'ns2', name: 'u' } });
    expect(valueOf(claim.undo!.change!, asked)).toMatchObject({
      from: ['RESTORING'],
      to: 'TRASHED',
      rename: { namespace: 'ns', name: 't' },
    });
  });

  test("a purge ends the table's trash at its point of no return; the expiry's own purge does not tell itself", () => {
    const ending = purge.steps.filter((step) => step.endsTrash);
    expect(ending.map((step) => [step.name, step.pointOfNoReturn])).toEqual([['delete garbage', true]]);
    const byHand = context<PurgeInput>({ tableId: 7, trigger: 'manual' }, table());
    expect(ending[0]!.endsTrash!(byHand)).toEqual({ reason: 'purged', droppedAt: NOW - 5_000 });
    const atExpiry = context<PurgeInput>({ tableId: 7, trigger: 'expiry', droppedAt: NOW - 5_000, fromTrashRun: true }, table());
    expect(ending[0]!.endsTrash!(atExpiry)).toBeUndefined();
  });

  test("a recall ends the table's trash with its commit, the trash it was recalled from", () => {
    const commit = undelete.steps.at(-1)!;
    expect(commit.endsTrash!(context<UndeleteInput>({ tableId: 7 }, table()))).toEqual({ reason: 'restored', droppedAt: NOW - 5_000 });
  });

  test("a drop's move begins the trash it stamped: its expiry is started then, and its commit starts none", () => {
    const move = trash.steps.find((step) => step.beginsTrash)!;
    const commit = trash.steps.at(-1)!;
    expect(move.name).toBe('move shards to trash');
    const lockWait = { firstMs: 10, maxMs: 20, attemptsPerRun: 3 };
    const moving = context({ tableId: 7, lockWait }, table({ state: 'TRASHING', droppedAt: NOW - 1_000, expireAt: null }));
    expect(move.beginsTrash!(moving)).toEqual({ droppedAt: NOW - 1_000, lockWait });
    expect(valueOf(commit.change, moving)).not.toHaveProperty('startExpiry');
    // Still DRAINING when the step is asked (before its change): no trash yet.
    expect(move.beginsTrash!(context({ tableId: 7 }, table({ state: 'DRAINING', droppedAt: null, expireAt: null })))).toBeUndefined();
  });

  test('a drop of several as one begins no trash at its move: its commit gives all its tables its own drop time and starts their expiries', () => {
    const move = trash.steps.find((step) => step.beginsTrash)!;
    const commit = trash.steps.at(-1)!;
    const member = table({ state: 'TRASHING', droppedAt: NOW - 1_000, expireAt: null });
    const together = { ...context({ tableId: 7 }, member), group: [member, table({ id: 8, state: 'TRASHING', droppedAt: NOW - 3_000 })] };
    expect(move.beginsTrash!(together)).toBeUndefined();
    expect(valueOf(commit.change, together)).toMatchObject({ kind: 'commitTrash', restamp: true, startExpiry: {} });
  });

  test('a table made TRASHING without a drop time (by an older worker) begins no trash at its move: its commit starts the expiry', () => {
    const move = trash.steps.find((step) => step.beginsTrash)!;
    const commit = trash.steps.at(-1)!;
    const unstamped = context({ tableId: 7 }, table({ state: 'TRASHING', droppedAt: null, expireAt: null }));
    expect(move.beginsTrash!(unstamped)).toBeUndefined();
    expect(valueOf(commit.change, unstamped)).toMatchObject({ kind: 'commitTrash', startExpiry: {} });
    // Its commit stamps its own time, as every commit did before the move stamped one.
    expect(columnsOnEntering('TRASHING', 'TRASHED', NOW, { retentionSeconds: 60, droppedAt: null })).toMatchObject({
      droppedAt: NOW,
      expireAt: NOW + 60_000,
    });
    expect(columnsOnEntering('TRASHING', 'TRASHED', NOW, { retentionSeconds: 60, droppedAt: NOW - 1_000 })).toMatchObject({
      droppedAt: NOW - 1_000,
      expireAt: NOW + 59_000,
    });
  });

  test('only a step the run never takes back ends a trash: a point of no return, or the last step', () => {
    const ending = Object.values(OPERATION_STEPS).flatMap((operation) =>
      operation.steps.flatMap((step, index) => (step.endsTrash ? [{ operation, step, index }] : [])),
    );
    expect(ending.length).toBeGreaterThan(0);
    for (const { operation, step, index } of ending) {
      expect({ [`${operation.name}: ${step.name}`]: step.pointOfNoReturn === true || index === operation.steps.length - 1 }).toEqual({
        [`${operation.name}: ${step.name}`]: true,
      });
    }
  });
});

describe('which steps may share a call (a cancel is taken between calls)', () => {
  const begun = (...steps: number[]) => ({ ...startOf(NOW), begun: steps });
  test('a commit waits for a call of its own once something undoable is made, unless past a point of no return', () => {
    // A recall's commit after its claim: a cancel during the claim's call must still take the recall back.
    expect(mayJoinCall(undelete.steps[2]!, begun(1))).toBe(false);
    // A create's commit after its shards; a drop's commit after its move.
    expect(mayJoinCall(create.steps[2]!, begun(0, 1))).toBe(false);
    expect(mayJoinCall(trash.steps[3]!, begun(0, 2))).toBe(false);
    // A purge's deletes are its point of no return, and its commit comes after them: one call for all.
    expect(mayJoinCall(purge.steps[2]!, begun(1))).toBe(true);
    expect(mayJoinCall(purge.steps[3]!, begun())).toBe(true);
  });

  test('undoable steps, and steps after nothing undoable, ride along', () => {
    expect(mayJoinCall(undelete.steps[1]!, begun())).toBe(true);
    expect(mayJoinCall(trash.steps[2]!, begun(0))).toBe(true);
    // A drop's wait for its leases changes nothing: it rides along, and answers the workflow only if it must wait.
    expect(mayJoinCall(trash.steps[1]!, begun(0))).toBe(true);
    expect(mayJoinCall(rename.steps[2]!, begun())).toBe(true);
  });
});
