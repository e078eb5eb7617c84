import type { Catalog } from '../../catalog/catalog';
import type { TableFateClient } from '../../client/client';
import { toTableInfo, type TableInfo } from '../../domain/table';
import type { FamilyMaker } from './families';
import { FamilyChecks } from './family-checks';
import { checkFiles, type ShardFingerprints } from './files';
import type { StorageFindings } from './invariants';
import type { LocalFileStorage } from '../../storage/local-files';
import { checkNamespaces, inRunNamespace, type NamespaceLoad } from './namespaces';
import type { OpRecord } from './ops';
import type { Problem } from './problems';
import type { NodeDatabase, RowInserter } from './rows';
import { checkTables, type UserTable } from './tables';
import { checkGenerations } from './truncate-files';
import { afterRecalls, unitsAtRest, type PartitionLoad, type UnitKeys } from './units';

/**
 * The storage once the run is at rest, judged against what the run did: with files, each shard's checksum; on
 * PostgreSQL nodes, each table's rows, its family, the keys and leaves of tables dropped as one, and the run's
 * namespaces, before and after the checker recalls every trashed table as a user would (through the SDK). Every drop
 * of several tables as one must still be whole first.
 */
export interface StorageAtRest {
  ops: readonly OpRecord[];
  catalog: Catalog;
  sdk: TableFateClient;
  files?: { files: LocalFileStorage; fingerprints: ShardFingerprints };
  postgres?: {
    nodes: NodeDatabase[];
    userTables: UserTable[];
    inserter: RowInserter;
    families: FamilyMaker;
    unitKeys: UnitKeys;
    partitions: PartitionLoad;
    namespaces: NamespaceLoad;
  };
}

