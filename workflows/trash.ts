import { CancellationScope, log } from '@temporalio/workflow';
import { TableBusyError } from '../domain/errors';
import { describeLease } from '../domain/leases';
import { DEFAULT_DRAIN_TIMEOUT_SECONDS } from '../domain/limits';
import { tablesOf, type TrashInput } from '../domain/operation-inputs';
import { trashChangedSignal } from '../domain/contracts';
import { SHARDS, transition, type Operation, type Readiness, type Step, type StepContext, type TrashBegun } from '../domain/steps';
import type { ShardChange } from '../domain/contracts';
import type { TableName } from '../domain/names';
import { toTableInfo, type TableInfo } from '../domain/table';
import type { TrashCommitted } from '../activities';
import { operationRun, wokenBy } from './execute';
import { purge } from './purge';

/**
 * Soft-deletes a table, or several as one (`together`: all of them, or none): new leases stopped (DRAINING while leases
 * are live, waiting for them), TRASHING with its drop time, shards to the trash area while the trash's expiry run is
 * started, TRASHED with its expiry. The table is unreachable from the first step on.
 */
export const trash: Operation<TrashInput> = {
  name: 'drop',
  tables: tablesOf,
  steps: [
    {
      // Takes the table's lock (a table found DRAINING or TRASHING is a drop resumed); undone, the table is READY again.
      name: 'stop new leases',
      change: ({ input, tableId }) => {
        const expectName = expectedNameOf(input, tableId!);
        const others = tablesOf(input).filter((id) => id !== tableId);
        return {
          kind: 'startDrain',
          tableId: tableId!,
          ...(expectName ? { expectName } : {}),
          ...(others.length > 0 ? { droppedWith: others } : {}),
        };
      },
      undo: { change: transition(['DRAINING', 'TRASHING'], 'READY') },
    },
    { name: 'wait for leases', waitsForLeases: drained },
    {
      name: 'move shards to trash',
      change: ({ table }) => (table!.state === 'DRAINING' ? transition('DRAINING', 'TRASHING') : undefined),
      beginsTrash: trashBegun,
      shards: toTrashWithinDrain,
      undo: { shards: SHARDS.backFromTrash },
    },
    commitTrashed({ droppedWith: ({ input, tableId }) => tablesOf(input).filter((id) => id !== tableId) }),
  ],
};

/** The name the client resolved to one of the drop's tables, if it gave one. */
function expectedNameOf(input: TrashInput, tableId: number): TableName | undefined {
  return tableId === input.tableId ? input.expectedName : input.together?.find((other) => other.tableId === tableId)?.expectedName;
}

/** What a drop is asked besides its table: how long it drains, how long the trash keeps the table, who dropped it. */
type DropSettings = Pick<TrashInput, 'retentionSeconds' | 'drainTimeoutSeconds' | 'expiryRetry' | 'droppedBy' | 'lockWait' | 'startedBy'>;

/** One deadline for the whole drain, from when the table's lock was taken: the leases, then (PostgreSQL) the sessions. */
export const drainDeadline = ({ input, lockedAt }: StepContext<Pick<TrashInput, 'drainTimeoutSeconds'>>) =>
  lockedAt + (input.drainTimeoutSeconds ?? DEFAULT_DRAIN_TIMEOUT_SECONDS) * 1000;

/** A move of the table's shards that waits (PostgreSQL) for the sessions using the table as long as the drain's deadline leaves. */
export function withinDrain(move: Extract<ShardChange, { method: 'moveShard' }>) {
  return (context: StepContext<Pick<TrashInput, 'drainTimeoutSeconds'>>): ShardChange => ({
    ...move,
    drainTimeoutMs: Math.max(drainDeadline(context) - context.now, 1000),
  });
}

/**
 * The move of a drop's shards to the trash, within the drain's deadline (with `cascade`, with what depends on the table;
 * of a `wholeNamespace`, with its schema).
 */
export function toTrashWithinDrain(
  context: StepContext<Pick<TrashInput, 'drainTimeoutSeconds' | 'cascade' | 'wholeNamespace'>>,
): ShardChange {
  const { cascade, wholeNamespace: namespace } = context.input;
  return {
    ...withinDrain(SHARDS.toTrash)(context),
    ...(cascade ? { cascade: true } : {}),
    ...(namespace !== undefined ? { namespace } : {}),
  };
}

/**
 * The trash a drop's move begins, once its table is TRASHING, stamped with its drop time: its expiry's run is started
 * beside the move (Step.beginsTrash). A drop of several as one begins none: its tables may have gone to the trash at
 * different times (one straight away, another once its leases drained), and the unit they make has one drop time, its
 * commit's, whose expiries the commit starts.
 */
export function trashBegun({ table, input, group }: StepContext<Pick<TrashInput, 'lockWait' | 'expiryRetry'>>): TrashBegun | undefined {
  if (group !== undefined || table?.state !== 'TRASHING' || table.droppedAt === null) return undefined;
  const { lockWait, expiryRetry } = input;
  return { droppedAt: table.droppedAt, ...(lockWait ? { lockWait } : {}), ...(expiryRetry ? { expiryRetry } : {}) };
}

