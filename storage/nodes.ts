import { promises as fs } from 'node:fs';
import path from 'node:path';
import { errnoOf } from './errors';
import { SHARD_FILE_NAME } from './shard-files';

/** Storage node directories are named node-<k>, k from 0. */
export const NODE_NAME = /^node-(0|[1-9][0-9]*)$/;

export function nodeName(k: number): string {
  return `node-${k}`;
}

export function nodeNumber(node: string): number {
  return Number(node.slice('node-'.length));
}

export function byNodeNumber(a: string, b: string): number {
  return nodeNumber(a) - nodeNumber(b);
}

/** The node directories that exist under the storage root, in node order. */
export async function existingNodes(root: string): Promise<string[]> {
  let entries: string[];
  try {
    entries = await fs.readdir(root);
  } catch (error) {
    if (errnoOf(error) === 'ENOENT') return [];
    throw error;
  }
  return entries.filter((name) => NODE_NAME.test(name)).sort(byNodeNumber);
}

/** How many shard files (live, trash or garbage) a node directory holds. */
export async function countShardFiles(root: string, node: string): Promise<number> {
  let total = 0;
  for (const area of ['live', 'trash']) {
    let names: string[];
    try {
      names = await fs.readdir(path.join(root, node, area));
    } catch (error) {
      const code = errnoOf(error);
      if (code === 'ENOENT' || code === 'ENOTDIR') continue;
      throw error;
    }
    total += names.filter((name) => SHARD_FILE_NAME.test(name)).length;
  }
  return total;
}

export interface NodeHoldings {
  node: string;
  shardFiles: number;
}

/** The nodes numbered `nodeCount` or above (outside the configuration) that still hold shard files. */
export async function shardsBeyond(root: string, nodeCount: number): Promise<NodeHoldings[]> {
  const beyond = (await existingNodes(root)).filter((node) => nodeNumber(node) >= nodeCount);
  const holdings = await Promise.all(beyond.map(async (node) => ({ node, shardFiles: await countShardFiles(root, node) })));
  return holdings.filter((h) => h.shardFiles > 0);
}

/**
 * Refuses a node count that would leave shards behind: tables placed on node-k for k >= nodeCount would be
 * unreachable, and every operation on them would fail. A worker must not start like that.
 */
export async function assertNodesHoldAllShards(root: string, nodeCount: number): Promise<void> {
  const stranded = await shardsBeyond(root, nodeCount);
  if (stranded.length === 0) return;
  const list = stranded.map((h) => `${h.node} holds ${h.shardFiles} shard file${h.shardFiles === 1 ? '' : 's'}`).join(', ');
  const needed = Math.max(...stranded.map((h) => nodeNumber(h.node))) + 1;
  throw new Error(
    `TABLEFATE_STORAGE_NODES=${nodeCount} leaves shards behind: ${list} (under ${root}); ` +
      `set TABLEFATE_STORAGE_NODES to at least ${needed}, or move those tables away first`,
  );
}
