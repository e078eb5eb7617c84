import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TableInfo, TableRecord } from '../../domain/table';
import type { ShardReport } from '../../storage/driver';
import type { LocalFileStorage } from '../../storage/local-files';
import { shardFileNames } from '../../storage/shard-files';
import type { Problem } from './problems';
import { TRANSITIONAL_STATES } from './observe';
import { namesOf } from './answers';
import type { OpRecord } from './ops';
import { truncatesAfter } from './truncate-lineage';

/**
 * The files must say what the catalog says: a READY table's shards complete in the live area, a TRASHED
 * one's complete in the trash, nothing at all of a PURGED or CREATE_FAILED table, and no file that belongs to
 * no table. Also: a table's bytes never change after its create answered (moves keep the checksum), unless a truncate
 * (issue 43) gave it a fresh set since; a truncate's entry's, after the truncate answered (truncate-files.ts judges what
 * the sets hold).
 */

type Area = NonNullable<ShardReport['area']>;

interface FoundFile {
  node: string;
  area: Area | 'tmp';
  /** The file's name without the garbage suffix: the same in every area. */
  name: string;
  relative: string;
}

const GARBAGE = /\.gar$/;
const SHARD_FILE = /^t(\d+)-s(\d+)\./;

async function listDir(dir: string): Promise<string[]> {
  try {
    return await fs.promises.readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

/** Every file under <root>/<node>/{live,trash,tmp}; a trash file with the garbage suffix is in the garbage area. */
async function scanStorage(root: string): Promise<FoundFile[]> {
  const found: FoundFile[] = [];
  for (const node of await listDir(root)) {
    for (const dir of ['live', 'trash', 'tmp'] as const) {
      for (const file of await listDir(path.join(root, node, dir))) {
        const area: FoundFile['area'] = dir === 'trash' && GARBAGE.test(file) ? 'garbage' : dir;
        found.push({ node, area, name: file.replace(GARBAGE, ''), relative: `${node}/${dir}/${file}` });
      }
    }
  }
  return found;
}

/** inspect, again if a file moved under it (a rename between its look and its read is not a finding). */
async function inspect(storage: LocalFileStorage, ref: { tableId: number; shard: number; node: string }): Promise<ShardReport> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await storage.inspect(ref);
    } catch (err) {
      if (attempt >= 3) throw err;
      await sleep(100);
    }
  }
}

/**
 * The checksums of each table's shards right after its create answered; of a truncate's entry right after the truncate
 * answered, and of its table again then (its fresh empty set).
 */
export class ShardFingerprints {
  private readonly byTable = new Map<number, { checksums: string[]; at: number }>();

  constructor(private readonly storage: LocalFileStorage) {}

  /** Records a new table's checksums, unless its files are already being deleted (then there is nothing to keep). */
  async record(table: Pick<TableInfo, 'id' | 'placement'>): Promise<void> {
    if (this.byTable.has(table.id)) return;
    await this.renew(table);
  }

  /** Records the table's checksums as they are now, in place of those it had (a truncate gave it a fresh set). */
  async renew(table: Pick<TableInfo, 'id' | 'placement'>): Promise<void> {
    const at = Date.now();
    try {
      const reports = await Promise.all(table.placement.map((p) => inspect(this.storage, { tableId: table.id, ...p })));
      // Only whole sets: a set in the garbage area may be half deleted already.
      if (reports.every((r) => r.area === 'live' || r.area === 'trash'))
        this.byTable.set(table.id, { checksums: reports.map((r) => r.checksum), at });
      else this.byTable.delete(table.id);
    } catch {
      // Moving too fast to read: no fingerprint for this one.
      this.byTable.delete(table.id);
    }
  }

  /** The checksums, and when they were read (a truncate that began before may have changed them since). */
  get(tableId: number): { checksums: readonly string[]; at: number } | undefined {
    return this.byTable.get(tableId);
  }

  get size(): number {
    return this.byTable.size;
  }
}

export interface FileFindings {
  problems: Problem[];
  notes: string[];
  /** How many tables' checksums were compared with the ones taken at create. */
  fingerprintsChecked: number;
}

