/**
 * The vocabulary of an operation, in the manner of Accumulo FATE's Repo: each step says when it may run (`check`,
 * `isReady`), what it changes (`change`, then `shards`) and how to take that back (`undo`), side by side. An operation
 * is a list of such steps; the executor runs the list (workflows/execute.ts in the workflow, activities/steps-here.ts
 * in the worker) and decides alone how the steps are batched into calls. Pure: both halves read the same list.
 */
import type { Backoff, LockWaitPolicy } from './backoff';
import type { TableFateError } from './errors';
import type { Lease } from './leases';
import type { TableName } from './names';
import type { ShardChange, ShardRef } from './contracts';
import type { TableState } from './states';
import type { TableRecord } from './table';
import type { CreateParams } from './table';

/** What a step knows when it runs. */
export interface StepContext<I> {
  input: I;
  /** The table as read under the operation's lock when it was taken (null: there is none). */
  checked: TableRecord | null;
  /** The table as the last change left it (absent before the first change or read). */
  table?: TableRecord;
  /** Workflow time when the operation's lock was taken: the time its check decides on, and a drop's drain starts. */
  lockedAt: number;
  /** Workflow time of the call that runs the step. */
  now: number;
  /** The leases live on the table, read for a step that waits for them (`waitsForLeases`). */
  leases: Lease[];
  /** What the run's shard changes have said so far, a sentence each (a cascade's family, as its move said it). */
  said: string[];
  /**
   * The table the change is made on, when the operation names its tables (`Operation.tables`): a step's change is made
   * on each of them in turn, and `checked` and `table` are that table's.
   */
  tableId?: number;
  /** Every table of a run over several (`Operation.tables`), as the last change left each (null: not read yet). */
  group?: ReadonlyArray<TableRecord | null>;
}

/** What a check decides on the table read under the lock. */
export type Verdict =
  /** Go on with the next step. */
  | { proceed: true }
  /** Go on, only forward: an earlier run crossed the point of no return (a purge found PURGING); nothing is undone. */
  | { forward: true }
  /** Nothing (more) to do: the operation ends now, successfully, with the table as it is (`why`, for the log). */
  | { finish: string }
  /** Refused, with the error the caller hears. */
  | { refuse: TableFateError };

/** Whether a step that waits may run now. */
export type Readiness = { ready: true } | { waitMs: number; why: string } | { refuse: TableFateError };

/** A change of the catalog a step makes, as data the worker carries out (activities/steps-here.ts). */
export type CatalogChange =
  /** A compare-and-set of the table's state (and name). */
  | { kind: 'transition'; from: TableState[]; to: TableState; rename?: TableName; expectName?: TableName }
  /** A create's record: id and placement chosen once, the name's lock and the table's taken (busy: wait; found made: finish). */
  | { kind: 'prepareCreate'; table: TableName; params: CreateParams; nameLock: string }
  /**
   * A drop's first change, which takes the table's lock (busy: wait): READY to DRAINING while leases are live, else
   * TRASHING; a truncate's (`truncate`): READY to TRUNCATING, the id of its rows' trash entry chosen and locked.
   */
  | { kind: 'startDrain'; tableId: number; expectName?: TableName; droppedWith?: number[]; truncate?: true }
  /**
   * TRASHING to TRASHED with the retention asked, else the one in force where the table lives, and who dropped it
   * (`droppedBy`, recorded beside the drop time; null when absent); `startExpiry`: then the trash's expiry, a run of its
   * own (workflows/trash-expiry.ts), is started, with how its purge waits and tries again.
   */
  | {
      kind: 'commitTrash';
      tableId: number;
      retentionSeconds?: number;
      droppedBy?: string;
      /** What the drop took along, as its move said it (TableRecord.family). */
      family?: string[];
      /** The other tables of a drop of several as one (TableRecord.droppedWith). */
      droppedWith?: number[];
      /**
       * A truncate's commit (TRUNCATING to READY): the trash entry its rows went to (TableRecord.truncateInto), recorded
       * TRASHED as a drop's table would be; the entry is what the commit answers, and whose expiry it starts.
       */
      truncateInto?: number;
      /** The commit's time is the drop time, not the one stamped on entering TRASHING (a drop of several: one for all). */
      restamp?: true;
      startExpiry?: { lockWait?: LockWaitPolicy; expiryRetry?: Backoff };
    }
  /** A legal hold placed (`hold`) or released (null). */
  | { kind: 'changeHold'; tableId: number; hold: { reason: string | null; since: number } | null; expectName?: TableName }
  /** One more lock for the run (busy: wait). */
  | { kind: 'lock'; lock: string };

