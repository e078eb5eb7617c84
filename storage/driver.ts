import type { ShardArea, ShardRef, StorageArea } from '../domain/contracts';
import type { RecordedShardTable } from '../domain/health';

// How a shard is addressed and changed is a contract between workflows, activities and storage (domain/contracts.ts).
export type { ShardArea, ShardChange, ShardRef, StorageArea } from '../domain/contracts';

/** What a change said beyond doing it, a sentence each. */
export type ChangeNotes = string[];

export interface ShardReport {
  tableId: number;
  shard: number;
  node: string;
  /** Where the set was found, or null when no file of it exists anywhere. */
  area: ShardArea | 'garbage' | null;
  /** Total bytes of the set. */
  bytes: number;
  /** sha256 over the set's files (name and content, in name order), hex. */
  checksum: string;
}

/** One shard's files found in one area of one node, whether or not any table accounts for them. */
export interface StoredSet {
  tableId: number;
  shard: number;
  node: string;
  area: StorageArea;
  /** How many of the set's files exist there, 1..3: fewer than 3 is a set torn by a crash, or half moved. */
  files: number;
  /**
   * The newest ctime among its files, ms since the epoch. ctime, not mtime: a rename (a move to trash, a mark
   * as garbage) changes it, so a set that was just moved looks new, not as old as its data.
   */
  changedAt: number;
}

/** What listSets found: the sets of the nodes it could read, and the nodes it left alone because they are quarantined. */
export interface SetListing {
  /** By node number, then area (live, trash, garbage), tableId and shard. */
  sets: StoredSet[];
  skippedNodes: string[];
  /**
   * From a driver that records what it placed (PostgreSQL): every shard table of the catalog its record names on the
   * nodes listed, and how what the node holds under that identity differs from the record (dropped, renamed, moved,
   * its owner changed outside tablefate). `sets` leaves out a table no longer where its record says; this keeps it, for
   * `tablefate doctor` to report. Absent from a driver that keeps no record (files).
   */
  shardTables?: RecordedShardTable[];
}

/**
 * How the caller follows a change file by file: `beat` hears each step (an activity heartbeats there), and once
 * `signal` is aborted (the activity was cancelled or superseded) the change stops before its next file. A set
 * being renamed is put back first, so a stopped change leaves it where it was; a re-run finishes the job.
 */
export interface Watch {
  signal?: AbortSignal;
  beat?: () => void;
}

/** Throws why the watcher stopped the change, if it has; reports progress otherwise. */
export function checkWatch(watch: Watch | undefined): void {
  if (!watch) return;
  if (watch.signal?.aborted)
    throw watch.signal.reason instanceof Error ? watch.signal.reason : new Error('storage change stopped by its caller');
  watch.beat?.();
}

/**
 * Owns the bytes. Every method is idempotent: running it again after it succeeded, or after a crash half
 * way through, finishes the job or finds it done and succeeds. What it throws is one of errors.ts's classes
 * (or an fs error with its errno), which classifyStorageError sorts into permanent, transient and fatal.
 */
