import { firstStateChanges, purgeVerdict, undeleteVerdict, verdictFor } from '../../domain/checks';
import type { TableRecord } from '../../domain/table';

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
    expireAt: NOW + 60_000,
    purgedAt: null,
    updatedAt: NOW - 5_000,
    hold: null,
    ...over,
  };
}

const refusal = (verdict: ReturnType<typeof undeleteVerdict>) => ('refuse' in verdict ? verdict.refuse.type : undefined);

describe('undeleteVerdict: what a recall checks under the lock', () => {
  test('a trashed table before its expiry, or a recall to finish (RESTORING), goes on', () => {
    expect(undeleteVerdict(table(), { tableId: 7 }, NOW)).toEqual({ proceed: 'change' });
    expect(undeleteVerdict(table({ state: 'RESTORING' }), { tableId: 7 }, NOW)).toEqual({ proceed: 'change' });
  });

  test('past its expiry it is refused, unless it is held (a held table waits for its release, and may be recalled)', () => {
    const expired = table({ expireAt: NOW - 1 });
    expect(refusal(undeleteVerdict(expired, { tableId: 7 }, NOW))).toBe('WrongState');
    expect(undeleteVerdict({ ...expired, hold: { reason: 'audit', since: NOW - 2 } }, { tableId: 7 }, NOW)).toEqual({ proceed: 'change' });
    // (Decided at the time it was read: the same read checked again later decides the same.)
    expect(undeleteVerdict(expired, { tableId: 7 }, NOW - 2)).toEqual({ proceed: 'change' });
  });

  test('no table, a tombstone, a live table or another name than the caller resolved is refused', () => {
    expect(refusal(undeleteVerdict(null, { tableId: 7 }, NOW))).toBe('TableNotFound');
    expect(refusal(undeleteVerdict(table({ state: 'PURGED' }), { tableId: 7 }, NOW))).toBe('TableNotFound');
    expect(refusal(undeleteVerdict(table({ state: 'READY' }), { tableId: 7 }, NOW))).toBe('WrongState');
    expect(refusal(undeleteVerdict(table(), { tableId: 7, expectedName: { namespace: 'ns', name: 'other' } }, NOW))).toBe('WrongState');
  });
});

describe('purgeVerdict: what a purge checks under the lock', () => {
  const manual = { tableId: 7, trigger: 'manual' as const };
  const expiry = { tableId: 7, trigger: 'expiry' as const, droppedAt: NOW - 5_000 };

  test('by hand: a trashed table goes on, a held one is OnHold, a live one is refused, a purged one is done', () => {
    expect(purgeVerdict(table(), manual, NOW)).toEqual({ proceed: 'change' });
    expect(refusal(purgeVerdict(table({ hold: { reason: null, since: NOW } }), manual, NOW))).toBe('OnHold');
    expect(refusal(purgeVerdict(table({ state: 'READY' }), manual, NOW))).toBe('WrongState');
    expect(refusal(purgeVerdict(null, manual, NOW))).toBe('TableNotFound');
    expect(purgeVerdict(table({ state: 'PURGED' }), manual, NOW)).toEqual({ finished: 'purged already' });
  });

  test('a purge an earlier run took past its point of no return (PURGING) only goes forward', () => {
    expect(purgeVerdict(table({ state: 'PURGING' }), manual, NOW)).toEqual({ proceed: 'forward' });
    expect(purgeVerdict(table({ state: 'PURGING' }), expiry, NOW)).toEqual({ proceed: 'forward' });
  });

  test('at expiry: only the trash the timer was set for, once expired, and never a held table', () => {
    expect(purgeVerdict(table({ expireAt: NOW }), expiry, NOW)).toEqual({ proceed: 'change' });
    expect(purgeVerdict(table(), expiry, NOW)).toEqual({ finished: 'not expired yet' });
    expect(purgeVerdict(table({ expireAt: NOW, droppedAt: NOW - 1 }), expiry, NOW)).toEqual({ finished: 'not in that trash' });
    expect(purgeVerdict(table({ state: 'READY', expireAt: null }), expiry, NOW)).toEqual({ finished: 'not in that trash' });
    expect(purgeVerdict(table({ expireAt: NOW, hold: { reason: 'x', since: NOW } }), expiry, NOW)).toEqual({ finished: 'held' });
  });
});

describe('firstStateChanges: the changes the lock attempt makes with the first shard call', () => {
  test("an undelete claims the name asked for, or the table's own, as it goes RESTORING; nothing is committed there", () => {
    const own = firstStateChanges({ op: 'undelete', tableId: 7 }, table());
    expect(own).toEqual({ before: { from: ['TRASHED'], to: 'RESTORING', rename: { namespace: 'ns', name: 't' } } });
    const renamed = firstStateChanges({ op: 'undelete', tableId: 7, newName: { namespace: 'ns', name: 'u' } }, table());
    expect(renamed.before.rename).toEqual({ namespace: 'ns', name: 'u' });
  });

  test('a purge goes PURGING, and commits PURGED, telling the trash run only when asked and only of its own trash', () => {
    const byHand = firstStateChanges({ op: 'purge', tableId: 7, trigger: 'manual', endsTimer: true }, table());
    expect(byHand).toEqual({
      before: { from: ['TRASHED'], to: 'PURGING' },
      commit: { from: ['PURGING'], to: 'PURGED', endTrashTimer: { reason: 'purged', droppedAt: NOW - 5_000 } },
    });
    const atExpiry = firstStateChanges({ op: 'purge', tableId: 7, trigger: 'expiry', droppedAt: NOW - 5_000, endsTimer: false }, table());
    expect(atExpiry.commit).toEqual({ from: ['PURGING'], to: 'PURGED' });
  });

  test('verdictFor asks the verdict of the operation it is told of', () => {
    expect(verdictFor({ op: 'undelete', tableId: 7 }, table({ state: 'READY' }), NOW)).toHaveProperty('refuse');
    expect(verdictFor({ op: 'purge', tableId: 7, trigger: 'manual', endsTimer: true }, table(), NOW)).toEqual({ proceed: 'change' });
  });
});
