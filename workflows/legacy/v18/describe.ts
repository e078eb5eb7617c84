import type { ShardChange, ShardRef } from '../../../domain/contracts';
import type { TableName } from '../../../domain/names';
import type { TableState } from '../../../domain/states';
import type { TableRecord } from '../../../domain/table';
import type { FirstChangeFor } from '../../../domain/legacy-v18-checks';

// How v18's calls are said in the web UI, and the shard lists they are made of.

/** What a change does to shards, as a person reads it in the web UI: "move shards 0, 2 of table 12 to trash on node-1". */
export function describeShardChange(change: ShardChange, tableId: number, shards: readonly number[], node: string): string {
  const listed = shards.length <= 8 ? shards.join(', ') : `${shards.slice(0, 8).join(', ')} and ${shards.length - 8} more`;
  const which = `${shards.length === 1 ? 'shard' : 'shards'} ${listed} of table ${tableId}`;
  // (v18 makes no other change: a truncate is of later code.)
  const doing: Partial<Record<ShardChange['method'], string>> = {
    createShard: `create ${which}`,
    dropShard: `drop ${which}`,
    markGarbage: `mark ${which} as garbage`,
    unmarkGarbage: `take back the garbage mark of ${which}`,
    deleteGarbage: `delete ${which} (purge)`,
    moveShard: change.method === 'moveShard' ? (change.to === 'trash' ? `move ${which} to trash` : `move ${which} back from trash`) : '',
  };
  return `${doing[change.method] ?? change.method} on ${node}`;
}

export function describeFirstChange(first: FirstChange): string {
  return first.for.op === 'undelete' ? 'RESTORING, shards back from the trash' : 'PURGING, shards marked garbage, deleted, PURGED';
}

/** A transition as the web UI shows it: "table 12: READY to TRASHING". */
export function describeTransition(args: { tableId: number; from: readonly TableState[]; to: TableState; rename?: TableName }): string {
  const renamed = args.rename ? ` as ${args.rename.namespace}.${args.rename.name}` : '';
  return `table ${args.tableId}: ${args.from.join(' or ')} to ${args.to}${renamed}`;
}

/** The shards grouped by the node that holds them, in placement order. */
export function nodesOf(shards: readonly ShardRef[]): Array<[node: string, shards: ShardRef[]]> {
  const byNode = new Map<string, ShardRef[]>();
  for (const shard of shards) byNode.set(shard.node, [...(byNode.get(shard.node) ?? []), shard]);
  return [...byNode];
}

export const shardsOf = (table: TableRecord): ShardRef[] =>
  table.placement.map((p) => ({ tableId: table.id, shard: p.shard, node: p.node }));

/** The first step's change that an undelete's or a purge's lock attempt makes too (since v18): what for, and which. */
export interface FirstChange {
  for: FirstChangeFor;
  change: ShardChange;
  then?: ShardChange;
}
