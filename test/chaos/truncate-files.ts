import fs from 'node:fs';
import type { Catalog } from '../../catalog/catalog';
import type { StorageArea } from '../../storage/driver';
import type { TableInfo, TableRecord } from '../../domain/table';
import type { LocalFileStorage } from '../../storage/local-files';
import { shardPaths } from '../../storage/shard-files';
import { describeOp } from './answers';
import type { ShardFingerprints } from './files';
import type { OpRecord } from './ops';
import type { Problem } from './problems';
import { TRANSITIONAL_STATES } from './observe';
import { lineageOf } from './truncate-lineage';

/**
 * A truncate's sets with the files driver (issue 43): the table's set moves into the trash as its entry's, and a fresh
 * empty set takes its place. The run never writes into a set (files.ts), so a set's rows are what its `.meta` says it
 * was made as: the table it was made for, its shard, and when (`createdAt`): a generation, written once by a create
 * or a truncate. Checked right after a truncate answered, and at rest:
 * - the entry's set is a generation of its table's (made for that table, or for one whose rows the table holds), and
 *   the table's is a newer one, made for itself: the rows left it, and it is live (never both, never neither);
 * - at rest, each set holds a generation of its table's lineage, for its shard, and no generation is in two sets.
 */

/** What a set's `.meta` says: the table it was made for, its shard, and when. */
interface Generation {
  tableId: number;
  shard: number;
  createdAt: number;
}

const key = (g: Generation) => `t${g.tableId}-s${g.shard}@${g.createdAt}`;

/** The generation of the set of `ref` in `area`, or undefined when its `.meta` is not there (moved, or being purged). */
async function generationOf(
  root: string,
  ref: { tableId: number; shard: number; node: string },
  area: StorageArea,
): Promise<Generation | undefined> {
  const meta = shardPaths(root, ref, area).find((file) => file.endsWith('.meta'))!;
  try {
    return JSON.parse(await fs.promises.readFile(meta, 'utf8')) as Generation;
  } catch {
    return undefined;
  }
}

/** Where a set is now (the area of its `.meta`), and its generation. */
async function lookAt(
  root: string,
  ref: { tableId: number; shard: number; node: string },
): Promise<{ area: StorageArea; generation: Generation } | undefined> {
  for (const area of ['live', 'trash'] as const) {
    const generation = await generationOf(root, ref, area);
    if (generation) return { area, generation };
  }
  return undefined;
}

/** The checks right after a truncate answered, and its fingerprints. */
export class TruncatedSets {
  readonly problems: Problem[] = [];
  checked = 0;

  constructor(
    private readonly storage: LocalFileStorage,
    private readonly fingerprints: ShardFingerprints,
    private readonly catalog: Pick<Catalog, 'getTable'>,
  ) {}

  async afterTruncate(op: OpRecord, entry: TableInfo): Promise<void> {
    const from = entry.truncatedFrom;
    if (from === undefined) return; // judged at rest (truncate-answers.ts)
    await this.fingerprints.record(entry);
    await this.fingerprints.renew({ id: from, placement: entry.placement });
    // The tables whose rows the table may hold: itself, and (an entry recalled) those its rows came from.
    const lineage: number[] = [from];
    for (let t = await this.catalog.getTable(from); t?.truncatedFrom !== undefined; t = await this.catalog.getTable(t.truncatedFrom)) {
      lineage.push(t.truncatedFrom);
    }
    for (const { shard, node } of entry.placement) {
      const rows = await lookAt(this.storage.root, { tableId: entry.id, shard, node });
      const table = await lookAt(this.storage.root, { tableId: from, shard, node });
      // Purged, or moving, since the answer: the end of the run judges what is left.
      if (!rows || !table) continue;
      this.checked++;
      const problem = (detail: string) =>
        this.problems.push({
          invariant: 'files',
          detail: `${describeOp(op)}: entry ${entry.id} of table ${from}, shard ${shard} on ${node}: ${detail}`,
        });
      const made = (g: Generation) => `made for table ${g.tableId} shard ${g.shard} at ${new Date(g.createdAt).toISOString()}`;
      if (!lineage.includes(rows.generation.tableId) || rows.generation.shard !== shard) {
        problem(`the entry's set (${rows.area}) was ${made(rows.generation)}: not the table's rows`);
      }
      if (table.generation.tableId !== from || table.generation.createdAt <= rows.generation.createdAt) {
        problem(
          `the table's set (${table.area}) was ${made(table.generation)}, the entry's ${made(rows.generation)}: the table's is not a fresh one`,
        );
      }
    }
  }
}

/** At rest: each set holds a generation of its table's lineage, for its shard; no generation is in two sets. */
export async function checkGenerations(
  storage: LocalFileStorage,
  tables: readonly TableRecord[],
): Promise<{ problems: Problem[]; sets: number }> {
  const problems: Problem[] = [];
  const byId = new Map(tables.map((t) => [t.id, t]));
  const holders = new Map<string, string[]>();
  let sets = 0;
  for (const t of tables) {
    if (TRANSITIONAL_STATES.includes(t.state)) continue;
    const area = t.state === 'READY' ? 'live' : t.state === 'TRASHED' ? 'trash' : undefined;
    if (!area) continue;
    const lineage = lineageOf(byId, t.id);
    for (const { shard, node } of t.placement) {
      const generation = await generationOf(storage.root, { tableId: t.id, shard, node }, area);
      // (A set missing is files.ts's finding.)
      if (!generation) continue;
      sets++;
      const label = `table ${t.id} (${t.namespace}.${t.name}, ${t.state}) shard ${shard} on ${node}`;
      if (!lineage.includes(generation.tableId) || generation.shard !== shard) {
        problems.push({
          invariant: 'files',
          detail: `${label} holds the set made for table ${generation.tableId} shard ${generation.shard}: not its rows, nor rows its lineage (${lineage.join(' <- ')}) had`,
        });
      }
      holders.set(key(generation), [...(holders.get(key(generation)) ?? []), label]);
    }
  }
  for (const [generation, held] of holders) {
    if (held.length > 1)
      problems.push({ invariant: 'files', detail: `the same rows (set ${generation}) are in ${held.length} places: ${held.join('; ')}` });
  }
  return { problems, sets };
}
