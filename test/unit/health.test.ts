import {
  describeFinding,
  describeFindingLines,
  diagnose,
  judgeSet,
  RESUMED_BY,
  type Finding,
  type HealthFacts,
  type LockFact,
  type RecordedShardTable,
  type SetOnDisk,
} from '../../domain/health';
import { liveShardName } from '../../domain/names';
import type { TableState } from '../../domain/states';
import type { TableRecord } from '../../domain/table';
import { formatHealth } from '../../cli/format';

/*
 * What the doctor reports and the reconciler repairs, decided from facts alone (domain/health.ts): no server,
 * no disk. Every fact here is built by hand.
 */

const NOW = 1_700_000_000_000;
const GRACE = 60_000;
const LONG_AGO = NOW - 10 * GRACE;

/** A table of `shards` shards on node-0, node-1, ... (one node per shard), in `state`. */
function table(id: number, state: TableState, shards = 2): TableRecord {
  const trashed = ['TRASHED', 'RESTORING', 'PURGING', 'PURGED'].includes(state);
  return {
    id,
    namespace: 'ns',
    name: `t${id}`,
    state,
    params: { shards },
    placement: Array.from({ length: shards }, (_, shard) => ({ shard, node: `node-${shard}` })),
    createdAt: LONG_AGO,
    droppedAt: trashed ? LONG_AGO + 1000 : null,
    droppedBy: trashed ? 'alice@test' : null,
    expireAt: trashed ? NOW + 3_600_000 : null,
    hold: null,
    purgedAt: state === 'PURGED' ? LONG_AGO + 2000 : null,
    updatedAt: LONG_AGO,
  };
}

function set(tableId: number, shard: number, area: SetOnDisk['area'], changedAt = LONG_AGO, node = `node-${shard}`): SetOnDisk {
  return { tableId, shard, node, area, whole: true, changedAt };
}

/** Every shard of `t` in `area`, as its placement says. */
function setsOf(t: TableRecord, area: SetOnDisk['area'], changedAt = LONG_AGO): SetOnDisk[] {
  return t.placement.map((p) => set(t.id, p.shard, area, changedAt, p.node));
}

function lock(tableId: number, ownerClosed: boolean, workflowId = `op:${tableId}`): LockFact {
  return { resource: `table:${tableId}`, workflowId, runId: `run-${tableId}`, since: LONG_AGO, ownerClosed };
}

function facts(partial: Partial<HealthFacts>): HealthFacts {
  return { tables: [], locks: [], trashTimers: new Set(), sets: [], now: NOW, orphanGraceMs: GRACE, ...partial };
}

const kinds = (findings: Finding[]) => findings.map((f) => f.kind);

