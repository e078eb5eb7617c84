import type { TableFateClient } from '../../client/client';
import type { TableName } from '../../domain/names';
import type { TableState } from '../../domain/states';
import type { Operation, StepsCall } from '../../domain/steps';
import type { TableInfo } from '../../domain/table';
import { create } from '../../workflows/create';
import { hold } from '../../workflows/hold';
import { purge } from '../../workflows/purge';
import { rename } from '../../workflows/rename';
import { trash } from '../../workflows/trash';
import { truncate } from '../../workflows/truncate';
import { undelete } from '../../workflows/undelete';
import { textOf, type Disturbance, type Engine, type PartMade, type TrashRunLook } from './engine';

/** A table as the tests see it: what the catalog says, where its files are, who holds its locks, its trash run. */
export interface Look {
  /** Its state (one of them); `none`: no record (a create that never made its prepare). */
  state: TableState | 'none' | ReadonlyArray<TableState | 'none'>;
  /** Where every shard's whole set of files is, and no other file of the table anywhere; null: no file at all. */
  area?: 'live' | 'trash' | null;
  /** The name it bears: the one the test gave it, or the new one (a rename's). */
  name?: 'given' | 'new';
  held?: boolean;
  /** Where the table's trash run is (test/engine/engine.ts's trashRunOf). */
  trashRun?: TrashRunLook;
  /** A truncate's entry of the table's rows: none, or one, TRASHED, every shard's set whole in the trash. */
  truncatedInto?: 'none' | 'trash';
}

/** The table a case works on: a name of its own, and the name a rename gives it. */
export interface Subject {
  name: TableName;
  newName: TableName;
}

/** One operation, as the engine tests run it: its step list, the table it starts from, and the looks it must end with. */
export interface OperationCase {
  title: string;
  /** Short, for table names: `<slug>_<case>`. */
  slug: string;
  /** The operation's steps, as the worker runs them (workflows/<operation>.ts). */
  operation: Operation<never>;
  shards: number;
  /** What is there before the operation: no table, a READY one, or a TRASHED one (with its trash run waiting). */
  given: 'nothing' | 'READY' | 'TRASHED';
  workflowId(engine: Engine, subject: Subject, tableId: number | undefined): string;
  /** Runs the operation on the table (by its name, or by `tableId`), through the SDK. */
  run(client: TableFateClient, subject: Subject, tableId: number | undefined): Promise<TableInfo>;
  /** The table before the operation: where a run that is taken back leaves it. */
  before: Look;
  /** The table once the operation is done. */
  after: Look;
  /** The state the operation answers, where it is not the table's (a truncate answers its rows' entry, TRASHED). */
  answers?: TableState;
  /** Where a run that stops past the operation's point of no return leaves the table (the next run goes forward). */
  stuck?: Look;
}

const RETENTION_SECONDS = 3600;

const trashed = { state: 'TRASHED', area: 'trash', trashRun: 'waiting' } as const;

/**
 * The operations (workflows/operations.ts's), each with its setup and end states. The trash's steps change more often
 * than the others' (the lead's work): what is expected of it is derived from its step list (./expected.ts), as for all.
 */