export async function checkStorageAtRest(at: StorageAtRest, tables: Parameters<typeof checkFiles>[1]): Promise<StorageFindings> {
  const { ops, catalog, sdk } = at;
  // Before the checker recalls anything: every drop of several tables as one still whole.
  const units = unitsAtRest(tables, ops);
  const togetherDrops = ops.filter((op) => op.request.kind === 'trash' && op.request.together).length;
  const aloneRecalls = ops.filter((op) => op.request.kind === 'undelete' && op.request.alone).length;
  const namespaceDrops = ops.filter((op) => op.request.kind === 'trash' && op.request.namespace !== undefined);
  const intoRecalls = ops.filter((op) => op.request.kind === 'undelete' && op.request.newNamespace !== undefined).length;
  const unitLine =
    `${togetherDrops} drops of several tables, ${namespaceDrops.length} of a whole namespace ` +
    `(${namespaceDrops.filter((op) => op.outcome.kind === 'ok').length} answered, ${namespaceDrops.filter((op) => op.cli).length} by the CLI), ` +
    `${aloneRecalls} recalls alone, ${intoRecalls} into another namespace; ${units.units} units in the trash at rest`;
  if (at.files) {
    const found = await checkFiles(at.files.files, tables, at.files.fingerprints, ops);
    // What each set holds (a truncate moves a table's set into the trash as its entry's): never in two places.
    const generations = await checkGenerations(at.files.files, tables);
    return {
      ...found,
      problems: [...units.problems, ...found.problems, ...generations.problems],
      summary: `shard checksums compared for ${found.fingerprintsChecked}; ${generations.sets} sets' generations judged; ${unitLine}`,
    };
  }
  if (!at.postgres) throw new Error('the storage at rest is checked on files or on PostgreSQL nodes');
  const { nodes, userTables, inserter, families, unitKeys, partitions, namespaces } = at.postgres;
  // The checker's recalls: a table dropped with others that came back with an earlier one is READY already; one
  // recalled under a fresh name comes alone. What each recall said, for the checks of keys and leaves after them.
  const recallNotes = new Map<number, string[]>();
  const unitRecallProblems: Problem[] = [];
  const recall = async (tableId: number, newName?: string): Promise<TableInfo> => {
    const now = await catalog.getTable(tableId);
    if (now?.state === 'READY' && newName === undefined) return { ...toTableInfo(now), notes: recallNotes.get(tableId) ?? [] };
    const mates = now?.droppedWith ?? [];
    const unit: number[] = [];
    for (const id of mates) {
      const mate = await catalog.getTable(id);
      if (mate?.state === 'TRASHED' && mate.droppedWith?.includes(tableId)) unit.push(id);
    }
    let answer: TableInfo;
    // A table of the run's namespaces whose schema's name was made again meanwhile: with its drop's others (and its
    // schema) into a namespace of their own.
    const into = newName !== undefined && now && inRunNamespace(now) ? `recalled_ns${tableId}` : undefined;
    try {
      answer = await sdk.undelete(
        into !== undefined
          ? { table: tableId, newNamespace: into }
          : { table: tableId, ...(newName ? { newName, ...(mates.length > 0 ? { alone: true } : {}) } : {}) },
        { timeoutMs: 60_000 },
      );
    } catch (err) {
      // Refused: all of them still in the trash, none left half way back (RESTORING) or back alone. (Those that had
      // left the trash before, recalled alone or purged, are no longer of its unit.)
      const type = (err as { type?: string }).type;
      if (type !== undefined && !newName && unit.length > 0) {
        const left = [];
        for (const id of [tableId, ...unit]) {
          const t = await catalog.getTable(id);
          if (t && t.state !== 'TRASHED' && t.state !== 'PURGED') left.push(`table ${id} (${t.namespace}.${t.name}) ${t.state}`);
        }
        if (left.length > 0) {
          unitRecallProblems.push({
            invariant: 'units',
            detail:
              `the checker's recall of table ${tableId} (dropped with ${unit.join(', ')}) was refused ${type} ` +
              `(${(err as Error).message}), and left ${left.join(', ')}: not all of them back in the trash`,
          });
        }
      }
      throw err;
    }
    for (const id of [tableId, ...(newName && !into ? [] : mates)])
      recallNotes.set(id, [...(recallNotes.get(id) ?? []), ...(answer.notes ?? [])]);
    return answer;
  };
  // The checker recalls the trashed tables as a user would: through the SDK, with the deployment's driver.
  const namespacesBefore = await checkNamespaces({
    incarnations: namespaces.incarnations,
    nodes,
    catalog,
    catalogId: catalog.id,
    ops,
    when: 'before the recalls',
  });
  const familyChecks = new FamilyChecks(
    { dependents: families.dependents, orphaned: families.orphaned, ops, unitKeys: unitKeys.keys },
    nodes,
    catalog.id,
  );
  const found = await checkTables(
    {
      nodes,
      catalogId: catalog.id,
      ledger: inserter.ledger,
      ops,
      userTables,
      recall,
      getTable: (tableId) => catalog.getTable(tableId),
      families: familyChecks,
    },
    tables,
  );
  const after = await afterRecalls({
    keys: unitKeys.keys,
    leaves: partitions.adopted,
    nodes,
    catalog,
    ops,
    recallNotes,
  });
  const namespacesAfter = await checkNamespaces({
    incarnations: namespaces.incarnations,
    nodes,
    catalog,
    catalogId: catalog.id,
    ops,
    when: 'after the recalls',
  });
  const nsStats = namespaces.stats;
  const p = partitions.stats;
  return {
    ...found,
    problems: [
      ...units.problems,
      ...namespacesBefore.problems,
      ...found.problems,
      ...unitRecallProblems,
      ...after.problems,
      ...namespacesAfter.problems,
    ],
    summary:
      `rows compared for ${found.tablesChecked} tables (${found.rowsChecked} rows seen committed looked for), ` +
      `${found.recalled} trashed tables recalled; ${familyChecks.summary()}; ${unitLine}; ${after.summary}; ` +
      `${namespacesBefore.summary}; ${namespacesAfter.summary}; ${nsStats.ticks} sequence ticks (missed furnishing: ` +
      `${[...nsStats.missed.entries()].map(([m, n]) => `${n}x ${m}`).join('; ') || 'none'}); ` +
      `${p.rowsCommitted} rows committed through chaos_p.events into adopted leaves, ${p.remade} leaves made again ` +
      `(refused: ${[...p.refused.entries()].map(([m, n]) => `${n}x ${m}`).join('; ') || 'none'})`,
  };
}