describe('diagnose', () => {
  test('settled tables with every set where it belongs, and a timer for each trashed one, give no finding', () => {
    const ready = table(1, 'READY');
    const trashed = table(2, 'TRASHED');
    const purged = table(3, 'PURGED');
    const failed = table(4, 'CREATE_FAILED');
    expect(
      diagnose(
        facts({
          tables: [ready, trashed, purged, failed],
          trashTimers: new Set([2]),
          sets: [...setsOf(ready, 'live'), ...setsOf(trashed, 'trash')],
        }),
      ),
    ).toEqual([]);
  });

  test('a lock whose holder has closed is a stale lock; one whose holder runs is not', () => {
    const findings = diagnose(facts({ locks: [lock(1, true, 'trash:1@c'), lock(2, false)] }));
    expect(findings).toEqual([{ kind: 'stale-lock', resource: 'table:1', workflowId: 'trash:1@c', runId: 'run-1', since: LONG_AGO }]);
  });

  test.each(Object.entries(RESUMED_BY))('a %s table no running operation holds is stuck, and resumed by %s', (state, resume) => {
    const t = table(7, state as TableState, 3);
    expect(diagnose(facts({ tables: [t] }))).toEqual([
      { kind: 'stuck', table: { id: 7, namespace: 'ns', name: 't7', shards: 3, params: t.params }, state, resume },
    ]);
  });

  test('the six transitional states, and no other, are resumed, each by the operation that enters it', () => {
    expect(RESUMED_BY).toEqual({
      CREATING: 'create',
      DRAINING: 'trash',
      TRASHING: 'trash',
      TRUNCATING: 'truncate',
      RESTORING: 'undelete',
      PURGING: 'purge',
    });
  });

  test('a transitional table held by a running operation is not stuck; held by a closed one, it is (and the lock is stale)', () => {
    const t = table(5, 'TRASHING');
    expect(diagnose(facts({ tables: [t], locks: [lock(5, false)] }))).toEqual([]);
    expect(kinds(diagnose(facts({ tables: [t], locks: [lock(5, true)] })))).toEqual(['stale-lock', 'stuck']);
  });

  test('only the table lock makes a table busy: a running holder of another resource does not hide it', () => {
    const t = table(5, 'TRASHING');
    const nameLock: LockFact = { ...lock(5, false), resource: 'name:ns.t5' };
    expect(kinds(diagnose(facts({ tables: [t], locks: [nameLock] })))).toEqual(['stuck']);
  });

  test('a trashed table with no trash timer is missing its timer; expired once its expiry is now or past', () => {
    const waiting = table(1, 'TRASHED');
    const due = { ...table(2, 'TRASHED'), expireAt: NOW };
    const overdue = { ...table(3, 'TRASHED'), expireAt: NOW - 1 };
    const notYet = { ...table(4, 'TRASHED'), expireAt: NOW + 1 };
    const findings = diagnose(facts({ tables: [waiting, due, overdue, notYet] }));
    expect(findings).toEqual(
      [waiting, due, overdue, notYet].map((t) => ({
        kind: 'missing-timer',
        table: { id: t.id, namespace: 'ns', name: t.name, shards: 2, params: t.params },
        droppedAt: t.droppedAt,
        expireAt: t.expireAt,
        expired: t.expireAt! <= NOW,
      })),
    );
    expect(findings.map((f) => f.kind === 'missing-timer' && f.expired)).toEqual([false, true, true, false]);
  });

  test('a trashed table whose timer runs, or that a running operation holds, is not missing its timer', () => {
    const t = table(1, 'TRASHED');
    expect(diagnose(facts({ tables: [t], trashTimers: new Set([1]) }))).toEqual([]);
    expect(diagnose(facts({ tables: [t], locks: [lock(1, false)] }))).toEqual([]);
  });

  test('a set of a table the catalog does not know is an orphan', () => {
    const orphan = set(99, 0, 'live');
    expect(diagnose(facts({ sets: [orphan] }))).toEqual([
      { kind: 'orphan', set: orphan, why: 'no table 99 in the catalog', collectableAt: LONG_AGO + GRACE, collectable: true },
    ]);
  });

  test('a set of a failed create or of a purged table is an orphan, in any area', () => {
    const failed = table(1, 'CREATE_FAILED');
    const purged = table(2, 'PURGED');
    const sets = [set(1, 0, 'live'), set(1, 1, 'trash'), set(2, 0, 'trash'), set(2, 1, 'garbage')];
    const findings = diagnose(facts({ tables: [failed, purged], sets }));
    expect(findings.map((f) => f.kind === 'orphan' && [f.set.tableId, f.set.area, f.why])).toEqual([
      [1, 'live', 'table 1 is CREATE_FAILED and keeps no files'],
      [1, 'trash', 'table 1 is CREATE_FAILED and keeps no files'],
      [2, 'trash', 'table 2 is PURGED and keeps no files'],
      [2, 'garbage', 'table 2 is PURGED and keeps no files'],
    ]);
  });

  test('a set on a node, or of a shard, that the placement does not name is an orphan, whatever the state', () => {
    for (const state of ['READY', 'TRASHED', 'CREATING', 'TRASHING', 'RESTORING', 'PURGING'] as const) {
      const t = table(1, state, 2);
      const wrongNode = set(1, 0, 'live', LONG_AGO, 'node-2');
      const noSuchShard = set(1, 5, 'live', LONG_AGO, 'node-1');
      expect({ state, verdicts: [judgeSet(wrongNode, t, []), judgeSet(noSuchShard, t, [])] }).toEqual({
        state,
        verdicts: [
          { kind: 'orphan', why: 'table 1 places no shard 0 on node-2' },
          { kind: 'orphan', why: 'table 1 places no shard 5 on node-1' },
        ],
      });
    }
  });

  test('the sets of a table in transition are never orphans nor misplaced, in any area', () => {
    for (const state of ['CREATING', 'TRASHING', 'RESTORING', 'PURGING'] as const) {
      const t = table(1, state);
      // Half moved: shard 0 in live and trash at once, shard 1 in garbage only.
      const sets = [set(1, 0, 'live'), set(1, 0, 'trash'), set(1, 1, 'garbage')];
      expect({ state, verdicts: sets.map((s) => judgeSet(s, t, sets)) }).toEqual({ state, verdicts: [undefined, undefined, undefined] });
      // Locked by a closed run, so not busy: only the stuck table and the stale lock are findings.
      expect({ state, kinds: kinds(diagnose(facts({ tables: [t], locks: [lock(1, true)], sets }))) }).toEqual({
        state,
        kinds: ['stale-lock', 'stuck'],
      });
    }
  });

  test('a second copy beside the one where the table keeps it is an orphan (a spare); alone, it is misplaced', () => {
    const ready = table(1, 'READY', 1);
    const trashed = table(2, 'TRASHED', 1);
    const spareOfReady = set(1, 0, 'trash');
    const garbageOfReady = set(1, 0, 'garbage');
    const spareOfTrashed = set(2, 0, 'live');
    const withHomes = [set(1, 0, 'live'), spareOfReady, garbageOfReady, set(2, 0, 'trash'), spareOfTrashed];
    expect(judgeSet(spareOfReady, ready, withHomes)).toEqual({
      kind: 'orphan',
      why: 'table 1 is READY: a spare copy in trash, beside the one in live',
    });
    expect(judgeSet(garbageOfReady, ready, withHomes)).toEqual({
      kind: 'orphan',
      why: 'table 1 is READY: a spare copy in garbage, beside the one in live',
    });
    expect(judgeSet(spareOfTrashed, trashed, withHomes)).toEqual({
      kind: 'orphan',
      why: 'table 2 is TRASHED: a spare copy in live, beside the one in trash',
    });

    const alone = [spareOfReady, spareOfTrashed];
    expect(judgeSet(spareOfReady, ready, alone)).toEqual({
      kind: 'misplaced',
      why: 'table 1 is READY but this shard is in trash, not live',
    });
    expect(judgeSet(spareOfTrashed, trashed, alone)).toEqual({
      kind: 'misplaced',
      why: 'table 2 is TRASHED but this shard is in live, not trash',
    });
    // A set split across areas (half its files moved by hand, say) is the table's data on both sides: no spare.
    const splitHome = { ...set(1, 0, 'live'), whole: false };
    expect(judgeSet(spareOfReady, ready, [splitHome, spareOfReady])).toEqual({
      kind: 'misplaced',
      why: 'table 1 is READY but this shard is in trash, not live',
    });
    const findings = diagnose(facts({ tables: [ready, trashed], trashTimers: new Set([2]), sets: alone }));
    expect(findings).toEqual([
      { kind: 'misplaced', set: spareOfReady, why: 'table 1 is READY but this shard is in trash, not live' },
      { kind: 'misplaced', set: spareOfTrashed, why: 'table 2 is TRASHED but this shard is in live, not trash' },
    ]);
  });

  test('a home copy of the same shard on another node, or of another shard, does not make a set a spare', () => {
    const ready = table(1, 'READY', 2);
    const inTrash = set(1, 0, 'trash');
    // Shard 1's live copy, and a copy of shard 0 in live on a node it is not placed on.
    const others = [inTrash, set(1, 1, 'live'), set(1, 0, 'live', LONG_AGO, 'node-1')];
    expect(judgeSet(inTrash, ready, others)?.kind).toBe('misplaced');
  });

  test('the sets of a table a running operation holds are skipped, however long left alone', () => {
    const ready = table(1, 'READY', 1);
    const sets = [set(1, 0, 'live'), set(1, 0, 'trash'), set(1, 3, 'live')];
    expect(diagnose(facts({ tables: [ready], locks: [lock(1, false)], sets }))).toEqual([]);
    // The same facts with the holder closed: the spare and the unplaced set are orphans.
    expect(kinds(diagnose(facts({ tables: [ready], locks: [lock(1, true)], sets })))).toEqual(['stale-lock', 'orphan', 'orphan']);
  });

  test('an orphan is collectable once it has been left alone for the grace, not a millisecond before', () => {
    const at = (changedAt: number) => diagnose(facts({ sets: [set(99, 0, 'live', changedAt)] }))[0];
    expect(at(NOW - GRACE)).toMatchObject({ kind: 'orphan', collectableAt: NOW, collectable: true });
    expect(at(NOW - GRACE + 1)).toMatchObject({ kind: 'orphan', collectableAt: NOW + 1, collectable: false });
    expect(at(NOW)).toMatchObject({ kind: 'orphan', collectableAt: NOW + GRACE, collectable: false });
    // A set changed "in the future" (a clock stepped back) waits the more.
    expect(at(NOW + 5_000)).toMatchObject({ collectableAt: NOW + 5_000 + GRACE, collectable: false });
    // Grace zero: collectable at once.
    expect(diagnose(facts({ orphanGraceMs: 0, sets: [set(99, 0, 'live', NOW)] }))[0]).toMatchObject({ collectable: true });
  });

  test('a misplaced set is reported at once, grace or not: it is never collected, so it has no grace', () => {
    const ready = table(1, 'READY', 1);
    const fresh = set(1, 0, 'trash', NOW);
    expect(diagnose(facts({ tables: [ready], sets: [fresh] }))).toEqual([
      { kind: 'misplaced', set: fresh, why: 'table 1 is READY but this shard is in trash, not live' },
    ]);
  });

  test('findings come in a stable order: stale locks, then tables by id, then sets as listed', () => {
    const tables = [table(9, 'PURGING'), table(3, 'TRASHED'), table(5, 'CREATING')];
    const sets = [set(100, 1, 'trash'), set(100, 0, 'live')];
    const findings = diagnose(facts({ tables, sets, locks: [lock(50, true), lock(40, true)] }));
    expect(
      findings.map((f) =>
        f.kind === 'stale-lock'
          ? f.resource
          : f.kind === 'orphan' || f.kind === 'misplaced'
            ? `${f.kind} ${f.set.area}`
            : `${f.kind} ${f.table.id}`,
      ),
    ).toEqual(['table:50', 'table:40', 'missing-timer 3', 'stuck 5', 'stuck 9', 'orphan trash', 'orphan live']);
  });
});