export const OPERATIONS: readonly OperationCase[] = [
  {
    title: 'create',
    slug: 'create',
    operation: create,
    shards: 3,
    given: 'nothing',
    workflowId: (engine, { name }) => engine.workflowIdOf('create', name),
    run: (client, { name }) => client.create({ table: textOf(name), shards: 3 }),
    // Taken back, its record stays, CREATE_FAILED (a retry resumes it); a prepare that failed made none.
    before: { state: ['none', 'CREATE_FAILED'], area: null },
    after: { state: 'READY', area: 'live' },
  },
  {
    title: 'undelete',
    slug: 'undelete',
    operation: undelete,
    shards: 3,
    given: 'TRASHED',
    workflowId: (engine, _subject, tableId) => engine.workflowIdOf('undelete', tableId!),
    run: (client, _subject, tableId) => client.undelete({ table: tableId! }),
    before: { ...trashed, name: 'given' },
    after: { state: 'READY', area: 'live', name: 'given', trashRun: 'restored' },
  },
  {
    title: 'purge',
    slug: 'purge',
    operation: purge,
    shards: 3,
    given: 'TRASHED',
    workflowId: (engine, _subject, tableId) => engine.workflowIdOf('purge', tableId!),
    run: (client, _subject, tableId) => client.purge({ tableId: tableId! }),
    before: trashed,
    after: { state: 'PURGED', area: null, trashRun: 'purged' },
    // Past its point of no return the purge has told the trash's run that the trash is over (it ends once it begins).
    stuck: { state: 'PURGING', trashRun: 'purged' },
  },
  {
    // More shards than one call changes: its marks take two calls, the deletes join the second and end in a third.
    title: 'purge of 17 shards',
    slug: 'purge17',
    operation: purge,
    shards: 17,
    given: 'TRASHED',
    workflowId: (engine, _subject, tableId) => engine.workflowIdOf('purge', tableId!),
    run: (client, _subject, tableId) => client.purge({ tableId: tableId! }),
    before: trashed,
    after: { state: 'PURGED', area: null, trashRun: 'purged' },
    // Past its point of no return the purge has told the trash's run that the trash is over (it ends once it begins).
    stuck: { state: 'PURGING', trashRun: 'purged' },
  },
  {
    title: 'rename',
    slug: 'rename',
    operation: rename,
    shards: 3,
    given: 'READY',
    workflowId: (engine, _subject, tableId) => engine.workflowIdOf('rename', tableId!),
    run: (client, { name, newName }) => client.rename({ table: textOf(name), newName: textOf(newName) }),
    before: { state: 'READY', area: 'live', name: 'given' },
    after: { state: 'READY', area: 'live', name: 'new' },
  },
  {
    title: 'hold',
    slug: 'hold',
    operation: hold,
    shards: 3,
    given: 'READY',
    workflowId: (engine, _subject, tableId) => engine.workflowIdOf('hold', tableId!),
    run: (client, { name }) => client.hold({ table: textOf(name), reason: 'issue 40' }),
    before: { state: 'READY', area: 'live', held: false },
    after: { state: 'READY', area: 'live', held: true },
  },
  {
    title: 'trash',
    slug: 'trash',
    operation: trash,
    shards: 3,
    given: 'READY',
    workflowId: (engine, _subject, tableId) => engine.workflowIdOf('trash', tableId!),
    run: (client, { name }) => client.trash({ table: textOf(name), retentionSeconds: RETENTION_SECONDS }),
    // Taken back, the table is READY again, and its trash run has ended (answering the caller why).
    before: { state: 'READY', area: 'live', trashRun: 'ended' },
    after: trashed,
  },
  {
    title: 'truncate',
    slug: 'truncate',
    operation: truncate,
    shards: 3,
    given: 'READY',
    workflowId: (engine, _subject, tableId) => engine.workflowIdOf('truncate', tableId!),
    run: (client, { name }) => client.truncate({ table: textOf(name), retentionSeconds: RETENTION_SECONDS }),
    // Taken back, the rows are where they were, and no entry holds them; done, the table is live (its sets fresh) and
    // its rows are an entry of their own in the trash.
    before: { state: 'READY', area: 'live', truncatedInto: 'none' },
    after: { state: 'READY', area: 'live', truncatedInto: 'trash' },
    answers: 'TRASHED',
  },
];

/** One run of an operation on a table of its own, as the engine saw it. */
export interface Run {
  subject: Subject;
  workflowId: string;
  /** The table (a create's, once its prepare made it); undefined if there is none. */
  tableId: number | undefined;
  outcome: { answer: TableInfo } | { error: Error & { type?: string } };
  /** The parts the run made, in order. */
  parts: PartMade[];
  /** The executor's calls the run made, in order, as asked. */
  calls: StepsCall[];
  /** The shard changes the storage driver made on the table during the run, in order. */
  driver: string[];
}

/** Makes the table a case starts from (named after the case: `<slug>_<tag>`), then runs the operation on it, disturbed. */
export async function runCase(engine: Engine, op: OperationCase, tag: string, disturbance: Disturbance): Promise<Run> {
  const name = { namespace: 'engine', name: `${op.slug}_${tag}` };
  const subject: Subject = { name, newName: { ...name, name: `${name.name}_renamed` } };
  let table: TableInfo | undefined;
  if (op.given !== 'nothing') table = await engine.client.create({ table: textOf(name), shards: op.shards });
  if (op.given === 'TRASHED') table = await engine.client.trash({ table: textOf(name), retentionSeconds: RETENTION_SECONDS });
  const workflowId = op.workflowId(engine, subject, table?.id);
  engine.disturb(workflowId, disturbance);
  const driverBefore = table ? engine.driverChangesOf(table.id).length : 0;
  const outcome = await op.run(engine.client, subject, table?.id).then(
    (answer) => ({ answer }),
    (error: Error & { type?: string }) => ({ error }),
  );
  const tableId = table?.id ?? (await engine.catalog.findByName(name))?.id;
  return {
    subject,
    workflowId,
    tableId,
    outcome,
    parts: engine.partsOf(workflowId),
    calls: engine.callsOf(workflowId),
    driver: tableId === undefined ? [] : engine.driverChangesOf(tableId).slice(driverBefore),
  };
}