/**
 * A drop's last step: TRASHED, with its retention, who dropped it (the drop's starter; a drop resumed by the
 * reconciler carries its lost run's), what its move took along (its family, as the move said it) and the tables dropped
 * with it as one (`droppedWith`). The trash's expiry, a run of its own (trash-expiry.ts) that recalls, purges and retention
 * changes address, was started by the move; the commit starts it where nothing did: a truncate's (`truncated`: its rows'
 * trash entry, the table's truncateInto, TRASHED so, and the table READY), a drop of several as one (one drop time for
 * all its tables, the commit's: `restamp`), and a table made TRASHING by an older worker, without a drop time.
 */
export function commitTrashed<I extends DropSettings>(
  opts: { droppedWith?: (context: StepContext<I>) => number[]; truncated?: true } = {},
): Step<I> {
  return {
    name: opts.truncated ? 'commit trashed, start its expiry' : 'commit trashed',
    change: (context) => {
      const { retentionSeconds, lockWait, expiryRetry, droppedBy, startedBy } = context.input;
      const others = opts.droppedWith?.(context) ?? [];
      // (Whether its move began the trash. Where it did not, the commit starts the expiry: a truncate's entry, a drop of
      // several, a table made TRASHING by an older worker.)
      const begun = trashBegun(context) !== undefined;
      return {
        kind: 'commitTrash',
        tableId: context.table!.id,
        retentionSeconds,
        droppedBy: droppedBy ?? startedBy,
        ...(context.said.length > 0 ? { family: context.said } : {}),
        ...(others.length > 0 ? { droppedWith: others } : {}),
        ...(opts.truncated ? { truncateInto: context.table!.truncateInto! } : {}),
        ...(context.group !== undefined ? { restamp: true as const } : {}),
        ...(begun ? {} : { startExpiry: { ...(lockWait ? { lockWait } : {}), ...(expiryRetry ? { expiryRetry } : {}) } }),
      };
    },
  };
}

/**
 * Qserv's drain: a DRAINING table (a drop's) or a TRUNCATING one waits until every lease is released (the release wakes
 * the run) or has expired (it looks again at the soonest expiry). Past the deadline the operation is TableBusy, naming
 * the leases, and taken back.
 */
export function drained(context: StepContext<Pick<TrashInput, 'drainTimeoutSeconds'>>): Readiness {
  const { table, leases, now } = context;
  if ((table!.state !== 'DRAINING' && table!.state !== 'TRUNCATING') || leases.length === 0) return { ready: true };
  const operation = table!.state === 'DRAINING' ? 'drop' : 'truncate';
  const deadline = drainDeadline(context);
  const until = new Date(deadline).toISOString();
  if (now >= deadline) {
    return {
      refuse: new TableBusyError(
        `table ${table!.id} is still leased at the ${operation}'s drain deadline, ${until}: ` +
          `${leases.map(describeLease).join('; ')}; the ${operation} was taken back, the table is READY`,
      ),
    };
  }
  return {
    waitMs: Math.max(Math.min(leases[0]!.expiresAt - now, deadline - now), 1),
    why: `draining table ${table!.id} until ${until}: ${leases.map(describeLease).join('; ')}`,
  };
}

/**
 * A drop's run: the steps above. Its caller hears the table TRASHED; with the trash off where it was dropped
 * (trash.enabled false), the table is purged in the same run and its caller hears it PURGED, unless it is held or the
 * purge fails or outwaits its run's share of a lock wait (then it waits in the trash for its expiry).
 */
export async function trashTable(input: TrashInput): Promise<TableInfo> {
  const run = operationRun(trash, input, { wake: wokenBy(trashChangedSignal) });
  const trashed: TrashCommitted = await run.table();
  const answer = await keptOrPurged(trashed, input);
  // (The tables dropped with it, each purged too where the trash is off: one after the other, as their own runs.)
  for (const other of run.others()) await keptOrPurged(other, input);
  return withNotes(answer, run.said());
}

/** A table as its caller hears it, with what the run's shard changes said (a cascade's family). */
export const withNotes = (info: TableInfo, notes: readonly string[]): TableInfo =>
  notes.length > 0 ? { ...info, notes: [...notes] } : info;

/**
 * A table a drop has just committed to the trash, as its caller hears it: TRASHED; or, with the trash off where it was
 * dropped, purged now (unless held, or the purge fails: then it waits in the trash for its expiry).
 */
export async function keptOrPurged(trashed: TrashCommitted, input: Pick<TrashInput, 'catalogId' | 'lockWait'>): Promise<TableInfo> {
  if (trashed.state !== 'TRASHED' || trashed.policy?.enabled !== false || trashed.hold) return toTableInfo(trashed);
  // The table is in the trash: a cancel request can no longer take the drop back.
  return CancellationScope.nonCancellable(async () => {
    const { catalogId, lockWait } = input;
    const what = { tableId: trashed.id, trigger: 'policy', droppedAt: trashed.droppedAt!, catalogId, lockWait } as const;
    try {
      const purged = await operationRun(purge, what).table();
      if (purged.state === 'PURGED') return toTableInfo(purged);
    } catch (err) {
      log.warn('the trash is disabled, but purging the table at once failed: it waits in the trash for its expiry', {
        tableId: trashed.id,
        error: String(err),
      });
    }
    return toTableInfo(trashed);
  });
}