describe('describeFinding', () => {
  test('each kind gives one line that names what to look at and what will be done', () => {
    const t = table(12, 'TRASHED');
    const key = { id: 12, namespace: 'ns', name: 't12', shards: 2 };
    const lines = [
      describeFinding({ kind: 'missing-timer', table: key, droppedAt: t.droppedAt!, expireAt: NOW - 1, expired: true }),
      describeFinding({ kind: 'missing-timer', table: key, droppedAt: t.droppedAt!, expireAt: NOW, expired: false }),
      describeFinding({ kind: 'stuck', table: key, state: 'PURGING', resume: 'purge' }),
      describeFinding({ kind: 'stale-lock', resource: 'table:12', workflowId: 'purge:12@c', runId: 'r', since: NOW }),
      describeFinding({ kind: 'orphan', set: set(12, 1, 'garbage'), why: 'why', collectableAt: NOW, collectable: true }),
      describeFinding({ kind: 'orphan', set: set(12, 1, 'garbage'), why: 'why', collectableAt: NOW, collectable: false }),
      describeFinding({ kind: 'misplaced', set: set(12, 0, 'live'), why: 'why' }),
    ];
    expect(lines).toEqual([
      'table 12 is TRASHED with no trash timer: re-arm it (expired: purge now)',
      `table 12 is TRASHED with no trash timer: re-arm it (expires ${new Date(NOW).toISOString()})`,
      'table 12 is PURGING and no operation holds it: run purge again',
      'lock table:12 is held by purge:12@c, which has closed: release it',
      'shard t12-s1 in garbage on node-1: why: collect it',
      `shard t12-s1 in garbage on node-1: why: collect it after ${new Date(NOW).toISOString()}`,
      'shard t12-s0 in live on node-0: why: left for an operator',
    ]);
    for (const line of lines) expect(line).not.toContain('\n');
  });
});