type Of<I, T> = T | ((context: StepContext<I>) => T);

/**
 * A trash begun: the drop time its table was stamped with on entering TRASHING, and how its expiry's purge waits and tries
 * again, for the expiry's run (`trash:<id>`) started beside the move.
 */
export interface TrashBegun {
  droppedAt: number;
  lockWait?: LockWaitPolicy;
  expiryRetry?: Backoff;
}

/** How the trash made at `droppedAt` ended, as its expiry run is told (a recall, a purge by hand). */
export interface EndOfTrash {
  reason: 'restored' | 'purged';
  droppedAt: number;
}

/** One step of an operation. */
export interface Step<I> {
  name: string;
  /** FATE's isReady, on the table read under the lock: go on, go forward only, finish now, or refuse. */
  check?: (context: StepContext<I>) => Verdict;
  /** FATE's isReady for a step that waits for the table's leases (read fresh before each look). */
  waitsForLeases?: (context: StepContext<I>) => Readiness;
  /** The catalog change the step begins with (none when the function answers undefined). */
  change?: Of<I, CatalogChange | undefined>;
  /** The change on every shard of the table, once `change` is made. */
  shards?: Of<I, ShardChange>;
  /**
   * FATE's isReady asked of every shard: a read (no change) that refuses what the next step's shards would refuse, so
   * that a change of several shards is refused before any of them is made. It rides along in any call, as a check does.
   */
  checkShards?: Of<I, ShardChange>;
  /** How the step is taken back: its shards' change on every shard, then the catalog's change back. */
  undo?: { shards?: Of<I, ShardChange>; change?: Of<I, CatalogChange> };
  /** From this step on the operation only goes forward: nothing before it is undone, and it has no undo itself. */
  pointOfNoReturn?: true;
  /**
   * The trash's expiry run (`trash:<id>`) is started, once the step's change is made (the table TRASHING, stamped with
   * its drop time), while its shards move: the start costs a write of the Temporal server's, made beside the move rather
   * than after the commit. The call answers once the run is started. The run waits for the commit (and, the move taken
   * back, finds its trash ended and closes). Undefined: no trash to begin (a table made TRASHING by an older worker,
   * unstamped, whose commit starts it).
   */
  beginsTrash?: (context: StepContext<I>) => TrashBegun | undefined;
  /**
   * The trash's expiry run (`trash:<id>`) is told its trash is over, once the step's change is made, while its shards
   * change; the call answers once the message is delivered. Only on a step the run never takes back: its point of no
   * return, or its last.
   */
  endsTrash?: (context: StepContext<I>) => EndOfTrash | undefined;
}

/** An operation: its name (a key of the registry the worker is given), the steps, and the table it locks first, if any. */
export interface Operation<I> {
  name: string;
  /**
   * The table whose lock the operation's first call takes, reading the table under it (`checked`). Absent: its first
   * step's change takes its locks itself (a create's prepare, a drop's first change).
   */
  lockTable?: (input: I) => number;
  /**
   * The tables the operation addresses, from its input, when it may address several as one (a drop of several tables):
   * each step's check, wait and change are made on each of them in ascending id order (so two such runs never wait for
   * each other's locks in a circle), and its shards are all of theirs, changed together on each node where the driver
   * can (`ShardChange.together`). With `lockTable`, the first call locks every one of them, in that order.
   */
  tables?: (input: I) => readonly number[];
  steps: ReadonlyArray<Step<I>>;
}

