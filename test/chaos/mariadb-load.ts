import type { Catalog } from '../../catalog/catalog';
import type { TableFateClient } from '../../client/client';
import type { TableInfo, TableRecord } from '../../domain/table';
import type { StorageFindings } from './invariants';
import { checkMariadbAtRest } from './mariadb-at-rest';
import { ObjectMaker, type ObjectStats } from './mariadb-objects';
import { ObjectsOnRecall } from './mariadb-recalls';
import { MariadbRowsOnAnswer } from './mariadb-rows-on-answer';
import { MariadbConnectionCutter, MariadbRowInserter } from './mariadb-rows';
import { ChaosMariadb, restartMariadbDuringOps } from './mariadb-servers';
import { adoptHandMadeTable, ADOPTED_DATABASE, makeMariadbUserTables, type MariadbUserTable } from './mariadb-user';
import { NAMESPACES } from './namespaces';
import type { OpRecord } from './ops';
import type { Random } from './random';
import type { InsertStats } from './rows';
import type { Progress } from './server-restarts';

/**
 * A `--driver mariadb` chaos run's storage, start to end (the postgres driver's user-load.ts and tables.ts, for
 * MariaDB): a MariaDB server per node with the worker's own least-privilege account (mariadb-servers.ts), the user's
 * tables made by hand before the workers start, then, once a worker polls, a hand-made table adopted and the user's load
 * during the operations: rows written into the live tables, triggers and keys made on them, the worker's sessions cut,
 * a node's server crashed and started again. At rest, mariadb-at-rest.ts judges what the nodes hold.
 */

/** The databases of the run's namespaces, on which the worker's account is granted what MARIADB_WORKER_GRANTS lists. */
const DATABASES = ['chaos', ...NAMESPACES, ADOPTED_DATABASE];

/** What the report tells of the MariaDB side of a run. */
export interface MariadbSummary {
  inserts: InsertStats;
  rowsCommitted: number;
  connectionCuts: number;
  serverRestarts: number;
  userTables: string[];
  adopted: string;
  objects: ObjectStats;
  /** The run's triggers and keys looked at right after a recall of their table answered. */
  objectsLookedOnRecall: number;
  /** Shards whose rows were compared right after a drop, recall or purge of their table answered. */
  shardsCheckedOnAnswer: number;
}

export class MariadbRun {
  private inserter: MariadbRowInserter | undefined;
  private cutter: MariadbConnectionCutter | undefined;
  private objects: ObjectMaker | undefined;
  private onRecall: ObjectsOnRecall | undefined;
  private rowsOnAnswer: MariadbRowsOnAnswer | undefined;

  private constructor(
    readonly servers: ChaosMariadb,
    readonly userTables: MariadbUserTable[],
    private adopted = '',
  ) {}

  /** The servers, the worker's account on each, and the user's tables: before any worker starts. */
  static async start(nodes: readonly string[], log: (line: string) => void): Promise<MariadbRun> {
    const servers = await ChaosMariadb.start(nodes, DATABASES, log);
    try {
      const userTables = await makeMariadbUserTables(servers.nodes);
      log(`storage nodes are MariaDB servers: ${servers.nodes.map((n) => `${n.node} ${n.rootUrl}`).join(', ')}`);
      log(`the user's own tables, made by hand: ${userTables.map((u) => `${u.node} ${u.database}.${u.table}`).join(', ')}`);
      return new MariadbRun(servers, userTables);
    } catch (err) {
      await servers.stop();
      throw err;
    }
  }

  /** Each node's url as the worker reaches it (its own account). */
  get workerUrls(): string[] {
    return this.servers.nodes.map((n) => n.workerUrl);
  }

  /** Once a worker polls: the hand-made table adopted, and the user's load made ready. */
  async prepare(o: {
    catalog: Catalog;
    sdk: TableFateClient;
    rng: Random;
    /** How often the worker's sessions are cut (ms, a range); false: never. */
    cutEveryMs: readonly [number, number] | false;
    log: (line: string) => void;
  }): Promise<void> {
    const { nodes } = this.servers;
    const catalogId = o.catalog.id;
    this.inserter = new MariadbRowInserter({ nodes, catalog: o.catalog, catalogId, rng: o.rng.fork('inserter'), lanes: 2 });
    this.objects = new ObjectMaker({ nodes, catalog: o.catalog, catalogId, rng: o.rng.fork('objects') });
    const objects = this.objects;
    this.onRecall = new ObjectsOnRecall(nodes, objects.objects);
    this.rowsOnAnswer = new MariadbRowsOnAnswer(nodes, catalogId, this.inserter.ledger);
    const adopted = await adoptHandMadeTable({ nodes, sdk: o.sdk, inserter: this.inserter, nextObject: () => objects.nextNumber() });
    objects.objects.push(...adopted.objects);
    this.adopted = `${adopted.name} (table ${adopted.tableId}, with a trigger and a key to it)`;
    o.log(`the user's hand-made ${this.adopted} adopted`);
    if (o.cutEveryMs) this.cutter = new MariadbConnectionCutter(nodes, o.rng.fork('cutter'), o.cutEveryMs);
  }

  start(): void {
    this.inserter?.start();
    this.objects?.start();
    this.cutter?.start();
  }

  async stop(): Promise<void> {
    await this.onRecall?.settle();
    await this.rowsOnAnswer?.settle();
    await this.objects?.stop();
    await this.inserter?.stop();
    await this.cutter?.stop();
  }

  /** A create answered: maybe a trigger or a key on the new table at once; a recall: its objects looked at. */
  onAnswer(record: OpRecord): void {
    if (record.outcome.kind !== 'ok') return;
    const table: TableInfo = record.outcome.table;
    if (record.request.kind === 'create') this.objects?.afterCreate(table);
    if (record.request.kind === 'undelete') this.onRecall?.afterRecall(record, table);
    if (['trash', 'undelete', 'purge'].includes(record.request.kind)) this.rowsOnAnswer?.afterAnswer(record, table);
  }

  /** Crashes and restarts the nodes' servers `count` times during the operations. */
  restartsDuringOps(progress: Progress, ops: number, count: number, signal: AbortSignal): Promise<Error | undefined> {
    return restartMariadbDuringOps(this.servers, progress, ops, count, signal);
  }

  summary(): MariadbSummary {
    return {
      inserts: this.inserter!.stats,
      rowsCommitted: this.inserter!.ledger.size,
      connectionCuts: this.cutter?.cuts ?? 0,
      serverRestarts: this.servers.restarts,
      userTables: this.userTables.map((u) => `${u.node} ${u.database}.${u.table}`),
      adopted: this.adopted,
      objects: this.objects!.stats,
      objectsLookedOnRecall: this.onRecall!.looked,
      shardsCheckedOnAnswer: this.rowsOnAnswer!.checked,
    };
  }

  async checkAtRest(
    o: { ops: readonly OpRecord[]; catalog: Catalog; sdk: TableFateClient },
    tables: readonly TableRecord[],
  ): Promise<StorageFindings> {
    const found = await checkMariadbAtRest(
      { ...o, nodes: this.servers.nodes, userTables: this.userTables, ledger: this.inserter!.ledger, objects: this.objects!.objects },
      tables,
    );
    return { ...found, problems: [...this.rowsOnAnswer!.problems, ...this.onRecall!.problems(o.ops), ...found.problems] };
  }

  async close(): Promise<void> {
    await this.stop();
    await this.servers.stop();
  }
}
