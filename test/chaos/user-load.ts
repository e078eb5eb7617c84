import type { Catalog } from '../../catalog/catalog';
import type { TableRecord } from '../../domain/table';
import type { TableFateClient } from '../../client/client';
import { FamilyMaker } from './families';
import { NamespaceLoad } from './namespaces';
import type { Random } from './random';
import { PARTITION_SCHEMA, RowInserter, type NodeDatabase } from './rows';
import { RowsOnAnswer } from './rows-on-answer';
import { ConnectionCutter } from './tables';
import { PartitionLoad, UnitKeys } from './units';

/**
 * What the users of PostgreSQL storage nodes do beside tablefate during a chaos run: a service writing rows into the
 * live tables (and the rows checked on each answer), the storage connections cut now and then, views and keys made on
 * the tables (families, which drops with cascade take along), keys between live tables and leaves of a partitioned table
 * adopted alone and written through it (several tables as one, units.ts), and the run's namespaces furnished with a
 * sequence, a function and a view. And which tables have nothing of the user's that a truncate (issue 43) refuses, as
 * PostgreSQL refuses TRUNCATE of a table another's key references.
 */
export interface PostgresLoad {
  inserter: RowInserter;
  rowsOnAnswer: RowsOnAnswer;
  cutter?: ConnectionCutter;
  families: FamilyMaker;
  unitKeys: UnitKeys;
  partitions: PartitionLoad;
  namespaces: NamespaceLoad;
  /**
   * Whether the user made nothing on the table (by its id) that a truncate refuses: no materialized view reading it, no
   * key of theirs or between tablefate's tables to it, and not a leaf of their partitioned table. (Its views a truncate
   * points at its empty twin.)
   */
  truncatable(table: TableRecord): boolean;
  start(): void;
  stop(): Promise<void>;
}

export async function preparePostgresLoad(o: {
  nodes: NodeDatabase[];
  catalog: Catalog;
  sdk: TableFateClient;
  rng: Random;
  /** The server whose connections to the nodes are cut, and how often (ms, a range); none: never. */
  cutConnections: { serverUrl: string; everyMs: readonly [number, number] | false } | undefined;
  log: (line: string) => void;
}): Promise<PostgresLoad> {
  const { nodes, catalog, rng } = o;
  const catalogId = catalog.id;
  const inserter = new RowInserter({ nodes, catalog, catalogId, rng: rng.fork('inserter'), lanes: 2 });
  const cuts = o.cutConnections;
  const cutter = cuts && cuts.everyMs !== false ? new ConnectionCutter(cuts.serverUrl, nodes, rng.fork('cutter'), cuts.everyMs) : undefined;
  const rowsOnAnswer = new RowsOnAnswer(nodes, catalogId, inserter.ledger, catalog);
  const families = new FamilyMaker({ nodes, catalog, catalogId, rng: rng.fork('families') });
  const unitKeys = new UnitKeys({ nodes, catalog, catalogId, rng: rng.fork('unit-keys') });
  const partitions = new PartitionLoad({
    node: nodes[0]!,
    nodes,
    sdk: o.sdk,
    catalog,
    catalogId,
    ledger: inserter.ledger,
    rng: rng.fork('partitions'),
  });
  await partitions.setUp();
  o.log(`the user's partitioned table chaos_p.events on ${nodes[0]!.node}; leaves adopted alone: ${partitions.names().join(', ')}`);
  const namespaces = new NamespaceLoad({
    nodes,
    catalog,
    catalogId,
    rng: rng.fork('namespaces'),
    onView: (view) => families.dependents.push(view),
  });
  return {
    inserter,
    rowsOnAnswer,
    ...(cutter ? { cutter } : {}),
    families,
    unitKeys,
    partitions,
    namespaces,
    truncatable: (table) =>
      table.namespace !== PARTITION_SCHEMA &&
      !families.dependents.some((d) => d.tableId === table.id && (d.kind === 'materialized view' || d.kind === 'foreign key')) &&
      !unitKeys.keys.some((k) => k.parentId === table.id),
    start() {
      inserter.start();
      families.start();
      unitKeys.start();
      partitions.start();
      namespaces.start();
      cutter?.start();
    },
    async stop() {
      await namespaces.stop();
      await partitions.stop();
      await unitKeys.stop();
      await families.stop();
      await inserter.stop();
      await cutter?.stop();
      await rowsOnAnswer.close();
    },
  };
}
