/**
 * How costs grow: create time against the shard count (1, 4, 16, 64, 256), and the catalog reads (`ls`,
 * `describe`) against the catalog's size (1k, 10k, 100k rows). The rows for the second part are written straight
 * into the catalog (the same compare-and-sets a create makes, without the workflow): what is measured is reading.
 *
 *   npm run bench:growth
 *   npm run bench:growth -- --rows 1000,10000     (fewer rows)
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import type { SqliteCatalog } from '../catalog/sqlite';
import { startBench } from './setup';
import { placeShards } from '../domain/table';
import { lockFor } from '../domain/operations';

const SHARD_COUNTS = [1, 4, 16, 64, 256];
const ROUNDS = 5;

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function ms(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

/** Adds READY rows to the catalog until it holds `target`, as a create's catalog steps would. */
async function fillCatalog(catalog: SqliteCatalog, from: number, target: number): Promise<void> {
  const never = () => Promise.resolve(false);
  for (let i = from; i < target; i++) {
    const owner = { workflowId: `fill-${i}`, runId: 'fill' };
    const name = { namespace: 'fill', name: `t${i}` };
    await catalog.acquireLock(lockFor.name(name), owner, Date.now(), never);
    const prepared = await catalog.prepareCreate(
      {
        ...name,
        params: { shards: 4 },
        owner,
        nameLock: lockFor.name(name),
        place: (id, p) => placeShards(id, p.shards, ['node-0', 'node-1', 'node-2']),
        now: Date.now(),
      },
      never,
    );
    if (prepared.outcome !== 'prepared') throw new Error(`fill: ${prepared.outcome}`);
    await catalog.transition({ tableId: prepared.table.id, from: ['CREATING'], to: 'READY', owner, now: Date.now() });
    await catalog.releaseLocks(owner);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { rows: { type: 'string' } }, strict: true });
  const sizes = (values.rows ?? '1000,10000,100000').split(',').map(Number);
  const bench = await startBench();
  const { client, catalog } = bench;
  console.log(`how costs grow: ${os.cpus().length} cores, node ${process.version}`);
  try {
    await client.create({ table: 'warm.up', shards: 1 });
    console.log('shards   create p50 ms   per shard ms');
    for (const shards of SHARD_COUNTS) {
      const times: number[] = [];
      for (let r = 0; r < ROUNDS; r++) times.push(await ms(() => client.create({ table: `grow.s${shards}_${r}`, shards })));
      const p50 = median(times);
      console.log(`${String(shards).padStart(6)} ${p50.toFixed(0).padStart(15)} ${(p50 / shards).toFixed(1).padStart(14)}`);
    }
    console.log('rows      fill s   ls p50 ms   ls -a p50 ms   ls page of 100 p50 ms   describe by name p50 ms   describe by id p50 ms');
    let filled = (await catalog.listTables({ includeTrashed: true })).length;
    for (const size of sizes) {
      const fillMs = await ms(() => fillCatalog(catalog, filled, size));
      filled = Math.max(filled, size);
      const ls: number[] = [];
      const lsAll: number[] = [];
      const page: number[] = [];
      const byName: number[] = [];
      const byId: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        ls.push(await ms(() => client.list()));
        lsAll.push(await ms(() => client.list({ includeTrashed: true })));
        // A page from the middle of the catalog: `ls --limit 100 --after <id>`.
        page.push(await ms(() => client.list({ includeTrashed: true, limit: 100, after: Math.floor(size / 2) })));
        byName.push(await ms(() => client.describe({ table: `fill.t${Math.floor(size / 2)}` })));
        byId.push(await ms(() => client.describe({ table: Math.floor(size / 2) })));
      }
      console.log(
        `${String(size).padStart(6)} ${(fillMs / 1000).toFixed(0).padStart(9)} ${median(ls).toFixed(1).padStart(11)} ${median(lsAll).toFixed(1).padStart(14)} ` +
          `${median(page).toFixed(2).padStart(23)} ` +
          `${median(byName).toFixed(2).padStart(25)} ${median(byId).toFixed(2).padStart(23)}`,
      );
    }
  } finally {
    await bench.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
