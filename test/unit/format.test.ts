import { formatBytes, formatTable, formatTableList, renderRows } from '../../cli/format';
import type { TableInfo } from '../../domain/table';

describe('formatBytes', () => {
  test('writes sizes as pg_size_pretty does: bytes up to 10 kB, then the next unit of 1024, rounded', () => {
    expect(formatBytes(0)).toBe('0 bytes');
    expect(formatBytes(8192)).toBe('8192 bytes');
    expect(formatBytes(10 * 1024 - 1)).toBe('10239 bytes');
    expect(formatBytes(10 * 1024)).toBe('10 kB');
    expect(formatBytes(16384)).toBe('16 kB');
    expect(formatBytes(1024 ** 3)).toBe('1024 MB');
    expect(formatBytes(10 * 1024 ** 3)).toBe('10 GB');
    expect(formatBytes(5 * 1024 ** 5)).toBe('5120 TB');
  });

  test('says "?" for a size the nodes did not give, "-" for one nobody asked for', () => {
    expect(formatBytes(null)).toBe('?');
    expect(formatBytes(undefined)).toBe('-');
  });
});

describe('formatTable', () => {
  const table: TableInfo = {
    id: 7,
    namespace: 'crm',
    name: 'notes',
    state: 'READY',
    shards: 1,
    placement: [{ shard: 0, node: 'node-0' }],
    createdAt: '2026-12-04T00:00:00.000Z',
    droppedAt: null,
    droppedBy: null,
    expireAt: null,
    purgedAt: null,
    hold: null,
  };

  test("a recall's notes come last, a line each; a table without notes has no note line", () => {
    const lines = formatTable({
      ...table,
      notes: ['crm.notes: foreign key a is back NOT VALID', 'crm.notes: foreign key b was not put back'],
    }).split('\n');
    expect(lines.slice(-2)).toEqual([
      'note        crm.notes: foreign key a is back NOT VALID',
      'note        crm.notes: foreign key b was not put back',
    ]);
    expect(formatTable(table)).not.toMatch(/^note /m);
  });

  test("who dropped it: '-' for a table never dropped, the dropper's identity, '?' for a drop that did not say", () => {
    const droppedLines = (t: TableInfo) =>
      formatTable(t)
        .split('\n')
        .filter((line) => line.startsWith('dropped'));
    expect(droppedLines(table)).toEqual(['dropped     -', 'dropped by  -']);
    const trashed: TableInfo = { ...table, state: 'TRASHED', droppedAt: '2026-12-05T00:00:00.000Z', expireAt: '2026-12-12T00:00:00.000Z' };
    expect(droppedLines({ ...trashed, droppedBy: 'alice@test' })).toEqual([
      'dropped     2026-12-05T00:00:00.000Z',
      'dropped by  alice@test',
    ]);
    expect(droppedLines(trashed)).toEqual(['dropped     2026-12-05T00:00:00.000Z', 'dropped by  ?']);
    // `ls`: the BY column beside DROPPED, the same way.
    expect(formatTableList([table, { ...trashed, id: 8, droppedBy: 'alice@test' }, { ...trashed, id: 9 }]).split('\n')).toEqual([
      'ID  STATE    NAMESPACE  NAME   SHARDS  SIZE  CREATED                   DROPPED                   BY          EXPIRES                   HOLD  WITH',
      '7   READY    crm        notes  1       -     2026-12-04T00:00:00.000Z  -                         -           -                         -     -',
      '8   TRASHED  crm        notes  1       -     2026-12-04T00:00:00.000Z  2026-12-05T00:00:00.000Z  alice@test  2026-12-12T00:00:00.000Z  -     -',
      '9   TRASHED  crm        notes  1       -     2026-12-04T00:00:00.000Z  2026-12-05T00:00:00.000Z  ?           2026-12-12T00:00:00.000Z  -     -',
    ]);
  });
});

describe('renderRows', () => {
  const rows = [
    ['NODE', 'STATE', 'NOTE'],
    ['node-10', 'up', ''],
    ['node-2', 'quarantined', 'disk full'],
  ];

  test('aligned: each column as wide as its widest cell, two spaces apart, no blanks at the end of a line', () => {
    expect(renderRows(rows).split('\n')).toEqual(['NODE     STATE        NOTE', 'node-10  up', 'node-2   quarantined  disk full']);
  });

  test('markdown: the first row is the header, over a rule of one dash run a column', () => {
    expect(renderRows(rows.slice(0, 2), 'markdown').split('\n')).toEqual([
      '| NODE | STATE | NOTE |',
      '|---|---|---|',
      '| node-10 | up |  |',
    ]);
  });
});
