import { TypedSearchAttributes } from '@temporalio/common';
import type { WorkflowExecutionInfo } from '@temporalio/client';
import { formatHistory, formatOperations } from '../../cli/format';
import { operationsQuery, startedByOf, toOperationInfo } from '../../client/operations';
import { starterOf, type OperationInfo } from '../../domain/operation-runs';
import { SEARCH_ATTRIBUTES } from '../../domain/search-attributes';
import type { TableInfo } from '../../domain/table';

const running: OperationInfo = {
  workflowId: 'trash:5@cat1',
  runId: 'r2',
  operation: 'trash',
  tableId: 5,
  table: 'ops.orders',
  status: 'RUNNING',
  startedAt: '2026-01-02T10:00:00.000Z',
  closedAt: null,
  startedBy: 'alice@host1',
  currentStep: 'draining table 5 until 2026-01-02T10:01:00.000Z: lease 1 held by etl@h until 2026-01-02T10:05:00.000Z',
};
const created: OperationInfo = {
  ...running,
  workflowId: 'create:ops.orders@cat1',
  runId: 'r1',
  operation: 'create',
  status: 'COMPLETED',
  startedAt: '2026-01-02T09:00:00.000Z',
  closedAt: '2026-01-02T09:00:00.120Z',
  startedBy: 'reconciler',
  currentStep: null,
};

describe('who started a run', () => {
  test("the run's memo says it; else the workflow that started it as a child, by its id; else unknown", () => {
    expect(startedByOf({ memo: { startedBy: 'billing@rack4' }, parentExecution: { workflowId: 'reconcile@c', runId: 'x' } })).toBe(
      'billing@rack4',
    );
    expect(startedByOf({ memo: {}, parentExecution: { workflowId: 'reconcile@c', runId: 'x' } })).toBe('reconciler');
    expect(startedByOf({ memo: undefined, parentExecution: undefined })).toBe('unknown');
    expect(starterOf('evict@c')).toBe('trash space cap');
    expect(starterOf('trash:12@c')).toBe('trash expiry');
    expect(starterOf('trash:12')).toBe('trash expiry');
    expect(starterOf('something@c')).toBe('workflow something@c');
    expect(starterOf(undefined)).toBe('unknown');
  });
});

test('a listed run becomes an OperationInfo: its search attributes name the operation and the table', () => {
  const run = {
    workflowId: 'rename:5@cat1',
    runId: 'r3',
    status: { code: 2, name: 'COMPLETED' },
    startTime: new Date('2026-01-02T11:00:00.000Z'),
    closeTime: new Date('2026-01-02T11:00:00.050Z'),
    memo: { startedBy: 'alice@host1' },
    typedSearchAttributes: new TypedSearchAttributes([
      { key: SEARCH_ATTRIBUTES.tableOp, value: 'rename' },
      { key: SEARCH_ATTRIBUTES.tableId, value: 5 },
      { key: SEARCH_ATTRIBUTES.tableNamespace, value: 'ops' },
      { key: SEARCH_ATTRIBUTES.tableName, value: 'orders2' },
    ]),
  } as unknown as WorkflowExecutionInfo;
  expect(toOperationInfo(run)).toEqual({
    workflowId: 'rename:5@cat1',
    runId: 'r3',
    operation: 'rename',
    tableId: 5,
    table: 'ops.orders2',
    status: 'COMPLETED',
    startedAt: '2026-01-02T11:00:00.000Z',
    closedAt: '2026-01-02T11:00:00.050Z',
    startedBy: 'alice@host1',
    currentStep: null,
  });
});

test("the visibility query asks for the table operations' runs, of one table, running only", () => {
  expect(operationsQuery({})).toBe(
    "TableOp IN ('create', 'adopt', 'trash', 'adoptTrash', 'truncate', 'undelete', 'recallInPlace', 'purge', 'rename', 'hold', 'release', 'lease')",
  );
  expect(operationsQuery({ tableId: 7, running: true })).toMatch(/^TableOp IN \(.*\) AND TableId = 7 AND ExecutionStatus = 'Running'$/);
});

test('ops prints aligned columns, the running step last; history a line of the table, then its runs', () => {
  expect(formatOperations([running, created]).split('\n')).toEqual([
    'STARTED                   OPERATION  TABLE  NAME        STATUS     CLOSED                    BY           WORKFLOW                STEP',
    `2026-01-02T10:00:00.000Z  trash      5      ops.orders  RUNNING    -                         alice@host1  trash:5@cat1            ${running.currentStep}`,
    '2026-01-02T09:00:00.000Z  create     5      ops.orders  COMPLETED  2026-01-02T09:00:00.120Z  reconciler   create:ops.orders@cat1  -',
  ]);
  const table: TableInfo = {
    id: 5,
    namespace: 'ops',
    name: 'orders',
    state: 'TRASHED',
    shards: 1,
    placement: [{ shard: 0, node: 'node-0' }],
    createdAt: '2026-01-02T09:00:00.120Z',
    droppedAt: '2026-01-02T10:02:00.000Z',
    droppedBy: 'alice@host1',
    expireAt: '2026-01-09T10:02:00.000Z',
    purgedAt: null,
    hold: { reason: 'case 114', since: '2026-01-02T10:03:00.000Z' },
  };
  const text = formatHistory({ table, operations: [created] }).split('\n');
  expect(text.slice(0, 3)).toEqual([
    'table 5 ops.orders: TRASHED since 2026-01-02T10:02:00.000Z by alice@host1, expires 2026-01-09T10:02:00.000Z, on hold: case 114',
    '',
    'STARTED                   OPERATION  NAME        STATUS     CLOSED                    BY          WORKFLOW                STEP',
  ]);
  // A trash whose drop did not say who (made before the catalog recorded it): the line says nothing of who.
  expect(formatHistory({ table: { ...table, droppedBy: null, hold: null }, operations: [] }).split('\n')[0]).toBe(
    'table 5 ops.orders: TRASHED since 2026-01-02T10:02:00.000Z, expires 2026-01-09T10:02:00.000Z',
  );
  expect(formatHistory({ table: { ...table, state: 'PURGED', purgedAt: '2026-01-03T00:00:00.000Z', hold: null }, operations: [] })).toBe(
    "table 5 ops.orders: PURGED at 2026-01-03T00:00:00.000Z (a tombstone)\nno operation on it is left in the server's visibility (runs are kept for the namespace's retention)",
  );
});