export async function checkFiles(
  storage: LocalFileStorage,
  tables: readonly TableRecord[],
  fingerprints: ShardFingerprints,
  ops: readonly OpRecord[],
): Promise<FileFindings> {
  const problems: Problem[] = [];
  const files = await scanStorage(storage.root);
  const present = new Set(files.map((f) => `${f.node}/${f.area}/${f.name}`));
  const accounted = new Set<string>();
  const byId = new Map(tables.map((t) => [t.id, t]));
  let fingerprintsChecked = 0;

  for (const table of tables) {
    const label = `table ${table.id} (${table.namespace}.${table.name}, ${table.state})`;
    if (TRANSITIONAL_STATES.includes(table.state)) {
      // Reported as stuck already; its files may be anywhere between two areas (a truncate's: its entry's too, whose
      // row the catalog has only once the truncate commits).
      const ids = [table.id, ...(table.state === 'TRUNCATING' && table.truncateInto !== undefined ? [table.truncateInto] : [])];
      for (const f of files) if (ids.map(String).includes(SHARD_FILE.exec(f.name)?.[1] ?? '')) accounted.add(f.relative);
      continue;
    }
    const expected: Area | null = table.state === 'READY' ? 'live' : table.state === 'TRASHED' ? 'trash' : null;
    const checksums: string[] = [];
    for (const placement of table.placement) {
      const ref = { tableId: table.id, ...placement };
      const where = `shard ${placement.shard} on ${placement.node}`;
      const report = await inspect(storage, ref);
      checksums.push(report.checksum);
      const names = shardFileNames(ref);
      const ofShard = files.filter((f) => f.node === placement.node && names.includes(f.name));
      if (expected === null) {
        if (report.area !== null || ofShard.length > 0) {
          const list = ofShard.map((f) => f.relative).join(', ');
          problems.push({
            invariant: 'files',
            detail: `${label}: ${where} still has files in ${String(report.area)}${list ? `: ${list}` : ''}`,
          });
        }
        for (const f of ofShard) accounted.add(f.relative);
        continue;
      }
      const missing = names.filter((name) => !present.has(`${placement.node}/${expected}/${name}`));
      if (missing.length > 0) {
        problems.push({
          invariant: 'files',
          detail: `${label}: ${where} is incomplete in ${expected}, missing ${missing.join(', ')} (inspect finds it in ${String(report.area)})`,
        });
      } else if (report.area !== expected) {
        problems.push({
          invariant: 'files',
          detail: `${label}: ${where} is found in ${String(report.area)} by inspect, expected ${expected}`,
        });
      }
      for (const f of ofShard) if (f.area === expected) accounted.add(f.relative);
    }
    const fingerprint = fingerprints.get(table.id);
    // (A truncate that may have acted since gave the table a fresh set: its checksums are another set's.)
    const truncated = fingerprint && truncatesAfter(ops, table.id, namesOf(ops, table.id, table), fingerprint.at - 1).length > 0;
    if (expected !== null && fingerprint && !truncated) {
      fingerprintsChecked++;
      if (fingerprint.checksums.join() !== checksums.join()) {
        problems.push({
          invariant: 'checksums',
          detail: `${label}: shard checksums changed since they were read after its create or truncate answered`,
        });
      }
    }
  }

  // Files no table accounts for, by table: orphans (no such table) or in an area its state does not allow.
  const strays = new Map<string, string[]>();
  const notes: string[] = [];
  for (const f of files) {
    if (accounted.has(f.relative)) continue;
    if (f.area === 'tmp') {
      notes.push(`leftover temporary file ${f.relative} (a create killed while writing; nothing removes it)`);
      continue;
    }
    const id = SHARD_FILE.exec(f.name)?.[1];
    const table = id === undefined ? undefined : byId.get(Number(id));
    const key =
      id === undefined
        ? 'files not named like any shard'
        : table
          ? `files of table ${id} (${table.state}) outside its expected area`
          : `orphan files of table ${id}, which the catalog does not have`;
    strays.set(key, [...(strays.get(key) ?? []), f.relative]);
  }
  for (const [what, list] of strays) problems.push({ invariant: 'files', detail: `${what}: ${list.join(', ')}` });
  return { problems, notes, fingerprintsChecked };
}
