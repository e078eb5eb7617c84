import path from 'node:path';
import type { ShardRef, StorageArea } from './driver';

// StorageArea is the driver's (its interface names it); re-exported for those that have imported it from here.
export type { StorageArea } from './driver';

/** Pegasus marks garbage by appending this to the trashed names, in the trash directory. */
export const GARBAGE_SUFFIX = '.gar';

/** The set's members, in name order (the order checksums use). */
export const SHARD_EXTENSIONS = ['.dat', '.idx', '.meta'] as const;

/** Base names of a shard's files, derived from the ids only so a rename of the table never touches storage. */
export function shardFileNames(ref: Pick<ShardRef, 'tableId' | 'shard'>): string[] {
  return SHARD_EXTENSIONS.map((ext) => `t${ref.tableId}-s${ref.shard}${ext}`);
}

/** Human-readable name of a shard for error messages. */
export function shardLabel(ref: ShardRef): string {
  return `shard t${ref.tableId}-s${ref.shard} on ${ref.node}`;
}

export function areaDir(root: string, node: string, area: StorageArea): string {
  // Garbage stays in the trash directory: marking it is a rename, never a copy across directories.
  return path.join(root, node, area === 'live' ? 'live' : 'trash');
}

/** Absolute paths of a shard's files in an area, in the same order as shardFileNames. */
export function shardPaths(root: string, ref: ShardRef, area: StorageArea): string[] {
  const dir = areaDir(root, ref.node, area);
  const suffix = area === 'garbage' ? GARBAGE_SUFFIX : '';
  return shardFileNames(ref).map((name) => path.join(dir, name + suffix));
}

/** A shard file's name in any area (`t12-s3.idx`, `t12-s3.idx.gar`). */
export const SHARD_FILE_NAME = /^t[0-9]+-s[0-9]+\.(dat|idx|meta)(\.gar)?$/;

/** SHARD_FILE_NAME with its parts, and only in the one spelling shardFileNames gives (no leading zeros). */
const SHARD_FILE_PARTS = /^t(0|[1-9][0-9]*)-s(0|[1-9][0-9]*)\.(?:dat|idx|meta)(\.gar)?$/;

/**
 * The shard a file name belongs to, and whether it carries the garbage suffix; null for any other name. A
 * name the driver would never write for any ref (`t012-s3.dat`, ids beyond 2^53) is not a shard file: no
 * ShardRef could reach it, so nothing could ever remove it as one.
 */
export function parseShardFileName(name: string): { tableId: number; shard: number; garbage: boolean } | null {
  const parts = SHARD_FILE_PARTS.exec(name);
  if (!parts) return null;
  const tableId = Number(parts[1]);
  const shard = Number(parts[2]);
  if (!Number.isSafeInteger(tableId) || !Number.isSafeInteger(shard)) return null;
  return { tableId, shard, garbage: parts[3] !== undefined };
}