export interface StorageDriver {
  /** The storage nodes shards can be placed on, in a stable order. */
  readonly nodes: readonly string[];
  /** Creates an empty shard in the live area. A shard that already exists there is left as it is. */
  createShard(shard: ShardRef, watch?: Watch): Promise<void>;
  /** Removes a shard wherever it is (create's compensation). A missing shard is success. */
  dropShard(shard: ShardRef, watch?: Watch): Promise<void>;
  /**
   * Moves the shard's whole set of files between areas (try-and-roll-back); already there is success. `drainTimeoutMs`:
   * how long a driver whose tables others use (PostgreSQL) waits for them to let go before it gives up (TableBusy).
   * `cascade`: out of the live area, with what depends on the table (PostgreSQL: its views, moved along, and what live
   * tables have on it, detached), rather than refused while anything does.
   * Answers what the move did beyond the move, or could not do as the table had it, in words, if anything (PostgreSQL:
   * the views it took along; a foreign key a recall put back NOT VALID, or could not put back).
   */
  moveShard(
    shard: ShardRef,
    from: ShardArea,
    to: ShardArea,
    watch?: Watch,
    opts?: { drainTimeoutMs?: number; cascade?: boolean },
  ): Promise<ChangeNotes | void>;
  /**
   * Moves several shards of one node as moveShard moves one, in one transaction (tables dropped or recalled as one): none
   * of them is ever seen moved without the others, and what ties them is kept (PostgreSQL: a foreign key between two of
   * them is detached and put back in an order that never refuses the move). Absent from a driver with nothing to tie
   * (files: the catalog alone makes a set reachable): the shards are moved one by one.
   */
  moveShards?(
    shards: readonly ShardRef[],
    from: ShardArea,
    to: ShardArea,
    watch?: Watch,
    opts?: { drainTimeoutMs?: number; cascade?: boolean; namespace?: string },
  ): Promise<ChangeNotes>;
  /**
   * A truncate into the trash: the live shard's set (its rows) becomes the trashed shard `{ tableId: into, shard, node }`,
   * and an empty shard of the same definition is left live as `shard`, never a moment without one for a user of the
   * table (PostgreSQL: in one transaction, after the same drain as a drop's move, `drainTimeoutMs`). Idempotent: with
   * `into`'s trashed set already there, the truncate is made, and only a live shard missing (a crash between the two
   * halves, files) is created; it never truncates twice.
   */
  truncateShard(shard: ShardRef, into: number, watch?: Watch, opts?: { drainTimeoutMs?: number }): Promise<ChangeNotes | void>;
  /**
   * truncateShard's undo: `into`'s trashed set live again as `shard`, in place of the empty one the truncate left, which
   * is removed. Refused (PermanentStorageError, nothing changed) once anything was written to that empty one: its rows
   * are never thrown away. Nothing of `into` in the trash is success (the truncate was never made, or is taken back).
   */
  untruncateShard(shard: ShardRef, into: number, watch?: Watch): Promise<void>;
  /**
   * Truncates several shards of one node as truncateShard truncates one, in one transaction (tables truncated as one: a
   * cascade), each into its own entry (`into`): none of them is ever seen emptied without the others, and their keys to
   * one another hold (PostgreSQL: the twins' keys point at the twins). Absent from a driver with nothing to tie (files):
   * the shards are truncated one by one.
   */
  truncateShards?(
    shards: ReadonlyArray<{ shard: ShardRef; into: number }>,
    watch?: Watch,
    opts?: { drainTimeoutMs?: number },
  ): Promise<ChangeNotes>;
  /**
   * Refuses, as truncateShard into `into` would now, a truncate of the live shard (thrown as it would throw it), and
   * changes nothing: asked of every shard before any is truncated, so that one shard refusing leaves none emptied. A
   * shard truncated into `into` already passes. `with`: the other tables truncated with it (a cascade), whose keys to
   * it refuse nothing. A read: no lock. Absent from a driver whose truncate refuses nothing ahead of its change (files).
   */
  checkTruncate?(shard: ShardRef, into: number, withTables?: readonly number[]): Promise<void>;
  /**
   * A cascade truncate's family, as found on this node: the tables whose foreign keys reference a live shard of
   * `shards`, and theirs in turn, each with the tablefate table it is a shard of (`tableId`), or none (a table tablefate
   * does not keep: the truncate is refused naming it). A read: no lock. Absent from a driver whose tables no key
   * references (files).
   */
  referencingTables?(shards: readonly ShardRef[]): Promise<ReferencingTable[]>;
  /**
   * A drop's dry run (`drop --dry-run`): what a move of the live shard into the trash, with the same `cascade`, would take
   * along or detach beyond the shard itself, in words ("would move into the trash with it: ..."), as its move would say
   * it; or the refusal that move would meet, thrown as it would throw it (HasDependents, ShardMissing). A read: no lock,
   * nothing changed. Absent from a driver whose tables nothing else depends on (files): a drop moves the shards alone.
   */
  dependentsOf?(shard: ShardRef, opts?: { cascade?: boolean }): Promise<ChangeNotes>;
  /** Purge, first half: renames the trashed set to its garbage name. */
  markGarbage(shard: ShardRef, watch?: Watch): Promise<void>;
  /** Undo of markGarbage: renames the garbage set back into the trash area. */
  unmarkGarbage(shard: ShardRef, watch?: Watch): Promise<void>;
  /** Purge, second half: deletes the garbage set. */
  deleteGarbage(shard: ShardRef, watch?: Watch): Promise<void>;
  /** Size and content checksum of a shard, wherever it is. */
  inspect(shard: ShardRef): Promise<ShardReport>;
  /**
   * The bytes each shard takes, in order, wherever it is (0 when it is nowhere): a cheap look, with no checksum
   * (`describe`, `ls`, the trash's gauge), made for many shards at once since `ls` asks for every live table's.
   */
  sizesOf(shards: readonly ShardRef[]): Promise<number[]>;
  /**
   * Every set on every node (or on `nodes` only), in every area, whatever the catalog says (the reconciler's view). Quarantined
   * nodes are skipped and named. Not a snapshot: a change running meanwhile may be seen half done, so act on
   * a set only after checking it again under its table's lock.
   */
  listSets(nodes?: readonly string[]): Promise<SetListing>;
  /**
   * Removes the shard's set in one area through garbage, as purge does, never touching its sets in the other
   * areas. Garbage of the shard found beforehand is deleted too: outside a running purge nothing is garbage,
   * and the caller holds the table's lock, so none runs. A set absent from the area and from garbage is success.
   */
  discardSet(shard: ShardRef, area: StorageArea, watch?: Watch): Promise<void>;
}

// The driver's errors live in errors.ts (with the one function that classifies them); re-exported here for
// the callers that have always imported them from the driver.
export { FatalStorageError, PermanentStorageError } from './errors';

/** A table whose foreign key references a table a cascade truncates (StorageDriver.referencingTables). */
export interface ReferencingTable {
  /** As a person reads it: `shop.order_items`. */
  name: string;
  /** The tablefate table it is a shard of; absent for a table tablefate does not keep. */
  tableId?: number;
  /** The key that makes it one of the family, as a person reads it: `order_items_order_id_fkey references shop.orders`. */
  key: string;
}