/** The value of a step's `Of`: the thing itself, or what its function makes of the context. */
export function valueOf<I, T>(of: Of<I, T>, context: StepContext<I>): T {
  return typeof of === 'function' ? (of as (context: StepContext<I>) => T)(context) : of;
}

/** The changes a step makes on every shard, named for what they do. */
export const SHARDS = {
  create: { method: 'createShard' },
  drop: { method: 'dropShard' },
  toTrash: { method: 'moveShard', from: 'live', to: 'trash' },
  backFromTrash: { method: 'moveShard', from: 'trash', to: 'live' },
  /** A live table given another name where its users query it (files: nothing to do, the catalog alone names a set). */
  renamed: { method: 'moveShard', from: 'live', to: 'live' },
  markGarbage: { method: 'markGarbage' },
  unmarkGarbage: { method: 'unmarkGarbage' },
  deleteGarbage: { method: 'deleteGarbage' },
} as const satisfies Record<string, ShardChange>;

/** A compare-and-set of the table's state, as a step writes it. */
export function transition(
  from: TableState | TableState[],
  to: TableState,
  more: Omit<Extract<CatalogChange, { kind: 'transition' }>, 'kind' | 'from' | 'to'> = {},
): CatalogChange {
  return { kind: 'transition', from: Array.isArray(from) ? from : [from], to, ...more };
}

/** The name a table bears. */
export const nameOf = (table: TableName): TableName => ({ namespace: table.namespace, name: table.name });

/**
 * Where a run of an operation stands, carried from call to call: the step it is at, whether that step's change is made,
 * which of its shards are changed, which steps are begun (their undos run, last first, if the run is taken back), and
 * what the steps know.
 */
export interface Progress {
  /** The operation's table lock (`lockTable`) is taken and the table read under it. */
  locked: boolean;
  /** Whether the run holds locks it has not released yet. */
  holdsLocks: boolean;
  /** The step the run is at (the steps' length once every step is done). */
  step: number;
  /** The step's catalog change is made (or it has none). */
  changed: boolean;
  /** The step's shards changed so far, by their place in the run's shards (`shardsOfRun`): a one-table run's shard numbers. */
  shardsDone: number[];
  /** The steps begun that have an undo, first to last; a point of no return empties it. */
  begun: number[];
  /**
   * The operation is past its point of no return (crossed by this run, or by an earlier one: a check said `forward`): the
   * steps go on to the end, a cancel is not taken, and nothing is undone.
   */
  forwardOnly: boolean;
  /** Taking back: the shards of the last begun step whose undo is made. */
  undoneShards: number[];
  checked: TableRecord | null;
  table?: TableRecord;
  lockedAt: number;
  leases: Lease[];
  /**
   * An operation over several tables (`Operation.tables`, more than one): each of them, in ascending id order, as read
   * under its lock and as the last change left it. `checked` and `table` are the first's.
   */
  group?: GroupMember[];
}

/** One table of a run over several, as the run knows it. */
export interface GroupMember {
  id: number;
  checked: TableRecord | null;
  table?: TableRecord;
  /** The steps whose change is made on it: taken back, a step's change is undone on these tables only. */
  changed?: number[];
}

/** The tables of a run over several, in the order their locks are taken; undefined for a run over one. */
export function groupOf(ids: readonly number[]): GroupMember[] | undefined {
  const sorted = [...new Set(ids)].sort((a, b) => a - b);
  return sorted.length > 1 ? sorted.map((id) => ({ id, checked: null })) : undefined;
}

