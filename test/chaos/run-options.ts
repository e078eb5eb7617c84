import type { Convergence } from './convergence';
import type { FamilyStats } from './families';
import type { DoorSummary } from './invariants';
import type { MonkeyStats } from './monkey';
import type { LockWait } from './observe';
import type { OpRecord } from './ops';
import type { MariadbSummary } from './mariadb-load';
import type { FinalRelease } from './policies';
import type { Problem } from './problems';
import type { InsertStats } from './rows';

/** What a chaos run is asked to do (runner.ts), and what it reports. */

export interface ChaosOptions {
  seed: number;
  ops: number;
  clients: number;
  /** How many times the Temporal server is SIGKILLed and restarted (a cluster: one history process at a time). */
  serverRestarts: number;
  /**
   * The Temporal server: a dev server of the run's own (default), or a cluster of the run's own on the run's
   * PostgreSQL (frontend, two history processes, matching, worker: servers/cluster.ts).
   */
  temporal?: 'dev' | 'cluster';
  /** Where the catalog is: the SQLite file under the state directory (default), or a throwaway PostgreSQL. */
  catalog?: 'sqlite' | 'postgres';
  /**
   * What a shard is: files under the storage nodes' directories (default), or a real PostgreSQL table, each node a
   * database of its own on a throwaway server (the catalog's, with `catalog: 'postgres'`), into whose live tables
   * the run inserts rows while the operations go on; or a real MariaDB table, each node a throwaway MariaDB server of
   * its own (the worker with an account of its own, of least privilege), rows inserted likewise.
   */
  driver?: 'files' | 'postgres' | 'mariadb';
  /**
   * postgres and mariadb drivers: how often tablefate's storage connections are cut (pg_terminate_backend; KILL
   * CONNECTION of the worker account's sessions); false: never. Default 3 to 8 s.
   */
  connectionCutsEveryMs?: readonly [number, number] | false;
  /** mariadb driver: how many times a node's server is SIGKILLed and started again on its data directory. Default 2. */
  mariadbRestarts?: number;
  /** How many orchestrating `tablefate worker` processes run at once (same home, same catalog). Default 1. */
  workers?: number;
  /**
   * `local` (default): the workers serve the storage nodes from the home's storage directory. `remote`: they serve
   * none; each of the three nodes has a `tablefate storage-node` process of its own, with a directory of its own.
   */
  storage?: 'local' | 'remote';
  /** How many of the workers the monkey kills (the first ones); default all. */
  killWorkers?: number;
  /** With remote storage, how many of the storage nodes the monkey kills (node-0 first); default 1. */
  killNodes?: number;
  /**
   * Who issues the operations: SDK clients (default), `tablefate` commands run from an empty directory, or (postgres
   * driver) the SQL door for its calls (drop, recall, purge, hold, release, retention) and the SDK for the others.
   */
  caller?: 'sdk' | 'cli' | 'sql';
  /** A call without an answer after this long is an unknown outcome. Default 60 s. */
  callTimeoutMs?: number;
  /** No operation starts after this long (the product may stall); default 10 min. */
  opsTimeLimitMs?: number;
  /** How long to wait for the system to come to rest after the operations. Default 3 min. */
  convergenceTimeoutMs?: number;
  /** A worker lives this long after it starts polling before it is killed. Default 1.5 to 5 s. */
  killAfterReadyMs?: readonly [number, number];
  /** Keep the state directory (catalog, storage, logs) even when no problem was found. */
  keepState?: boolean;
  /** Stops issuing operations and skips to the cleanup. */
  signal?: AbortSignal;
  /** Progress lines, with the time since the start. */
  log?: (line: string) => void;
}

export interface ChaosReport {
  seed: number;
  options: Required<
    Pick<
      ChaosOptions,
      | 'ops'
      | 'clients'
      | 'serverRestarts'
      | 'temporal'
      | 'catalog'
      | 'driver'
      | 'workers'
      | 'storage'
      | 'killWorkers'
      | 'killNodes'
      | 'caller'
      | 'callTimeoutMs'
      | 'opsTimeLimitMs'
      | 'convergenceTimeoutMs'
      | 'mariadbRestarts'
    >
  > & {
    /** postgres and mariadb drivers: whether tablefate's storage connections were cut during the operations. */
    connectionCuts: boolean;
  };
  ops: OpRecord[];
  stats: MonkeyStats;
  /** At rest with the run's holds still on (a held table past its expiry counts as at rest): where the holds were checked. */
  holdCheckpoint: Convergence | undefined;
  /** What the look at the holds found before their release, and the releases the run made then. */
  holds?: { held: number; heldPastExpiry: number; released: FinalRelease[] };
  /** At rest after every hold was released: where every other invariant is checked. */
  convergence: Convergence | undefined;
  problems: Problem[];
  notes: string[];
  tables: number;
  /** What the storage checks compared (checksums of files, or rows of tables). */
  storageSummary: string;
  /** `--caller sql`: the calls through the SQL door, and what the end of the run found of their requests. */
  door?: DoorSummary;
  /** Shards of truncates' entries (with their tables) looked at right after the truncate answered: files' sets, or rows. */
  truncatesCheckedOnAnswer?: number;
  /** postgres driver: the user's service's inserts, the storage connections cut, the user's tables. */
  postgres?: {
    inserts: InsertStats;
    rowsCommitted: number;
    /** Shards whose rows were compared right after a trash, recall or purge of their table answered. */
    shardsCheckedOnAnswer: number;
    connectionCuts: number;
    userTables: string[];
    /** Sessions of the node databases seen waiting more than 5 s for a lock, and for whom (observe.ts, LockWaitWatch). */
    lockWaits: LockWait[];
    /** The views, keys and policies the user made on the tables (families.ts). */
    families: FamilyStats;
  };
  /** mariadb driver: the user's service's inserts, the connections cut, the servers restarted, the user's tables and objects. */
  mariadb?: MariadbSummary;
  opsPhaseMs: number;
  durationMs: number;
  aborted: boolean;
  /** Where the catalog, the storage nodes, the logs and ops.json (every call and answer) are; removed unless kept. */
  dir: string;
  kept: boolean;
  workerLog: string;
  /** The worker log's warnings and errors, by message (read before the state directory is removed). */
  workerLogSummary: string[];
  serverLog: string;
}