describe('shard tables changed outside tablefate (the records of a driver that keeps them: PostgreSQL)', () => {
  /** Table `id`'s shard as a node's record has it: live under the catalog's name, as tablefate left it, unless told. */
  function rec(t: TableRecord, shard: number, over: Partial<RecordedShardTable> = {}): RecordedShardTable {
    const node = t.placement.find((p) => p.shard === shard)!.node;
    const live = liveShardName({ namespace: t.namespace, name: t.name, shards: t.params.shards }, shard);
    const area = t.state === 'TRASHED' ? 'trash' : 'live';
    const at = area === 'live' ? live : { schema: 'tablefate_trash', table: `cc_t${t.id}_s${shard}` };
    return { tableId: t.id, shard, node, area, ...at, differences: [], ...over };
  }
  /** Facts with the sets every intact record stands for, and the records of node-0 and node-1 read at NOW. */
  function recordedFacts(tables: TableRecord[], records: RecordedShardTable[], partial: Partial<HealthFacts> = {}): HealthFacts {
    const sets = records.filter((r) => r.area !== null).map((r) => set(r.tableId, r.shard, r.area!, LONG_AGO, r.node));
    const timers = new Set(tables.filter((t) => t.state === 'TRASHED').map((t) => t.id));
    return facts({
      tables,
      sets,
      trashTimers: timers,
      recorded: { nodes: ['node-0', 'node-1'], listedAt: NOW, tables: records },
      ...partial,
    });
  }
  const keyOf = (t: TableRecord) => ({ id: t.id, namespace: t.namespace, name: t.name, shards: t.params.shards, params: t.params });

  test('records as tablefate left them, and where the catalog says, give no finding; nor does a driver that keeps none', () => {
    const ready = table(1, 'READY', 2);
    const single = table(2, 'READY', 1);
    const trashed = table(3, 'TRASHED', 2);
    const records = [rec(ready, 0), rec(ready, 1), rec(single, 0), rec(trashed, 0), rec(trashed, 1)];
    expect(records.slice(0, 3).map((r) => `${r.schema}.${r.table}`)).toEqual(['ns.t1_0', 'ns.t1_1', 'ns.t2']);
    expect(diagnose(recordedFacts([ready, single, trashed], records))).toEqual([]);
    // Files: no record at all, so no shard is missing from one.
    expect(diagnose(facts({ tables: [ready], sets: setsOf(ready, 'live') }))).toEqual([]);
  });

  test("each difference the driver found is reported, with the catalog's key of the table, or its id alone when the catalog has none", () => {
    const dropped = table(1, 'READY', 1);
    const renamed = table(2, 'READY', 1);
    const owner = table(3, 'TRASHED', 1);
    const records = [
      rec(dropped, 0, { area: null, differences: ['ns.t1 was dropped outside tablefate'] }),
      rec(renamed, 0, { area: null, differences: ['ns.t2 was renamed outside tablefate to ns.people'] }),
      // Its owner changed only: still where its record says, so still among the sets (in its area).
      rec(owner, 0, { differences: ["tablefate_trash.cc_t3_s0's owner was changed outside tablefate from tf to mallory"] }),
      {
        tableId: 77,
        shard: 1,
        node: 'node-1',
        area: null,
        schema: 'x',
        table: 'y',
        differences: ['x.y was moved outside tablefate to schema z (as y)'],
      },
    ];
    expect(diagnose(recordedFacts([dropped, renamed, owner], records))).toEqual([
      { kind: 'outside-change', table: keyOf(dropped), shard: 0, node: 'node-0', differences: ['ns.t1 was dropped outside tablefate'] },
      {
        kind: 'outside-change',
        table: keyOf(renamed),
        shard: 0,
        node: 'node-0',
        differences: ['ns.t2 was renamed outside tablefate to ns.people'],
      },
      {
        kind: 'outside-change',
        table: keyOf(owner),
        shard: 0,
        node: 'node-0',
        differences: ["tablefate_trash.cc_t3_s0's owner was changed outside tablefate from tf to mallory"],
      },
      {
        kind: 'outside-change',
        table: { id: 77 },
        shard: 1,
        node: 'node-1',
        differences: ['x.y was moved outside tablefate to schema z (as y)'],
      },
    ]);
  });

  test('what the node holds is a fact whatever the catalog says: reported for a table an operation holds, in transition, or just changed', () => {
    for (const state of ['READY', 'TRASHING', 'RESTORING', 'PURGED'] as const) {
      const t = { ...table(1, state, 1), updatedAt: NOW };
      const records = [rec(t, 0, { area: null, differences: ['ns.t1 was dropped outside tablefate'] })];
      expect({ state, kinds: kinds(diagnose(recordedFacts([t], records, { locks: [lock(1, false)] }))) }).toEqual({
        state,
        kinds: ['outside-change'],
      });
    }
  });

  test('a READY table whose live shard the record names otherwise than the catalog: that is a difference too', () => {
    const multi = table(1, 'READY', 2);
    const single = table(2, 'READY', 1);
    const records = [rec(multi, 0), rec(multi, 1, { table: 't1_old' }), rec(single, 0, { schema: 'archive' })];
    expect(diagnose(recordedFacts([multi, single], records))).toEqual([
      {
        kind: 'outside-change',
        table: keyOf(multi),
        shard: 1,
        node: 'node-1',
        differences: ["the catalog names it ns.t1_1, but tablefate's record on node-1 has it as ns.t1_old"],
      },
      {
        kind: 'outside-change',
        table: keyOf(single),
        shard: 0,
        node: 'node-0',
        differences: ["the catalog names it ns.t2, but tablefate's record on node-0 has it as archive.t2"],
      },
    ]);
  });

  test('the catalog is compared with a record only for a settled table no operation holds, whose row did not change as it was listed', () => {
    const renamedRecord = (t: TableRecord) => [rec(t, 0, { table: 'other' })];
    const ready = table(1, 'READY', 1);
    expect(kinds(diagnose(recordedFacts([ready], renamedRecord(ready))))).toEqual(['outside-change']);
    // Held by a running operation, or changed within a second of the listing (an operation that ended meanwhile): not yet.
    expect(diagnose(recordedFacts([ready], renamedRecord(ready), { locks: [lock(1, false)] }))).toEqual([]);
    expect(diagnose(recordedFacts([{ ...ready, updatedAt: NOW - 1_000 }], renamedRecord(ready)))).toEqual([]);
    expect(kinds(diagnose(recordedFacts([{ ...ready, updatedAt: NOW - 1_001 }], renamedRecord(ready))))).toEqual(['outside-change']);
    // In transition, the name is the operation's to settle; in the trash, the name is tablefate's own.
    const restoring = table(2, 'RESTORING', 1);
    expect(diagnose(recordedFacts([restoring], renamedRecord(restoring), { locks: [lock(2, false)] }))).toEqual([]);
    const trashed = table(3, 'TRASHED', 1);
    expect(diagnose(recordedFacts([trashed], [rec(trashed, 0, { table: 'anything' })]))).toEqual([]);
    // A record out of place (area null) is reported by its differences alone, not by its name.
    expect(diagnose(recordedFacts([ready], [rec(ready, 0, { area: null, table: 'x', differences: ['d'] })]))).toEqual([
      { kind: 'outside-change', table: keyOf(ready), shard: 0, node: 'node-0', differences: ['d'] },
    ]);
  });

  test('a READY or TRASHED shard placed on a node whose record lacks it is reported; other states, and nodes not read, are not', () => {
    const ready = table(1, 'READY', 3);
    const trashed = table(2, 'TRASHED', 1);
    // Shard 2 of table 1 is on node-2, whose record was not read (another node's survey, or quarantined).
    const findings = diagnose(recordedFacts([ready, trashed], [rec(ready, 1)]));
    const missing = (t: TableRecord, shard: number, node: string) => ({
      kind: 'outside-change',
      table: keyOf(t),
      shard,
      node,
      differences: [
        `the catalog has it ${t.state} with this shard on ${node}, but ${node} keeps no record of it: it was never placed there, or its record was deleted outside tablefate`,
      ],
    });
    expect(findings).toEqual([missing(ready, 0, 'node-0'), missing(trashed, 0, 'node-0')]);
    for (const state of ['CREATE_FAILED', 'PURGED', 'CREATING', 'TRASHING', 'PURGING'] as const) {
      expect({ state, findings: diagnose(recordedFacts([table(3, state, 1)], [], { locks: [lock(3, false)] })) }).toEqual({
        state,
        findings: [],
      });
    }
    expect(diagnose(recordedFacts([ready], [], { locks: [lock(1, false)] }))).toEqual([]);
    expect(diagnose(recordedFacts([{ ...trashed, updatedAt: NOW }], []))).toEqual([]);
  });

  test('the findings of records come after those of sets, in the order listed, then the missing records by table and shard', () => {
    const a = table(5, 'READY', 1);
    const b = table(4, 'READY', 2);
    const records = [rec(a, 0, { area: null, differences: ['gone'] })];
    const findings = diagnose(recordedFacts([a, b], records, { sets: [set(99, 0, 'live')] }));
    expect(
      findings.map((f) => (f.kind === 'orphan' ? 'orphan 99' : f.kind === 'outside-change' ? `${f.table.id}/${f.shard}` : f.kind)),
    ).toEqual(['orphan 99', '5/0', '4/0', '4/1']);
  });

  test('the doctor prints one line per difference, naming the table, its shard and node; the reconciler logs one line', () => {
    const t = table(12, 'READY', 1);
    const change: Finding = {
      kind: 'outside-change',
      table: keyOf(t),
      shard: 0,
      node: 'node-0',
      differences: ['ns.t12 was renamed outside tablefate to ns.people', "ns.t12's owner was changed outside tablefate from tf to bob"],
    };
    const unknown: Finding = {
      kind: 'outside-change',
      table: { id: 77 },
      shard: 1,
      node: 'node-1',
      differences: ['x.y was dropped outside tablefate'],
    };
    expect(describeFindingLines(change)).toEqual([
      'table 12 (ns.t12) shard 0 on node-0: ns.t12 was renamed outside tablefate to ns.people',
      "table 12 (ns.t12) shard 0 on node-0: ns.t12's owner was changed outside tablefate from tf to bob",
    ]);
    expect(describeFinding(change)).toBe(
      "table 12 (ns.t12) shard 0 on node-0: ns.t12 was renamed outside tablefate to ns.people; ns.t12's owner was changed outside tablefate from tf to bob: left for an operator",
    );
    expect(describeFinding(unknown)).toBe(
      'table 77 (not in the catalog) shard 1 on node-1: x.y was dropped outside tablefate: left for an operator',
    );
    const misplaced: Finding = { kind: 'misplaced', set: set(12, 0, 'trash'), why: 'why' };
    expect(describeFindingLines(misplaced)).toEqual([describeFinding(misplaced)]);
    expect(formatHealth({ findings: [change, unknown], omitted: 0, skippedNodes: [], actions: [], deferred: 0 }).split('\n')).toEqual([
      'outside-change table 12 (ns.t12) shard 0 on node-0: ns.t12 was renamed outside tablefate to ns.people',
      "outside-change table 12 (ns.t12) shard 0 on node-0: ns.t12's owner was changed outside tablefate from tf to bob",
      'outside-change table 77 (not in the catalog) shard 1 on node-1: x.y was dropped outside tablefate',
    ]);
  });
});