/** Every shard of the run's tables, table by table (a one-table run's: its placement, in shard order). */
export function shardsOfRun(progress: Pick<Progress, 'group' | 'table' | 'checked'>): ShardRef[] {
  const tables = progress.group ? progress.group.map((m) => m.table ?? m.checked) : [progress.table ?? progress.checked];
  return tables.flatMap((t) => (t ? t.placement.map((p) => ({ tableId: t.id, shard: p.shard, node: p.node })) : []));
}

/** A run's progress before its first call. */
export function startOf(now: number): Progress {
  return {
    locked: false,
    holdsLocks: false,
    step: 0,
    changed: false,
    shardsDone: [],
    begun: [],
    forwardOnly: false,
    undoneShards: [],
    checked: null,
    lockedAt: now,
    leases: [],
  };
}

/** Whether the step has anything to take back. */
export const undoable = <I>(step: Step<I>): boolean => step.undo !== undefined;

/** Whether the step changes anything (a check or a wait does not). */
export const changes = <I>(step: Step<I>): boolean => step.change !== undefined || step.shards !== undefined;

/**
 * Whether step `next` may run in a call that has already run steps before it. A cancel is taken between calls, and must
 * find everything made since the last point of no return still undoable: so a step that cannot be undone (a commit)
 * waits for a call of its own once something undoable has been made, unless it is the point of no return itself. A step
 * that changes nothing (a check, a wait) always rides along.
 */
export function mayJoinCall<I>(next: Step<I>, progress: Progress): boolean {
  return !changes(next) || undoable(next) || next.pointOfNoReturn === true || progress.begun.length === 0;
}

/** One call of the executor's to the worker (activities/steps-here.ts): run the operation's steps as far as one call may. */
export interface StepsCall {
  catalogId?: string;
  /** The operation's name, a key of the worker's registry (workflows/operations.ts). */
  operation: string;
  input: unknown;
  progress: Progress;
  /** The call's key in the run: the catalog journals each part of it under this key and the part's name. */
  call: string;
  /** Workflow time of the call. */
  now: number;
  /** Forward through the steps, or back through the undos of the steps begun (a compensation). */
  direction: 'forward' | 'back';
  /** How many shards of a step one call changes at most: a long change is seen to progress between calls. */
  shardsPerCall: number;
  /** What the run's shard changes said in its earlier calls (absent: nothing, or a call of an older run). */
  said?: string[];
}

/** How a call ended, and where the run stands after it. */
export interface StepsAnswer {
  progress: Progress;
  /** What the shard changes said beyond doing them (a recall's foreign keys it could not put back as they were). */
  notes: string[];
  outcome:
    | { kind: 'done' }
    /** A check (or a create found made) ended the operation: the table is as it was found. */
    | { kind: 'finished'; why: string }
    /** A lock another run holds: nothing of this step was made; ask again once it is free. */
    | { kind: 'busy'; holder: string }
    /** The step is not ready (leases live): look again after `ms`, or when the run is woken. */
    | { kind: 'wait'; ms: number; why: string }
    /** These shards are on nodes this worker does not serve: their nodes' workers make `change`. */
    | { kind: 'elsewhere'; change: ShardChange; shards: ShardRef[] }
    /** The call made what it may; the next call goes on (a cancel is taken in between). */
    | { kind: 'goOn' }
    /** A step (or, taking back, an undo) failed for good, or a check refused. */
    | { kind: 'failed'; type: string; message: string };
}

/** The progress once the shards a node's worker changed are made: as a step's change, or as its undo. */
export function madeElsewhere(progress: Progress, direction: StepsCall['direction'], shards: readonly ShardRef[]): Progress {
  const all = shardsOfRun(progress);
  const numbers = shards.map((shard) => all.findIndex((s) => s.tableId === shard.tableId && s.shard === shard.shard));
  return direction === 'forward'
    ? { ...progress, shardsDone: [...progress.shardsDone, ...numbers] }
    : { ...progress, undoneShards: [...progress.undoneShards, ...numbers] };
}
